// Builds the console's bundle (run by `make console`; docs/console.md):
// esbuild bundles src/main.js and the CodeMirror 6 packages it imports into
// dist/console.js, and dist/LICENSES.txt collects the licence of every npm
// package that went into it (MIT-style licences ask for the notice to travel
// with the copy; the console links it). Nothing is fetched: the packages are
// those `npm ci` installed from package-lock.json.
import * as esbuild from 'esbuild';
import { readFileSync, writeFileSync, existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const result = await esbuild.build({
  entryPoints: ['src/main.js'],
  bundle: true,
  format: 'esm',
  target: 'es2020',
  minify: true,
  legalComments: 'none',
  outfile: 'dist/console.js',
  metafile: true,
  logLevel: 'warning',
});

const pkgs = new Map();
for (const input of Object.keys(result.metafile.inputs)) {
  const m = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
  if (m && !pkgs.has(m[1])) {
    const dir = join('node_modules', m[1]);
    const meta = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    const lic = readdirSync(dir).find((f) => /^(licen[cs]e|copying)(\.|$)/i.test(f));
    pkgs.set(m[1], { version: meta.version, license: meta.license,
      text: lic && existsSync(join(dir, lic)) ? readFileSync(join(dir, lic), 'utf8').trim() : '(no licence file in the package)' });
  }
}
const names = [...pkgs.keys()].sort();
let out = 'Third-party packages in the QUBIQ Edge console bundle (console.js)\n\n';
for (const n of names) {
  const p = pkgs.get(n);
  out += `${'='.repeat(72)}\n${n} ${p.version} (${p.license})\n${'='.repeat(72)}\n${p.text}\n\n`;
}
writeFileSync('dist/LICENSES.txt', out);
const size = result.metafile.outputs['dist/console.js'].bytes;
console.log(`console: dist/console.js ${(size / 1024).toFixed(0)} KiB from ${names.length} packages (${names.join(', ')})`);
