// Trends backed by history (GET /api/v1/history), extended by the live
// values of the WebSocket: a time axis, rounded value labels with units, a
// legend by label (never the tag path), steps for discrete tags, gaps for
// Bad samples, and a window the operator chooses that survives a tab
// switch and a reload (localStorage).
'use strict';

import { state, now } from './state.js';
import { el, format, clock } from './ui.js';
import { api } from './net.js';
import { niceTicks, timeTicks, decimalsFor, durationText } from './axis.js';

// Muted, distinguishable line colours; none of the alarm colours
// (ISA-101: red, amber and yellow mean alarms).
const COLOURS = ['#1f4e8c', '#2b7a4b', '#6a3d9a', '#8c5a1f', '#2a8c8c', '#5a5a5a'];
const CHOICES_S = [600, 3600, 8 * 3600, 86400];
const RAW_UP_TO_MS = 15 * 60000;
const POINTS_PER_TREND = 600;

// cache keeps each trend's points across tab switches (key "view/index").
const cache = new Map();
// shown are the trends of the view on screen.
let shown = [];

const storeKey = (key) => 'qubiq.liveview.trend.' + key;

function savedWindow(key, fallback) {
  try {
    const s = Number(localStorage.getItem(storeKey(key)));
    if (Number.isFinite(s) && s >= 10 && s <= 86400) return s;
  } catch (e) { /* storage off: the view's window */ }
  return fallback;
}

function saveWindow(key, s) {
  try { localStorage.setItem(storeKey(key), String(s)); } catch (e) { /* storage off: this page only */ }
}

function series(w) {
  return w.series && w.series.length ? w.series : (w.tags || []).map((t) => ({ tag: t, label: t.split('/').pop(), step: false }));
}

export function buildTrend(card, v, w, index) {
  const key = v.name + '/' + index;
  let t = cache.get(key);
  if (!t) {
    t = { key, points: {}, known: {}, bools: {}, windowS: savedWindow(key, w.window_s || 600), loading: false, error: '' };
    for (const s of series(w)) t.points[s.tag] = [];
    cache.set(key, t);
  }
  t.w = w;
  t.series = series(w);
  const head = el('div', 'trend-head');
  head.appendChild(el('div', 'label', w.label));
  const wins = el('div', 'wins');
  const choices = [...new Set([...CHOICES_S, w.window_s || 600])].sort((a, b) => a - b);
  for (const s of choices) {
    const b = el('button', 'win', durationText(s));
    b.type = 'button';
    b.dataset.window = String(s);
    b.setAttribute('aria-pressed', String(s === t.windowS));
    b.addEventListener('click', () => {
      t.windowS = s;
      saveWindow(key, s);
      for (const x of wins.children) x.setAttribute('aria-pressed', String(x.dataset.window === String(s)));
      load(t);
    });
    wins.appendChild(b);
  }
  head.appendChild(wins);
  card.appendChild(head);
  t.canvas = el('canvas');
  card.appendChild(t.canvas);
  t.legend = el('div', 'legend');
  t.series.forEach((s, k) => {
    const item = el('span', 'item');
    item.dataset.tag = s.tag;
    item.dataset.step = String(!!s.step);
    const dot = el('i');
    dot.style.background = COLOURS[k % COLOURS.length];
    item.appendChild(dot);
    item.appendChild(el('span', 'name', s.label));
    item.appendChild(el('span', 'cur', ''));
    t.legend.appendChild(item);
  });
  card.appendChild(t.legend);
  t.note = el('div', 'note');
  card.appendChild(t.note);
  card.dataset.trend = key;
  shown.push(t);
  load(t);
}

// forgetShown drops the trends of the previous view from the redraws (their
// points stay cached).
export function forgetShown() { shown = []; }

// clearTrends forgets everything (a sign-out).
export function clearTrends() { cache.clear(); shown = []; }

// reloadTrends fetches the shown trends' history again (after the link came
// back: the gap is filled from history).
export function reloadTrends() { for (const t of shown) load(t); }

function point(p) {
  const ts = Date.parse(p.timestamp);
  if ((p.quality || '').startsWith('Bad')) return [ts, null];
  if (typeof p.value === 'boolean') return [ts, p.value ? 1 : 0, true];
  if (typeof p.value === 'number') return [ts, p.value];
  return undefined; // no value: hold the previous
}

