// End-to-end test of the engineer's console in headless Debian chromium,
// driven by playwright-core (never `npx playwright install`: the browser is
// the distribution's). Run by integration/console_test.go, which starts
// qubiqd, a pymodbus device and a loopback package index, and answers this
// script's requests on stdin:
//
//   stdout "@@ stop-modbus" / "@@ start-modbus"  → the test stops / starts the pymodbus device
//   stdout "@@ stop-index"                       → the test closes the loopback index (its port then refuses)
//   stdout "@@ revoke-stale-key"                 → the test revokes the API key stale-e2e over the API
//   stdout "@@ disable-op2"                      → the test disables the operator op2 over the API
//
// Environment: QUBIQ_URL, CHROMIUM, PROFILE_DIR (a fresh --user-data-dir),
// ARTIFACTS (screenshots), PASSWORD, SB_USER (sandbox_admin), DES_USER
// (designer, no sandbox_admin), UA_USER (users_admin), OP_USER (an operator),
// WHEEL (a tiny wheel file to upload), WIDEN_REQ (a requirement the loopback
// index serves that widens: numpy).
//
// The run fails on any request to a host other than the appliance, and on
// any Content Security Policy violation.
import { chromium } from 'playwright-core';
import { createInterface } from 'node:readline';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`environment variable ${k} is not set`);
  return v;
};
const base = env('QUBIQ_URL');
const origin = new URL(base).origin;
const artifacts = env('ARTIFACTS');
mkdirSync(artifacts, { recursive: true });

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function ask(cmd) {
  console.log('@@ ' + cmd);
  const { value, done } = await lines.next();
  if (done) throw new Error(`no answer to "${cmd}"`);
  if (value.trim() !== 'OK') throw new Error(`"${cmd}": ${value}`);
}
const log = (msg) => console.log('e2e: ' + msg);
function check(cond, msg) { if (!cond) throw new Error(msg); }

const ctx = await chromium.launchPersistentContext(env('PROFILE_DIR'), {
  executablePath: env('CHROMIUM'),
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1280, height: 800 },
});

// Nothing but the appliance: every request of every page is checked, and a
// request elsewhere is refused and fails the run.
const foreign = [];
await ctx.route('**/*', (route) => {
  const u = route.request().url();
  if (u.startsWith('data:') || new URL(u).origin === origin) return route.continue();
  foreign.push(u);
  return route.abort('blockedbyclient');
});
ctx.on('request', (req) => {
  const u = req.url();
  if (!u.startsWith('data:') && new URL(u).origin !== origin) foreign.push(u);
});
const cspViolations = [];
const page = ctx.pages()[0] || await ctx.newPage();
page.setDefaultTimeout(20000);
page.on('pageerror', (e) => log('page error: ' + e.message));
page.on('console', (m) => {
  if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
  if (m.type() === 'error' && !/status of 40[139]/.test(m.text())) log('console error: ' + m.text());
});
page.on('dialog', (d) => d.dismiss()); // a native dialog would be a bug: the console uses <dialog>

let shot = 0;
const snap = async (name) => page.screenshot({ path: join(artifacts, `${String(++shot).padStart(2, '0')}-${name}.png`), fullPage: false });

async function login(user) {
  await page.goto(base + '/console/');
  await page.locator('#login').waitFor({ state: 'visible' });
  await page.fill('#login-user', user);
  await page.fill('#login-pass', env('PASSWORD'));
  await page.keyboard.press('Enter');
  await page.locator('#layout').waitFor({ state: 'visible' });
}
async function logout() {
  await page.click('#logout');
  await page.locator('#login').waitFor({ state: 'visible' });
}
// go navigates with the keyboard: focus the page's link in the side bar, press Enter.
async function go(path) {
  await page.focus(`#nav a[data-path="${path}"]`);
  await page.keyboard.press('Enter');
  await page.waitForFunction((p) => document.getElementById('main').dataset.page === p, path);
}
async function confirmDialog() {
  const d = page.locator('dialog.dlg[open]');
  await d.waitFor();
  await d.locator('.actions button.primary, .actions button.danger').click();
  await d.waitFor({ state: 'detached' });
}
// forged does a request from inside the page with the session's cookie and
// CSRF token, as a tampered browser would.
const forged = (method, path, body) => page.evaluate(async ([m, p, b]) => {
  const s = await (await fetch('/api/v1/auth/session', { headers: { 'X-Qubiq-Console': '1' } })).json();
  const r = await fetch('/api/v1' + p, { method: m, body: b === undefined ? undefined : JSON.stringify(b),
    headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': s.csrf_token, 'X-Qubiq-Console': '1',
      'X-Qubiq-Realm': 'platform', 'X-Qubiq-Permissions': 'sandbox_admin' } });
  return { status: r.status, body: await r.json().catch(() => null) };
}, [method, path, body]);

