// The alarm banner on every page, the alarm list page and the alarm list
// widget (docs/liveview.md, "Alarms"). Alarms arrive over the WebSocket
// (docs/alarms.md, "WebSocket"); acknowledge and shelve go to POST
// /alarms/ack, /alarms/shelve and /alarms/unshelve, where the daemon
// decides under the write-level rules; the panel only greys out what the
// operator's level cannot do, and says refusals in words.
'use strict';

import { state, sessionLevel, levelAtLeast } from './state.js';
import { $, el, toast, sinceText } from './ui.js';
import { api, refusalWords } from './net.js';

export const PRIORITIES = ['critical', 'high', 'medium', 'low', 'diagnostic'];
const rank = (p) => { const i = PRIORITIES.indexOf(p); return i < 0 ? PRIORITIES.length : i; };
const BANNER_ROWS = 3;
const SHELVE_S = 3600;

const STATE_WORDS = {
  active_unacked: 'active, not acknowledged',
  active_acked: 'active',
  rtn_unacked: 'returned, not acknowledged',
  normal: 'normal',
};

// annunciated: neither shelved, suppressed nor out of service.
const annunciated = (a) => !a.shelved && !a.suppressed && !a.out_of_service;
const unacked = (a) => a.state === 'active_unacked' || a.state === 'rtn_unacked';

// hidden are the counts of alarms suppressed by design and out of service
// (GET /alarms/stats: the WebSocket's snapshot, like GET /alarms, lists the
// annunciated and shelved ones only), refreshed at most every HIDDEN_EVERY_MS.
let hidden = null, hiddenAt = 0, hiddenBusy = false;
const HIDDEN_EVERY_MS = 15000;

async function refreshHidden() {
  if (hiddenBusy || !state.session || Date.now() - hiddenAt < HIDDEN_EVERY_MS) return;
  hiddenBusy = true;
  hiddenAt = Date.now();
  try {
    const st = await api('GET', '/alarms/stats?window_h=1', undefined, true);
    hidden = { suppressed: st.suppressed || 0, oos: st.out_of_service || 0 };
    paintBanner();
  } catch (e) { /* the counts stay as they were */ } finally { hiddenBusy = false; }
}

// onAlarmMessage takes a WebSocket message of type alarm or alarm_summary.
export function onAlarmMessage(m) {
  if (m.type === 'alarm_summary') {
    state.alarmSummary = m;
    state.alarmsKnown = true;
    paintAlarms();
    refreshHidden();
    return;
  }
  if (m.event && /suppress|service/.test(m.event)) hiddenAt = 0; // count them again at the next summary
  const a = m.alarm;
  if (!a || !a.id) return;
  if (a.state === 'normal' && annunciated(a)) state.alarms.delete(a.id);
  else state.alarms.set(a.id, a);
}

// alarmOf returns the alarm of the tag at path that an operator should
// see on its card: the highest-priority annunciated one that is not normal
// (unacknowledged first), or null.
export function alarmOf(path) {
  let best = null;
  for (const a of state.alarms.values()) {
    if (a.source !== path || !annunciated(a) || a.state === 'normal') continue;
    if (!best || order(a, best) < 0) best = a;
  }
  return best;
}

// resetAlarms forgets the alarms: a new connection sends them again
// (reconnect: the banner keeps what it shows until the new summary), and a
// sign-out leaves nothing for the next user (signedOut).
export function resetAlarms(signedOut) {
  state.alarms.clear();
  if (signedOut) {
    state.alarmSummary = null;
    state.alarmsKnown = false;
    hidden = null;
    hiddenAt = 0;
  }
}

// order: unacknowledged active first, then by priority, then newest.
function order(a, b) {
  const ua = a.state === 'active_unacked' ? 0 : (a.state === 'rtn_unacked' ? 1 : 2);
  const ub = b.state === 'active_unacked' ? 0 : (b.state === 'rtn_unacked' ? 1 : 2);
  if (ua !== ub) return ua - ub;
  if (rank(a.priority) !== rank(b.priority)) return rank(a.priority) - rank(b.priority);
  return (Date.parse(b.active_since || b.last_change || 0) || 0) - (Date.parse(a.active_since || a.last_change || 0) || 0);
}

function visible(prefix) {
  const out = [];
  for (const a of state.alarms.values()) {
    if (prefix && a.source !== prefix && !a.source.startsWith(prefix + '/')) continue;
    out.push(a);
  }
  return out.sort(order);
}

