// Settings → Script Sandbox (permission sandbox_admin, "Manage the script
// sandbox"; every call of this page needs it, reads included): the
// sandbox's configuration and what is in force (GET /sandbox/config, GET
// /health), the installed packages (GET /sandbox/packages, DELETE
// /sandbox/packages/{name}), Add & install from the index or from wheel
// files (POST /sandbox/packages, POST /sandbox/packages/upload) with the
// widening warning at the button and pip's progress streamed, and the
// index connectivity check (GET /sandbox/check).
import { get, del, request, stream, enc, ApiError } from '../api.js';
import { h, clear, section, kv, table, busy, confirm, problem, timeCell, fmtBytes } from '../ui.js';

// WIDENING_WARNING is the documentation's text (docs/console.md, "What a
// package brings"), shown at the install button.
export const WIDENING_WARNING = [
  'Every package widens what scripts can do: all of its modules become importable by every script, and the package itself may import anything (the allow-list checks only what a script imports).',
  'Some bring much more. numpy re-exports ctypes: numpy.ctypeslib loads native code, which raises no audit events. Pickle loaders (torch.load, joblib.load) run arbitrary code when they load a data file. pandas reads and writes files by any path (read_csv, read_pickle), outside system.files. Network clients (requests, httpx) open connections outside system.*.',
  'The sandbox is a guardrail, not a security boundary: install only what the scripts need, from a source you trust.',
];

const STEPS = ['download', 'resolve', 'install', 'swap', 'restart'];

function limitText(v, unit) {
  if (v === 0 || v === null || v === undefined) return 'unset';
  if (v < 0) return 'unlimited';
  return unit === 'bytes' ? fmtBytes(v) : String(v);
}

