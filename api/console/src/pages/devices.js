// Status → Devices: every device of the project with its state and why
// (GET /devices), the worst quality of its tags (POST /tags/read), any
// further field the daemon gives (counters, last error, breaker state)
// shown generically, and the request plan of a scan (GET
// /devices/{name}/plan) on demand.
import { get, post, enc } from '../api.js';
import { h, clear, table, poller, problem, stateClass, qualityClass, fmtValue } from '../ui.js';

const KNOWN = new Set(['name', 'driver', 'url', 'state', 'reason', 'tags']);
const MAX_TAGS_PER_DEVICE = 200;
const MAX_EXTRA_COLUMNS = 8;
const READ_CHUNK = 500; // paths per POST /tags/read (the request body stays far below its 1 MiB limit)

// flatten turns {stats: {requests: 3}} into {"stats.requests": 3}.
function flatten(obj, pre = '', out = {}) {
  for (const [k, v] of Object.entries(obj)) {
    if (v && typeof v === 'object' && !Array.isArray(v) && pre === '') flatten(v, k + '.', out);
    else out[pre + k] = v;
  }
  return out;
}

function worst(values) {
  let rank = -1, q = '', n = 0;
  const r = (x) => (x === 'Good' ? 0 : x.startsWith('Uncertain') ? 1 : 2);
  for (const v of values) {
    const k = r(v.quality);
    if (k > rank) { rank = k; q = v.quality; n = 1; } else if (k === rank && v.quality === q) n++;
  }
  return { quality: q, count: n, total: values.length };
}

export function devicesPage(ctx) {
  const holder = h('div', { id: 'devices' });
  const when = h('span', { class: 'dim updated' });
  ctx.main.append(h('header', { class: 'pagehead' }, h('h1', {}, 'Devices'), when),
    h('p', { class: 'dim' }, 'State and reason as the driver reports them; tag quality is the worst of the device\'s tags. Press Plan to see the requests one scan sends.'),
    holder);
  const expanded = new Set();
  const plans = new Map();
  let tagsByDevice = null;

  async function loadPlan(name) {
    try {
      plans.set(name, await get(`/devices/${enc(name)}/plan`));
    } catch (e) {
      plans.set(name, e);
    }
  }

  function planCell(name) {
    const p = plans.get(name);
    if (!p) return h('p', { class: 'dim' }, 'Loading the plan…');
    if (p instanceof Error) return problem(p, 'Request plan');
    if (!p.length) return h('p', { class: 'dim' }, 'No request plan: this driver does not plan requests (OPC UA subscribes, the simulator computes).');
    return table([
      { label: 'Scan', key: 'scan' },
      { label: 'Function', cell: (r) => `FC${r.function_code}` },
      { label: 'Unit', key: 'unit_id' },
      { label: 'Start', key: 'start' },
      { label: 'Count', key: 'count' },
      { label: 'Tags', cell: (r) => r.tags.join(', ') },
    ], p, { class: 'plan', caption: `Request plan of ${name}: ${p.length} request${p.length === 1 ? '' : 's'} per scan` });
  }

  async function refresh() {
    let devs;
    try {
      devs = await get('/devices', { background: true });
      if (!tagsByDevice) {
        tagsByDevice = {};
        for (const t of await get('/tags', { background: true })) (tagsByDevice[t.device] ||= []).push(t.path);
      }
    } catch (e) {
      clear(holder, problem(e, 'Devices'));
      return;
    }
    const paths = devs.flatMap((d) => (tagsByDevice[d.name] || []).slice(0, MAX_TAGS_PER_DEVICE));
    const byPath = {};
    try {
      for (let i = 0; i < paths.length; i += READ_CHUNK) {
        for (const v of await post('/tags/read', { paths: paths.slice(i, i + READ_CHUNK) }, { background: true })) byPath[v.path] = v;
      }
    } catch { /* the column shows unknown */ }
    const extras = [];
    const flat = devs.map((d) => {
      const f = flatten(Object.fromEntries(Object.entries(d).filter(([k]) => !KNOWN.has(k))));
      for (const k of Object.keys(f)) if (!extras.includes(k)) extras.push(k);
      return f;
    });
    const shown = extras.slice(0, MAX_EXTRA_COLUMNS);
    const rows = devs.map((d, i) => {
      const vals = (tagsByDevice[d.name] || []).map((pt) => byPath[pt]).filter(Boolean);
      return { ...d, extra: flat[i], tq: worst(vals) };
    });
    const focusKey = document.activeElement?.dataset?.focusKey;
    const t = table([
      { label: 'Device', cell: (d) => h('strong', {}, d.name) },
      { label: 'Driver', key: 'driver' },
      { label: 'URL', cell: (d) => h('code', {}, d.url || '') },
      { label: 'State', cell: (d) => h('span', { class: 'q state ' + stateClass(d.state) }, d.state) },
      { label: 'Reason', cell: (d) => d.reason || '', class: 'wrap' },
      { label: 'Tags', key: 'tags', class: 'num' },
      { label: 'Tag quality', cell: (d) => d.tq.total
        ? h('span', { class: 'q tagq ' + qualityClass(d.tq.quality) }, d.tq.quality, d.tq.total > 1 ? ` (${d.tq.count} of ${d.tq.total})` : '')
        : h('span', { class: 'dim' }, '—') },
      ...shown.map((k) => ({ label: k, cell: (d) => fmtValue(d.extra[k]), class: 'extra' })),
      { label: 'Plan', cell: (d) => h('button', { type: 'button', class: 'small', 'aria-expanded': String(expanded.has(d.name)),
        dataset: { focusKey: 'plan:' + d.name },
        onclick: async () => {
          if (expanded.has(d.name)) { expanded.delete(d.name); } else { expanded.add(d.name); await loadPlan(d.name); }
          refresh();
        } }, expanded.has(d.name) ? 'Hide plan' : 'Plan') },
    ], rows, {
      empty: 'The project has no devices.',
      rowAttrs: (d) => ({ dataset: { device: d.name, state: d.state, quality: d.tq.quality || '' } }),
    });
    const tbody = t.tBodies[0];
    for (const name of expanded) {
      const tr = tbody.querySelector(`tr[data-device="${CSS.escape(name)}"]`);
      if (tr) tr.after(h('tr', { class: 'planrow' }, h('td', { colspan: tr.children.length }, planCell(name))));
    }
    const more = extras.length > shown.length
      ? h('details', {}, h('summary', {}, `${extras.length - shown.length} more fields`),
        rows.map((d) => h('p', {}, h('strong', {}, d.name + ': '), extras.slice(MAX_EXTRA_COLUMNS).map((k) => `${k}=${fmtValue(d.extra[k])}`).join(', '))))
      : null;
    clear(holder, h('div', { class: 'scroll' }, t), more);
    when.textContent = 'updated ' + new Date().toLocaleTimeString();
    if (focusKey) holder.querySelector(`[data-focus-key="${CSS.escape(focusKey)}"]`)?.focus();
  }
  const p = poller(refresh, 2000);
  ctx.onLeave(() => p.stop());
}