// mayDo says whether the session's level reaches the alarm's ack_level
// (what 'ack') or shelve_level ('shelve'), and if not, why in words. A
// platform user is let through: the daemon decides.
function mayDo(a, what) {
  const need = what === 'ack' ? (a.ack_level || 'operate') : (a.shelve_level || 'supervise');
  if (!state.session || state.session.realm !== 'operator') return { ok: true, why: '' };
  const have = sessionLevel();
  if (levelAtLeast(have, need)) return { ok: true, why: '' };
  const verb = what === 'ack' ? 'acknowledging' : 'shelving';
  return { ok: false, why: verb + ' needs level ' + need + ' (you are ' + have + ')' };
}

async function operate(what, a, btn) {
  const path = { ack: '/alarms/ack', shelve: '/alarms/shelve', unshelve: '/alarms/unshelve' }[what];
  const body = what === 'shelve' ? { ids: [a.id], duration_s: SHELVE_S } : { ids: [a.id] };
  const name = a.display_path || a.id;
  const done = { ack: 'acknowledged', shelve: 'shelved for 1 h', unshelve: 'back from the shelf' }[what];
  const not = { ack: 'not acknowledged', shelve: 'not shelved', unshelve: 'not unshelved' }[what];
  if (btn) btn.disabled = true;
  try {
    const res = await api('POST', path, body);
    const r = (res && res.results && res.results[0]) || {};
    if (r.status === 'Good') toast('ok', name + ': ' + done);
    else toast('refused', name + ': ' + not + ': ' + alarmRefusal(r), r.status + (r.reason ? ': ' + r.reason : ''));
  } catch (e) {
    const why = e.status === 403 ? 'your level may not operate alarms (' + e.message + ')' : refusalWords(e);
    toast('refused', name + ': ' + not + ': ' + why, e.tech);
  } finally {
    if (btn) btn.disabled = false;
    paintAlarms();
  }
}

function alarmRefusal(r) {
  switch (r.status) {
    case 'Bad_UserAccessDenied': return r.reason || 'your level is too low';
    case 'Bad_NodeIdUnknown': return 'this alarm no longer exists';
    default: return r.reason || 'refused';
  }
}

function actionButton(what, a, text) {
  const b = el('button', 'alarm-' + what, text);
  b.type = 'button';
  const m = mayDo(a, what === 'unshelve' ? 'shelve' : what);
  b.disabled = !m.ok || state.stale;
  b.title = !m.ok ? m.why : (state.stale ? 'no connection to the gateway' : '');
  b.addEventListener('click', () => operate(what, a, b));
  return b;
}

function when(a) {
  const t = Date.parse(a.active_since || a.last_change || '');
  return Number.isFinite(t) ? sinceText(t) : '';
}

function prioChip(a) {
  const c = el('span', 'prio p-' + a.priority, a.priority);
  if (a.state === 'active_unacked' && annunciated(a)) c.classList.add('blink');
  return c;
}

// paintBanner draws the banner: counts of the unacknowledged by priority,
// the highest-priority unacknowledged alarms with Acknowledge, and the
// calm counts of the rest (active acknowledged, shelved, suppressed).
function paintBanner() {
  const b = $('alarm-banner');
  if (!state.session || !state.alarmsKnown) { b.hidden = true; return; }
  b.hidden = false;
  b.textContent = '';
  const all = [...state.alarms.values()];
  const open = all.filter((a) => annunciated(a) && unacked(a)).sort(order);
  const counts = {};
  for (const a of open) counts[a.priority] = (counts[a.priority] || 0) + 1;
  b.className = open.length ? 'alarms-open top-' + open[0].priority : 'alarms-calm';
  b.dataset.unacked = String(open.length);
  const head = el('div', 'alarm-counts');
  if (open.length) {
    head.appendChild(el('strong', '', open.length + ' unacknowledged'));
    for (const p of PRIORITIES) {
      if (!counts[p]) continue;
      const c = el('span', 'count p-' + p, counts[p] + ' ' + p);
      c.dataset.priority = p;
      head.appendChild(c);
    }
  } else {
    head.appendChild(el('span', 'calm', 'No unacknowledged alarms'));
  }
  const acked = all.filter((a) => annunciated(a) && a.state === 'active_acked').length;
  const shelved = all.filter((a) => a.shelved).length;
  const seen = all.filter((a) => !a.shelved && a.suppressed && !a.out_of_service).length;
  const seenOos = all.filter((a) => !a.shelved && a.out_of_service).length;
  const suppressed = hidden ? Math.max(hidden.suppressed, seen) : seen;
  const oos = hidden ? Math.max(hidden.oos, seenOos) : seenOos;
  const rest = [];
  if (acked) rest.push(acked + ' active acknowledged');
  if (shelved) rest.push(shelved + ' shelved');
  if (suppressed) rest.push(suppressed + ' suppressed');
  if (oos) rest.push(oos + ' out of service');
  if (rest.length) head.appendChild(el('span', 'calm rest', rest.join(' · ')));
  const link = el('a', 'alarm-link', 'Alarm list');
  link.href = '#alarms';
  head.appendChild(link);
  b.appendChild(head);
  for (const a of open.slice(0, BANNER_ROWS)) {
    const row = el('div', 'alarm-row');
    row.dataset.id = a.id;
    row.dataset.state = a.state;
    row.appendChild(prioChip(a));
    row.appendChild(el('span', 'where', a.display_path || a.id));
    row.appendChild(el('span', 'msg', a.message || ''));
    row.appendChild(el('span', 'when', (a.state === 'rtn_unacked' ? 'returned · ' : 'since ') + when(a)));
    row.appendChild(actionButton('ack', a, 'Acknowledge'));
    const m = mayDo(a, 'ack');
    if (!m.ok) row.appendChild(el('span', 'ro', m.why));
    b.appendChild(row);
  }
}

