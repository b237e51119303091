// QUBIQ LiveView panel. Plain JavaScript modules, no dependency, no build
// step: it is embedded in qubiqd and must work on an air-gapped plant
// floor (no CDN, no other host).
//
// Look and feel follow ANSI/ISA-101.01 (high-performance HMI): grey and
// calm while everything is normal, colour only for abnormal states, and a
// value that is stale or Bad looks it. Authority lives on the server: the
// session cookie is HttpOnly, the grant is derived there; this page sends
// the session's X-CSRF-Token and the panel it shows (X-Qubiq-Panel), and
// shows every refusal in words.
'use strict';

import { API, state } from './state.js';
import { $, el, hideToast, toast, sinceText } from './ui.js';
import { api, whenSessionEnds } from './net.js';
import { track } from './quality.js';
import { render, paint, paintAll, whenActed } from './widgets.js';
import { trendValues, drawTrends, forgetShown, clearTrends, reloadTrends } from './trend.js';
import { onAlarmMessage, resetAlarms, paintAlarms } from './alarms.js';

const HEARTBEAT_MISS_MS = 12000; // two heartbeats (5 s) and a margin
const ACTIVITY_EVERY_MS = 30000;
const ALARM_PAGE = 'alarms';

const link = { socket: null, up: false, retry: 0, retryTimer: null, lastMsg: 0, lastActivity: 0, eventsTimer: null };

// ---- login --------------------------------------------------------------

function showLogin(message) {
  state.session = null;
  closeSocket();
  hideToast();
  clearInterval(link.eventsTimer);
  state.values = {};
  state.since = {};
  state.view = null;
  state.stale = true;
  state.staleSince = null;
  resetAlarms(true);
  clearTrends();
  $('who').hidden = true;
  $('hatch').hidden = true;
  $('link').hidden = true;
  $('alarm-banner').hidden = true;
  $('panel').hidden = true;
  $('alarm-page').hidden = true;
  $('empty').hidden = true;
  $('tabs').textContent = '';
  $('login').hidden = false;
  $('login-error').textContent = message || '';
  $('login-user').focus();
}

whenSessionEnds(() => { if (state.session) showLogin('Your session ended: sign in again.'); });

async function onLogin(ev) {
  ev.preventDefault();
  $('login-error').textContent = '';
  try {
    state.session = await api('POST', '/auth/login', { user: $('login-user').value, password: $('login-pass').value });
    $('login-pass').value = '';
    await start();
  } catch (e) {
    $('login-error').textContent = e.kind === 'rate_limited' ? e.message : (e.status === 401 ? 'Wrong user name or password.' : e.message);
  }
}

async function onLogout() {
  try { await api('POST', '/auth/logout'); } catch (e) { /* the session may be gone already */ }
  showLogin('Signed out.');
}

// ---- views --------------------------------------------------------------

async function start() {
  hideToast();
  $('login').hidden = true;
  $('login-error').textContent = '';
  const s = state.session;
  $('who').hidden = false;
  $('who-name').textContent = s.user + ' · ' + (s.realm === 'operator' ? s.level : 'platform');
  $('hatch').hidden = !s.escape_hatch;
  state.views = await api('GET', '/liveview/views');
  const tabs = $('tabs');
  tabs.textContent = '';
  for (const v of state.views) {
    const a = el('a', '', v.title);
    a.href = '#' + encodeURIComponent(v.name);
    a.dataset.view = v.name;
    tabs.appendChild(a);
  }
  const al = el('a', 'alarms-tab', 'Alarms');
  al.href = '#' + ALARM_PAGE;
  al.dataset.view = '#' + ALARM_PAGE;
  const badge = el('span', 'badge');
  badge.hidden = true;
  al.appendChild(badge);
  tabs.appendChild(al);
  setStale(true);
  showView();
  connect();
}

function showView() {
  const want = decodeURIComponent(location.hash.slice(1));
  forgetShown();
  clearInterval(link.eventsTimer);
  if (want === ALARM_PAGE) {
    state.page = 'alarms';
    state.view = null;
    for (const a of $('tabs').children) a.classList.toggle('active', a.dataset.view === '#' + ALARM_PAGE);
    $('panel').hidden = true;
    $('empty').hidden = true;
    $('alarm-page').hidden = false;
    subscribe();
    paintAlarms();
    return;
  }
  state.page = 'view';
  $('alarm-page').hidden = true;
  const v = state.views.find((x) => x.name === want) || state.views[0];
  if (!v) { state.view = null; $('panel').hidden = true; $('empty').hidden = false; return; }
  if (v.name !== want) history.replaceState(null, '', '#' + encodeURIComponent(v.name));
  state.view = v;
  for (const a of $('tabs').children) a.classList.toggle('active', a.dataset.view === v.name);
  $('empty').hidden = true;
  $('panel').hidden = false;
  $('side').hidden = v.events === 0;
  render(v);
  paintAll();
  subscribe();
  loadEvents();
  link.eventsTimer = setInterval(loadEvents, 5000);
}

function paths(v) {
  const out = [];
  for (const w of (v ? v.widgets : [])) {
    if (w.tag && !out.includes(w.tag)) out.push(w.tag);
    for (const t of (w.tags || [])) if (!out.includes(t)) out.push(t);
  }
  return out;
}

// ---- live values ----------------------------------------------------------

