// robolake view, quarantine page: every input that could not be ingested, with its reason code,
// the file at fault and the sentence saying what to do; paged by the server (/api/quarantine).
"use strict";

(() => {
  const { PAGE, el, fmtNum, fmtTime, getJSON, nav, fillTable } = robolake;
  const form = document.getElementById("filters");
  const state = { reason: new URLSearchParams(location.search).get("reason") || "", offset: 0, limit: 100 };
  const view = { total: null, rows: [], loaded: null };
  window.robolakeView = view;

  const columns = [
    { key: "reason_code", label: "reason code", class: "mono" },
    { key: "source_path", label: "file", class: "mono" },
    { key: "reason", label: "what is wrong, what to do" },
    { key: "source_format", label: "format" },
    { key: "source_episode_index", label: "episode", class: "num", render: (r) => (r.source_episode_index < 0 ? "—" : r.source_episode_index) },
    { key: "quarantined_at", label: "when", render: (r) => fmtTime(r.quarantined_at / 1e9) },
  ];

  async function load() {
    const q = new URLSearchParams({ offset: String(state.offset), limit: String(state.limit) });
    if (state.reason) q.set("reason", state.reason);
    history.replaceState(null, "", state.reason ? "?reason=" + encodeURIComponent(state.reason) : location.pathname);
    const status = document.getElementById("status");
    try {
      const r = await getJSON("/api/quarantine?" + q.toString());
      view.total = r.total;
      view.rows = r.rows;
      fillTable(document.getElementById("quarantine"), columns, r.rows);
      const last = Math.min(r.offset + r.rows.length, r.total);
      document.getElementById("range").textContent = r.total ? (r.offset + 1) + "–" + last + " of " + fmtNum(r.total) : "";
      document.getElementById("prev").disabled = r.offset === 0;
      document.getElementById("next").disabled = last >= r.total;
      status.className = "status";
      status.textContent = r.total ? fmtNum(r.total) + " quarantined item" + (r.total === 1 ? "" : "s") : "the quarantine is empty: every input was ingested";
    } catch (e) {
      status.className = "status error";
      status.textContent = e.message;
    }
  }

  nav();
  const sel = form.elements.reason;
  for (const [reason, n] of Object.entries(PAGE.data.reasons)) sel.append(el("option", { value: reason }, reason + " (" + n + ")"));
  sel.value = state.reason;
  sel.addEventListener("change", () => { state.reason = sel.value; state.offset = 0; view.loaded = load(); });
  form.addEventListener("submit", (e) => e.preventDefault());
  document.getElementById("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); view.loaded = load(); });
  document.getElementById("next").addEventListener("click", () => { state.offset += state.limit; view.loaded = load(); });
  view.loaded = load();
})();