// fillList renders alarms into a table body: one row each, its state in
// words, shelving and suppression shown calmly, and the actions the level
// allows (the others read-only, naming the level).
function fillList(box, alarms, limit) {
  box.textContent = '';
  if (!alarms.length) { box.appendChild(el('div', 'calm empty', 'No alarms.')); return; }
  const table = el('table', 'alarm-table');
  const head = el('tr');
  for (const h of ['Priority', 'Alarm', 'Message', 'State', 'Since', '']) head.appendChild(el('th', '', h));
  table.appendChild(head);
  for (const a of alarms.slice(0, limit || 1000)) {
    const tr = el('tr', 'alarm ' + a.state + (annunciated(a) ? '' : ' hidden-state'));
    tr.dataset.id = a.id;
    tr.dataset.state = a.state;
    tr.appendChild(el('td', '', '')).appendChild(prioChip(a));
    tr.appendChild(el('td', 'where', a.display_path || a.id));
    const msg = el('td', 'msg', a.message || '');
    if (a.evaluable === false) msg.appendChild(el('div', 'sub', 'cannot be evaluated: ' + (a.reason || 'the source is not Good')));
    tr.appendChild(msg);
    const st = el('td', 'state', STATE_WORDS[a.state] || a.state);
    if (a.shelved) st.appendChild(el('div', 'sub', 'shelved by ' + a.shelved.by + ' until ' + sinceText(Date.parse(a.shelved.until))));
    else if (a.suppressed) st.appendChild(el('div', 'sub', 'suppressed by design'));
    else if (a.out_of_service) st.appendChild(el('div', 'sub', 'out of service'));
    if (a.chattering) st.appendChild(el('div', 'sub', 'chattering'));
    tr.appendChild(st);
    tr.appendChild(el('td', 'when', when(a)));
    const td = el('td', 'acts');
    const act = el('div', 'acts-box');
    td.appendChild(act);
    const notes = [];
    if (unacked(a) && annunciated(a)) {
      act.appendChild(actionButton('ack', a, 'Acknowledge'));
      const m = mayDo(a, 'ack');
      if (!m.ok) notes.push(m.why);
    }
    if (a.shelved) act.appendChild(actionButton('unshelve', a, 'Unshelve'));
    else if (a.state !== 'normal') act.appendChild(actionButton('shelve', a, 'Shelve 1 h'));
    const ms = mayDo(a, 'shelve');
    if (!ms.ok) notes.push(ms.why);
    for (const n of notes) act.appendChild(el('div', 'ro', n));
    tr.appendChild(td);
    table.appendChild(tr);
  }
  box.appendChild(table);
  if (limit && alarms.length > limit) box.appendChild(el('div', 'calm', (alarms.length - limit) + ' more on the alarm list'));
}

// buildAlarmList makes an alarm list widget in card (w.prefix, w.limit).
export function buildAlarmList(card, w) {
  card.appendChild(el('div', 'label', w.label));
  const box = el('div', 'alarm-list');
  box.dataset.prefix = w.prefix || '';
  box.dataset.limit = String(w.limit || 20);
  card.appendChild(box);
  fillList(box, visible(w.prefix), w.limit);
}

// paintAlarms redraws the banner, the alarm page and the alarm widgets.
export function paintAlarms() {
  paintBanner();
  const open = [...state.alarms.values()].filter((a) => annunciated(a) && unacked(a)).length;
  const tab = document.querySelector('#tabs a[data-view="#alarms"] .badge');
  if (tab) { tab.textContent = open ? String(open) : ''; tab.hidden = !open; }
  if (state.page === 'alarms') fillList($('alarm-page-list'), visible(''), 0);
  for (const box of document.querySelectorAll('#widgets .alarm-list')) fillList(box, visible(box.dataset.prefix), Number(box.dataset.limit));
}
