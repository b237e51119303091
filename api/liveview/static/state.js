// Shared state of the panel (one page, one session at a time).
'use strict';

export const API = '/api/v1';

export const state = {
  session: null,        // GET /auth/session answer, null when signed out
  views: [],            // GET /liveview/views answer
  view: null,           // the view shown; null on the alarm page
  page: 'view',         // 'view' or 'alarms'
  values: {},           // path → last TagValue received
  since: {},            // path → ms of the first non-Good VQT of the current run of them
  stale: true,          // the live link is down (values are stale)
  staleSince: null,     // ms when the link went down
  clockOffset: 0,       // server clock − this clock, from the heartbeats (ms)
  alarms: new Map(),    // alarm id → alarm object (docs/alarms.md)
  alarmSummary: null,   // last alarm_summary message
  alarmsKnown: false,   // an alarm snapshot arrived on this connection
};

// now is the server's clock as well as the panel knows it (ms).
export function now() { return Date.now() + state.clockOffset; }

// Operator levels in order (docs/security.md); platform users act at design.
export const LEVELS = ['view', 'operate', 'supervise', 'design'];

// sessionLevel is the session's write level: an operator's level, design
// for a platform user.
export function sessionLevel() {
  const s = state.session;
  if (!s) return 'view';
  return s.realm === 'operator' ? (s.level || 'view') : 'design';
}

// levelAtLeast reports whether level have reaches need.
export function levelAtLeast(have, need) {
  return LEVELS.indexOf(have) >= LEVELS.indexOf(need || 'operate');
}
