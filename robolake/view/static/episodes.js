// robolake view, episodes page: the table of every episode, filtered, sorted and paged by the
// server (/api/episodes), so the browser only ever holds one page. The query lives in the URL.
"use strict";

(() => {
  const { PAGE, el, fmtNum, fmtBool, getJSON, nav, fillTable, episodeURL } = robolake;
  const form = document.getElementById("filters");
  const state = { text: "", embodiment: "", success: "", where: "", sort: "episode_id", desc: false, offset: 0, limit: 50 };
  const view = { total: null, rows: [], query: state, loaded: null };
  window.robolakeView = view;

  const columns = [
    { key: "episode_id", label: "episode", render: (r) => el("a", { href: episodeURL(r.episode_id), class: "mono" }, r.episode_id) },
    { key: "task", label: "task" },
    { key: "embodiment", label: "embodiment" },
    { key: "num_steps", label: "length", class: "num" },
    { key: "duration_s", label: "duration (s)", class: "num", render: (r) => fmtNum(r.duration_s) },
    { key: "source_file", label: "source file", class: "mono", sort: false },
    { key: "source_format", label: "format" },
    { key: "ingest_version", label: "ingest version", class: "num" },
    { key: "success", label: "success", render: (r) => fmtBool(r.success) },
    // the checks that flag the episode by its own quality (robolake doctor's rules); "—" when not measured
    { key: "quality_flags", label: "quality", sort: false, render: (r) => r.quality_flags === null || r.quality_flags === undefined ? "—" : (r.quality_flags.length ? el("span", { class: "flags" }, r.quality_flags.join(", ")) : "ok") },
  ];

  function fromURL() {
    const q = new URLSearchParams(location.search);
    for (const k of ["text", "embodiment", "success", "where", "sort"]) if (q.has(k)) state[k] = q.get(k);
    state.desc = q.get("desc") === "1";
    state.offset = Math.max(0, Number(q.get("offset") || 0) || 0);
    state.limit = Math.min(500, Math.max(1, Number(q.get("limit") || 50) || 50));
    for (const k of ["text", "embodiment", "success", "where"]) form.elements[k].value = state[k];
  }

  function params() {
    const q = new URLSearchParams();
    for (const k of ["text", "embodiment", "success", "where"]) if (state[k]) q.set(k, state[k]);
    if (state.sort !== "episode_id") q.set("sort", state.sort);
    if (state.desc) q.set("desc", "1");
    if (state.offset) q.set("offset", String(state.offset));
    if (state.limit !== 50) q.set("limit", String(state.limit));
    return q;
  }

  async function load() {
    const q = params();
    history.replaceState(null, "", q.toString() ? "?" + q.toString() : location.pathname);
    const status = document.getElementById("status");
    status.className = "status";
    status.textContent = "loading…";
    try {
      const r = await getJSON("/api/episodes?" + q.toString());
      view.total = r.total;
      view.rows = r.rows;
      fillTable(document.getElementById("episodes"), columns, r.rows, { sort: state.sort, desc: state.desc, onSort });
      const last = Math.min(r.offset + r.rows.length, r.total);
      document.getElementById("range").textContent = r.total ? (r.offset + 1) + "–" + last + " of " + fmtNum(r.total) : "no episodes match";
      document.getElementById("prev").disabled = r.offset === 0;
      document.getElementById("next").disabled = last >= r.total;
      status.textContent = fmtNum(r.total) + " episode" + (r.total === 1 ? "" : "s");
    } catch (e) {
      status.className = "status error";
      status.textContent = e.message;
    }
  }

  function onSort(key) {
    if (state.sort === key) state.desc = !state.desc; else { state.sort = key; state.desc = false; }
    state.offset = 0;
    view.loaded = load();
  }

  nav();
  const emb = form.elements.embodiment;
  for (const name of PAGE.data.embodiments) emb.append(el("option", { value: name }, name));
  fromURL();
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    for (const k of ["text", "embodiment", "success", "where"]) state[k] = form.elements[k].value.trim();
    state.offset = 0;
    view.loaded = load();
  });
  for (const k of ["embodiment", "success"]) form.elements[k].addEventListener("change", () => form.requestSubmit());
  document.getElementById("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); view.loaded = load(); });
  document.getElementById("next").addEventListener("click", () => { state.offset += state.limit; view.loaded = load(); });
  view.loaded = load();
})();
