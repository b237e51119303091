// End-to-end test of the LiveView panel in headless Debian chromium, driven
// by playwright-core (never `npx playwright install`: the browser is the
// distribution's). Run by integration/liveview_test.go, which starts qubiqd
// and answers this script's requests on stdin:
//
//   stdout "@@ readback PATH VALUE"  → the test reads PATH over REST and answers "OK" or "FAIL reason"
//   stdout "@@ stop" / "@@ start"    → the test stops / starts qubiqd and answers "OK"
//
// Environment: QUBIQ_URL, CHROMIUM, PROFILE_DIR (a fresh --user-data-dir),
// ARTIFACTS (screenshots), OP_USER, SUP_USER, PASSWORD.
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
const artifacts = env('ARTIFACTS');
mkdirSync(artifacts, { recursive: true });

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function ask(cmd) {
  console.log('@@ ' + cmd);
  const { value, done } = await lines.next();
  if (done) throw new Error(`no answer to "${cmd}"`);
  if (value.trim() !== 'OK') throw new Error(`"${cmd}": ${value}`);
}

function log(msg) { console.log('e2e: ' + msg); }
function check(cond, msg) { if (!cond) throw new Error(msg); }

const ctx = await chromium.launchPersistentContext(env('PROFILE_DIR'), {
  executablePath: env('CHROMIUM'),
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1280, height: 800 },
  hasTouch: true,
});
const page = ctx.pages()[0] || await ctx.newPage();
page.setDefaultTimeout(15000);
page.on('pageerror', (e) => log('page error: ' + e.message));
let shot = 0;
const snap = async (name) => page.screenshot({ path: join(artifacts, `${String(++shot).padStart(2, '0')}-${name}.png`) });
const card = (tag) => page.locator(`#widgets .w[data-tag="${tag}"]`);
const toast = page.locator('#toast');

async function login(user) {
  await page.locator('#login').waitFor({ state: 'visible' });
  await page.fill('#login-user', user);
  await page.fill('#login-pass', env('PASSWORD'));
  await page.click('#login-submit');
  await page.locator('#panel').waitFor({ state: 'visible' });
  await page.waitForFunction(() => document.body.dataset.link === 'up');
}

async function expectToast(kind, text) {
  await page.waitForFunction(([k, t]) => {
    const e = document.getElementById('toast');
    return !e.hidden && e.className === k && e.textContent.includes(t);
  }, [kind, text]);
  return toast.textContent();
}

async function press(label) {
  await page.locator('#widgets .w.button button', { hasText: label }).tap();
}

