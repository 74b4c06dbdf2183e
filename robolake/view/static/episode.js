// robolake view, episode page: every camera's frame at one step, play/pause and a scrubber,
// state and action plots (one per modality.json slice, one series per joint) with a cursor at
// the step shown. `window.robolakeView` exposes what the page shows, for tests and the console:
//   robolakeView.setStep(k) -> Promise (resolves once every camera shows frame k)
//   robolakeView.plotted()  -> [{kind, group, dims, values: [[...per step] per dim]}] (what the plots hold)
//   robolakeView.timings    -> {ready_ms, ...} (navigation start to first frame + plots drawn)
//   robolakeView.extraPlots -> [{u, line}] other plots whose step cursor follows (record.js adds them)
"use strict";

(() => {
  const { PAGE, PALETTE, el, clear, fmtNum, fmtBool, fmtTime, apiURL, getJSON, nav } = robolake;
  const D = PAGE.data;
  const view = {
    episode: D, step: 0, playing: false, timestamps: null, state: null, action: null,
    plots: [], images: {}, timings: {}, ready: null, lineage: null,
  };
  window.robolakeView = view;

  function frameURL(camera, step) {
    return apiURL("/api/frame", { id: D.episode_id, camera, step: String(step) });
  }

  // --- header ------------------------------------------------------------------------------
  function header() {
    const h = document.getElementById("header");
    const facts = [
      ["episode", D.episode_id], ["embodiment", D.embodiment],
      ["length", D.num_steps + " steps · " + fmtNum(D.duration_s) + " s at " + fmtNum(D.fps, 1) + " fps"],
      ["success", fmtBool(D.success)],
      ...(D.trim ? [["trimmed", "keeps steps " + D.trim.kept.map((r) => r[0] + "–" + (r[1] - 1)).join(", ") + " of the " + D.trim.frames + " ingested (robolake trim)"]] : []),
      ["source file", D.source_file], ["source format", D.source_format + " (episode " + D.source_episode_index + " of " + D.source_uri + ")"],
      ["source time offset", D.source_time_offset_s === null || D.source_time_offset_s === undefined ? "—" : D.source_time_offset_s + " s (lake t = 0 is source t = " + D.source_time_offset_s + ")"],
      ["ingested", fmtTime(D.ingested_at_ns / 1e9) + " · lake version " + D.ingest_version],
      ["content hash", D.content_hash],
    ];
    const dl = el("dl", { class: "facts" });
    for (const [k, v] of facts) dl.append(el("dt", {}, k), el("dd", { class: k === "content hash" ? "mono" : null }, v));
    const tasks = (D.tasks || []).filter((t) => t !== D.task);
    clear(h).append(
      el("div", { class: "task", id: "task" }, D.task),
      tasks.length ? el("div", { class: "muted" }, "other tasks: " + tasks.join(" · ")) : "",
      dl,
      el("div", {}, el("span", { class: "muted" }, "lineage (lake versions holding it): "), el("span", { id: "lineage" }, "…")),
    );
  }

  async function lineage() {
    const rows = await getJSON(apiURL("/api/lineage", { id: D.episode_id }));
    view.lineage = rows;
    const box = clear(document.getElementById("lineage"));
    for (const r of rows) {
      const cls = "chip " + (r.holds ? "yes" : "no") + (r.version === PAGE.lake.version ? " here" : "");
      box.append(el("span", { class: cls, title: r.operation + (r.holds === null ? " (tables collected)" : "") }, "v" + r.version + " " + r.operation));
    }
  }

  // --- frames ------------------------------------------------------------------------------
  function cameras() {
    const box = clear(document.getElementById("cameras"));
    for (const c of D.cameras) {
      const img = el("img", { alt: c.name + " frame", "data-camera": c.name, width: c.width || 256, height: c.height || 256 });
      view.images[c.name] = img;
      box.append(el("div", { class: "camera" }, el("figure", {}, img, el("figcaption", {}, c.name + " · " + (c.width || "?") + "×" + (c.height || "?") + " · " + c.encoding))));
    }
    if (!D.cameras.length) box.append(el("p", { class: "muted" }, "this episode has no camera frames"));
  }

  // Frames are fetched and decoded off-screen, READ_AHEAD steps ahead of the one shown, so
  // playing or stepping forward finds the next frame already in the browser's cache.
  const READ_AHEAD = 8;
  const loading = new Map();  // frame URL -> Promise of its decoded Image
  function load(url) {
    let p = loading.get(url);
    if (p === undefined) {
      const im = new Image();
      im.src = url;
      p = im.decode().then(() => im);
      p.catch(() => loading.delete(url));
      loading.set(url, p);
      if (loading.size > 32 * Math.max(1, D.cameras.length)) loading.delete(loading.keys().next().value);
    }
    return p;
  }
  function readAhead(step) {
    for (let k = step + 1; k <= Math.min(D.num_steps - 1, step + READ_AHEAD); k++) {
      for (const c of D.cameras) load(frameURL(c.name, k));
    }
  }

  let token = 0;
  async function setStep(k) {
    const step = Math.max(0, Math.min(D.num_steps - 1, Math.round(k)));
    const mine = ++token;
    view.step = step;
    document.getElementById("scrubber").value = String(step);
    const t = view.timestamps ? view.timestamps[step] : null;
    const off = D.source_time_offset_s || 0;
    document.getElementById("position").textContent =
      "step " + step + " / " + (D.num_steps - 1) + (t === null ? "" : " · t = " + t.toFixed(3) + " s · source t = " + (t + off).toFixed(3) + " s");
    moveCursors();
    // Decode off-screen, then swap: the shown frame never goes blank between steps.
    const shown = D.cameras.map(async (c) => {
      const url = frameURL(c.name, step);
      try { await load(url); } catch (e) { if (mine === token) throw e; return; }
      if (mine !== token) return;
      const img = view.images[c.name];
      img.src = url;
      await img.decode().catch(() => {});
    });
    readAhead(step);
    await Promise.all(shown);
    return step;
  }
  view.setStep = setStep;

  function play() {
    view.playing = !view.playing;
    document.getElementById("play").textContent = view.playing ? "❚❚ pause" : "▶ play";
    if (!view.playing) return;
    const period = 1000 / (D.fps || 20);
    (async function loop() {
      while (view.playing) {
        const start = performance.now();
        const next = view.step + 1 >= D.num_steps ? 0 : view.step + 1;
        await setStep(next);
        const wait = period - (performance.now() - start);
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
    })();
  }

  function controls() {
    const s = document.getElementById("scrubber");
    s.max = String(Math.max(0, D.num_steps - 1));
    s.addEventListener("input", () => { if (view.playing) play(); setStep(Number(s.value)); });
    document.getElementById("play").addEventListener("click", play);
    document.addEventListener("keydown", (e) => {
      if (e.target instanceof HTMLInputElement && e.target.type !== "range") return;
      if (e.key === " ") { e.preventDefault(); play(); }
      else if (e.key === "ArrowRight") { e.preventDefault(); setStep(view.step + 1); }
      else if (e.key === "ArrowLeft") { e.preventDefault(); setStep(view.step - 1); }
    });
  }

  // --- series and plots --------------------------------------------------------------------
  async function loadSeries() {
    const r = await fetch(apiURL("/api/steps", { id: D.episode_id }));
    if (!r.ok) throw new Error("steps: " + r.status);
    const buf = await r.arrayBuffer();
    const [n, sw, aw] = new Uint32Array(buf, 0, 4);
    let off = 16;
    view.timestamps = new Float64Array(buf, off, n); off += 8 * n;
    view.state = new Float32Array(buf, off, n * sw); off += 4 * n * sw;
    view.action = new Float32Array(buf, off, n * aw);
    view.widths = { state: sw, action: aw, steps: n };
  }

  function column(flat, width, dim) {
    const n = view.widths.steps;
    const out = new Array(n);
    for (let i = 0; i < n; i++) out[i] = flat[i * width + dim];
    return out;
  }

  function nearestStep(t) {
    const ts = view.timestamps;
    let lo = 0, hi = ts.length - 1;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (ts[mid] < t) lo = mid + 1; else hi = mid; }
    return lo > 0 && Math.abs(ts[lo - 1] - t) < Math.abs(ts[lo] - t) ? lo - 1 : lo;
  }

  // A constant joint (a leg that never moves) gets a band around its value, not uPlot's 0..100.
  function yRange(u, min, max) {
    if (min === null || max === null) return [-1, 1];
    if (min === max) return [min - 1, max + 1];
    return uPlot.rangeNum(min, max, 0.1, true);
  }

  const onScreen = new Set();
  const watcher = new IntersectionObserver((entries) => {
    for (const e of entries) {
      const p = e.target.robolakePlot;
      if (!e.isIntersecting) { onScreen.delete(p); continue; }
      onScreen.add(p);
      p.u.setLegend({ idx: view.step });
    }
  });

  function plots(kind) {
    const box = clear(document.getElementById(kind + "-plots"));
    const flat = view[kind], width = view.widths[kind], names = D[kind + "_names"];
    const xs = Array.from(view.timestamps);
    for (const g of D[kind + "_groups"]) {
      const holder = el("div", { class: "plot", dataset: { kind, group: g.name } }, el("div", { class: "title" }, kind + " · " + g.name));
      box.append(holder);
      const data = [xs, ...g.dims.map((d) => column(flat, width, d))];
      const series = [{ label: "t (s)", value: (u, v) => (v === null ? "—" : v.toFixed(2)) }].concat(g.dims.map((d, i) => ({
        label: names[d], stroke: PALETTE[i % PALETTE.length], width: 1, points: { show: false },
        value: (u, v) => (v === null || v === undefined ? "—" : v.toFixed(3)),
      })));
      const u = new uPlot({
        width: Math.max(360, holder.clientWidth - 10), height: 150, series, legend: { live: true },
        scales: { x: { time: false }, y: { range: yRange } }, axes: [{ size: 28 }, { size: 46 }], cursor: { drag: { x: false, y: false } },
      }, data, holder);
      const line = el("div", { class: "step-cursor" });
      u.over.append(line);
      u.over.addEventListener("click", (e) => { if (view.playing) play(); setStep(nearestStep(u.posToVal(e.offsetX, "x"))); });
      const plot = { kind, group: g.name, dims: g.dims, u, line };
      view.plots.push(plot);
      holder.robolakePlot = plot;
      watcher.observe(holder);
    }
  }

  function moveCursors() {
    if (!view.timestamps) return;
    const t = view.timestamps[view.step];
    for (const p of view.plots.concat(view.extraPlots || [])) p.line.style.left = p.u.valToPos(t, "x") + "px";
    // Legends read each joint's value at the frame shown; only plots on screen are updated
    // (a legend is DOM work, ~0.5 ms a plot, where the cursor line is one style change).
    for (const p of onScreen) p.u.setLegend({ idx: view.step });
  }

  view.plotted = () => view.plots.map((p) => ({ kind: p.kind, group: p.group, dims: p.dims, values: p.u.data.slice(1) }));

  // what robolake doctor finds in the episode's own quality numbers, and the numbers
  function quality() {
    const box = clear(document.getElementById("quality"));
    const Q = D.quality || { measured: false, findings: [], numbers: {} };
    if (!Q.measured) {
      box.append(el("div", { class: "muted" }, "no quality measured (robolake doctor LAKE --update measures it)"));
      return;
    }
    if (!Q.findings.length) box.append(el("div", {}, "no check flags this episode"));
    const ul = el("ul", { class: "findings" });
    for (const f of Q.findings) {
      const where = f.camera ? " (camera " + f.camera + ")" : f.stream ? " (" + f.stream + ")" : "";
      ul.append(el("li", {}, el("b", {}, f.check), where + ": " + f.detail));
    }
    if (Q.findings.length) box.append(ul);
    const dl = el("dl", { class: "facts" });
    for (const [k, v] of Object.entries(Q.numbers)) dl.append(el("dt", {}, k), el("dd", {}, typeof v === "number" ? fmtNum(v) : String(v)));
    box.append(dl);
  }

  function metadata() {
    document.getElementById("metadata").append(el("pre", { class: "meta" }, JSON.stringify(D.metadata, null, 1)));
  }

  // --- start -------------------------------------------------------------------------------
  nav();
  document.title = "robolake · " + D.episode_id;
  header();
  cameras();
  controls();
  quality();
  metadata();
  lineage().catch((e) => { document.getElementById("lineage").textContent = "unavailable: " + e.message; });
  view.ready = (async () => {
    await loadSeries();
    plots("state");
    plots("action");
    await setStep(0);
    view.timings.ready_ms = performance.now();
    document.body.dataset.ready = "1";
  })().catch((e) => {
    document.body.dataset.ready = "error";
    document.getElementById("position").textContent = "error: " + e.message;
    throw e;
  });
})();
