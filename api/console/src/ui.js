// Small DOM helpers of the console: elements, tables, busy buttons,
// dialogs, toasts, refusals. Text always goes in as text (never as HTML).
import { ApiError, permissions } from './api.js';

// h builds an element: h('button', {class: 'primary', onclick}, 'Save').
// Attributes: class, text, dataset (object), on* (listeners), hidden,
// disabled, and any other as an attribute. Children: nodes, strings,
// numbers, arrays, null (skipped).
export function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k === 'value') e.value = v;
    else if (k === 'checked' || k === 'disabled' || k === 'hidden' || k === 'selected' || k === 'multiple' || k === 'required') e[k] = !!v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  append(e, children);
  return e;
}

function append(e, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(e, ...children) {
  e.replaceChildren();
  append(e, children);
  return e;
}

// busy runs fn while button shows that it works (disabled, aria-busy, a
// spinner, an elapsed-seconds counter after a second): every long action
// shows progress.
export async function busy(button, fn) {
  if (!button) return fn();
  const label = button.dataset.label || button.textContent;
  button.dataset.label = label;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  button.classList.add('busy');
  const start = Date.now();
  const tick = setInterval(() => {
    const s = Math.floor((Date.now() - start) / 1000);
    if (s >= 1) button.textContent = `${label} (${s} s)`;
  }, 250);
  try {
    return await fn();
  } finally {
    clearInterval(tick);
    button.textContent = label;
    button.disabled = false;
    button.removeAttribute('aria-busy');
    button.classList.remove('busy');
  }
}

let toastTimer;
export function toast(msg, kind = 'ok') {
  const t = document.getElementById('toast');
  t.textContent = msg;
  t.className = kind;
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, kind === 'ok' ? 4000 : 9000);
}

// dialog opens a modal <dialog> (focus moves into it; Escape closes it)
// with content and buttons [{label, value, class}]; it resolves with the
// value of the button pressed (undefined on Escape).
export function dialog(title, content, buttons) {
  return new Promise((resolve) => {
    const d = h('dialog', { class: 'dlg', 'aria-labelledby': 'dlg-title' });
    const close = (v) => { d.close(); d.remove(); resolve(v); };
    d.append(h('h2', { id: 'dlg-title' }, title), h('div', { class: 'dlg-body' }, content),
      h('div', { class: 'actions' }, buttons.map((b) => h('button', { type: 'button', class: b.class || '', onclick: () => close(b.value) }, b.label))));
    d.addEventListener('cancel', (ev) => { ev.preventDefault(); close(undefined); });
    document.body.append(d);
    d.showModal();
    const first = d.querySelector('.actions button.primary, .actions button.danger') || d.querySelector('button');
    first?.focus();
  });
}

export async function confirm(title, text, label = 'Confirm', danger = false) {
  const v = await dialog(title, h('p', {}, text), [
    { label: 'Cancel', value: false, class: 'ghost' },
    { label, value: true, class: danger ? 'danger' : 'primary' },
  ]);
  return v === true;
}

// describeNeed turns a need of the route table into words: a permission
// with its meaning, a scope, "a session".
export function describeNeed(need) {
  if (!need) return '';
  if (permissions[need]) return `the permission ${need} (“${permissions[need]}”)`;
  if (need.includes(':')) return `the scope ${need}`;
  return need;
}

// refusal is the page shown to a user whose session lacks need.
export function refusal(page, need, session) {
  const have = session.permissions.length ? session.permissions.join(', ') : 'no permissions';
  return h('section', { class: 'refusal', role: 'alert', dataset: { need } },
    h('h1', {}, page),
    h('p', { class: 'big' }, 'This page needs ', h('strong', { class: 'need' }, describeNeed(need)), '.'),
    h('p', {}, `Your account “${session.user}” (${session.realm} realm) has ${have}. `,
      'A user administrator (users_admin) can grant it under Settings → Users and API keys.'),
    h('p', { class: 'dim' }, 'Every action of this page is refused by the appliance without it, whatever the browser sends.'));
}

