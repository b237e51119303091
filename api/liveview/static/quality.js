// Quality as an operator sees it (ANSI/ISA-101.01: calm when normal; a
// value that is not trustworthy looks it): a class for the card, a short
// reason in words, and the technical reason on demand.
'use strict';

import { state } from './state.js';
import { sinceText } from './ui.js';

// qualityClass: q-good, q-uncertain, q-bad, q-stale (the link is down,
// so the value is old whatever it was) or q-wait (no value yet).
export function qualityClass(tv) {
  if (state.stale) return 'q-stale';
  if (!tv) return 'q-wait';
  const q = tv.quality || '';
  if (q === 'Good') return 'q-good';
  if (q.startsWith('Uncertain')) return 'q-uncertain';
  return 'q-bad';
}

// usable reports whether a write control may act on the tag now: the link
// is up and the value is Good or Uncertain (a Bad or stale value is not a
// base for an operator's decision, and the write would not reach the
// device).
export function usable(tv) {
  const c = qualityClass(tv);
  return c === 'q-good' || c === 'q-uncertain';
}

// track keeps, per tag, when its current quality began (the "since" of
// "no connection to plc1 since 10:42:05"): the VQT's timestamp when the
// quality changed. The daemon keeps that timestamp while the quality and
// reason stay, so a reloaded panel finds the same instant.
export function track(prev, tv) {
  if (tv.quality === 'Good') { delete state.since[tv.path]; return; }
  const ts = Date.parse(tv.timestamp) - state.clockOffset;
  if (!prev || prev.quality !== tv.quality || state.since[tv.path] === undefined) {
    state.since[tv.path] = Number.isFinite(ts) ? Math.min(ts, Date.now()) : Date.now();
  }
}

// operatorReason is the short text under a value that is not Good, in
// words ("" when Good).
export function operatorReason(tv, device) {
  const dev = device || 'the device';
  if (state.stale) {
    const at = state.staleSince ? ' since ' + sinceText(state.staleSince) : '';
    return 'stale: no connection to the gateway' + at;
  }
  if (!tv) return 'waiting for the first value';
  const q = tv.quality || '';
  if (q === 'Good') return '';
  const since = state.since[tv.path] !== undefined ? ' since ' + sinceText(state.since[tv.path]) : '';
  switch (q) {
    case 'Bad_NotConnected': return 'no connection to ' + dev + since;
    case 'Bad_CommunicationError': return 'communication with ' + dev + ' failing' + since;
    case 'Bad_Timeout': return dev + ' not answering' + since;
    case 'Bad_DeviceFailure': return dev + ' reports a failure' + since;
    case 'Bad_WaitingForInitialData': return 'waiting for the first value from ' + dev;
    case 'Bad_ConfigurationError': return 'not configured correctly: tell the engineer';
    case 'Bad_NodeIdUnknown': return dev + ' does not know this point';
    case 'Bad_CertificateUntrusted': return dev + ' is not trusted yet: tell the engineer';
    case 'Bad_UserAccessDenied': return 'not visible to you';
    case 'Bad_OutOfRange': return 'reading out of range' + since;
    case 'Bad_TypeMismatch': return 'reading of the wrong type';
    case 'Uncertain_LastUsableValue': return 'last value before a restart; waiting for ' + dev;
  }
  if (q.startsWith('Uncertain')) return 'uncertain value' + since;
  return 'bad value' + since;
}

// technicalReason is what the engineer needs: the quality name and the
// driver's reason, without a retry countdown that would freeze on screen.
export function technicalReason(tv) {
  if (!tv) return '';
  let r = (tv.reason || '').replace(/\s*\(next attempt in [^)]*\)/g, '');
  if (tv.status_code) r += (r ? '; ' : '') + 'status code 0x' + tv.status_code.toString(16).padStart(8, '0');
  return (tv.quality || '') + (r ? ': ' + r : '');
}
