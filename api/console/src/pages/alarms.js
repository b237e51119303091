// Status → Alarms: the alarms not in state normal (GET /alarms, scope
// alarm:read, docs/console.md). A daemon without the alarm API (no such
// route: 404, or 501) shows a labelled placeholder instead.
import { get } from '../api.js';
import { h, clear, table, poller, problem, timeCell, fmtValue, qualityBadge } from '../ui.js';

const prioClass = { critical: 'q-bad', high: 'q-bad', medium: 'q-uncertain', low: 'q-none', diagnostic: 'q-none' };

export function alarmsPage(ctx) {
  const holder = h('div', { id: 'alarms' });
  const when = h('span', { class: 'dim updated' });
  ctx.main.append(h('header', { class: 'pagehead' }, h('h1', {}, 'Alarms'), when), holder);
  let p;
  const refresh = async () => {
    let res;
    try {
      res = await get('/alarms', { background: true });
    } catch (e) {
      if (e.status === 404 || e.status === 501) {
        clear(holder, h('section', { class: 'placeholder', id: 'alarms-placeholder', role: 'status' },
          h('h2', {}, 'Alarms are not configured'),
          h('p', {}, 'This appliance\'s daemon serves no alarm API (GET /api/v1/alarms answered ', String(e.status), '), so there are no alarms to show. ',
            'When alarms are defined in the project and the daemon has the alarm API, this page lists the active and unacknowledged ones.')));
        p?.stop();
        return;
      }
      clear(holder, problem(e, 'Alarms'));
      return;
    }
    when.textContent = `${res.active} active, ${res.unacked} unacknowledged · updated ${new Date().toLocaleTimeString()}`;
    clear(holder, h('div', { class: 'scroll' }, table([
      { label: 'Priority', cell: (a) => h('span', { class: 'q ' + (prioClass[a.priority] || '') }, a.priority) },
      { label: 'State', key: 'state' },
      { label: 'Alarm', cell: (a) => h('span', { title: a.id }, a.display_path || a.id) },
      { label: 'Message', class: 'wrap', cell: (a) => a.message || '' },
      { label: 'Value', class: 'num', cell: (a) => `${fmtValue(a.value)}${a.units ? ' ' + a.units : ''}` },
      { label: 'Quality', cell: (a) => qualityBadge(a.quality) },
      { label: 'Active since', cell: (a) => timeCell(a.active_since) },
      { label: 'Acked by', cell: (a) => a.acked_by || '' },
      { label: 'Shelved', cell: (a) => (a.shelved ? `by ${a.shelved.by} until ${a.shelved.until}` : '') },
      { label: 'Not evaluable', class: 'wrap', cell: (a) => (a.evaluable === false ? a.reason || 'source not Good' : '') },
    ], res.alarms || [], { empty: 'No alarm is active, unacknowledged or shelved.' })));
  };
  p = poller(refresh, 3000);
  ctx.onLeave(() => p.stop());
}
