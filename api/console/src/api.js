// The console's one way to the appliance: the REST API under /api/v1, with
// the browser session's cookie, its CSRF token on every state-changing
// request and the X-Qubiq-Console header (the server records the origin as
// "console" and accepts it only from platform-realm sessions). Nothing else
// leaves the page: no other host, no side channel.
import needs from './needs.json';

const API = '/api/v1';
let csrf = '';
let onSessionEnded = () => {};

export function setCSRF(token) { csrf = token || ''; }
export function onEnded(fn) { onSessionEnded = fn; }

// ApiError is a refused or failed call: the HTTP status and the problem
// document (RFC 9457: type, title, status, detail, kind, and extra members).
export class ApiError extends Error {
  constructor(status, problem, route) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
    this.kind = problem.kind || '';
    this.route = route;
  }
  // need names what the route table says the route needs ("sandbox_admin").
  get need() { return needOf(this.route); }
}

const paramRE = /\{[^}]+\}/g;
const routeREs = Object.entries({ ...needs.routes, ...needs.optional }).map(([k, v]) => {
  const [m, p] = k.split(' ');
  return { key: k, method: m, re: new RegExp('^' + p.replace(paramRE, '[^/]+') + '$'), need: v };
});

// routeOf maps a method and a path to its row of needs.json ("GET /api/v1/scripts/{module}").
export function routeOf(method, path) {
  const p = path.split('?')[0];
  const hit = routeREs.find((r) => r.method === method && r.re.test(p));
  return hit ? hit.key : `${method} ${p}`;
}

export function needOf(route) {
  return needs.routes[route] || needs.optional[route] || '';
}

export const permissions = needs.permissions;

const unsafe = (m) => m !== 'GET' && m !== 'HEAD';

// request does one call. opts: body (JSON, or a FormData/Blob sent as is),
// background (a poll the user did not ask for: it does not restart the
// session's idle timeout), signal, raw (return the Response unread).
export async function request(method, path, opts = {}) {
  const headers = { 'X-Qubiq-Console': '1', Accept: 'application/json, application/problem+json' };
  let body;
  if (opts.body instanceof FormData || opts.body instanceof Blob) {
    body = opts.body;
  } else if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.body);
  }
  if (unsafe(method)) headers['X-CSRF-Token'] = csrf;
  if (opts.background) headers['X-Qubiq-Background'] = '1';
  const route = routeOf(method, API + path);
  let res;
  try {
    res = await fetch(API + path, { method, headers, body, signal: opts.signal, credentials: 'same-origin', cache: 'no-store' });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, { kind: 'unreachable', detail: `the appliance did not answer (${e.message})` }, route);
  }
  if (res.status === 401 && !path.startsWith('/auth/login')) {
    const p = await problemOf(res);
    onSessionEnded(p.detail);
    throw new ApiError(401, p, route);
  }
  if (!res.ok) {
    throw new ApiError(res.status, await problemOf(res), route);
  }
  if (opts.raw) return res;
  if (res.status === 204) return null;
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

async function problemOf(res) {
  const text = await res.text().catch(() => '');
  try {
    const p = JSON.parse(text);
    if (p && typeof p === 'object') return p;
  } catch { /* not JSON */ }
  return { status: res.status, title: res.statusText, detail: text.trim() || `HTTP ${res.status} ${res.statusText}`, kind: '' };
}

export const get = (path, opts) => request('GET', path, opts);
export const post = (path, body, opts = {}) => request('POST', path, { ...opts, body });
export const put = (path, body, opts = {}) => request('PUT', path, { ...opts, body });
export const del = (path, opts) => request('DELETE', path, opts);

// stream does a call whose answer is NDJSON (package installs): onEvent
// gets each parsed line as it arrives; the promise resolves with the last
// event. A refusal before the stream starts throws an ApiError.
export async function stream(method, path, body, onEvent, opts = {}) {
  const res = await request(method, path, { ...opts, body, raw: true });
  const ct = res.headers.get('Content-Type') || '';
  if (!ct.includes('ndjson')) {
    const text = await res.text();
    const v = text ? JSON.parse(text) : null;
    onEvent(v);
    return v;
  }
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  let last = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line) continue;
      last = JSON.parse(line);
      onEvent(last);
    }
    if (done) break;
  }
  if (buf.trim()) { last = JSON.parse(buf); onEvent(last); }
  return last;
}

export const enc = encodeURIComponent;
