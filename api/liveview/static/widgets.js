// The cards of a view: values, numeric controls, two-state switches,
// buttons (in a bar, or inside the card they act on) and how each shows
// its quality.
'use strict';

import { state } from './state.js';
import { $, el, details, toast, confirmAsk, format, resultWords } from './ui.js';
import { api, refusalWords, writeWords } from './net.js';
import { qualityClass, usable, operatorReason, technicalReason } from './quality.js';
import { buildTrend } from './trend.js';
import { buildAlarmList, alarmOf } from './alarms.js';

let afterAction = () => {};

// whenActed sets what runs after a write or a press (the events list).
export function whenActed(fn) { afterAction = fn; }

// groups returns the view's widgets as the cards drawn: neighbouring
// button widgets share one button bar.
function groups(v) {
  const out = [];
  v.widgets.forEach((w, i) => {
    if (w.type === 'button') {
      const last = out[out.length - 1];
      const b = { label: w.label, entry: w.entry, args: w.args, confirm: w.confirm };
      if (last && last.bar && last.loose) { last.buttons.push(b); return; }
      out.push({ bar: true, loose: true, label: '', buttons: [b], index: i });
      return;
    }
    if (w.type === 'buttons') { out.push({ bar: true, label: w.label || '', buttons: w.buttons || [], index: i }); return; }
    out.push({ w, index: i });
  });
  return out;
}

export function render(v) {
  const root = $('widgets');
  root.textContent = '';
  for (const g of groups(v)) {
    if (g.bar) { root.appendChild(buildBar(g)); continue; }
    const w = g.w;
    const card = el('div', 'w ' + w.type);
    card.dataset.type = w.type;
    card.dataset.index = String(g.index);
    if (w.type === 'trend') { buildTrend(card, v, w, g.index); root.appendChild(card); continue; }
    if (w.type === 'alarms') { buildAlarmList(card, w); root.appendChild(card); continue; }
    card.dataset.tag = w.tag;
    card.appendChild(el('div', 'label', w.label));
    card.appendChild(el('div', 'val', '—'));
    card.appendChild(el('div', 'q'));
    if (w.type === 'numeric') buildNumeric(card, w);
    if (w.type === 'boolean') buildSwitch(card, w);
    if (w.buttons && w.buttons.length) {
      const row = el('div', 'btns');
      for (const b of w.buttons) row.appendChild(buildButton(b));
      card.appendChild(row);
    }
    if ((w.type === 'numeric' || w.type === 'boolean') && !w.writable) {
      card.classList.add('readonly');
      card.appendChild(el('div', 'ro', 'Read-only: ' + w.read_only_reason));
    }
    root.appendChild(card);
    paint(w.tag);
  }
}

function buildBar(g) {
  const card = el('div', 'w bar');
  card.dataset.type = 'buttons';
  card.dataset.index = String(g.index);
  if (g.label) card.appendChild(el('div', 'label', g.label));
  const row = el('div', 'btns');
  for (const b of g.buttons) row.appendChild(buildButton(b));
  card.appendChild(row);
  return card;
}

function buildButton(b) {
  const btn = el('button', 'act', b.label);
  btn.type = 'button';
  btn.dataset.entry = b.entry;
  btn.addEventListener('click', () => press(b, btn));
  return btn;
}

async function press(b, btn) {
  if (b.confirm && !(await confirmAsk(b.confirm))) return;
  btn.disabled = true;
  btn.classList.add('busy');
  try {
    const [module, entry] = b.entry.split('.');
    const run = await api('POST', '/scripts/' + encodeURIComponent(module) + '/' + encodeURIComponent(entry) + '/run');
    toast('ok', b.label + ': ' + resultWords(run && run.result));
  } catch (e) {
    toast('refused', b.label + ' refused: ' + refusalWords(e), e.kind === 'script_error' ? e.message : e.tech);
  } finally {
    btn.classList.remove('busy');
    btn.disabled = false;
    paintAll(); // a card's buttons stay off while its value is Bad or stale
    afterAction();
  }
}

function buildNumeric(card, w) {
  const ctl = el('div', 'ctl');
  const input = el('input');
  input.type = 'number';
  input.inputMode = 'decimal';
  if (w.min !== undefined) input.min = w.min;
  if (w.max !== undefined) input.max = w.max;
  input.step = w.step !== undefined ? w.step : 'any';
  const set = el('button', 'set', 'Set');
  set.type = 'button';
  set.addEventListener('click', async () => {
    const n = Number(input.value);
    if (input.value === '' || !Number.isFinite(n)) { toast('refused', w.label + ': enter a number'); return; }
    if ((w.min !== undefined && n < w.min) || (w.max !== undefined && n > w.max)) {
      toast('refused', w.label + ' not set: ' + n + ' is outside ' + format(w.min, w) + ' … ' + format(w.max, w) + unitsOf(w)); return;
    }
    await write(w, n);
  });
  ctl.appendChild(input);
  ctl.appendChild(set);
  card.appendChild(ctl);
}