export function sandboxPage(ctx) {
  const cfgBox = h('div', { id: 'sandbox-config' }, h('p', { class: 'dim' }, 'Loading the configuration…'));
  const pkgBox = h('div', { id: 'packages' }, h('p', { class: 'dim' }, 'Loading the packages…'));
  ctx.main.append(h('header', { class: 'pagehead' }, h('h1', {}, 'Settings → Script Sandbox'),
    h('span', { class: 'dim' }, 'Every part of this screen needs the permission sandbox_admin (“Manage the script sandbox”).')));
  const install = installBlock(() => loadPackages());
  ctx.main.append(h('div', { class: 'cols' }, section('Configuration', cfgBox), h('div', {}, install, checkBlock())),
    section('Installed packages', pkgBox));

  async function loadConfig() {
    let cfg, hl;
    try {
      [cfg, hl] = await Promise.all([get('/sandbox/config'), get('/health')]);
    } catch (e) {
      clear(cfgBox, problem(e, 'Sandbox configuration'));
      return;
    }
    const lim = hl.sandbox?.limits || {};
    const [gd, gmin, gmax] = cfg.gateway_timeout_ms || [];
    const hard = Object.keys(cfg.hardening || {}).filter((k) => k !== 'landlock_abi');
    clear(cfgBox,
      kv([
        ['Python runtime', h('span', { id: 'cfg-python' }, `${cfg.python?.status || '?'} ${cfg.python?.version || ''} — ${cfg.python_path || cfg.python?.path || ''}`)],
        ['pip', cfg.pip || 'not found'],
        ['Isolation', cfg.mode],
        ['Workers', `${cfg.replicas} replicas, queue of ${cfg.queue} runs`],
        ['Script timeouts', `default ${gd} ms, clamped to ${gmin} ms … ${gmax} ms; flow nodes ${cfg.node_timeout_ms} ms`],
        ['Recycling', `after ${cfg.recycle_after_runs} runs or above ${fmtBytes(cfg.recycle_above_memory)}`],
        ['Linter', h('span', { id: 'cfg-linter' }, cfg.linter + (cfg.linter_path ? ' — ' + cfg.linter_path : cfg.linter === 'syntax-only' ? ' (ruff not found)' : ''))],
        ['Package index', h('span', { id: 'cfg-index' }, cfg.index_url || 'none: offline, packages install from uploaded wheel files only')],
        ['Packages directory', h('code', {}, cfg.packages_dir)],
        ['Scripts may import', [...(cfg.allowed || []), ...(cfg.installed || [])].join(', ')],
      ]),
      table([
        { label: 'Limit per worker', key: 'name' },
        { label: 'Configured', key: 'configured' },
        { label: 'In force', cell: (r) => {
          const on = /^(on|enforced|active|set)/.test(r.state);
          return h('span', { class: 'q ' + (on ? 'q-good' : 'q-uncertain'), dataset: { enforced: String(on) } }, on ? `enforced (${r.state})` : `not enforced (${r.state})`);
        } },
      ], [
        { name: 'memory (memory_max)', configured: limitText(cfg.memory_max, 'bytes'), state: String(lim.memory ?? 'unknown') },
        { name: 'processes (pids_max)', configured: limitText(cfg.pids_max), state: String(lim.pids ?? 'unknown') },
        { name: 'CPU cores (cpu_max)', configured: limitText(cfg.cpu_max), state: String(lim.cpu ?? 'unknown') },
      ], { class: 'limits', caption: 'Limits, and whether each is enforced' }),
      table([
        { label: 'Hardening', key: 'name' },
        { label: 'Configured', key: 'configured' },
        { label: 'State', cell: (r) => h('span', { class: 'q ' + (String(r.state).startsWith('active') ? 'q-good' : 'q-uncertain') }, r.state) },
      ], hard.map((k) => ({ name: k, configured: cfg.hardening_config?.[k] || '—', state: String(cfg.hardening[k]) })), { class: 'hardening' }));
  }

  async function loadPackages() {
    let pkgs;
    try {
      pkgs = await get('/sandbox/packages');
    } catch (e) {
      clear(pkgBox, problem(e, 'Installed packages'));
      return;
    }
    clear(pkgBox, table([
      { label: 'Package', cell: (p) => h('strong', {}, p.name) },
      { label: 'Version', key: 'version' },
      { label: 'Imports', cell: (p) => p.imports.join(', ') },
      { label: 'Installed', cell: (p) => (p.requested ? [`${p.source || ''} by ${p.installed_by || '?'} `, timeCell(p.installed_at)] : h('span', { class: 'dim' }, 'as a dependency')) },
      { label: 'Native code', cell: (p) => (p.native ? 'yes' : 'no') },
      { label: 'Widens', class: 'wrap', cell: (p) => h('ul', { class: 'widens' }, p.widens.map((w) => h('li', {}, w))) },
      { label: '', cell: (p) => (p.requested ? h('button', { type: 'button', class: 'small danger', dataset: { remove: p.name },
        onclick: async (ev) => {
          if (!await confirm('Remove a package', `Remove ${p.name} ${p.version}? Scripts that import it fail from the next run; the workers restart one at a time.`, 'Remove', true)) return;
          await busy(ev.target, async () => {
            try {
              await del('/sandbox/packages/' + enc(p.name));
              loadPackages();
              loadConfig();
            } catch (e) {
              pkgBox.prepend(problem(e, `Not removed: ${p.name}`));
            }
          });
        } }, 'Remove') : '') },
    ], pkgs, { empty: 'No package is installed: scripts import the standard allow-list only.', rowAttrs: (p) => ({ dataset: { package: p.name, version: p.version } }) }));
  }

  loadConfig();
  loadPackages();
}

