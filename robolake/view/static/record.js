// robolake view, episode page: the record of the episode's other streams. Each numeric stream is
// plotted from the record at its own rate, every message on the steps' time axis (past two
// messages a pixel the server sends each pixel's min and max, in order; zooming asks again for
// the narrower span, so detail comes back), with the step ticks along the bottom and the cursor
// at the step shown. Events are markers on their own plot on the same axis: a flag's transitions
// (true green, false red), labels where they change (their text drawn on the canvas, never as
// HTML), triggers. A picker chooses the streams plotted. Drag across a plot to zoom every record
// plot; double-click to see the whole episode again.
//   robolakeView.record.ready     -> Promise (catalog read and the first plots drawn)
//   robolakeView.record.catalog   -> what /api/record answered
//   robolakeView.record.plotted() -> [{stream, decimated, count, in_view, points, series, shown}]
//   robolakeView.record.drawn     -> {markers: {stream: markers drawn}, labels: n, ticks: {stream: n}}
//   robolakeView.record.show(stream, on) -> Promise (plot or drop a stream)
"use strict";

(() => {
  const { PAGE, PALETTE, el, clear, fmtNum, apiURL, getJSON } = robolake;
  const view = window.robolakeView;
  const D = PAGE.data;
  const SHOWN = 4;  // streams plotted at first
  const FILTER_PAST = 12;  // more streams than this: the picker gets a filter box
  const EVENT_LINES = 200;  // event markers also drawn across the stream plots, up to this many
  const SYNC = "robolake-record";
  const Y_AXIS = 120;  // every record plot's y axis is this wide, so their time axes line up
  const LANE_COLORS = ["#1f77b4", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];  // no red/green: those are a flag's false/true
  const rec = {
    catalog: null, plots: new Map(), events: null, full: null, span: null, ready: null,
    drawn: { markers: {}, labels: 0, ticks: {} },
  };
  view.record = rec;
  view.extraPlots = view.extraPlots || [];

  const status = () => document.getElementById("record-status");
  function say(text, bad) {
    const s = status();
    s.textContent = text;
    s.classList.toggle("error", !!bad);
  }

  // --- the shared time axis ----------------------------------------------------------------
  function extend(lo, hi) {
    if (!(Number.isFinite(lo) && Number.isFinite(hi))) return false;
    const f = rec.full;
    const next = f ? [Math.min(f[0], lo), Math.max(f[1], hi)] : [lo, hi];
    const zoomed = rec.span && f && (rec.span[0] !== f[0] || rec.span[1] !== f[1]);
    rec.full = next;
    if (!zoomed) rec.span = next.slice();
    return !f || next[0] !== f[0] || next[1] !== f[1];
  }

  function xRange() { return rec.span ? rec.span.slice() : [0, 1]; }

  function yRange(u, min, max) {
    if (min === null || max === null) return [-1, 1];
    if (min === max) return [min - 1, max + 1];
    return uPlot.rangeNum(min, max, 0.1, true);
  }

  function allPlots() {
    const out = [...rec.plots.values()].map((p) => p.u);
    if (rec.events) out.push(rec.events.u);
    return out;
  }

  let zoomToken = 0;
  async function zoom(lo, hi) {
    if (!(hi > lo)) return;
    rec.span = [lo, hi];
    const mine = ++zoomToken;
    for (const u of allPlots()) u.setScale("x", { min: lo, max: hi });
    for (const p of view.extraPlots) placeCursor(p);
    const whole = rec.full && lo <= rec.full[0] && hi >= rec.full[1];
    await Promise.all([...rec.plots.values()].map((p) => load(p, whole ? null : [lo, hi], mine)));
  }

  function zoomFromSelect(u) {
    const s = u.select;
    if (s.width > 3) zoom(u.posToVal(s.left, "x"), u.posToVal(s.left + s.width, "x"));
    u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
  }

  // --- what is drawn over every record plot: step ticks, event lines -------------------------
  function drawTicks(u, name) {
    const ts = view.timestamps;
    if (!ts) return;
    const [lo, hi] = [u.scales.x.min, u.scales.x.max];
    const { top, height } = u.bbox;
    const ctx = u.ctx;
    const y0 = top + height, y1 = y0 - 9 * uPlot.pxRatio;
    let n = 0;
    ctx.save();
    ctx.strokeStyle = "rgba(11, 107, 203, 0.75)";
    ctx.lineWidth = Math.max(1, uPlot.pxRatio);
    ctx.beginPath();
    for (let i = 0; i < ts.length; i++) {
      if (ts[i] < lo || ts[i] > hi) continue;
      const x = Math.round(u.valToPos(ts[i], "x", true)) + 0.5;
      ctx.moveTo(x, y0);
      ctx.lineTo(x, y1);
      n++;
    }
    ctx.stroke();
    ctx.restore();
    rec.drawn.ticks[name] = n;
  }

  function eventColor(i) { return LANE_COLORS[i % LANE_COLORS.length]; }

  function drawEventLines(u) {
    const evs = (rec.catalog && rec.catalog.events) || [];
    if (evs.reduce((n, e) => n + e.t.length, 0) > EVENT_LINES) return;
    const { top, height } = u.bbox;
    const ctx = u.ctx;
    ctx.save();
    ctx.setLineDash([3 * uPlot.pxRatio, 3 * uPlot.pxRatio]);
    evs.forEach((e, i) => {
      ctx.strokeStyle = eventColor(i);
      ctx.globalAlpha = 0.55;
      ctx.beginPath();
      for (const t of e.t) {
        if (t < u.scales.x.min || t > u.scales.x.max) continue;
        const x = Math.round(u.valToPos(t, "x", true)) + 0.5;
        ctx.moveTo(x, top);
        ctx.lineTo(x, top + height);
      }
      ctx.stroke();
    });
    ctx.restore();
  }

  function cursorLine(u) {
    const line = el("div", { class: "step-cursor" });
    u.over.append(line);
    u.over.addEventListener("click", () => {
      const t = u.posToVal(u.cursor.left, "x");
      if (view.timestamps && Number.isFinite(t)) view.setStep(nearest(t));
    });
    u.over.addEventListener("dblclick", () => { if (rec.full) zoom(rec.full[0], rec.full[1]); });
    const p = { u, line };
    view.extraPlots.push(p);
    placeCursor(p);
    return p;
  }

  function placeCursor(p) {
    if (!view.timestamps) return;
    p.line.style.left = p.u.valToPos(view.timestamps[view.step], "x") + "px";
  }

  function nearest(t) {
    const ts = view.timestamps;
    let lo = 0, hi = ts.length - 1;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (ts[mid] < t) lo = mid + 1; else hi = mid; }
    return lo > 0 && Math.abs(ts[lo - 1] - t) < Math.abs(ts[lo] - t) ? lo - 1 : lo;
  }

  // --- one numeric stream ------------------------------------------------------------------
  function describe(s) {
    return s.name + " · " + fmtNum(s.rate_hz, 1) + " Hz · " + fmtNum(s.count) + " messages" +
      (s.gaps ? " · " + s.gaps.count + " gap(s), longest " + fmtNum(s.gaps.longest_s, 3) + " s" : "");
  }

  function seriesOf(d) {
    const multi = new Set(d.series.map((s) => s.part)).size > 1;
    return [{ label: "t (s)", value: (u, v) => (v === null ? "—" : v.toFixed(3)) }].concat(d.series.map((s, i) => ({
      label: s.label, show: !s.hidden, stroke: PALETTE[i % PALETTE.length], width: 1, spanGaps: multi,
      value: (u, v) => (v === null || v === undefined ? "—" : Number(v.toPrecision(6)).toString()),
    })));
  }

  function note(p, d) {
    const how = d.decimated
      ? fmtNum(d.in_view) + " messages in view, drawn as the min and max of each of " + d.bucket_counts.length + " pixel columns"
      : fmtNum(d.in_view) + " messages in view, every one drawn";
    p.note.textContent = how + (d.omitted_series ? " · " + d.omitted_series + " more series not sent" : "") +
      " · blue ticks along the bottom: the steps";
  }

  async function load(p, span, token) {
    const params = { id: D.episode_id, stream: p.name, px: String(Math.max(50, Math.round(p.u.bbox.width / uPlot.pxRatio))) };
    if (span) { params.from = String(span[0]); params.to = String(span[1]); }
    const d = await getJSON(apiURL("/api/signal", params));
    if (token !== undefined && token !== zoomToken) return;
    p.data = d;
    p.u.setData([d.x, ...d.values], false);
    p.u.setScale("x", { min: xRange()[0], max: xRange()[1] });
    placeCursor(p.cursor);
    note(p, d);
  }

  async function plot(name) {
    const s = rec.catalog.streams.find((x) => x.name === name);
    const holder = el("div", { class: "plot", dataset: { stream: name } }, el("div", { class: "title" }, describe(s)));
    const noteEl = el("div", { class: "muted note" }, "loading…");
    holder.append(noteEl);
    document.getElementById("record-plots").append(holder);
    const d = await getJSON(apiURL("/api/signal", {
      id: D.episode_id, stream: name, px: String(Math.max(50, holder.clientWidth - 80)),
    }));
    if (d.x.length && extend(d.x[0], d.x[d.x.length - 1])) for (const u of allPlots()) u.setScale("x", { min: xRange()[0], max: xRange()[1] });
    const u = new uPlot({
      width: Math.max(360, holder.clientWidth - 10), height: 170, series: seriesOf(d), legend: { live: true },
      scales: { x: { time: false, range: xRange }, y: { range: yRange } }, axes: [{ size: 28 }, { size: Y_AXIS }],
      cursor: { drag: { x: true, y: false, setScale: false }, sync: { key: SYNC } },
      hooks: { draw: [(u) => drawTicks(u, name), drawEventLines], setSelect: [zoomFromSelect] },
    }, [d.x, ...d.values], holder);
    const p = { name, u, holder, note: noteEl, data: d, cursor: cursorLine(u) };
    rec.plots.set(name, p);
    note(p, d);
    if (rec.span && rec.full && (rec.span[0] > rec.full[0] || rec.span[1] < rec.full[1])) await load(p, rec.span, zoomToken);
    return p;
  }

  function drop(name) {
    const p = rec.plots.get(name);
    if (!p) return;
    p.u.destroy();
    p.holder.remove();
    view.extraPlots.splice(view.extraPlots.indexOf(p.cursor), 1);
    rec.plots.delete(name);
    delete rec.drawn.ticks[name];
  }

  async function show(name, on) {
    const box = document.querySelector('#record-picker input[data-stream="' + CSS.escape(name) + '"]');
    if (box) box.checked = on;
    if (on && !rec.plots.has(name)) await plot(name);
    if (!on) drop(name);
  }
  rec.show = show;

  rec.plotted = () => [...rec.plots.values()].map((p) => ({
    stream: p.name, decimated: p.data.decimated, count: p.data.count, in_view: p.data.in_view,
    points: p.u.data[0].length, series: p.data.series.map((s) => s.label),
    shown: p.u.series.slice(1).filter((s) => s.show).map((s) => s.label),
  }));

  // --- events ------------------------------------------------------------------------------
  function eventsPlot(evs) {
    const box = clear(document.getElementById("events-plot"));
    if (!evs.length) return;
    const lanes = evs.map((e) => e.name);
    const xs = [...new Set(evs.flatMap((e) => e.t))].sort((a, b) => a - b);
    const at = new Map(xs.map((t, i) => [t, i]));
    const series = [{ label: "t (s)", value: (u, v) => (v === null ? "—" : v.toFixed(3)) }];
    const data = [xs];
    const lane = (i) => lanes.length - i;
    evs.forEach((e, i) => {
      const groups = e.kind === "bool" ? [["true", "#1e8449"], ["false", "#c0392b"]] : [[null, eventColor(i)]];
      for (const [value, color] of groups) {
        const ys = new Array(xs.length).fill(null);
        e.t.forEach((t, k) => { if (value === null || e.value[k] === value) ys[at.get(t)] = lane(i); });
        data.push(ys);
        series.push({
          label: e.name + (value === null ? "" : " = " + value), stroke: color, fill: color, width: 0,
          paths: () => null, points: { show: true, size: 9, width: 1, stroke: color, fill: color },
          value: (u, v) => (v === null ? "—" : "●"),
        });
      }
      extend(e.t[0], e.t[e.t.length - 1]);
    });
    const holder = el("div", { class: "plot" }, el("div", { class: "title" }, "events · " +
      evs.map((e) => e.name + " (" + e.kind + ", " + fmtNum(e.count) + ")").join(" · ")));
    box.append(holder);
    const u = new uPlot({
      width: Math.max(360, holder.clientWidth - 10), height: 40 + 26 * lanes.length, series, legend: { show: false },
      scales: { x: { time: false, range: xRange }, y: { range: () => [0.4, lanes.length + 0.6] } },
      axes: [{ size: 28 }, {
        size: Y_AXIS, splits: () => lanes.map((_, i) => lane(i)),
        values: (u, splits) => splits.map((s) => { const n = lanes[lanes.length - s] || ""; return n.length > 18 ? "…" + n.slice(-17) : n; }),
      }],
      cursor: { drag: { x: true, y: false, setScale: false }, sync: { key: SYNC }, points: { show: false } },
      hooks: { draw: [(u) => drawTicks(u, "events"), (u) => drawLabels(u, evs, lane)], setSelect: [zoomFromSelect] },
    }, data, holder);
    rec.events = { u, holder, cursor: cursorLine(u) };
  }

  // Labels (and a count of the markers in view) drawn on the canvas: text from the lake is
  // painted as pixels, never parsed as markup. A label that would overlap the one before is skipped.
  function drawLabels(u, evs, lane) {
    const ctx = u.ctx;
    const [lo, hi] = [u.scales.x.min, u.scales.x.max];
    let labels = 0;
    ctx.save();
    ctx.font = 11 * uPlot.pxRatio + "px system-ui, sans-serif";
    ctx.fillStyle = "#333";
    evs.forEach((e, i) => {
      let shown = 0, end = -Infinity;
      const y = u.valToPos(lane(i), "y", true) - 6 * uPlot.pxRatio;
      e.t.forEach((t, k) => {
        if (t < lo || t > hi) return;
        shown++;
        const text = e.value[k];
        if (text === null || e.kind === "bool") return;
        const x = u.valToPos(t, "x", true) + 6 * uPlot.pxRatio;
        if (x < end) return;
        const cut = text.length > 40 ? text.slice(0, 39) + "…" : text;
        ctx.fillText(cut, x, y);
        end = x + ctx.measureText(cut).width + 8 * uPlot.pxRatio;
        labels++;
      });
      rec.drawn.markers[e.name] = shown;
    });
    ctx.restore();
    rec.drawn.labels = labels;
  }

  // --- the picker --------------------------------------------------------------------------
  function picker(streams, chosen) {
    const box = clear(document.getElementById("record-picker"));
    if (!streams.length) return;
    const list = el("div", { class: "picker" });
    for (const s of streams) {
      const input = el("input", { type: "checkbox", dataset: { stream: s.name } });
      input.checked = chosen.includes(s.name);
      input.addEventListener("change", () => show(s.name, input.checked).catch((e) => say("error: " + e.message, true)));
      list.append(el("label", { class: "chip", title: describe(s), dataset: { stream: s.name } }, input, " " + s.name));
    }
    if (streams.length > FILTER_PAST) {
      const filter = el("input", { type: "search", placeholder: "filter streams", "aria-label": "filter streams" });
      filter.addEventListener("input", () => {
        const q = filter.value.toLowerCase();
        for (const l of list.children) l.style.display = l.dataset.stream.toLowerCase().includes(q) ? "" : "none";
      });
      box.append(filter);
    }
    box.append(list);
  }

  // --- start -------------------------------------------------------------------------------
  rec.ready = (async () => {
    say("reading the record…");
    const cat = await getJSON(apiURL("/api/record", { id: D.episode_id }));
    rec.catalog = cat;
    await view.ready.catch(() => {});
    const ts = view.timestamps;
    if (ts && ts.length) extend(ts[0], ts[ts.length - 1]);
    if (!cat.streams.length && !cat.events.length) {
      say("this episode keeps no record of other streams (ingested before the record was kept, or its source has none)");
      return;
    }
    const chosen = cat.streams.slice(0, SHOWN).map((s) => s.name);
    picker(cat.streams, chosen);
    eventsPlot(cat.events);
    for (const name of chosen) await plot(name);
    for (const u of allPlots()) u.setScale("x", { min: xRange()[0], max: xRange()[1] });
    for (const p of view.extraPlots) placeCursor(p);
    say(cat.streams.length + " streams recorded, " + chosen.length + " plotted (pick others above); " +
      cat.events.length + " event streams. Drag across a plot to zoom, double-click for the whole episode.");
    document.body.dataset.recordReady = "1";
  })().catch((e) => {
    document.body.dataset.recordReady = "error";
    say("error: " + e.message, true);
    throw e;
  });
})();
