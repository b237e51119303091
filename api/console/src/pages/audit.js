// Status → Audit log: the newest records first with filters on principal,
// origin, kind of action, result and time (GET /audit/search, permission
// users_admin); a record opens to its values before and after.
import { get } from '../api.js';
import { h, clear, table, problem, timeCell, busy } from '../ui.js';

const KINDS = ['tag.write', 'script', 'script.run', 'script.save', 'script.rollback', 'sandbox.package', 'refused', 'auth.login',
  'user', 'apikey', 'liveview.press', 'project', 'device.cert', 'mqtt.command', 'provision'];

// localToISO turns a datetime-local value into RFC 3339 UTC.
const localToISO = (v) => (v ? new Date(v).toISOString() : '');

export function auditPage(ctx) {
  const f = {
    principal: h('input', { id: 'audit-principal', placeholder: 'admin', 'aria-label': 'Principal' }),
    origin: h('input', { id: 'audit-origin', placeholder: 'console, liveview, script, mqtt', 'aria-label': 'Origin' }),
    action: h('input', { id: 'audit-action', list: 'audit-kinds', placeholder: 'tag.write, script, refused', 'aria-label': 'Kind' }),
    result: h('input', { id: 'audit-result', placeholder: 'ok, refused, Good', 'aria-label': 'Result' }),
    since: h('input', { id: 'audit-since', type: 'datetime-local', step: '1', 'aria-label': 'From' }),
    until: h('input', { id: 'audit-until', type: 'datetime-local', step: '1', 'aria-label': 'Until' }),
  };
  const search = h('button', { type: 'submit', class: 'primary', id: 'audit-search' }, 'Search');
  const holder = h('div', { id: 'audit' });
  const more = h('button', { type: 'button', id: 'audit-more', hidden: true }, 'Older records');
  const form = h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); busy(search, () => load(false)); } },
    h('label', {}, 'Principal ', f.principal), h('label', {}, 'Origin ', f.origin), h('label', {}, 'Kind ', f.action),
    h('label', {}, 'Result ', f.result), h('label', {}, 'From ', f.since), h('label', {}, 'Until ', f.until), search,
    h('datalist', { id: 'audit-kinds' }, KINDS.map((k) => h('option', { value: k }))));
  ctx.main.append(h('header', { class: 'pagehead' }, h('h1', {}, 'Audit log')),
    h('p', { class: 'dim' }, 'Newest first. Origin and kind match a whole prefix (“script” finds script.run and script.save; “liveview” every panel). One search looks through the newest 50,000 records.'),
    form, holder, more);
  let records = [];
  let next = null;
  const open = new Set();

  async function load(older) {
    const q = new URLSearchParams();
    for (const k of ['principal', 'origin', 'action', 'result']) if (f[k].value.trim()) q.set(k, f[k].value.trim());
    if (f.since.value) q.set('since', localToISO(f.since.value));
    if (f.until.value) q.set('until', localToISO(f.until.value));
    q.set('limit', '100');
    if (older && next) q.set('before', String(next));
    let page;
    try {
      page = await get('/audit/search?' + q.toString());
    } catch (e) {
      clear(holder, problem(e, 'Audit log'));
      more.hidden = true;
      return;
    }
    records = older ? records.concat(page.records) : page.records;
    next = page.next_before;
    more.hidden = next === null;
    render();
  }

  function render() {
    const t = table([
      { label: 'Seq', key: 'seq', class: 'num' },
      { label: 'Time', cell: (r) => timeCell(r.time) },
      { label: 'Principal', cell: (r) => r.principal || '' },
      { label: 'Realm', cell: (r) => r.realm || '' },
      { label: 'Origin', cell: (r) => r.origin || '' },
      { label: 'Kind', cell: (r) => h('code', {}, r.action) },
      { label: 'Target', class: 'wrap', cell: (r) => r.target || '' },
      { label: 'Result', cell: (r) => h('span', { class: r.result === 'ok' || r.result === 'Good' ? 'q q-good' : r.result ? 'q q-bad' : '' }, r.result || '') },
      { label: 'Detail', class: 'wrap', cell: (r) => r.detail || '' },
      { label: '', cell: (r) => (r.before || r.after
        ? h('button', { type: 'button', class: 'small', 'aria-expanded': String(open.has(r.seq)), onclick: () => { open.has(r.seq) ? open.delete(r.seq) : open.add(r.seq); render(); } }, open.has(r.seq) ? 'Hide' : 'Values')
        : '') },
    ], records, { empty: 'No record matches.', rowAttrs: (r) => ({ dataset: { seq: String(r.seq), action: r.action } }) });
    for (const seq of open) {
      const r = records.find((x) => x.seq === seq);
      const tr = t.tBodies[0].querySelector(`tr[data-seq="${seq}"]`);
      if (r && tr) {
        tr.after(h('tr', { class: 'planrow' }, h('td', { colspan: tr.children.length },
          r.before ? [h('h4', {}, 'Before'), h('pre', {}, JSON.stringify(r.before, null, 2))] : null,
          r.after ? [h('h4', {}, 'After'), h('pre', {}, JSON.stringify(r.after, null, 2))] : null)));
      }
    }
    clear(holder, h('div', { class: 'scroll' }, t));
  }
  more.addEventListener('click', () => busy(more, () => load(true)));
  load(false);
}