// problem is the box that shows a failed call: its kind and the server's
// detail, which names the missing scope, level or permission of a refusal.
export function problem(err, what = '') {
  if (!(err instanceof ApiError)) {
    return h('div', { class: 'problem', role: 'alert' }, (what ? what + ': ' : '') + String(err && err.message || err));
  }
  const p = err.problem;
  const head = err.status === 403
    ? `Refused${err.need ? ' (needs ' + describeNeed(err.need) + ')' : ''}`
    : `${p.title || 'Error'}${err.status ? ' (HTTP ' + err.status + ')' : ''}`;
  return h('div', { class: 'problem', role: 'alert', dataset: { kind: err.kind, status: String(err.status) } },
    h('strong', {}, (what ? what + ' — ' : '') + head),
    err.kind ? h('span', { class: 'kind' }, err.kind) : null,
    h('div', { class: 'detail' }, p.detail || ''));
}

export function errText(err) {
  if (err instanceof ApiError) {
    const n = err.status === 403 && err.need ? ` (needs ${err.need})` : '';
    return `${err.kind || 'error'}${n}: ${err.problem.detail || err.message}`;
  }
  return String(err && err.message || err);
}

// Time: local date and time to the millisecond, the UTC instant in the
// tooltip.
export function fmtTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (isNaN(d)) return iso;
  const p = (n, w = 2) => String(n).padStart(w, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

export function timeCell(iso) {
  return h('time', { datetime: iso || '', title: iso || '' }, fmtTime(iso));
}

export function fmtDuration(s) {
  s = Math.floor(s);
  const d = Math.floor(s / 86400), hh = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  if (d) return `${d} d ${hh} h`;
  if (hh) return `${hh} h ${m} min`;
  if (m) return `${m} min ${s % 60} s`;
  return `${s} s`;
}

export function fmtBytes(n) {
  if (!n) return '0';
  const u = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${Number.isInteger(n) ? n : n.toFixed(1)} ${u[i]}`;
}

// qualityClass colours a quality as LiveView does: Good green, Uncertain*
// amber, Bad* red.
export function qualityClass(q) {
  if (!q) return 'q-none';
  if (q === 'Good') return 'q-good';
  if (q.startsWith('Uncertain')) return 'q-uncertain';
  return 'q-bad';
}

export function qualityBadge(q) {
  return h('span', { class: 'q ' + qualityClass(q) }, q || '—');
}

// stateClass colours a device or health state.
export function stateClass(s) {
  if (s === 'connected' || s === 'ok' || s === 'active') return 'q-good';
  if (!s) return 'q-none';
  if (s === 'connecting' || s === 'degraded' || s === 'demoted' || s === 'probing') return 'q-uncertain';
  return 'q-bad';
}

// fmtValue shows a tag value: JSON for arrays and objects, else as is.
export function fmtValue(v) {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

// table builds a <table>: columns [{key, label, cell(row) → node|string,
// class}], rows; opts.rowAttrs(row) → attributes of the <tr>.
export function table(columns, rows, opts = {}) {
  const thead = h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col', class: c.class || '' }, c.label))));
  const tbody = h('tbody', {}, rows.map((r) => h('tr', opts.rowAttrs ? opts.rowAttrs(r) : {},
    columns.map((c) => h('td', { class: c.class || '' }, c.cell ? c.cell(r) : fmtValue(r[c.key]))))));
  if (!rows.length && opts.empty) tbody.append(h('tr', {}, h('td', { colspan: columns.length, class: 'empty' }, opts.empty)));
  return h('table', { class: 'grid' + (opts.class ? ' ' + opts.class : '') }, opts.caption ? h('caption', {}, opts.caption) : null, thead, tbody);
}

// section is a titled block of a page.
export function section(title, ...children) {
  const id = 's-' + title.toLowerCase().replace(/[^a-z0-9]+/g, '-');
  return h('section', { class: 'block', 'aria-labelledby': id }, h('h2', { id }, title), children);
}

export function kv(pairs) {
  return h('dl', { class: 'kv' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

// poller calls fn now and every ms while the page lives; stop() ends it.
// A poll never overlaps the previous one.
export function poller(fn, ms) {
  let stopped = false;
  let timer;
  const run = async () => {
    if (stopped) return;
    try { await fn(); } catch { /* the page shows its own error */ }
    if (!stopped) timer = setTimeout(run, ms);
  };
  run();
  return { stop() { stopped = true; clearTimeout(timer); } };
}
