// Stackbone Studio: number formats and the layout math of the run waterfall
// and the usage charts. Pure functions, no DOM: app.js draws what they say.

// ---------- Formats ----------

// fmtInt writes a count with thousands separators (12,345).
export function fmtInt(n) {
  return Number(n || 0).toLocaleString('en-US');
}

// fmtTokens writes a token count short enough for a chart label: 812,
// 12,345, 1.23M.
export function fmtTokens(n) {
  n = Number(n || 0);
  if (n >= 1e6) return `${(n / 1e6).toFixed(n >= 1e7 ? 1 : 2)}M`;
  if (n >= 1e5) return `${Math.round(n / 1e3)}k`;
  return fmtInt(n);
}

// fmtUSD writes a known price in dollars with the precision small amounts
// need ($0.00042, $0.0123, $1.25). A null price is "unknown", never $0.
export function fmtUSD(v) {
  if (v === null || v === undefined || !Number.isFinite(Number(v))) return 'unknown';
  v = Number(v);
  if (v === 0) return '$0';
  const a = Math.abs(v);
  // Two significant digits, never an exponent: $0.000068, $0.0000001.
  if (a < 0.01) return `$${v.toFixed(Math.min(20, 1 - Math.floor(Math.log10(a)))).replace(/0+$/, '')}`;
  if (a < 1) return `$${v.toFixed(4).replace(/0{1,2}$/, '')}`;
  return `$${v.toFixed(2)}`;
}

// costText says what a cost is: "unknown" when no price is known (costUsd
// null), "$0.012 + unknown" when some model call had no price (costComplete
// false), else the amount.
export function costText(costUsd, costComplete = true) {
  if (costUsd === null || costUsd === undefined) return 'unknown';
  if (costComplete === false) return `${fmtUSD(costUsd)} + unknown`;
  return fmtUSD(costUsd);
}