function onValues(list) {
  for (const tv of list) {
    track(state.values[tv.path], tv);
    state.values[tv.path] = tv;
    if (state.view) paint(tv.path);
  }
  trendValues(list);
}

function setStale(stale) {
  if (stale && !state.stale) state.staleSince = Date.now();
  if (!stale) state.staleSince = null;
  state.stale = stale;
  const l = $('link');
  l.hidden = !stale || !state.session;
  l.textContent = state.staleSince
    ? 'No connection to the gateway since ' + sinceText(state.staleSince) + '. Values are stale and controls are off until it is back. Reconnecting…'
    : 'Connecting to the gateway…';
  document.body.dataset.link = stale ? 'down' : 'up';
  paintAll();
  paintAlarms();
}

function closeSocket() {
  clearTimeout(link.retryTimer);
  if (link.socket) {
    const s = link.socket;
    link.socket = null;
    s.onclose = null;
    s.close();
  }
  link.up = false;
}

function connect() {
  closeSocket();
  if (!state.session) return;
  const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + API + '/ws');
  link.socket = ws;
  ws.onopen = () => {
    link.up = true;
    link.retry = 0;
    link.lastMsg = Date.now();
    resetAlarms();
    subscribe();
  };
  ws.onmessage = (ev) => {
    link.lastMsg = Date.now();
    let m;
    try { m = JSON.parse(ev.data); } catch (e) { return; }
    switch (m.type) {
      case 'values': {
        const wasStale = state.stale;
        if (wasStale) setStale(false);
        onValues(m.values || []);
        if (wasStale) reloadTrends();
        break;
      }
      case 'heartbeat': {
        const t = Date.parse(m.time);
        if (Number.isFinite(t)) state.clockOffset = t - Date.now();
        break;
      }
      case 'alarm': case 'alarm_summary':
        onAlarmMessage(m);
        if (m.type === 'alarm_summary') paintAll();
        break;
      case 'error':
        // The session ended: the close (4001) that follows shows the login.
        if (!/session ended|expired/.test(m.reason || '')) toast('refused', 'The gateway refused: ' + m.reason);
        break;
    }
  };
  ws.onclose = (ev) => {
    if (link.socket !== ws) return;
    link.socket = null;
    link.up = false;
    setStale(true);
    if (ev.code === 4001) { showLogin('Your session ended: sign in again.'); return; }
    link.retryTimer = setTimeout(reconnect, Math.min(5000, 500 * Math.pow(2, link.retry++)));
  };
}

async function reconnect() {
  if (!state.session) return;
  try {
    // A restarted daemon may have a new project: check the session first.
    state.session = await api('GET', '/auth/session', undefined, true);
    connect();
  } catch (e) {
    if (state.session) link.retryTimer = setTimeout(reconnect, Math.min(5000, 500 * Math.pow(2, link.retry++)));
  }
}

function subscribe() {
  if (!link.up) return;
  link.socket.send(JSON.stringify({ type: 'subscribe', paths: paths(state.view) }));
}

function watchdog() {
  if (link.up && Date.now() - link.lastMsg > HEARTBEAT_MISS_MS) {
    // Silence: the link or the daemon hangs. Mark stale and start over.
    setStale(true);
    const s = link.socket;
    closeSocket();
    if (s) reconnect();
  }
}

function activity() {
  if (!link.up) return;
  const n = Date.now();
  if (n - link.lastActivity < ACTIVITY_EVERY_MS) return;
  link.lastActivity = n;
  link.socket.send(JSON.stringify({ type: 'activity' }));
}

// ---- audit events of the panel ----------------------------------------------

async function loadEvents() {
  const v = state.view;
  if (!v || v.events === 0 || !state.session) return;
  let evs;
  try { evs = await api('GET', '/liveview/views/' + encodeURIComponent(v.name) + '/events', undefined, true); } catch (e) { return; }
  if (state.view !== v) return;
  const ol = $('events');
  ol.textContent = '';
  for (const e of evs) {
    const ok = e.result === 'ok' || e.result === 'Good';
    const li = el('li', ok ? 'ok' : 'refused');
    li.appendChild(el('div', 't', sinceText(Date.parse(e.time)) + ' · ' + e.principal));
    const what = e.action === 'liveview.press' ? 'pressed ' + e.target
      : (e.action.startsWith('tag.write') ? 'wrote ' + e.target
        : (e.action.startsWith('alarm.') ? e.action.slice(6) + ' ' + (e.target || '') : e.action + ' ' + (e.target || '')));
    li.appendChild(el('div', '', what));
    li.appendChild(el('div', 'r', (e.result || '') + (e.detail ? ' — ' + e.detail : '')));
    ol.appendChild(li);
  }
}

// ---- boot -----------------------------------------------------------------

async function boot() {
  $('login-form').addEventListener('submit', onLogin);
  $('logout').addEventListener('click', onLogout);
  $('toast').addEventListener('click', (e) => { if (e.target.tagName !== 'SUMMARY') hideToast(); });
  window.addEventListener('hashchange', () => { if (state.session) showView(); });
  document.addEventListener('pointerdown', activity, { passive: true });
  whenActed(loadEvents);
  setInterval(watchdog, 2000);
  setInterval(drawTrends, 1000);
  window.addEventListener('resize', drawTrends);
  try {
    state.session = await api('GET', '/auth/session');
    await start();
  } catch (e) {
    showLogin('');
  }
}

boot();