function buildSwitch(card, w) {
  const sw = el('div', 'switch');
  sw.setAttribute('role', 'group');
  sw.setAttribute('aria-label', w.label);
  for (const on of [false, true]) {
    const b = el('button', 'seg ' + (on ? 'on' : 'off'), on ? (w.on_label || 'On') : (w.off_label || 'Off'));
    b.type = 'button';
    b.dataset.value = String(on);
    b.setAttribute('aria-pressed', 'false');
    b.addEventListener('click', async () => {
      if (b.getAttribute('aria-pressed') === 'true') return; // already in that state
      if (w.confirm && !(await confirmAsk(w.confirm))) return;
      const isInt = w.tag_type && w.tag_type !== 'bool';
      await write(w, isInt ? (on ? 1 : 0) : on);
    });
    sw.appendChild(b);
  }
  card.appendChild(sw);
}

const unitsOf = (w) => (w.units ? ' ' + w.units : '');

async function write(w, value) {
  try {
    const res = await api('POST', '/tags/write', { writes: [{ path: w.tag, value }] });
    const r = res[0];
    const shown = w.type === 'boolean' ? boolOf(value) : value;
    if (r.status === 'Good') toast('ok', w.label + ' set to ' + format(shown, w) + (typeof shown === 'number' ? unitsOf(w) : ''));
    else toast('refused', w.label + ' not set: ' + writeWords(r.status, r.reason, w.device), r.status + (r.reason ? ': ' + r.reason : ''));
  } catch (e) {
    toast('refused', w.label + ' not set: ' + refusalWords(e), e.tech);
  }
  afterAction();
}

// boolOf is a switch's state from the tag's value (an integer: non-zero
// is on), null when unknown.
function boolOf(v) {
  if (typeof v === 'boolean') return v;
  if (typeof v === 'number') return v !== 0;
  return null;
}

export function paint(path) {
  const tv = state.values[path];
  for (const card of document.querySelectorAll('#widgets .w[data-tag]')) {
    if (card.dataset.tag !== path) continue;
    const w = state.view.widgets[Number(card.dataset.index)];
    const cls = qualityClass(tv);
    card.classList.remove('q-good', 'q-uncertain', 'q-bad', 'q-stale', 'q-wait');
    card.classList.add(cls);
    card.dataset.quality = tv ? tv.quality : '';
    card.dataset.stale = String(cls === 'q-stale');
    const val = card.querySelector('.val');
    const sw = card.querySelector('.switch');
    const isBoolValue = sw || (tv && typeof tv.value === 'boolean');
    val.textContent = tv ? format(isBoolValue ? boolOf(tv.value) : tv.value, w) : '—';
    val.classList.toggle('none', !tv || tv.value === null || tv.value === undefined);
    if (w.units && tv && tv.value !== null && !isBoolValue) val.appendChild(el('span', 'units', w.units));
    const q = card.querySelector('.q');
    q.textContent = '';
    const words = operatorReason(tv, w.device);
    if (words) {
      q.appendChild(el('span', 'why', words));
      const tech = state.stale ? (tv && tv.quality !== 'Good' ? 'last received: ' + technicalReason(tv) : '') : technicalReason(tv);
      if (tech) q.appendChild(details(tech));
    }
    if (sw) {
      const b = usable(tv) ? boolOf(tv.value) : null;
      sw.dataset.state = b === null ? 'unknown' : (b ? 'on' : 'off');
      for (const seg of sw.children) seg.setAttribute('aria-pressed', String(b !== null && String(b) === seg.dataset.value));
    }
    paintMark(card, path);
    paintCard(card, w, tv);
  }
}

// paintMark puts the tag's alarm beside its label (ISA-101: the alarm
// where the value is), its priority in colour, blinking until acknowledged.
function paintMark(card, path) {
  const a = alarmOf(path);
  const label = card.querySelector('.label');
  let m = label.querySelector('.alarm-mark');
  if (!a) { if (m) m.remove(); return; }
  if (!m) { m = el('span'); label.appendChild(m); }
  m.className = 'alarm-mark prio p-' + a.priority + (a.state === 'active_unacked' ? ' blink' : '');
  m.textContent = a.priority;
  m.title = a.message || a.display_path || a.id;
  m.dataset.id = a.id;
}

// paintCard enables a card's controls only while its value is usable and
// the operator may write it; a disabled control says why (title).
function paintCard(card, w, tv) {
  const ok = usable(tv);
  const why = ok ? '' : operatorReason(tv, w.device);
  for (const c of card.querySelectorAll('.ctl input, .ctl button, .switch button')) {
    c.disabled = !w.writable || !ok;
    c.title = !w.writable ? 'Read-only: ' + w.read_only_reason : why;
  }
  for (const b of card.querySelectorAll('.btns button')) {
    if (b.classList.contains('busy')) continue;
    b.disabled = !ok;
    b.title = why;
  }
}

// paintControls re-applies the link state to bar buttons (a press needs
// the gateway) and repaints every card.
export function paintControls() {
  for (const b of document.querySelectorAll('#widgets .w.bar button')) {
    if (b.classList.contains('busy')) continue;
    b.disabled = state.stale;
    b.title = state.stale ? 'no connection to the gateway' : '';
  }
}

export function paintAll() {
  if (!state.view) return;
  const seen = new Set();
  for (const w of state.view.widgets) if (w.tag && !seen.has(w.tag)) { seen.add(w.tag); paint(w.tag); }
  paintControls();
}