try {
  // 1. Login screen, then an operator at operate signs in.
  await page.goto(base + '/');
  await page.locator('#login').waitFor({ state: 'visible' });
  await snap('login');
  await login(env('OP_USER'));
  log('operator signed in');

  // 2. A simulator value changes live.
  const speed = card('Line1/Speed');
  await page.waitForFunction(() => document.querySelector('#widgets .w[data-tag="Line1/Speed"]').dataset.quality === 'Good');
  const v1 = await speed.locator('.val').textContent();
  await page.waitForFunction((old) => document.querySelector('#widgets .w[data-tag="Line1/Speed"] .val').textContent !== old, v1);
  const v2 = await speed.locator('.val').textContent();
  check(await speed.evaluate((e) => e.classList.contains('q-good')), 'the live value is not coloured good');
  log(`live value changed: ${v1} → ${v2}`);
  await snap('panel-live');

  // 3. A setpoint within the operator's level reaches the device.
  const sp = card('Line1/Setpoint');
  await sp.locator('input').fill('42.5');
  await sp.locator('button', { hasText: 'Set' }).tap();
  await expectToast('ok', 'set to 42.5');
  await page.waitForFunction(() => document.querySelector('#widgets .w[data-tag="Line1/Setpoint"] .val').textContent.startsWith('42.5'));
  await ask('readback Line1/Setpoint 42.5');
  log('setpoint written and read back from the device');
  await snap('setpoint-written');

  // 4. A supervise tag: the control is read-only and names the level; a forged request is refused.
  const lim = card('Line1/Limit');
  check(await lim.locator('input').isDisabled(), 'the supervise control is not read-only');
  check(await lim.locator('button', { hasText: 'Set' }).isDisabled(), 'the supervise Set button is enabled');
  const ro = await lim.locator('.ro').textContent();
  check(ro.includes('write level "supervise" required'), `read-only note "${ro}" does not name the level`);
  const forged = await page.evaluate(async () => {
    const s = await (await fetch('/api/v1/auth/session')).json();
    const res = await fetch('/api/v1/tags/write', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': s.csrf_token, 'X-Qubiq-Realm': 'platform',
        'X-Qubiq-Level': 'design', 'X-Qubiq-Scopes': 'tag:write script:execute' },
      body: JSON.stringify({ writes: [{ path: 'Line1/Limit', value: 99 }] }),
    });
    return { status: res.status, body: await res.json() };
  });
  check(forged.status === 200 && forged.body[0].status === 'Bad_UserAccessDenied' && forged.body[0].reason.includes('supervise'),
    'forged write of the supervise tag was not refused: ' + JSON.stringify(forged));
  const forgedBody = await page.evaluate(async () => {
    const s = await (await fetch('/api/v1/auth/session')).json();
    const res = await fetch('/api/v1/tags/write', {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': s.csrf_token },
      body: JSON.stringify({ writes: [{ path: 'Line1/Limit', value: 99 }], realm: 'platform', write_level: 'design' }),
    });
    return res.status;
  });
  check(forgedBody === 400, `a body with forged realm/level answered ${forgedBody}, want 400`);
  await ask('readback Line1/Limit 0');
  log('supervise control read-only; forged requests refused');
  await snap('supervise-readonly');

  // 5. A button whose script calls system.script.runOnGateway: refused, naming script:execute.
  await press('Chain');
  const refused = await expectToast('refused', 'script:execute');
  log('refusal shown: ' + refused);
  await page.waitForFunction(() => [...document.querySelectorAll('#events li.refused')].some((li) => li.textContent.includes('permission_denied')));
  await snap('runongateway-refused');

  // A button with a confirm: Cancel does nothing, Confirm runs it.
  await press('Start');
  await page.locator('#confirm').waitFor({ state: 'visible' });
  await snap('confirm');
  await page.locator('#confirm-yes').tap();
  await expectToast('ok', 'Start: done');
  await page.waitForFunction(() => document.querySelector('#widgets .w[data-tag="Line1/Run"] .val').textContent.startsWith('On'));
  log('confirmed button ran and wrote Line1/Run');

  // 6. The WebSocket is cut (qubiqd stops): values go stale; it comes back and recovers.
  await ask('stop');
  await page.locator('#link').waitFor({ state: 'visible' });
  await page.waitForFunction(() => document.querySelector('#widgets .w[data-tag="Line1/Speed"]').dataset.stale === 'true');
  check(await speed.evaluate((e) => e.classList.contains('q-stale')), 'values not marked stale while the link is down');
  const staleText = await speed.locator('.q').textContent();
  check(staleText.includes('stale'), `quality text "${staleText}" does not say stale`);
  await snap('link-down-stale');
  log('link down: values stale');
  await ask('start');
  await page.locator('#link').waitFor({ state: 'hidden', timeout: 30000 });
  await page.waitForFunction(() => {
    const c = document.querySelector('#widgets .w[data-tag="Line1/Speed"]');
    return c.dataset.stale === 'false' && c.dataset.quality === 'Good';
  }, null, { timeout: 30000 });
  const r1 = await speed.locator('.val').textContent();
  await page.waitForFunction((old) => document.querySelector('#widgets .w[data-tag="Line1/Speed"] .val').textContent !== old, r1);
  await snap('link-recovered');
  log('link recovered, values live again');

  // 7. A supervise operator's press succeeds.
  await page.locator('#logout').tap();
  await login(env('SUP_USER'));
  check(!(await card('Line1/Limit').locator('input').isDisabled()), 'the supervise control is read-only for a supervise operator');
  await press('Chain');
  const ok = await expectToast('ok', 'pong');
  log('supervise press: ' + ok);
  await snap('supervise-press-ok');
  await ctx.close();
  log('PASS');
  process.exit(0);
} catch (e) {
  log('FAIL: ' + (e && e.stack ? e.stack : e));
  try { await page.screenshot({ path: join(artifacts, '99-failure.png') }); } catch (e2) { /* the page is gone */ }
  await ctx.close().catch(() => {});
  process.exit(1);
}
