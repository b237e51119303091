// Small DOM helpers, toasts, the confirm dialog and value formatting.
'use strict';

import { state } from './state.js';

export const $ = (id) => document.getElementById(id);

export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

// details returns a collapsed <details> holding the technical text (the
// operator's words stay in front; the engineer's are one tap away).
export function details(text, summary) {
  const d = el('details', 'tech');
  d.appendChild(el('summary', '', summary || 'Details'));
  d.appendChild(el('div', 'tech-text', text));
  return d;
}

let toastTimer = null;

// toast shows a short message in words: kind 'ok' or 'refused'; tech, when
// given, is the technical detail behind a Details toggle. Nothing is shown
// while signed out (a refusal racing a logout must not greet the next
// user).
export function toast(kind, text, tech) {
  if (!state.session) return;
  const t = $('toast');
  t.className = kind;
  t.textContent = '';
  t.appendChild(el('span', 'toast-text', text));
  if (tech) t.appendChild(details(tech));
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(hideToast, kind === 'refused' ? 12000 : 4000);
}

export function hideToast() {
  clearTimeout(toastTimer);
  const t = $('toast');
  t.hidden = true;
  t.textContent = '';
  t.className = '';
}

export function confirmAsk(text) {
  return new Promise((resolve) => {
    $('confirm-text').textContent = text;
    $('confirm').hidden = false;
    const done = (v) => { $('confirm').hidden = true; $('confirm-yes').onclick = null; $('confirm-no').onclick = null; resolve(v); };
    $('confirm-yes').onclick = () => done(true);
    $('confirm-no').onclick = () => done(false);
  });
}

const pad2 = (n) => String(n).padStart(2, '0');

// clock formats ms as the panel's local time of day, HH:MM:SS.
export function clock(ms) {
  const d = new Date(ms);
  return pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
}

// sinceText is "10:42:05", or "yesterday 10:42:05" / "1 Mar 10:42:05" for
// older instants.
export function sinceText(ms) {
  const d = new Date(ms), today = new Date();
  if (d.toDateString() === today.toDateString()) return clock(ms);
  const y = new Date(today.getTime() - 86400000);
  if (d.toDateString() === y.toDateString()) return 'yesterday ' + clock(ms);
  return d.toLocaleDateString(undefined, { day: 'numeric', month: 'short' }) + ' ' + clock(ms);
}

// format renders a value for an operator: booleans by the widget's state
// labels, numbers with the widget's decimals (else at most 3), never JSON.
export function format(v, w) {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'boolean') return v ? ((w && w.on_label) || 'On') : ((w && w.off_label) || 'Off');
  if (typeof v === 'number' && w && w.decimals !== undefined) return v.toFixed(w.decimals);
  if (typeof v === 'number') return String(Math.round(v * 1000) / 1000);
  if (typeof v === 'string') return v;
  if (Array.isArray(v)) return v.map((x) => format(x)).join(', ');
  return '…';
}

// words turns a script's result into the toast's text: its "message" when
// it returned one, else "done". Never raw JSON.
export function resultWords(result) {
  if (result && typeof result === 'object' && !Array.isArray(result) && typeof result.message === 'string' && result.message.trim()) {
    return result.message.trim().slice(0, 300);
  }
  return 'done';
}
