// Status → Overview: the appliance's health with every degraded reason,
// the sandbox's state and each device's connection (GET /health).
import { get } from '../api.js';
import { h, clear, section, kv, table, poller, problem, stateClass, fmtDuration } from '../ui.js';

export function overviewPage(ctx) {
  const body = h('div', { class: 'cols' });
  const when = h('span', { class: 'dim updated' });
  ctx.main.append(h('header', { class: 'pagehead' }, h('h1', {}, 'Overview'), when), body);
  const p = poller(async () => {
    let hl;
    try {
      hl = await get('/health', { background: true });
    } catch (e) {
      clear(body, problem(e, 'Health'));
      return;
    }
    when.textContent = 'updated ' + new Date().toLocaleTimeString();
    clear(body, healthBlock(hl), devicesBlock(hl), sandboxBlock(hl));
  }, 3000);
  ctx.onLeave(() => p.stop());
}

export function healthBlock(hl) {
  return section('Health',
    h('p', { class: 'status-line' }, h('span', { class: 'pill big ' + stateClass(hl.status), id: 'health-status', dataset: { status: hl.status } }, hl.status),
      ` qubiqd ${hl.version}, up ${fmtDuration(hl.uptime_s)}`, hl.escape_hatch ? h('span', { class: 'pill q-uncertain' }, 'escape hatch on') : null),
    hl.reasons.length
      ? h('ul', { class: 'reasons', id: 'health-reasons' }, hl.reasons.map((r) => h('li', {}, r)))
      : h('p', { class: 'dim', id: 'health-reasons' }, 'No degraded reason: every part reports ok.'),
    hl.tls ? kv([['TLS', `${hl.tls.mode}, SHA-256 ${hl.tls.fingerprint_sha256}`]]) : null);
}

function devicesBlock(hl) {
  const rows = Object.entries(hl.devices || {}).map(([name, d]) => ({ name, ...d }));
  return section('Devices',
    table([
      { label: 'Device', cell: (d) => h('a', { href: '#/devices' }, d.name) },
      { label: 'State', cell: (d) => h('span', { class: 'q ' + stateClass(d.state) }, d.state) },
      { label: 'Reason', cell: (d) => d.reason || '' },
    ], rows, { empty: 'The project has no devices.' }));
}

function sandboxBlock(hl) {
  const sb = hl.sandbox || {};
  const py = sb.python || {};
  return section('Script sandbox',
    kv([
      ['Python runtime', `${py.status || '?'}${py.version ? ' ' + py.version : ''}${py.path ? ' — ' + py.path : ''}`],
      ['Isolation', sb.mode],
      ['Linter', sb.linter],
    ]),
    h('p', {}, h('a', { href: '#/settings/sandbox' }, 'Settings → Script Sandbox'), ' shows the limits and hardening in detail.'));
}