// installBlock is Add & install: a requirement or wheel files; Review asks
// the appliance what the install brings (the answer without
// acknowledge_widening is the list of what each package widens, and nothing
// is installed); Install needs the acknowledgement and streams pip's
// progress.
function installBlock(done) {
  const fromIndex = h('input', { type: 'radio', name: 'src', value: 'index', id: 'src-index', checked: true });
  const fromUpload = h('input', { type: 'radio', name: 'src', value: 'upload', id: 'src-upload' });
  const req = h('input', { id: 'requirement', placeholder: 'numpy==1.26.4', autocomplete: 'off', spellcheck: 'false', 'aria-label': 'Requirement' });
  const files = h('input', { type: 'file', id: 'wheel-files', accept: '.whl', multiple: true, 'aria-label': 'Wheel files', disabled: true });
  const review = h('button', { type: 'button', id: 'review' }, 'Review what it brings');
  const ack = h('input', { type: 'checkbox', id: 'ack', disabled: true });
  const installBtn = h('button', { type: 'button', class: 'primary', id: 'install', disabled: true }, 'Install');
  const widenings = h('div', { id: 'widenings', 'aria-live': 'polite' });
  const progress = h('div', { id: 'install-progress', hidden: true });
  const out = h('div', { id: 'install-result', 'aria-live': 'polite' });
  let reviewed = null; // what was reviewed: the requirement or the files' names

  const source = () => (fromUpload.checked ? 'upload' : 'index');
  const key = () => (source() === 'index' ? 'index:' + req.value.trim() : 'upload:' + [...files.files].map((f) => f.name + f.size).join(','));
  const reset = () => {
    reviewed = null;
    ack.checked = false;
    ack.disabled = true;
    installBtn.disabled = true;
    clear(widenings);
    progress.hidden = true;
  };
  const sync = () => {
    req.disabled = source() !== 'index';
    files.disabled = source() !== 'upload';
    if (reviewed !== key()) reset();
  };
  for (const e of [fromIndex, fromUpload]) e.addEventListener('change', sync);
  req.addEventListener('input', sync);
  files.addEventListener('change', sync);
  ack.addEventListener('change', () => { installBtn.disabled = !ack.checked || reviewed !== key(); });

  function body(acknowledge) {
    if (source() === 'index') return { path: '/sandbox/packages', body: { requirement: req.value.trim(), acknowledge_widening: acknowledge } };
    const fd = new FormData();
    for (const f of files.files) fd.append('wheel', f, f.name);
    if (acknowledge) fd.append('acknowledge_widening', 'true');
    return { path: '/sandbox/packages/upload', body: fd };
  }

  function check() {
    if (source() === 'index' && !req.value.trim()) { clear(out, h('p', { class: 'error' }, 'Give a requirement: a package name with an optional version (name==1.2).')); req.focus(); return false; }
    if (source() === 'upload' && !files.files.length) { clear(out, h('p', { class: 'error' }, 'Choose one or more wheel files (.whl).')); files.focus(); return false; }
    return true;
  }

  review.addEventListener('click', () => busy(review, async () => {
    clear(out);
    reset();
    if (!check()) return;
    const b = body(false);
    try {
      const ev = await stream('POST', b.path, b.body, () => {});
      clear(out, h('p', {}, 'The appliance installed without asking for an acknowledgement: ', JSON.stringify(ev)));
      done();
    } catch (e) {
      if (e instanceof ApiError && e.kind === 'acknowledgement_required') {
        reviewed = key();
        ack.disabled = false;
        const ws = e.problem.widenings || [];
        clear(widenings, h('div', { class: 'warnbox', role: 'alert' },
          h('h3', {}, `This install brings ${ws.length} package${ws.length === 1 ? '' : 's'}:`),
          h('ul', {}, ws.map((w) => h('li', { dataset: { package: w.package } }, h('strong', {}, `${w.package} ${w.version || ''}`),
            w.requested ? '' : h('span', { class: 'dim' }, ' (a dependency)'),
            h('ul', {}, w.widens.map((x) => h('li', {}, x))))))));
        ack.focus();
        return;
      }
      clear(out, problem(e, 'Review'));
    }
  }));

  installBtn.addEventListener('click', () => busy(installBtn, async () => {
    if (!ack.checked || reviewed !== key()) return;
    clear(out);
    const log = h('ol', { class: 'pip', id: 'install-log' });
    const bar = h('div', { class: 'steps' }, STEPS.map((s) => h('span', { dataset: { step: s } }, s)));
    const elapsed = h('span', { class: 'dim', id: 'install-elapsed' }, '0 s');
    progress.hidden = false;
    const state = h('strong', { id: 'install-state' }, 'Installing… ');
    clear(progress, h('div', { class: 'toolbar' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), state, elapsed), bar, log);
    const t0 = Date.now();
    const tick = setInterval(() => { elapsed.textContent = `${Math.round((Date.now() - t0) / 1000)} s`; }, 500);
    const b = body(true);
    try {
      const last = await stream('POST', b.path, b.body, (ev) => {
        if (!ev) return;
        if (ev.event === 'progress') {
          for (const s of bar.children) if (s.dataset.step === ev.step) s.classList.add('on');
          log.append(h('li', { dataset: { step: ev.step || '' } }, h('span', { class: 'step' }, ev.step || ''), ' ', ev.message || ''));
          log.scrollTop = log.scrollHeight;
        }
      });
      state.textContent = last && last.event === 'done' ? 'Installed in ' : 'Stopped after ';
      if (last && last.event === 'done') {
        const r = last.result;
        clear(out, h('div', { class: 'ok', id: 'install-done' }, h('strong', {}, `Installed ${r.packages.join(', ')}`), ` in ${(r.duration_ms / 1000).toFixed(1)} s. `,
          'Scripts may now import: ', r.allowed.join(', ') + '.'));
        reviewed = null;
        ack.checked = false;
        ack.disabled = true;
        clear(widenings);
        req.value = '';
        files.value = '';
        done();
      } else if (last && last.event === 'error') {
        clear(out, problem(new ApiError(last.error.status || 500, last.error, ''), 'Install failed, nothing changed'));
      } else {
        clear(out, h('p', { class: 'error' }, 'The install answer ended without a result: reload the package list to see what is installed.'));
      }
    } catch (e) {
      clear(out, problem(e, 'Not installed'));
    } finally {
      clearInterval(tick);
      progress.querySelector('.spinner')?.remove();
    }
  }));

  return section('Add & install',
    h('fieldset', { class: 'src' }, h('legend', {}, 'From'),
      h('label', {}, fromIndex, ' the package index (python.index_url): ', req),
      h('label', {}, fromUpload, ' wheel files, for an appliance without an index: ', files)),
    h('div', { class: 'installrow' }, review, h('span', { class: 'dim small' }, 'asks the appliance which packages the install brings and what each widens; nothing is installed')),
    widenings,
    h('div', { class: 'atbutton' },
      h('div', { class: 'warnbox', id: 'widening-warning' }, h('h3', {}, 'What a package brings'), WIDENING_WARNING.map((p) => h('p', {}, p))),
      h('label', { class: 'ack' }, ack, ' I have read what these packages let every script do and install them anyway (acknowledge_widening).'),
      h('div', { class: 'installrow' }, installBtn, h('span', { class: 'dim small' }, 'Install stays disabled until the install is reviewed and acknowledged.'))),
    progress, out);
}

