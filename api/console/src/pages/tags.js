// Status → Tags: every tag in a filterable table with its value, quality
// (coloured as on the LiveView panels), timestamp and reason (GET /tags,
// POST /tags/read). Only the rows shown are read, every two seconds.
import { get, post } from '../api.js';
import { h, clear, table, poller, problem, qualityBadge, qualityClass, timeCell, fmtValue } from '../ui.js';

const MAX_ROWS = 500;
const READ_CHUNK = 500;
const MAX_QUALITY_SCAN = 5000;

// pathMatch: a filter is a substring of the path, or a pattern with * (any
// characters); case-insensitive.
function pathMatcher(f) {
  f = f.trim().toLowerCase();
  if (!f) return () => true;
  if (f.includes('*')) {
    const re = new RegExp('^' + f.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*') + '$', 'i');
    return (p) => re.test(p);
  }
  return (p) => p.toLowerCase().includes(f);
}

const qualityRank = { good: (q) => q === 'Good', uncertain: (q) => q.startsWith('Uncertain'), bad: (q) => q.startsWith('Bad'), notgood: (q) => q !== 'Good' };

export function tagsPage(ctx) {
  const filter = h('input', { type: 'search', id: 'tag-filter', placeholder: 'Line1/Pump or Line*/Speed', 'aria-label': 'Filter tags by path' });
  const device = h('select', { id: 'tag-device', 'aria-label': 'Device' }, h('option', { value: '' }, 'every device'));
  const quality = h('select', { id: 'tag-quality', 'aria-label': 'Quality' },
    h('option', { value: '' }, 'any quality'), h('option', { value: 'good' }, 'Good'),
    h('option', { value: 'uncertain' }, 'Uncertain…'), h('option', { value: 'bad' }, 'Bad…'), h('option', { value: 'notgood' }, 'not Good'));
  const count = h('span', { class: 'dim', id: 'tag-count', 'aria-live': 'polite' });
  const holder = h('div', { class: 'scroll', id: 'tags' });
  ctx.main.append(h('header', { class: 'pagehead' }, h('h1', {}, 'Tags'), count),
    h('form', { class: 'filters', onsubmit: (e) => e.preventDefault() },
      h('label', {}, 'Path ', filter), h('label', {}, 'Device ', device), h('label', {}, 'Quality ', quality)),
    holder);
  if (ctx.params[0]) filter.value = ctx.params.join('/');
  let all = null;

  async function refresh() {
    if (!all) {
      try {
        all = await get('/tags', { background: true });
      } catch (e) {
        clear(holder, problem(e, 'Tags'));
        return;
      }
      for (const d of [...new Set(all.map((t) => t.device))].sort()) device.append(h('option', { value: d }, d));
    }
    const m = pathMatcher(filter.value);
    let rows = all.filter((t) => m(t.path) && (!device.value || t.device === device.value));
    const qf = qualityRank[quality.value];
    const toRead = qf ? rows.slice(0, MAX_QUALITY_SCAN) : rows.slice(0, MAX_ROWS);
    const vals = {};
    try {
      for (let i = 0; i < toRead.length; i += READ_CHUNK) {
        const part = await post('/tags/read', { paths: toRead.slice(i, i + READ_CHUNK).map((t) => t.path) }, { background: true });
        for (const v of part) vals[v.path] = v;
      }
    } catch (e) {
      clear(holder, problem(e, 'Reading tag values'));
      return;
    }
    if (qf) rows = toRead.filter((t) => vals[t.path] && qf(vals[t.path].quality));
    const total = rows.length;
    rows = rows.slice(0, MAX_ROWS);
    count.textContent = `${total} of ${all.length} tags` + (total > MAX_ROWS ? ` (first ${MAX_ROWS} shown: narrow the filter)` : '') +
      (qf && all.length > MAX_QUALITY_SCAN ? ` (quality filter looks at the first ${MAX_QUALITY_SCAN})` : '');
    clear(holder, table([
      { label: 'Path', cell: (t) => h('code', {}, t.path) },
      { label: 'Value', class: 'num', cell: (t) => {
        const v = vals[t.path];
        return v ? [fmtValue(v.value), t.units ? h('span', { class: 'units' }, ' ' + t.units) : null] : '…';
      } },
      { label: 'Quality', cell: (t) => (vals[t.path] ? qualityBadge(vals[t.path].quality) : '') },
      { label: 'Timestamp', cell: (t) => (vals[t.path] ? timeCell(vals[t.path].timestamp) : '') },
      { label: 'Reason', class: 'wrap', cell: (t) => (vals[t.path] && vals[t.path].reason) || '' },
      { label: 'Device', key: 'device' },
      { label: 'Address', cell: (t) => h('code', {}, t.address) },
      { label: 'Type', key: 'type' },
      { label: 'Write level', cell: (t) => (t.read_only ? 'read-only' : t.write_level) },
    ], rows, {
      empty: all.length ? 'No tag matches the filter.' : 'The project has no tags.',
      rowAttrs: (t) => ({ dataset: { path: t.path, quality: vals[t.path]?.quality || '' }, class: 'row-' + qualityClass(vals[t.path]?.quality) }),
    }));
  }
  let timer;
  const again = () => { clearTimeout(timer); timer = setTimeout(refresh, 250); };
  filter.addEventListener('input', again);
  device.addEventListener('change', refresh);
  quality.addEventListener('change', refresh);
  const p = poller(refresh, 2000);
  ctx.onLeave(() => { p.stop(); clearTimeout(timer); });
}