// fmtMs writes a duration: 0.25 ms, 85 ms, 1.25 s, 12.5 s, 3 min 20 s, 2 h 5 min.
export function fmtMs(ms) {
  ms = Math.max(0, Number(ms || 0));
  if (ms < 1) return `${Number(ms.toFixed(2))} ms`;
  if (ms < 10) return `${Number(ms.toFixed(1))} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 10000) return `${(ms / 1000).toFixed(2)} s`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

// niceStep is a round step (1, 2 or 5 times a power of ten) near raw.
export function niceStep(raw) {
  if (!(raw > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(raw));
  const f = raw / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

// niceMax is a round axis maximum at or above v, with its step (about
// `ticks` steps).
export function niceMax(v, ticks = 4) {
  const step = niceStep((v > 0 ? v : 1) / ticks);
  return { max: Math.max(step, Math.ceil((v > 0 ? v : 1) / step) * step), step };
}

const ms = (iso) => new Date(iso).getTime();

// ---------- Run waterfall ----------

// runChain is the run id's chain of pauses and resumptions among a thread's
// runs (oldest first): back through resumedFrom to the first run, then
// forward through the runs that resumed each one. At most max runs, around
// the chosen one.
export function runChain(runs, id, max = 8) {
  const byId = new Map(runs.map((r) => [r.id, r]));
  const next = new Map();
  for (const r of runs) if (r.resumedFrom && byId.has(r.resumedFrom)) next.set(r.resumedFrom, r.id);
  const chain = [id];
  const seen = new Set(chain);
  for (let r = byId.get(id); r?.resumedFrom && byId.has(r.resumedFrom) && !seen.has(r.resumedFrom);
    r = byId.get(r.resumedFrom)) {
    chain.unshift(r.resumedFrom);
    seen.add(r.resumedFrom);
  }
  for (let n = next.get(id); n && !seen.has(n); n = next.get(n)) {
    chain.push(n);
    seen.add(n);
  }
  if (chain.length <= max) return chain;
  const at = chain.indexOf(id);
  const from = Math.max(0, Math.min(at - Math.floor(max / 2), chain.length - max));
  return chain.slice(from, from + max);
}

// stepTree orders a run's steps for drawing: each step of the run itself
// (depth 0) followed by the steps of the subagent its task call ran
// (parentToolCallId), nested deeper, in start order.
export function stepTree(steps) {
  const ordered = steps.slice().sort((a, b) => ms(a.startedAt) - ms(b.startedAt));
  const calls = new Set(ordered.filter((s) => s.kind === 'tool' && s.toolCallId).map((s) => s.toolCallId));
  const children = new Map();
  const roots = [];
  for (const s of ordered) {
    const p = s.parentToolCallId;
    if (p && calls.has(p)) {
      if (!children.has(p)) children.set(p, []);
      children.get(p).push(s);
    } else {
      roots.push(s);
    }
  }
  const out = [];
  const seen = new Set();
  const walk = (s, depth) => {
    if (seen.has(s)) return;
    seen.add(s);
    out.push({ step: s, depth });
    if (s.kind === 'tool' && s.toolCallId) for (const c of children.get(s.toolCallId) || []) walk(c, depth + 1);
  };
  for (const s of roots) walk(s, 0);
  return out;
}

// waterfall lays runs (details with steps, oldest first, each resuming the
// one before it) on one axis. Within a run the axis is linear time
// (left = startedAt - run start, width = durationMs), on one scale for
// every run; the wait between a paused run and the run that resumed it is
// a gap of fixed width, whatever its length. Positions are percentages of
// the axis. now ends runs still running.
export function waterfall(runs, now = Date.now()) {
  const segs = runs.map((r) => {
    const start = ms(r.startedAt);
    let end = r.endedAt ? ms(r.endedAt) : (r.durationMs != null ? start + r.durationMs : now);
    for (const s of r.steps || []) end = Math.max(end, ms(s.startedAt) + (s.durationMs || 0));
    return { run: r, start, end, dur: Math.max(end - start, 1) };
  });
  const busy = segs.reduce((a, s) => a + s.dur, 0);
  const gapW = segs.length > 1 ? Math.max(busy * 0.18, 1) : 0;
  let x = 0;
  for (let i = 0; i < segs.length; i++) {
    segs[i].offset = x;
    x += segs[i].dur + (i < segs.length - 1 ? gapW : 0);
  }
  const total = Math.max(x, 1);
  const pct = (v) => (v / total) * 100;
  const rows = [];
  const gaps = [];
  segs.forEach((seg, i) => {
    rows.push({ kind: 'run', run: seg.run, depth: 0, left: pct(seg.offset), width: pct(seg.dur), durationMs: seg.end - seg.start });
    for (const { step, depth } of stepTree(seg.run.steps || [])) {
      const off = Math.max(0, ms(step.startedAt) - seg.start);
      rows.push({ kind: step.kind, step, run: seg.run, depth: depth + 1,
        left: pct(seg.offset + off), width: pct(Math.max(0, step.durationMs || 0)), durationMs: step.durationMs || 0 });
    }
    const nxt = segs[i + 1];
    if (nxt) {
      const decisions = new Map();
      for (const d of [...(seg.run.decisions || []), ...(nxt.run.decisions || [])]) decisions.set(d.id || `${d.toolCallId}-${d.kind}`, d);
      gaps.push({ from: seg.run, to: nxt.run, left: pct(seg.offset + seg.dur), width: pct(gapW),
        waitedMs: Math.max(0, nxt.start - seg.end), decisions: [...decisions.values()] });
    }
  });
  // Ticks: one round step on the shared scale, counted from each run's start.
  const step = niceStep(busy / 8);
  const ticks = [];
  for (const seg of segs) {
    for (let t = 0; t <= seg.dur + 1e-9; t += step) ticks.push({ left: pct(seg.offset + t), label: fmtMs(t), run: seg.run.id });
  }
  return { rows, gaps, ticks, segs };
}

// ---------- Usage ----------

// days lists the UTC days from..to (YYYY-MM-DD), at most max of them; none
// when the span is longer.
export function days(from, to, max = 120) {
  const a = new Date(from);
  const b = new Date(to);
  if (!Number.isFinite(a.getTime()) || !Number.isFinite(b.getTime())) return [];
  const out = [];
  const d = new Date(Date.UTC(a.getUTCFullYear(), a.getUTCMonth(), a.getUTCDate()));
  // An end at midnight (exclusive) does not add its day.
  let end = b.getTime();
  if (end > a.getTime() && end % 86400000 === 0) end -= 1;
  while (d.getTime() <= end) {
    out.push(d.toISOString().slice(0, 10));
    if (out.length > max) return [];
    d.setUTCDate(d.getUTCDate() + 1);
  }
  return out;
}

// dayKey is the YYYY-MM-DD of a day group ("2026-03-01" or a timestamp).
export function dayKey(group) {
  const s = String(group || '');
  if (/^\d{4}-\d{2}-\d{2}/.test(s)) return s.slice(0, 10);
  const t = new Date(s);
  return Number.isFinite(t.getTime()) ? t.toISOString().slice(0, 10) : s;
}