// checkBlock is the connectivity check: can pip reach python.index_url?
// The appliance answers within about 4 s (reached, refused, timed out, or
// why not); the page gives up after 15 s.
function checkBlock() {
  const btn = h('button', { type: 'button', id: 'check' }, 'Check the package index');
  const out = h('div', { id: 'check-result', 'aria-live': 'polite' });
  btn.addEventListener('click', () => busy(btn, async () => {
    clear(out, h('p', { class: 'dim' }, 'Asking the index…'));
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 15000);
    try {
      const c = await request('GET', '/sandbox/check', { signal: ac.signal });
      const answer = c.reachable ? 'reached' : /refused/i.test(c.reason || '') ? 'refused'
        : /no answer within|timed? ?out|timeout/i.test(c.reason || '') ? 'timed out' : c.index_url ? 'failed' : 'offline';
      clear(out, h('div', { class: 'checkbox ' + (c.reachable ? 'q-good' : 'q-bad'), dataset: { answer } },
        h('strong', { class: 'answer' }, answer.charAt(0).toUpperCase() + answer.slice(1)),
        c.url ? [' — ', h('code', {}, c.url)] : null,
        ` in ${Math.round(c.duration_ms)} ms`, c.status ? ` (HTTP ${c.status})` : '',
        c.reason ? h('p', {}, c.reason) : null));
    } catch (e) {
      clear(out, e.name === 'AbortError'
        ? h('div', { class: 'checkbox q-bad', dataset: { answer: 'timed out' } }, h('strong', {}, 'Timed out'), ': the appliance did not answer within 15 s.')
        : problem(e, 'Connectivity check'));
    } finally {
      clearTimeout(timer);
    }
  }));
  return section('Connectivity check', h('p', { class: 'dim' }, 'Whether pip can reach the package index, asked the way pip asks (no proxy, the system\'s CA certificates), answered within a few seconds.'), btn, out);
}
