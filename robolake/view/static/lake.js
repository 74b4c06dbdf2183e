// robolake view, lake page: counts, versions (with what each added or removed, fetched after
// the first paint), tags, embodiments with their layout and statistics, quarantine by reason.
"use strict";

(() => {
  const { PAGE, PALETTE, el, clear, fmtNum, fmtTime, getJSON, nav, simpleTable } = robolake;
  const D = PAGE.data;
  window.robolakeView = { lake: D, changes: null };

  function overview() {
    const at = "version " + D.version + (D.tag ? " · tag " + D.tag.name + (D.tag.episodes === null ? "" : " (" + D.tag.episodes + " episodes)") : "");
    const c = D.counts;
    const cards = [["episodes", c.episodes], ["steps", c.steps], ["frames", c.media], ["embodiments", c.embodiments], ["quarantined", c.quarantine], ["versions", D.versions.length], ["tags", D.tags.length]];
    document.getElementById("overview").append(
      el("h1", {}, D.uri),
      el("div", { class: "muted" }, at),
      el("div", { class: "cards" }, cards.map(([k, n]) => el("div", { class: "card", dataset: { count: k } }, el("div", { class: "n" }, fmtNum(n)), el("div", { class: "k" }, k)))),
    );
  }

  // A count, never the ids (an ingest can add 100,000): the added ones link to the episodes
  // table filtered to those this version brought in that the shown version still holds.
  function added(total, version) {
    if (!total) return "—";
    const q = new URLSearchParams({ where: "ingest_version = " + version });
    return el("span", {}, fmtNum(total) + " · ", el("a", { href: "/episodes?" + q.toString(), class: "episodes-link" }, "show"));
  }

  function removed(total) {
    return total ? fmtNum(total) : "—";
  }

  function versions(changes) {
    const byVersion = new Map((changes || []).map((x) => [x.version, x]));
    const pending = changes === null;
    const cols = [
      { key: "version", label: "version", render: (v) => (v.version === D.version ? "▶ " : "") + v.version },
      { key: "operation", label: "operation" },
      { key: "created_at", label: "published", render: (v) => fmtTime(v.created_at) },
      { key: "who", label: "who / why", render: (v) => [v.who, v.reason].filter(Boolean).join(" · ") || "—" },
      { key: "added", label: "episodes added", render: (v) => { const x = byVersion.get(v.version); return pending ? "…" : (x && x.error ? x.error : added(x.added, v.version)); } },
      { key: "removed", label: "episodes removed", render: (v) => { const x = byVersion.get(v.version); return pending ? "…" : (x && x.error ? "" : removed(x.removed)); } },
      { key: "tags", label: "tags", render: (v) => v.tags.join(", ") || "—" },
      { key: "summary", label: "summary", class: "mono", render: (v) => Object.entries(v.summary).map(([k, x]) => k + "=" + x).join(" ") },
    ];
    clear(document.getElementById("versions")).append(simpleTable(cols, D.versions.slice().reverse()));
  }

  function tags() {
    const box = document.getElementById("tags");
    if (!D.tags.length) { box.append(el("p", { class: "muted" }, "no tags (robolake tag LAKE NAME)")); return; }
    box.append(simpleTable([
      { key: "name", label: "tag" }, { key: "version", label: "version" },
      { key: "episodes", label: "episodes", render: (t) => (t.episodes === null ? "all " : t.episodes + " of ") + fmtNum(t.version_episodes) + " of version " + t.version },
      { key: "operation", label: "operation" }, { key: "reason", label: "reason" },
      { key: "created_by", label: "by" }, { key: "created_at", label: "created", render: (t) => fmtTime(t.created_at) },
    ], D.tags));
  }

  function slices(list) { return list.map((s) => s.name + " [" + s.start + ":" + s.end + "]").join(", ") || "—"; }

  function statsPlot(holder, title, names, s) {
    if (!s || !s.mean.length) return;
    const xs = names.map((_, i) => i);
    const lo = s.mean.map((m, i) => m - s.std[i]), hi = s.mean.map((m, i) => m + s.std[i]);
    const box = el("div", { class: "plot" }, el("div", { class: "title" }, title + " (" + fmtNum(s.count) + " steps)"));
    holder.append(box);
    const pts = { show: true, size: 4 };
    new uPlot({
      width: Math.max(440, box.clientWidth - 10), height: 170, legend: { live: true },
      scales: { x: { time: false } }, axes: [{ size: 28 }, { size: 50 }],
      series: [
        { label: "joint", value: (u, v) => (v === null ? "—" : names[v] || String(v)) },
        { label: "mean", stroke: PALETTE[0], width: 2, points: pts },
        { label: "mean−std", stroke: PALETTE[0], dash: [4, 3], width: 1, points: { show: false } },
        { label: "mean+std", stroke: PALETTE[0], dash: [4, 3], width: 1, points: { show: false } },
        { label: "q01", stroke: PALETTE[3], width: 1, points: pts },
        { label: "q99", stroke: PALETTE[2], width: 1, points: pts },
      ],
    }, [xs, s.mean, lo, hi, s.q01, s.q99], box);
  }

  function embodiments() {
    const box = document.getElementById("embodiments");
    if (!D.embodiments.length) { box.append(el("p", { class: "muted" }, "no embodiments yet")); return; }
    for (const e of D.embodiments) {
      const sec = el("div", { class: "embodiment", dataset: { embodiment: e.embodiment } },
        el("h3", {}, e.embodiment + (e.robot_type ? " (" + e.robot_type + ")" : "")),
        el("dl", { class: "facts" },
          el("dt", {}, "episodes / steps"), el("dd", {}, fmtNum(e.episodes) + " / " + fmtNum(e.steps)),
          el("dt", {}, "cameras"), el("dd", {}, e.cameras.join(", ") || "—"),
          el("dt", {}, "fps"), el("dd", {}, fmtNum(e.fps, 1)),
          el("dt", {}, "state (" + e.state_dim + ")"), el("dd", {}, slices(e.state_slices)),
          el("dt", {}, "action (" + e.action_dim + ")"), el("dd", {}, slices(e.action_slices)),
        ));
      const plots = el("div", { class: "stats-plots" });
      sec.append(plots);
      box.append(sec);
      if (e.stats) {
        statsPlot(plots, "state statistics per joint", e.state_names, e.stats.state);
        statsPlot(plots, "action statistics per joint", e.action_names, e.stats.action);
      } else {
        plots.append(el("p", { class: "muted" }, "no statistics recorded"));
      }
    }
  }

  function quarantine() {
    const box = document.getElementById("quarantine-summary");
    const rows = Object.entries(D.quarantine).map(([reason, n]) => ({ reason, n }));
    if (!rows.length) { box.append(el("p", { class: "muted" }, "empty: every input was ingested")); return; }
    box.append(simpleTable([
      { key: "reason", label: "reason code", render: (r) => el("a", { href: "/quarantine?reason=" + encodeURIComponent(r.reason) }, r.reason) },
      { key: "n", label: "items", class: "num" },
    ], rows));
  }

  nav();
  overview();
  versions(null);
  tags();
  embodiments();
  quarantine();
  getJSON("/api/versions").then((changes) => { window.robolakeView.changes = changes; versions(changes); })
    .catch((e) => { document.getElementById("versions").prepend(el("p", { class: "status error" }, "changes unavailable: " + e.message)); });
})();