async function load(t) {
  const end = now();
  const windowMs = t.windowS * 1000;
  const start = end - windowMs;
  const raw = windowMs <= RAW_UP_TO_MS;
  const intervalMs = Math.max(1000, Math.ceil(windowMs / POINTS_PER_TREND / 1000) * 1000);
  const groups = raw ? [['raw', t.series]] : [['last', t.series.filter((s) => s.step)], ['avg', t.series.filter((s) => !s.step)]];
  t.loading = true;
  const seq = (t.seq || 0) + 1;
  t.seq = seq;
  const got = {};
  try {
    for (const [agg, ss] of groups) {
      if (!ss.length) continue;
      const q = ss.map((s) => 'path=' + encodeURIComponent(s.tag)).join('&') +
        '&start=' + encodeURIComponent(new Date(start).toISOString()) + '&end=' + encodeURIComponent(new Date(end).toISOString()) +
        '&aggregate=' + agg + (raw ? '' : '&interval_ms=' + intervalMs);
      const res = await api('GET', '/history?' + q, undefined, true);
      for (const hs of res || []) {
        const s = ss.find((x) => x.tag === hs.path);
        const pts = [];
        let last = null;
        for (const p of hs.points || []) {
          const pt = point(p);
          if (!pt) continue;
          // An avg interval missing between two points had no Good value: a gap.
          if (!raw && agg === 'avg' && last && pt[0] - last[0] > 1.5 * intervalMs && last[1] !== null) pts.push([last[0] + intervalMs, null]);
          pts.push(pt);
          last = pt;
          if (pt[2]) t.bools[hs.path] = true;
        }
        got[hs.path] = pts;
        t.known[hs.path] = hs.known;
      }
    }
    t.error = '';
  } catch (e) {
    t.error = 'history not available: ' + e.message;
  }
  if (t.seq !== seq) return; // a newer load (another window) won
  t.loading = false;
  for (const tag of Object.keys(got)) {
    const h = got[tag];
    const lastTs = h.length ? h[h.length - 1][0] : start;
    const live = (t.points[tag] || []).filter((p) => p[0] > lastTs);
    t.points[tag] = h.concat(live);
  }
  t.loadedWindowS = t.windowS;
  t.minGapMs = raw ? 0 : intervalMs / 4;
  noteOf(t);
  draw(t);
}

function noteOf(t) {
  const missing = t.series.filter((s) => t.known[s.tag] === false).map((s) => s.label);
  let n = t.error;
  if (!n && missing.length) n = 'No history recorded for ' + missing.join(', ') + ': showing the values since the panel opened.';
  t.note.textContent = n;
  t.note.hidden = !n;
}

// trendValues adds live values to every cached trend of their tags.
export function trendValues(list) {
  for (const tv of list) {
    for (const t of cache.values()) {
      const pts = t.points[tv.path];
      if (!pts) continue;
      const ts = Date.parse(tv.timestamp);
      let pt;
      if ((tv.quality || '').startsWith('Bad')) pt = [ts, null];
      else if (typeof tv.value === 'boolean') { pt = [ts, tv.value ? 1 : 0, true]; t.bools[tv.path] = true; }
      else if (typeof tv.value === 'number') pt = [ts, tv.value];
      else continue;
      const last = pts[pts.length - 1];
      if (last && last[0] > ts) continue;
      // A long window shows about POINTS_PER_TREND intervals: a fast tag's
      // live values closer than a quarter of one update the last point
      // instead of piling up (a stepped series keeps every change).
      const s = t.series.find((x) => x.tag === tv.path);
      if (t.minGapMs && last && pts.length > 1 && !(s && s.step) && last[1] !== null && pt[1] !== null && ts - last[0] < t.minGapMs) {
        last[1] = pt[1];
        continue;
      }
      pts.push(pt);
      const keepFrom = now() - 86400000;
      while (pts.length > 2 && (pts[1][0] < keepFrom || pts.length > 50000)) pts.shift();
    }
  }
}

export function drawTrends() {
  for (const t of shown) if (t.canvas.isConnected) draw(t);
}

