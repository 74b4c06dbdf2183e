"""The episodes table, one page at a time, and one episode's details and step series.

A browser must never receive 100k rows to show 50. The server keeps a small **index** of the
lake's episodes: the columns the table filters and sorts on (id, task, embodiment, length,
fps, success, source format), the derived duration and ingest version, and each row's position
in the episodes table, as one Arrow table read once per process (tens of bytes an episode:
100k episodes is a few megabytes). A request is then answered from memory:

- filters are boolean masks over the index: substring of task or id, embodiment, success, or a
  `--where` expression of the curation language (`robolake.lake.where`, evaluated over the
  lake); text and expression masks are cached, a few dozen of them;
- the order is one Arrow sort per column and direction (ties by id, unknown values last),
  cached, so a page is the sorted positions the mask keeps, sliced;
- only the page's own rows are read in full (source paths live in the metadata JSON), with a
  take of their offsets per fragment (`take_offsets`): no scan.

Measured on this machine (2 shared cores) with the 100k-episode benchmark lake (16 versions):
the first page, which reads the index, 70-120 ms (1k: 15-27 ms); then a page at the end of a
sort by steps not asked for before 6 ms, as on 1k (a numeric column sorts by radix over the rows
in id order; a string column through the ids' ranks, 36 ms); a page of a sort already made 4 ms.
A page's own rows are taken fragment by fragment (`take_offsets`): Lance's dataset take of 50
scattered rows cost 19 ms there, a fragment's 1 ms.

An episode id from a request is looked up in the index before anything else; an unknown id is
`None` (the app answers 404). Ids reach Lance only as SQL string literals quoted by the lake's
own `EpisodeFilter`, never as a path.

Step series are sent to the browser as one binary blob (`series_bytes`): a 16-byte header
(uint32 steps, state width, action width, 0) then float64 timestamps, float32 state and float32
action, row-major, little-endian. Exact and compact: the browser's `Float32Array` holds the
lake's values bit for bit, a fifth of the bytes of the same numbers as JSON text.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# The one definition of "the file an episode came from" (what `--where source_path` matches).
from robolake.lake import EpisodeFilter, episode_findings, row_offsets, source_path_of, sql_quote, take_offsets
from robolake.view.catalog import LakeCatalog, joint_groups, joint_names

__all__ = ["SORT_KEYS", "EpisodeCatalog", "EpisodeQuery"]

SORT_KEYS = (
    "episode_id",
    "task",
    "embodiment",
    "num_steps",
    "duration_s",
    "source_format",
    "success",
    "ingest_version",
)
_INDEX_COLUMNS = ["episode_id", "task", "embodiment", "num_steps", "fps", "success", "source_format"]
_SUCCESS = ("true", "false", "none")
_MASK_CACHE = 32
_META_SHOWN = 400  # characters of one metadata value shown on the episode page (frame indexes are long)


@dataclass(frozen=True, kw_only=True)
class EpisodeQuery:
    """One request of the episodes table.

    Attributes:
        text: Keep episodes whose task or id contains this (case-insensitive); "" keeps all.
        embodiment: Keep this embodiment only.
        success: "true", "false" or "none" (unknown); None keeps all.
        where: A curation filter expression (`robolake select --where` syntax).
        sort: Column to sort by, one of `SORT_KEYS`.
        descending: Sort descending.
        offset: First row of the page.
        limit: Rows per page, 1-500.
    """

    text: str = ""
    embodiment: str | None = None
    success: str | None = None
    where: str | None = None
    sort: str = "episode_id"
    descending: bool = False
    offset: int = 0
    limit: int = 50

    def __post_init__(self) -> None:
        if self.sort not in SORT_KEYS:
            raise ValueError(f"cannot sort episodes by {self.sort!r}; sort by one of {', '.join(SORT_KEYS)}")
        if self.success is not None and self.success not in _SUCCESS:
            raise ValueError(f"success filter {self.success!r} must be one of {', '.join(_SUCCESS)}")
        if self.offset < 0 or not 1 <= self.limit <= 500:
            raise ValueError(f"need offset >= 0 and 1 <= limit <= 500, got offset {self.offset}, limit {self.limit}")


def _flags(row: dict[str, Any], meta: dict[str, Any]) -> list[str] | None:
    """The checks that flag an episode by its own quality (the doctor's rules); None when not measured."""
    if not isinstance(meta.get("quality"), dict):
        return None
    return sorted({f.check for f in episode_findings({**row, "metadata": meta})})


def _quality(row: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """The episode page's quality panel: what the doctor finds in its own numbers, and the numbers."""
    q = meta.get("quality")
    if not isinstance(q, dict):
        return {"measured": False, "findings": [], "numbers": {}}
    found = episode_findings({**row, "metadata": meta})
    numbers = {k: v for k, v in sorted(q.items()) if isinstance(v, (bool, int, float))}
    return {
        "measured": True,
        "findings": [{"check": f.check, "detail": f.detail, "camera": f.camera, "stream": f.stream} for f in found],
        "numbers": numbers,
    }


def _shown_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in meta.items():
        text = json.dumps(v, default=str)
        out[k] = v if len(text) <= _META_SHOWN else text[:_META_SHOWN] + f"... ({len(text)} characters)"
    return out


def _numeric_order(values: pa.ChunkedArray | pa.Array, by_id: np.ndarray, descending: bool) -> np.ndarray:
    """Index rows sorted by a numeric or boolean column given in id order (`by_id`): values
    ascending or descending, ties by id (a stable sort of rows already in id order), unknown (null,
    NaN) last. A column of small integer range (steps, versions) sorts by radix: O(n), a few
    milliseconds at 100k episodes, so that a page deep in a new sort stays near a cached one's."""
    missing = pc.is_null(values, nan_is_null=True).to_numpy(zero_copy_only=False)
    keep = np.flatnonzero(~missing)
    v = np.asarray(pc.filter(values, pa.array(~missing)).to_numpy(zero_copy_only=False))
    v = v.astype(np.int64) if v.dtype.kind == "b" else v
    if descending:
        v = -v
    if v.dtype.kind in "iu" and v.size and int(v.max()) - int(v.min()) < 2**16:
        v = (v - v.min()).astype(np.uint16)  # numpy's stable sort of 16-bit integers is a radix sort
    return by_id[np.concatenate([keep[np.argsort(v, kind="stable")], np.flatnonzero(missing)])]


class EpisodeCatalog:
    """Episodes of one lake handle: the paged table, one episode's details, its step series."""

    def __init__(self, catalog: LakeCatalog):
        self._catalog = catalog
        self._lake = catalog.lake
        self._lock = threading.RLock()
        self._index: pa.Table | None = None
        self._position: dict[str, int] | None = None
        self._offsets = np.zeros(0, dtype=np.int64)
        self._orders: dict[tuple[str, bool], np.ndarray] = {}
        self._masks: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()

    # --- the index -------------------------------------------------------------------------

    def index(self) -> pa.Table:
        """The filter/sort columns of every episode of this handle (read once)."""
        with self._lock:
            if self._index is None:
                ds = self._lake.dataset("episodes")
                t = ds.to_table(columns=_INDEX_COLUMNS, filter=self._lake.predicate("episodes", None), with_row_id=True)
                self._offsets = row_offsets(ds, t["_rowid"].to_numpy())  # where each row is, for `take`
                t = t.drop_columns(["_rowid"])
                fps = pc.if_else(pc.greater(t["fps"], 0), t["fps"], pa.scalar(float("nan")))
                duration = pc.divide(pc.cast(t["num_steps"], pa.float64()), fps)
                t = t.append_column("duration_s", duration)
                t = t.append_column(
                    "ingest_version", pa.array(self._catalog.first_versions(t["episode_id"].combine_chunks()))
                )
                self._index = t.combine_chunks()
            return self._index

    def _positions(self) -> dict[str, int]:
        """Episode id -> its row of the index, built at the first lookup of one episode (a page of
        the table needs none: 100k ids as Python strings were a third of the first page's time)."""
        with self._lock:
            if self._position is None:
                self._position = {e: i for i, e in enumerate(self.index()["episode_id"].to_pylist())}
            return self._position

    def has(self, episode_id: str) -> bool:
        return episode_id in self._positions()

    def _mask(self, kind: str, value: str) -> np.ndarray:
        """Which index rows a text search or a `--where` expression keeps (cached, a few of each)."""
        key = (kind, value)
        with self._lock:
            if key not in self._masks:
                t = self.index()
                if kind == "where":
                    from robolake.lake import select_episode_ids

                    keep = pa.array(select_episode_ids(self._lake, value), pa.string())
                    hit = pc.is_in(t["episode_id"], value_set=keep)
                else:
                    hit = pc.or_(
                        pc.match_substring(t["task"], value, ignore_case=True),
                        pc.match_substring(t["episode_id"], value, ignore_case=True),
                    )
                self._masks[key] = pc.fill_null(hit, False).to_numpy(zero_copy_only=False)
                while len(self._masks) > _MASK_CACHE:
                    self._masks.popitem(last=False)
            self._masks.move_to_end(key)
            return self._masks[key]

    def page(self, q: EpisodeQuery) -> dict[str, Any]:
        """One page of the filtered, sorted table: {"total", "offset", "limit", "rows"}.

        Raises:
            WhereError: `q.where` is not a valid filter expression.
        """
        t = self.index()
        mask = np.ones(t.num_rows, dtype=bool)
        if q.text:
            mask &= self._mask("text", q.text)
        if q.embodiment:
            mask &= pc.fill_null(pc.equal(t["embodiment"], q.embodiment), False).to_numpy(zero_copy_only=False)
        if q.success is not None:
            ok = t["success"]
            sel = pc.is_null(ok) if q.success == "none" else pc.fill_null(pc.equal(ok, q.success == "true"), False)
            mask &= sel.to_numpy(zero_copy_only=False)
        if q.where:
            mask &= self._mask("where", q.where)
        order = self._order(q.sort, q.descending)
        kept = order[mask[order]]
        at = kept[q.offset : q.offset + q.limit]
        page = t.take(pa.array(at))
        return {"total": int(kept.size), "offset": q.offset, "limit": q.limit, "rows": self._rows(page, at)}

    def _order(self, column: str, descending: bool) -> np.ndarray:
        """Index positions sorted by `column` (ties by id; unknown values last), cached per sort."""
        with self._lock:
            key = (column, descending)
            if key not in self._orders:
                t = self.index()
                if column == "episode_id":  # unique and never null
                    order = pc.array_sort_indices(t["episode_id"], order="descending" if descending else "ascending")
                    self._orders[key] = order.to_numpy()
                    return self._orders[key]
                col = t[column]
                by_id = self._order("episode_id", False)
                if not pa.types.is_string(col.type):
                    self._orders[key] = _numeric_order(col.take(pa.array(by_id)), by_id, descending)
                    return self._orders[key]
                # Ties by id through each row's rank in the id order (sorted once): an integer key
                # sorts 100k rows in half the time the id strings took.
                rank = np.empty(len(by_id), dtype=np.int64)
                rank[by_id] = np.arange(len(by_id), dtype=np.int64)
                keys = pa.table({"missing": pc.is_null(col, nan_is_null=True), "key": col, "rank": rank})
                self._orders[key] = pc.sort_indices(
                    keys,
                    sort_keys=[
                        ("missing", "ascending"),
                        ("key", "descending" if descending else "ascending"),
                        ("rank", "ascending"),
                    ],
                ).to_numpy()
            return self._orders[key]

    def _take(self, rows: Sequence[int], columns: list[str] | None = None) -> list[dict[str, Any]]:
        """Full rows of episodes at these rows of the index: a take per fragment, no scan."""
        if not len(rows):
            return []
        return take_offsets(self._lake.dataset("episodes"), self._offsets[np.asarray(rows)], columns).to_pylist()

    def _rows(self, page: pa.Table, at: np.ndarray) -> list[dict[str, Any]]:
        ids = page["episode_id"].to_pylist()
        if not ids:
            return []
        full = self._take(at.tolist(), ["episode_id", "source_uri", "metadata"])
        metas = {r["episode_id"]: json.loads(r["metadata"] or "{}") for r in full}
        files = {r["episode_id"]: source_path_of(r["source_uri"], metas[r["episode_id"]]) for r in full}
        rows = page.to_pylist()
        for r in rows:
            r["source_file"] = files.get(r["episode_id"], "")
            r["quality_flags"] = _flags(r, metas.get(r["episode_id"], {}))
        return rows

    # --- one episode -----------------------------------------------------------------------

    def detail(self, episode_id: str) -> dict[str, Any] | None:
        """What the episode page shows above its frames, or None for an id the lake does not hold."""
        if not self.has(episode_id):
            return None
        rows = self._take([self._positions()[episode_id]])
        if not rows or rows[0]["episode_id"] != episode_id:
            raise RuntimeError(
                f"episode {episode_id!r} moved in the episodes table of lake version {self._lake.version}"
            )
        r = rows[0]
        meta = json.loads(r["metadata"] or "{}")
        cams = self._lake.to_arrow(
            "media",
            columns=["camera", "width", "height", "encoding"],
            where=f"episode_id = {sql_quote(episode_id)} AND step_index = 0",
        ).to_pylist()
        by_name = {c["camera"]: c for c in cams}
        spec = self._catalog.spec(r["embodiment"])
        dims = self._widths(episode_id)
        layout: dict[str, Any] = {}
        for kind, width in zip(("state", "action"), dims, strict=True):
            if spec is not None:
                layout[f"{kind}_names"] = joint_names(spec, kind, width)
                layout[f"{kind}_groups"] = joint_groups(spec, kind, width)
            else:
                layout[f"{kind}_names"] = [f"{kind}[{i}]" for i in range(width)]
                layout[f"{kind}_groups"] = [{"name": kind, "dims": list(range(width))}]
        return {
            "episode_id": episode_id,
            "task": r["task"],
            "tasks": meta.get("tasks", [r["task"]]),
            "embodiment": r["embodiment"],
            "num_steps": int(r["num_steps"]),
            "fps": float(r["fps"]),
            "duration_s": float(r["num_steps"]) / float(r["fps"]) if r["fps"] else None,
            "success": r["success"],
            "trim": meta.get("trim"),
            "source_uri": r["source_uri"],
            "source_format": r["source_format"],
            "source_file": source_path_of(r["source_uri"], meta),
            "source_episode_index": int(r["source_episode_index"]),
            "source_time_offset_s": meta.get("source_time_offset_s"),
            "ingested_at_ns": int(r["ingested_at"]),
            "content_hash": r["content_hash"],
            "ingest_version": int(self.index()["ingest_version"][self._positions()[episode_id]].as_py()),
            "cameras": [
                {
                    "name": c,
                    "width": by_name.get(c, {}).get("width"),
                    "height": by_name.get(c, {}).get("height"),
                    "encoding": by_name.get(c, {}).get("encoding"),
                }
                for c in (r["cameras"] or [])
                if c in by_name
            ],
            "state_dim": dims[0],
            "action_dim": dims[1],
            **layout,
            "quality": _quality(r, meta),
            "metadata": _shown_metadata(meta),
        }

    def _widths(self, episode_id: str) -> tuple[int, int]:
        first = self._lake.to_arrow(
            "steps", columns=["state", "action"], where=f"episode_id = {sql_quote(episode_id)} AND step_index = 0"
        ).to_pylist()
        if not first:
            return 0, 0
        return len(first[0]["state"] or []), len(first[0]["action"] or [])

    def series(self, episode_id: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(timestamps float64 [T], state float32 [T, S], action float32 [T, A]) in step order, or None."""
        if not self.has(episode_id):
            return None
        t = self._lake.to_arrow(
            "steps",
            columns=["step_index", "timestamp", "state", "action"],
            where=EpisodeFilter(episode_ids=[episode_id]),
        )
        t = t.take(pc.sort_indices(t["step_index"]))
        n = t.num_rows
        out = [t["timestamp"].to_numpy().astype(np.float64)]
        for name in ("state", "action"):
            col = t[name].combine_chunks()
            flat = pc.list_flatten(col).to_numpy(zero_copy_only=False).astype(np.float32)
            width = flat.size // n if n else 0
            if width * n != flat.size:
                raise ValueError(f"episode {episode_id}: its {name} vectors differ in width; run `robolake check`")
            out.append(flat.reshape(n, width))
        return out[0], out[1], out[2]

    def series_bytes(self, episode_id: str) -> bytes | None:
        """`series` as the binary blob the episode page reads (see the module essay), or None."""
        s = self.series(episode_id)
        if s is None:
            return None
        ts, state, action = s
        header = np.array([len(ts), state.shape[1], action.shape[1], 0], dtype="<u4").tobytes()
        return header + ts.astype("<f8").tobytes() + state.astype("<f4").tobytes() + action.astype("<f4").tobytes()
