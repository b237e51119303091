// HTTP to the daemon, and refusals in words.
//
// Authority lives on the server: the session cookie is HttpOnly, the grant
// is derived there. This page only sends the session's CSRF token and the
// panel it shows (X-Qubiq-Panel).
'use strict';

import { API, state } from './state.js';

// Refusal is a request the daemon refused (status, problem kind, detail)
// or could not be sent (status 0).
export class Refusal extends Error {
  constructor(status, kind, detail, tech) {
    super(detail || ('HTTP ' + status));
    this.status = status;
    this.kind = kind;
    this.tech = tech || '';
  }
}

let onSessionEnded = () => {};

// whenSessionEnds sets what happens when a request answers 401.
export function whenSessionEnds(fn) { onSessionEnded = fn; }

// api sends one request; background requests (the page's own polling) do
// not count as the operator's activity.
export async function api(method, path, body, background) {
  const headers = { 'Accept': 'application/json, application/problem+json' };
  if (background) headers['X-Qubiq-Background'] = '1';
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (state.session && method !== 'GET') headers['X-CSRF-Token'] = state.session.csrf_token;
  if (state.view) headers['X-Qubiq-Panel'] = state.view.name;
  let res;
  try {
    res = await fetch(API + path, { method, headers, credentials: 'same-origin', cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new Refusal(0, 'network', 'no connection to the gateway', String(e && e.message || e));
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!res.ok) {
    const p = (data && typeof data === 'object') ? data : {};
    if (res.status === 401 && path !== '/auth/login') onSessionEnded();
    const detail = typeof p.detail === 'string' ? p.detail : res.statusText;
    throw new Refusal(res.status, p.kind || '', detail, (p.kind ? p.kind + ' · ' : '') + 'HTTP ' + res.status);
  }
  return data;
}

// refusalWords says why a request was refused, for an operator.
export function refusalWords(e) {
  if (!(e instanceof Refusal)) return 'something went wrong in the panel';
  const d = e.message;
  switch (e.kind) {
    case 'network': return 'no connection to the gateway';
    case 'permission_denied': case 'level': case 'scope': return 'not allowed: ' + d;
    case 'timeout': return 'did not finish in time';
    case 'busy': return 'the gateway is busy; try again in a moment';
    case 'runtime_missing': return 'scripts are not available on this gateway';
    case 'script_error': return 'the script failed';
    case 'memory_limit_exceeded': return 'the script was stopped: it used too much memory';
    case 'killed': return 'the script was stopped';
    case 'rate_limited': return d;
    case 'unavailable': return 'the gateway cannot do this now; try again';
  }
  if (e.status === 401) return 'your session ended';
  if (e.status === 403) return 'not allowed: ' + d;
  if (e.status === 404) return 'not found';
  return d;
}

// writeWords says why one tag write was refused (its status, a quality
// name, and the daemon's reason).
export function writeWords(status, reason, device) {
  const dev = device || 'the device';
  const head = {
    Bad_UserAccessDenied: 'not allowed',
    Bad_OutOfRange: 'out of range',
    Bad_NotWritable: 'this value cannot be written',
    Bad_NotConnected: 'no connection to ' + dev,
    Bad_CommunicationError: 'communication with ' + dev + ' failed',
    Bad_Timeout: dev + ' did not answer',
    Bad_DeviceFailure: dev + ' refused it',
    Bad_TypeMismatch: 'wrong kind of value',
    Bad_NodeIdUnknown: 'unknown tag',
    Uncertain: 'may have been applied: ' + dev + ' did not confirm in time',
  }[status] || 'refused';
  if (!reason) return head;
  // The daemon's reason often starts with the same words ("out of range: ...").
  return reason.toLowerCase().startsWith(head.toLowerCase()) ? reason : head + ': ' + reason;
}
