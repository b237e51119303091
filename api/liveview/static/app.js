// QUBIQ LiveView panel. Plain JavaScript, no dependency, no build step:
// it is embedded in qubiqd and must work on an air-gapped plant floor.
//
// Authority lives on the server: the session cookie is HttpOnly, the grant
// is derived there. This page only sends the session's CSRF token and the
// panel it shows (X-Qubiq-Panel), and shows every refusal loudly.
'use strict';

(function () {
  const API = '/api/v1';
  const HEARTBEAT_MISS_MS = 12000; // two heartbeats (5 s) and a margin
  const ACTIVITY_EVERY_MS = 30000;
  const TREND_COLOURS = ['#3d8bfd', '#2fbf71', '#e6b422', '#e5484d', '#b37feb'];

  const $ = (id) => document.getElementById(id);
  const state = {
    session: null, views: [], view: null, values: {}, socket: null, socketUp: false,
    retry: 0, retryTimer: null, lastMsg: 0, lastActivity: 0, trends: {}, eventsTimer: null, stale: true,
  };

  // ---- HTTP ---------------------------------------------------------------

  class Refusal extends Error {
    constructor(status, kind, detail) { super(detail || ('HTTP ' + status)); this.status = status; this.kind = kind; }
  }

  async function api(method, path, body, background) {
    const headers = { 'Accept': 'application/json, application/problem+json' };
    // Requests the page makes on its own do not count as the operator's activity.
    if (background) headers['X-Qubiq-Background'] = '1';
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (state.session && method !== 'GET') headers['X-CSRF-Token'] = state.session.csrf_token;
    if (state.view) headers['X-Qubiq-Panel'] = state.view.name;
    const res = await fetch(API + path, { method, headers, credentials: 'same-origin', cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
    if (!res.ok) {
      const p = data || {};
      if (res.status === 401 && path !== '/auth/login') showLogin('Your session ended: sign in again.');
      throw new Refusal(res.status, p.kind || '', p.detail || text || res.statusText);
    }
    return data;
  }

  // ---- toasts and confirm -------------------------------------------------

  let toastTimer = null;
  function toast(kind, text) {
    const t = $('toast');
    t.className = kind;
    t.textContent = text;
    t.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { t.hidden = true; }, kind === 'refused' ? 12000 : 4000);
  }

  function confirmAsk(text) {
    return new Promise((resolve) => {
      $('confirm-text').textContent = text;
      $('confirm').hidden = false;
      const done = (v) => { $('confirm').hidden = true; $('confirm-yes').onclick = null; $('confirm-no').onclick = null; resolve(v); };
      $('confirm-yes').onclick = () => done(true);
      $('confirm-no').onclick = () => done(false);
    });
  }

  // ---- login --------------------------------------------------------------

  function showLogin(message) {
    state.session = null;
    closeSocket();
    $('who').hidden = true;
    $('hatch').hidden = true;
    $('link').hidden = true;
    $('panel').hidden = true;
    $('empty').hidden = true;
    $('tabs').textContent = '';
    $('login').hidden = false;
    $('login-error').textContent = message || '';
    $('login-user').focus();
  }

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
    $('login').hidden = true;
    const s = state.session;
    $('who').hidden = false;
    $('who-name').textContent = s.user + ' · ' + (s.realm === 'operator' ? s.level : 'platform');
    $('hatch').hidden = !s.escape_hatch;
    state.views = await api('GET', '/liveview/views');
    const tabs = $('tabs');
    tabs.textContent = '';
    for (const v of state.views) {
      const a = document.createElement('a');
      a.href = '#' + encodeURIComponent(v.name);
      a.textContent = v.title;
      a.dataset.view = v.name;
      tabs.appendChild(a);
    }
    showView();
    connect();
  }

  function showView() {
    const want = decodeURIComponent(location.hash.slice(1));
    const v = state.views.find((x) => x.name === want) || state.views[0];
    if (!v) { $('panel').hidden = true; $('empty').hidden = false; return; }
    if (v.name !== want) history.replaceState(null, '', '#' + encodeURIComponent(v.name));
    state.view = v;
    for (const a of $('tabs').children) a.classList.toggle('active', a.dataset.view === v.name);
    $('empty').hidden = true;
    $('panel').hidden = false;
    $('side').hidden = v.events === 0;
    render(v);
    subscribe();
    loadEvents();
    clearInterval(state.eventsTimer);
    state.eventsTimer = setInterval(loadEvents, 5000);
  }

  function paths(v) {
    const out = [];
    for (const w of v.widgets) {
      if (w.tag && !out.includes(w.tag)) out.push(w.tag);
      for (const t of (w.tags || [])) if (!out.includes(t)) out.push(t);
    }
    return out;
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function render(v) {
    const root = $('widgets');
    root.textContent = '';
    state.trends = {};
    v.widgets.forEach((w, i) => {
      const card = el('div', 'w ' + w.type + (w.type === 'trend' || w.type === 'button' ? '' : ' q-stale'));
      card.dataset.type = w.type;
      card.dataset.index = String(i);
      if (w.tag) card.dataset.tag = w.tag;
      card.appendChild(el('div', 'label', w.label));
      if (w.type === 'value' || w.type === 'numeric' || w.type === 'boolean') {
        const val = el('div', 'val', '—');
        card.appendChild(val);
        card.appendChild(el('div', 'q', 'waiting for data'));
      }
      if (w.type === 'numeric') buildNumeric(card, w);
      if (w.type === 'boolean') buildBoolean(card, w);
      if (w.type === 'button') buildButton(card, w);
      if (w.type === 'trend') buildTrend(card, w, i);
      root.appendChild(card);
      if (w.tag) paint(w.tag);
    });
  }

  function readOnlyNote(card, w) {
    if (w.writable) return;
    card.classList.add('readonly');
    card.appendChild(el('div', 'ro', 'Read-only: ' + w.read_only_reason));
  }

  function buildNumeric(card, w) {
    const ctl = el('div', 'ctl');
    const input = el('input');
    input.type = 'number';
    input.inputMode = 'decimal';
    if (w.min !== undefined) input.min = w.min;
    if (w.max !== undefined) input.max = w.max;
    input.step = w.step !== undefined ? w.step : 'any';
    input.disabled = !w.writable;
    const set = el('button', 'primary', 'Set');
    set.type = 'button';
    set.disabled = !w.writable;
    set.addEventListener('click', async () => {
      const n = Number(input.value);
      if (input.value === '' || !Number.isFinite(n)) { toast('refused', w.label + ': enter a number'); return; }
      if ((w.min !== undefined && n < w.min) || (w.max !== undefined && n > w.max)) {
        toast('refused', w.label + ': ' + n + ' is outside ' + w.min + ' … ' + w.max); return;
      }
      await write(w, n);
    });
    ctl.appendChild(input);
    ctl.appendChild(set);
    card.appendChild(ctl);
    readOnlyNote(card, w);
  }

  function buildBoolean(card, w) {
    const ctl = el('div', 'ctl');
    for (const [text, v] of [['On', true], ['Off', false]]) {
      const b = el('button', '', text);
      b.type = 'button';
      b.disabled = !w.writable;
      b.dataset.value = String(v);
      b.addEventListener('click', () => write(w, v));
      ctl.appendChild(b);
    }
    card.appendChild(ctl);
    readOnlyNote(card, w);
  }

  function buildButton(card, w) {
    const b = el('button', 'primary', w.label);
    b.type = 'button';
    b.dataset.entry = w.entry;
    b.addEventListener('click', async () => {
      if (w.confirm && !(await confirmAsk(w.confirm))) return;
      b.disabled = true;
      try {
        const [module, entry] = w.entry.split('.');
        const run = await api('POST', '/scripts/' + encodeURIComponent(module) + '/' + encodeURIComponent(entry) + '/run');
        toast('ok', w.label + ': done' + (run && run.result !== null ? ' → ' + JSON.stringify(run.result) : ''));
      } catch (e) {
        toast('refused', w.label + ' refused: ' + e.message);
      } finally {
        b.disabled = false;
        loadEvents();
      }
    });
    card.appendChild(b);
  }

  async function write(w, value) {
    try {
      const res = await api('POST', '/tags/write', { writes: [{ path: w.tag, value }] });
      const r = res[0];
      if (r.status === 'Good') toast('ok', w.label + ' set to ' + format(value, w));
      else toast('refused', w.label + ' refused: ' + r.status + (r.reason ? ' — ' + r.reason : ''));
    } catch (e) {
      toast('refused', w.label + ' refused: ' + e.message);
    }
    loadEvents();
  }

  // ---- values -------------------------------------------------------------

  function qualityClass(tv) {
    if (state.stale || !tv) return 'q-stale';
    const q = tv.quality || '';
    if (q === 'Good') return 'q-good';
    if (q.startsWith('Uncertain')) return 'q-uncertain';
    return 'q-bad';
  }

  function format(v, w) {
    if (v === null || v === undefined) return '—';
    if (typeof v === 'boolean') return v ? 'On' : 'Off';
    if (typeof v === 'number' && w && w.decimals !== undefined) return v.toFixed(w.decimals);
    if (typeof v === 'number') return String(Math.round(v * 1000) / 1000);
    return typeof v === 'string' ? v : JSON.stringify(v);
  }

  function paint(path) {
    const tv = state.values[path];
    for (const card of document.querySelectorAll('#widgets .w[data-tag]')) {
      if (card.dataset.tag !== path) continue;
      const w = state.view.widgets[Number(card.dataset.index)];
      const cls = qualityClass(tv);
      card.classList.remove('q-good', 'q-uncertain', 'q-bad', 'q-stale');
      card.classList.add(cls);
      card.dataset.quality = tv ? tv.quality : '';
      card.dataset.stale = String(cls === 'q-stale');
      const val = card.querySelector('.val');
      val.textContent = tv ? format(tv.value, w) : '—';
      if (w.units) val.appendChild(el('span', 'units', w.units));
      let q = tv ? tv.quality + (tv.reason ? ' — ' + tv.reason : '') : 'waiting for data';
      if (cls === 'q-stale' && tv) q = 'stale (link down) · last ' + tv.quality;
      card.querySelector('.q').textContent = q;
    }
  }

  function paintAll() {
    for (const p of paths(state.view || { widgets: [] })) paint(p);
  }

  function onValues(list) {
    const now = Date.now();
    for (const tv of list) {
      state.values[tv.path] = tv;
      paint(tv.path);
      for (const t of Object.values(state.trends)) {
        if (t.tags.includes(tv.path) && typeof tv.value === 'number' && tv.quality !== undefined && !tv.quality.startsWith('Bad')) {
          t.points[tv.path].push([now, tv.value]);
        }
      }
    }
  }

  // ---- trend (live values received over the WebSocket) ---------------------

  function buildTrend(card, w, i) {
    const canvas = el('canvas');
    card.appendChild(canvas);
    const legend = el('div', 'legend');
    w.tags.forEach((t, k) => {
      const s = el('span');
      const dot = el('i');
      dot.style.background = TREND_COLOURS[k % TREND_COLOURS.length];
      s.appendChild(dot);
      s.appendChild(document.createTextNode(t));
      legend.appendChild(s);
    });
    card.appendChild(legend);
    const points = {};
    for (const t of w.tags) points[t] = [];
    state.trends[i] = { tags: w.tags, windowMs: w.window_s * 1000, canvas, points };
  }

  function drawTrends() {
    const now = Date.now();
    for (const t of Object.values(state.trends)) {
      const c = t.canvas;
      const dpr = window.devicePixelRatio || 1;
      const wpx = c.clientWidth * dpr, hpx = c.clientHeight * dpr;
      if (!wpx || !hpx) continue;
      if (c.width !== wpx) c.width = wpx;
      if (c.height !== hpx) c.height = hpx;
      const g = c.getContext('2d');
      g.clearRect(0, 0, wpx, hpx);
      let lo = Infinity, hi = -Infinity;
      for (const tag of t.tags) {
        const pts = t.points[tag];
        while (pts.length && pts[0][0] < now - t.windowMs) pts.shift();
        for (const [, v] of pts) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
      }
      if (lo === Infinity) continue;
      if (hi === lo) { hi += 1; lo -= 1; }
      const pad = 8 * dpr;
      g.font = (12 * dpr) + 'px sans-serif';
      g.fillStyle = '#9aa8b7';
      g.fillText(format(hi), pad, pad + 10 * dpr);
      g.fillText(format(lo), pad, hpx - pad);
      t.tags.forEach((tag, k) => {
        g.strokeStyle = TREND_COLOURS[k % TREND_COLOURS.length];
        g.lineWidth = 2 * dpr;
        g.beginPath();
        t.points[tag].forEach(([ts, v], j) => {
          const x = pad + (wpx - 2 * pad) * (1 - (now - ts) / t.windowMs);
          const y = hpx - pad - (hpx - 2 * pad) * (v - lo) / (hi - lo);
          if (j === 0) g.moveTo(x, y); else g.lineTo(x, y);
        });
        g.stroke();
      });
    }
  }

  // ---- WebSocket ------------------------------------------------------------

  function setStale(stale) {
    state.stale = stale;
    $('link').hidden = !stale || !state.session;
    document.body.dataset.link = stale ? 'down' : 'up';
    paintAll();
  }

  function closeSocket() {
    clearTimeout(state.retryTimer);
    if (state.socket) {
      const s = state.socket;
      state.socket = null;
      s.onclose = null;
      s.close();
    }
    state.socketUp = false;
  }

  function connect() {
    closeSocket();
    if (!state.session) return;
    const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + API + '/ws');
    state.socket = ws;
    ws.onopen = () => {
      state.socketUp = true;
      state.retry = 0;
      state.lastMsg = Date.now();
      subscribe();
    };
    ws.onmessage = (ev) => {
      state.lastMsg = Date.now();
      let m;
      try { m = JSON.parse(ev.data); } catch (e) { return; }
      if (m.type === 'values') {
        if (state.stale) setStale(false);
        onValues(m.values || []);
      } else if (m.type === 'error') {
        toast('refused', m.reason);
      }
    };
    ws.onclose = (ev) => {
      if (state.socket !== ws) return;
      state.socket = null;
      state.socketUp = false;
      setStale(true);
      if (ev.code === 4001) { showLogin('Your session ended: sign in again.'); return; }
      const delay = Math.min(5000, 500 * Math.pow(2, state.retry++));
      state.retryTimer = setTimeout(reconnect, delay);
    };
  }

  async function reconnect() {
    if (!state.session) return;
    try {
      // A restarted daemon may have a new project: check the session and the views.
      state.session = await api('GET', '/auth/session', undefined, true);
      connect();
    } catch (e) {
      if (state.session) state.retryTimer = setTimeout(reconnect, Math.min(5000, 500 * Math.pow(2, state.retry++)));
    }
  }

  function subscribe() {
    if (!state.socketUp || !state.view) return;
    state.socket.send(JSON.stringify({ type: 'subscribe', paths: paths(state.view) }));
  }

  function watchdog() {
    if (state.socketUp && Date.now() - state.lastMsg > HEARTBEAT_MISS_MS) {
      // Silence: the link or the daemon hangs. Mark stale and start over.
      setStale(true);
      const s = state.socket;
      closeSocket();
      if (s) reconnect();
    }
  }

  function activity() {
    if (!state.socketUp) return;
    const now = Date.now();
    if (now - state.lastActivity < ACTIVITY_EVERY_MS) return;
    state.lastActivity = now;
    state.socket.send(JSON.stringify({ type: 'activity' }));
  }

  // ---- audit events of the panel ----------------------------------------------

  async function loadEvents() {
    const v = state.view;
    if (!v || v.events === 0 || !state.session) return;
    let evs;
    try { evs = await api('GET', '/liveview/views/' + encodeURIComponent(v.name) + '/events', undefined, true); } catch (e) { return; }
    const ol = $('events');
    ol.textContent = '';
    for (const e of evs) {
      const ok = e.result === 'ok' || e.result === 'Good';
      const li = el('li', ok ? 'ok' : 'refused');
      li.appendChild(el('div', 't', new Date(e.time).toLocaleTimeString() + ' · ' + e.principal));
      const what = e.action === 'liveview.press' ? 'pressed ' + e.target : (e.action.startsWith('tag.write') ? 'wrote ' + e.target : e.action + ' ' + (e.target || ''));
      li.appendChild(el('div', '', what));
      li.appendChild(el('div', 'r', (e.result || '') + (e.detail ? ' — ' + e.detail : '')));
      ol.appendChild(li);
    }
  }

  // ---- boot -----------------------------------------------------------------

  async function boot() {
    $('login-form').addEventListener('submit', onLogin);
    $('logout').addEventListener('click', onLogout);
    window.addEventListener('hashchange', () => { if (state.session) showView(); });
    document.addEventListener('pointerdown', activity, { passive: true });
    setInterval(watchdog, 2000);
    setInterval(drawTrends, 500);
    try {
      state.session = await api('GET', '/auth/session');
      await start();
    } catch (e) {
      showLogin('');
    }
  }

  boot();
})();
