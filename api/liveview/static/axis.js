// Axis arithmetic of the trends: rounded value ticks (1, 2, 2.5, 5 × 10^n),
// time ticks on whole local seconds, minutes and hours, and durations in
// words. Pure functions, no DOM.
'use strict';

const NICE = [1, 2, 2.5, 5, 10];

// niceTicks returns ticks covering [lo, hi] with about count intervals:
// {lo, hi, step, values}, every value a multiple of step.
export function niceTicks(lo, hi, count) {
  if (!(hi > lo)) {
    const pad = Math.abs(lo) > 0 ? Math.abs(lo) * 0.1 : 1;
    lo -= pad; hi += pad;
  }
  const raw = (hi - lo) / Math.max(1, count);
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  let step = mag;
  for (const m of NICE) { if (m * mag >= raw) { step = m * mag; break; } }
  const first = Math.floor(lo / step + 1e-9) * step;
  const last = Math.ceil(hi / step - 1e-9) * step;
  const values = [];
  for (let v = first; v <= last + step / 2; v += step) values.push(Math.abs(v) < step / 1e6 ? 0 : round(v, step));
  return { lo: first, hi: last, step, values };
}

function round(v, step) {
  const d = decimalsFor(step);
  return Number(v.toFixed(d));
}

// decimalsFor is how many decimals the labels of ticks step apart need
// (2.5 → 1, 0.25 → 2, 10 → 0).
export function decimalsFor(step) {
  let d = 0;
  while (d < 9 && Math.abs(Math.round(step * Math.pow(10, d)) - step * Math.pow(10, d)) > 1e-6 * Math.pow(10, d)) d++;
  return d;
}

const STEPS_MS = [1, 2, 5, 10, 15, 30].map((s) => s * 1000)
  .concat([1, 2, 5, 10, 15, 30].map((m) => m * 60000))
  .concat([1, 2, 3, 6, 12].map((h) => h * 3600000));

// timeTicks returns about count ticks in [start, end] (ms) on a step of
// STEPS_MS, aligned to the local clock (10:00, 10:15, ...): {step, values}.
export function timeTicks(start, end, count) {
  const span = end - start;
  let step = STEPS_MS[STEPS_MS.length - 1];
  for (const s of STEPS_MS) { if (span / s <= count) { step = s; break; } }
  const tz = -new Date(start).getTimezoneOffset() * 60000;
  const values = [];
  for (let v = Math.ceil((start + tz) / step) * step - tz; v <= end; v += step) values.push(v);
  return { step, values };
}

// durationText says a window in words: "30 s", "10 min", "1 h", "24 h".
export function durationText(s) {
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.round(s / 60) + ' min';
  if (s % 3600 === 0) return (s / 3600) + ' h';
  return (Math.round(s / 360) / 10) + ' h';
}