try {
  // 1. The login page; a sandbox administrator signs in.
  await page.goto(base + '/console/');
  await page.locator('#login').waitFor({ state: 'visible' });
  await snap('login');
  await login(env('SB_USER'));
  // Keyboard: Tab moves along the side bar's links.
  await page.focus('#nav a[data-path="/status"]');
  await page.keyboard.press('Tab');
  check(await page.evaluate(() => document.activeElement.dataset.path) === '/devices', 'Tab does not move to the next page link');
  await go('/settings/sandbox');
  await page.locator('#cfg-python').waitFor();
  check((await page.textContent('#cfg-python')).includes('ok'), 'the runtime is not shown as ok');
  check(/ruff|syntax-only/.test(await page.textContent('#cfg-linter')), 'the linter is not named');
  check(await page.locator('table.limits tbody tr').count() === 3, 'the three worker limits are not listed');
  await snap('sandbox-config');
  log('Settings → Script Sandbox shows the configuration');

  // 2. A wheel upload: reviewed, acknowledged, installed, listed.
  await page.check('#src-upload');
  await page.setInputFiles('#wheel-files', env('WHEEL'));
  check(await page.isDisabled('#install'), 'Install is enabled before the review');
  await page.click('#review');
  await page.locator('#widenings li[data-package="qubiq-tiny"]').waitFor();
  check(await page.isDisabled('#install'), 'Install is enabled before the acknowledgement');
  await page.check('#ack');
  check(await page.isEnabled('#install'), 'Install stays disabled after the acknowledgement');
  await page.click('#install');
  await page.locator('#install-log li').first().waitFor();
  await page.locator('#install-done').waitFor({ timeout: 120000 });
  await page.locator('#packages tr[data-package="qubiq-tiny"][data-version="1.0"]').waitFor();
  await page.locator('#packages').scrollIntoViewIfNeeded();
  await snap('wheel-uploaded');
  log('the uploaded wheel is installed and listed');

  // 3. A package that widens: the warning at the button, the server's list, no install without the acknowledgement.
  await page.check('#src-index');
  await page.fill('#requirement', env('WIDEN_REQ'));
  const warning = await page.textContent('#widening-warning');
  check(warning.includes('numpy re-exports ctypes') && warning.includes('pickle') && warning.includes('pandas reads and writes files by any path'),
    'the warning at the button does not say what packages bring: ' + warning);
  await page.click('#review');
  const numpyItem = page.locator('#widenings li[data-package="numpy"]');
  await numpyItem.waitFor({ timeout: 120000 });
  check((await numpyItem.textContent()).includes('ctypes'), 'the review does not say that numpy brings ctypes');
  check(await page.isDisabled('#install'), 'Install is enabled without the acknowledgement');
  await page.evaluate(() => document.getElementById('widenings').scrollIntoView({ block: 'start' }));
  await snap('widening-warning');
  const noAck = await forged('POST', '/sandbox/packages', { requirement: env('WIDEN_REQ'), acknowledge_widening: false });
  check(noAck.status === 409 && noAck.body.kind === 'acknowledgement_required', 'an install without the acknowledgement was not refused: ' + JSON.stringify(noAck));
  const listed = await forged('GET', '/sandbox/packages');
  check(!listed.body.some((p) => p.name === 'numpy'), 'numpy was installed without the acknowledgement');
  await page.check('#ack');
  await page.click('#install');
  await page.locator('#install-done').waitFor({ timeout: 180000 });
  await page.locator('#packages tr[data-package="numpy"]').waitFor();
  log('numpy: warned, refused without the acknowledgement, installed with it');

  // 4. The connectivity check: the loopback index is reached; once closed, its port refuses.
  let t0 = Date.now();
  await page.click('#check');
  await page.locator('#check-result [data-answer]').waitFor();
  check(await page.getAttribute('#check-result [data-answer]', 'data-answer') === 'reached', 'the loopback index was not reached: ' + await page.textContent('#check-result'));
  await page.locator('#check-result').scrollIntoViewIfNeeded();
  await snap('check-reached');
  await ask('stop-index');
  t0 = Date.now();
  await page.click('#check');
  await page.waitForFunction(() => document.querySelector('#check-result [data-answer]')?.dataset.answer === 'refused');
  const took = Date.now() - t0;
  check(took < 10000, `the check of a closed port took ${took} ms`);
  check((await page.textContent('#check-result')).includes('connection refused'), 'the refusal is not explained');
  await snap('check-refused');
  log(`connectivity check: reached, then refused in ${took} ms`);

  // 5. Remove the uploaded package.
  await page.click('#packages button[data-remove="qubiq-tiny"]');
  await confirmDialog();
  await page.locator('#packages tr[data-package="qubiq-tiny"]').waitFor({ state: 'detached', timeout: 120000 });
  log('package removed');
  await logout();

  // 6. A designer without sandbox_admin: the page says which permission is missing; the API refuses the forged request.
  await login(env('DES_USER'));
  await page.evaluate(() => { location.hash = '#/settings/sandbox'; });
  const refusal = page.locator('.refusal');
  await refusal.waitFor();
  const rtext = await refusal.textContent();
  check(rtext.includes('sandbox_admin') && rtext.includes('Manage the script sandbox'), 'the refusal does not name sandbox_admin: ' + rtext);
  await snap('sandbox-refused');
  for (const [m, p, b] of [['POST', '/sandbox/packages', { requirement: env('WIDEN_REQ'), acknowledge_widening: true }], ['GET', '/sandbox/config'],
    ['DELETE', '/sandbox/packages/numpy']]) {
    const r = await forged(m, p, b);
    check(r.status === 403 && r.body.kind === 'permission_denied' && r.body.detail.includes('sandbox_admin'),
      `forged ${m} ${p} was not refused naming sandbox_admin: ` + JSON.stringify(r));
  }
  log('a designer is refused the sandbox page and its routes, naming sandbox_admin');

  // 7. Scripts: a syntax error shows at its line before saving; fixed, saved, run, compared, rolled back.
  await go('/scripts');
  await page.click('#modules a[data-module="pumps"]');
  await page.locator('#editor .cm-content').waitFor();
  await page.waitForFunction(() => document.getElementById('lint-label').dataset.linter);
  check(await page.getAttribute('#module-version', 'data-version') === '1', 'pumps does not start at version 1');
  const content = page.locator('#editor .cm-content');
  await content.click();
  await page.keyboard.press('Control+End');
  await page.keyboard.insertText('\n\ndef broken(args)\n    return 1\n');
  const diag = page.locator('#diagnostics li[data-severity="error"]');
  await diag.first().waitFor();
  const line = Number(await diag.first().getAttribute('data-line'));
  const expectLine = await page.evaluate(() => [...document.querySelectorAll('#editor .cm-line')].findIndex((l) => l.textContent.startsWith('def broken')) + 1);
  check(line === expectLine, `the syntax error is reported at line ${line}, the broken def is at ${expectLine}`);
  // The inline mark sits on that line, and the gutter marks it.
  const markLine = await page.evaluate(() => {
    const lines = [...document.querySelectorAll('#editor .cm-line')];
    return lines.findIndex((l) => l.querySelector('.cm-lintRange-error, .cm-lintPoint-error')) + 1;
  });
  check(markLine === expectLine, `the inline lint mark is on line ${markLine}, want ${expectLine}`);
  await page.locator('#editor .cm-gutter-lint .cm-lint-marker-error').first().waitFor();
  const linter = await page.getAttribute('#lint-label', 'data-linter');
  check((await page.textContent('#lint-label')).includes(linter), 'the linter label does not name the linter');
  check(!(await page.isHidden('#dirty')), 'unsaved changes are not marked');
  await snap('script-syntax-error');
  log(`syntax error shown at line ${line} by ${linter} before saving`);
  // Fix it: the new entry returns a marker.
  await page.keyboard.press('Control+a');
  await page.keyboard.press('Delete');
  await page.keyboard.insertText('@gateway(timeout_ms=3000)\ndef start(args):\n    print("started", args.get("line"))\n    return {"started": args.get("line"), "version": 2}\n');
  await page.waitForFunction(() => document.querySelector('#diagnostics li[data-none]'));
  await page.keyboard.press('Control+s');
  await page.locator('#saved-note').waitFor();
  check(await page.getAttribute('#module-version', 'data-version') === '2', 'the save did not make version 2');
  await page.fill('#run-args', '{"line": 7}');
  await page.click('#run');
  await page.locator('#run-ok').waitFor();
  const result = JSON.parse(await page.textContent('#run-value'));
  check(result.started === 7 && result.version === 2, 'the run did not return the new version\'s result: ' + JSON.stringify(result));
  check((await page.textContent('#run-logs')).includes('started 7'), 'the run\'s log line is not shown');
  await page.locator('#run-result').scrollIntoViewIfNeeded();
  await snap('script-saved-run');
  log('fixed, saved as version 2, run: ' + JSON.stringify(result));
  // A run that fails shows the problem's kind.
  await page.fill('#run-args', '[1, 2]');
  await page.click('#run');
  await page.locator('#run-failed').waitFor();
  check(await page.getAttribute('#run-failed', 'data-kind') === 'script_error', 'a raising run does not show kind script_error');
  // The diff against version 1.
  await page.selectOption('#compare-version', '1');
  await page.click('#compare');
  await page.locator('#diff .cm-mergeView').waitFor();
  check(await page.locator('#diff .cm-changedLine, #diff .cm-deletedChunk, #diff .cm-changedText').count() > 0, 'the diff shows no change');
  check(await page.isHidden('#editor'), 'the editor stays beside the comparison');
  await page.locator('#diff').scrollIntoViewIfNeeded();
  await snap('script-diff');
  await page.click('#diff-close');
  // Roll back: version 1 runs again.
  await page.click('#rollback');
  await confirmDialog();
  await page.waitForFunction(() => document.getElementById('module-version')?.dataset.version === '1');
  await page.fill('#run-args', '{"line": 1}');
  await page.click('#run');
  await page.locator('#run-ok').waitFor();
  const back = JSON.parse(await page.textContent('#run-value'));
  check(back.version === undefined, 'the rolled-back module still runs version 2: ' + JSON.stringify(back));
  await snap('script-rolled-back');
  log('rolled back: version 1 runs again: ' + JSON.stringify(back));

  // 8. Devices: the pymodbus device goes Bad when stopped and comes back.
  await go('/devices');
  const plc = page.locator('#devices tr[data-device="plc1"]');
  await page.waitForFunction(() => document.querySelector('#devices tr[data-device="plc1"]')?.dataset.quality === 'Good');
  await page.click('#devices tr[data-device="plc1"] button');
  await page.locator('#devices table.plan').waitFor();
  await snap('devices-good');
  await ask('stop-modbus');
  await page.waitForFunction(() => (document.querySelector('#devices tr[data-device="plc1"]')?.dataset.quality || '').startsWith('Bad'));
  const reason = await plc.locator('td.wrap').first().textContent();
  await snap('devices-bad');
  log(`plc1 went ${await plc.getAttribute('data-quality')} (${await plc.getAttribute('data-state')}: ${reason})`);
  await go('/status');
  await page.waitForFunction(() => document.getElementById('health-status')?.dataset.status === 'degraded');
  check((await page.textContent('#health-reasons')).includes('plc1'), 'the degraded reason does not name plc1');
  await snap('overview-degraded');
  await go('/tags');
  await page.fill('#tag-filter', 'Line1/*');
  await page.selectOption('#tag-quality', 'bad');
  await page.locator('#tags tr[data-path="Line1/Speed"]').waitFor();
  await snap('tags-bad');
  await ask('start-modbus');
  await go('/devices');
  await page.waitForFunction(() => document.querySelector('#devices tr[data-device="plc1"]')?.dataset.quality === 'Good', null, { timeout: 30000 });
  await snap('devices-back');
  log('plc1 came back Good');
  await go('/alarms');
  await page.locator('#alarms-placeholder, #alarms table').first().waitFor();
  await snap('alarms');
  await logout();

  // An operator is not a console user: the page says so, and the API refuses the console's requests.
  await login(env('OP_USER'));
  await page.locator('.refusal', { hasText: 'platform-realm' }).waitFor();
  const opTry = await page.evaluate(async () => (await fetch('/api/v1/tags', { headers: { 'X-Qubiq-Console': '1' } })).status);
  check(opTry === 403, `an operator's console request answered ${opTry}`);
  await snap('operator-refused');
  await logout();

  // 9. A users administrator: the audit log with filters, API keys (token shown once, revoked), a user disabled.
  await login(env('UA_USER'));
  await go('/audit');
  await page.fill('#audit-action', 'script');
  await page.fill('#audit-origin', 'console');
  await page.click('#audit-search');
  await page.locator('#audit tr[data-action="script.save"]').first().waitFor();
  const auditText = await page.textContent('#audit');
  check(auditText.includes(env('DES_USER')) && auditText.includes('script.rollback'), 'the audit search misses the designer\'s saves and rollback');
  check(await page.locator('#audit tr[data-action]').count() === await page.locator('#audit tr[data-action^="script."]').count(), 'the kind filter lets other records through');
  await snap('audit');
  // Runs are recorded with the script as origin (script:module.entry) and the designer as principal.
  await page.fill('#audit-origin', '');
  await page.fill('#audit-action', 'script.run');
  await page.fill('#audit-principal', env('DES_USER'));
  await page.click('#audit-search');
  await page.locator('#audit tr[data-action="script.run"]').first().waitFor();
  check((await page.textContent('#audit')).includes('pumps.start'), 'the designer\'s runs are not in the audit log');
  await page.fill('#audit-action', 'refused');
  await page.click('#audit-search');
  await page.locator('#audit tr[data-action="refused"]').first().waitFor();
  check((await page.textContent('#audit')).includes('sandbox_admin'), 'the refused forged request is not in the audit log');
  await go('/settings/users');
  await page.locator('#users tr[data-user]').first().waitFor();
  await page.fill('#key-name', 'scada-e2e');
  await page.click('#key-create');
  const tokenBox = page.locator('#key-token');
  await tokenBox.waitFor();
  const token = await tokenBox.inputValue();
  check(token.length > 20, 'no token shown');
  await snap('apikey-token');
  await page.click('dialog.dlg .actions button.primary');
  const keyRow = page.locator('#apikeys tr[data-key]', { hasText: 'scada-e2e' });
  await keyRow.waitFor();
  check(!(await page.textContent('#apikeys')).includes(token), 'the token is shown again in the list');
  await keyRow.locator('button[data-revoke]').click();
  await confirmDialog();
  await keyRow.waitFor({ state: 'detached' });
  await page.click(`#users button[data-disable="${env('OP_USER')}"]`);
  await confirmDialog();
  await page.waitForFunction((u) => document.querySelector(`#users tr[data-user="${u}"]`)?.textContent.includes('disabled'), env('OP_USER'));
  await snap('users');
  log('API key made (token shown once) and revoked; operator disabled');
  // Done behind the page's back: the appliance answers 200 {"already": true,
  // "detail"} and the page shows that detail, not a plain success.
  await ask('revoke-stale-key');
  await ask('disable-op2');
  const staleRow = page.locator('#apikeys tr[data-key]', { hasText: 'stale-e2e' });
  await staleRow.locator('button[data-revoke]').click();
  await confirmDialog();
  await page.waitForFunction(() => document.querySelector('#toast.notice')?.textContent.includes('was already revoked'));
  await staleRow.waitFor({ state: 'detached' });
  await page.click('#users button[data-disable="op2"]');
  await confirmDialog();
  await page.waitForFunction(() => document.querySelector('#toast.notice')?.textContent.includes('user "op2" was already disabled; nothing changed'));
  await snap('users-already');
  log('a key revoked and a user disabled before: the page shows the appliance\'s "already" detail');
  await logout();

  check(cspViolations.length === 0, 'Content Security Policy violations: ' + cspViolations.join('\n'));
  check(foreign.length === 0, 'requests to hosts other than the appliance: ' + foreign.join(', '));
  log(`no request left the appliance (${origin}); no CSP violation`);
  await ctx.close();
  process.exit(0); // stdin stays open for the requests: end here
} catch (e) {
  await snap('failure').catch(() => {});
  await ctx.close().catch(() => {});
  console.error(e.stack || String(e));
  process.exit(1);
}
