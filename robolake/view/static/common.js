// robolake view: what every page shares. Text from the lake is only ever set as textContent
// (never innerHTML), so a task string holding markup shows as text.
"use strict";

const robolake = (() => {
  const PAGE = JSON.parse(document.getElementById("robolake-data").textContent);
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      if (k === "class") node.className = v;
      else if (k === "dataset") Object.assign(node.dataset, v);
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v);
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

  function fmtTime(unixSeconds) {
    if (!unixSeconds) return "";
    return new Date(unixSeconds * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
  }

  function fmtNum(x, digits) {
    if (x === null || x === undefined || Number.isNaN(x)) return "—";
    if (Number.isInteger(x)) return x.toLocaleString("en-US");
    return x.toFixed(digits === undefined ? 2 : digits);
  }

  function fmtBool(x) { return x === null || x === undefined ? "—" : (x ? "yes" : "no"); }

  function episodeURL(id) { return "/episode?id=" + encodeURIComponent(id); }

  // Versioned: a frame or series URL names the lake version (and tag) the server shows, so a
  // browser cache never mixes two servers' answers.
  function apiURL(path, params) {
    const q = new URLSearchParams(params);
    q.set("v", String(PAGE.lake.version) + (PAGE.lake.tag ? ":" + PAGE.lake.tag : ""));
    return path + "?" + q.toString();
  }

  async function getJSON(url) {
    const r = await fetch(url);
    const body = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(body.error || (r.status + " " + r.statusText));
    return body;
  }

  function nav() {
    const lake = PAGE.lake;
    const at = "version " + lake.version + (lake.tag ? " (tag " + lake.tag + ")" : "");
    const links = [["lake", "/", "Lake"], ["episodes", "/episodes", "Episodes"], ["quarantine", "/quarantine", "Quarantine"]];
    const n = clear(document.getElementById("nav"));
    n.append(el("span", { class: "brand" }, "robolake view"));
    for (const [page, href, label] of links) {
      n.append(el("a", { href, class: PAGE.page === page ? "here" : null }, label));
    }
    n.append(el("span", { class: "where", title: lake.uri }, lake.uri + " · " + at));
  }

  // A table from column specs [{key, label, render?(row) -> Node|string, sort?}] and rows.
  function table(columns, rows, opts) {
    const o = opts || {};
    const head = el("tr", {}, columns.map((c) => {
      const th = el("th", { dataset: { key: c.key } }, c.label);
      if (o.onSort && c.sort !== false) {
        th.classList.add("sortable");
        if (o.sort === c.key) th.classList.add(o.desc ? "desc" : "asc");
        th.addEventListener("click", () => o.onSort(c.key));
      }
      return th;
    }));
    const body = rows.map((r) => el("tr", {}, columns.map((c) => {
      const v = c.render ? c.render(r) : r[c.key];
      return el("td", { class: c.class || null }, v instanceof Node ? v : (v === null || v === undefined ? "—" : String(v)));
    })));
    return [head, body];
  }

  function fillTable(tableNode, columns, rows, opts) {
    const [head, body] = table(columns, rows, opts);
    clear(tableNode.tHead || tableNode.createTHead()).append(head);
    clear(tableNode.tBodies[0] || tableNode.createTBody()).append(...body);
  }

  function simpleTable(columns, rows) {
    const t = el("table", { class: "grid" }, el("thead"), el("tbody"));
    fillTable(t, columns, rows);
    return t;
  }

  function missingPage() {
    nav();
    const d = PAGE.data;
    document.getElementById("missing").append(
      el("h1", {}, String(d.status) + (d.status === 404 ? " — not in this lake" : d.status === 503 ? " — the lake's data is damaged" : "")),
      el("p", {}, d.error || ""),
      el("p", {}, el("a", { href: "/" }, "back to the lake")),
    );
  }

  return { PAGE, PALETTE, el, clear, fmtTime, fmtNum, fmtBool, episodeURL, apiURL, getJSON, nav, fillTable, simpleTable, missingPage };
})();