function draw(t) {
  const c = t.canvas;
  const dpr = window.devicePixelRatio || 1;
  const W = Math.round(c.clientWidth * dpr), H = Math.round(c.clientHeight * dpr);
  if (!W || !H) return;
  if (c.width !== W) c.width = W;
  if (c.height !== H) c.height = H;
  const g = c.getContext('2d');
  g.clearRect(0, 0, W, H);
  const end = now(), windowMs = t.windowS * 1000, start = end - windowMs;
  const L = 64 * dpr, R = 14 * dpr, T = 22 * dpr, B = 26 * dpr;
  const x = (ts) => L + (W - L - R) * (ts - start) / windowMs;

  // The value range: the view's min/max, else the visible points'.
  let lo = Infinity, hi = -Infinity, n = 0;
  const allBool = t.series.every((s) => t.bools[s.tag]);
  for (const s of t.series) {
    if (t.bools[s.tag] && !allBool) continue; // a bool of a mixed trend runs in its own lane
    const pts = t.points[s.tag] || [];
    for (let i = 0; i < pts.length; i++) {
      const p = pts[i];
      if (p[1] === null || (p[0] < start && !(pts[i + 1] && pts[i + 1][0] >= start))) continue;
      lo = Math.min(lo, p[1]); hi = Math.max(hi, p[1]);
      if (p[0] >= start) n++;
    }
  }
  if (t.w.min !== undefined) lo = t.w.min;
  if (t.w.max !== undefined) hi = t.w.max;
  let ticks;
  if (allBool) { lo = 0; hi = 1; ticks = { lo: -0.15, hi: 1.15, values: [0, 1], step: 1 }; } else if (lo === Infinity) {
    ticks = null;
  } else {
    ticks = niceTicks(lo, hi, Math.max(3, Math.floor((H - T - B) / (36 * dpr))));
    if (t.w.min !== undefined) ticks.lo = t.w.min;
    if (t.w.max !== undefined) ticks.hi = t.w.max;
  }
  g.font = (12 * dpr) + 'px system-ui, sans-serif';
  g.textBaseline = 'middle';
  const units = [...new Set(t.series.filter((s) => allBool || !t.bools[s.tag]).map((s) => s.units || '').filter((u) => u))];
  const ylabels = [];
  if (ticks) {
    const y = (v) => H - B - (H - T - B) * (v - ticks.lo) / (ticks.hi - ticks.lo);
    t.y = y;
    const dec = decimalsFor(ticks.step);
    g.strokeStyle = '#c9c9c9';
    g.lineWidth = 1;
    g.fillStyle = '#4a4a4a';
    g.textAlign = 'right';
    for (const v of ticks.values) {
      const yy = Math.round(y(v)) + 0.5;
      g.beginPath(); g.moveTo(L, yy); g.lineTo(W - R, yy); g.stroke();
      const label = allBool ? (v ? 'On' : 'Off') : v.toFixed(dec);
      ylabels.push(label);
      g.fillText(label, L - 8 * dpr, yy);
    }
    if (units.length === 1 && !allBool) {
      g.textAlign = 'left';
      g.fillText(units[0], 6 * dpr, 10 * dpr);
    }
  }
  // The time axis.
  const xt = timeTicks(start, end, Math.max(2, Math.floor((W - L - R) / (110 * dpr))));
  g.textAlign = 'center';
  g.fillStyle = '#4a4a4a';
  g.strokeStyle = '#dadada';
  const xlabels = [];
  for (const ts of xt.values) {
    const xx = Math.round(x(ts)) + 0.5;
    g.beginPath(); g.moveTo(xx, T); g.lineTo(xx, H - B); g.stroke();
    const label = xt.step < 60000 ? clock(ts) : clock(ts).slice(0, 5);
    xlabels.push(label);
    g.fillText(label, xx, H - B / 2);
  }
  g.strokeStyle = '#8a8a8a';
  g.beginPath(); g.moveTo(L, T); g.lineTo(L, H - B); g.lineTo(W - R, H - B); g.stroke();
  c.dataset.points = String(n);
  c.dataset.window = String(t.windowS);
  c.dataset.yLabels = ylabels.join('|');
  c.dataset.xLabels = xlabels.join('|');
  if (!ticks) {
    g.textAlign = 'center';
    g.fillStyle = '#6a6a6a';
    g.fillText(t.loading ? 'loading history…' : 'no values in this window yet', (L + W - R) / 2, (T + H - B) / 2);
  } else {
    g.save();
    g.beginPath(); g.rect(L, T - 2 * dpr, W - L - R, H - T - B + 4 * dpr); g.clip();
    const span = ticks.hi - ticks.lo;
    // A bool beside numbers: off and on near the bottom of the plot, not 0 and 1 on their scale.
    const lane = (v) => t.y(ticks.lo + span * (v ? 0.14 : 0.03));
    t.series.forEach((s, k) => line(g, t, s, COLOURS[k % COLOURS.length], x, t.bools[s.tag] && !allBool ? lane : t.y, start, end, dpr));
    g.restore();
  }
  legend(t);
}

// line draws one series: straight segments between samples, or steps
// (hold, then jump) for a discrete one; a Bad sample breaks the line; the
// last value is held up to now while the link is up.
function line(g, t, s, colour, x, y, start, end, dpr) {
  const pts = t.points[s.tag] || [];
  g.strokeStyle = colour;
  g.lineWidth = 2 * dpr;
  g.lineJoin = 'round';
  g.beginPath();
  let prev = null;
  for (const p of pts) {
    if (p[1] === null) { prev = null; continue; }
    const px = x(Math.max(p[0], start - 1000)), py = y(p[1]);
    if (!prev) g.moveTo(px, py);
    else if (s.step) { g.lineTo(px, y(prev[1])); g.lineTo(px, py); } else g.lineTo(px, py);
    prev = p;
  }
  if (prev && !state.stale) g.lineTo(x(end), y(prev[1]));
  g.stroke();
}

function legend(t) {
  for (const item of t.legend.children) {
    const s = t.series.find((x) => x.tag === item.dataset.tag);
    const tv = state.values[s.tag];
    const cur = item.querySelector('.cur');
    const good = tv && !state.stale && tv.quality === 'Good';
    const shownValue = tv ? (t.bools[s.tag] && typeof tv.value === 'number' ? tv.value !== 0 : tv.value) : null;
    cur.textContent = tv ? format(shownValue, t.w) + (s.units && typeof tv.value === 'number' && !t.bools[s.tag] ? ' ' + s.units : '') : '';
    item.classList.toggle('not-good', !!tv && !good);
  }
}
