"""`--where EXPR`: which episodes a curation verb keeps, as a safe, vectorised expression.

Users write filters the way they think about episodes: `task == 'pick' and num_steps > 100`,
`success and source = 'rollout'`, `max(abs(action)) > 3`, `embodiment in ('gr1', 'so101')`.
The expression is parsed with Python's own parser (`ast`, mode "eval") after a token-level pass
that accepts SQL habits (`=`, `<>`, `AND`/`OR`/`NOT`, `true`/`false`/`null`), then walked by a
small interpreter that knows a fixed set of node types, names and functions. Nothing is ever
`eval`'d, no attribute of a Python object is reachable, and an unknown name or function is an
error naming what there is: a filter handed over in a forum post cannot run code.

Evaluation is columnar: every name is a numpy array over the episodes of the lake version (one
entry per episode), so a filter over 100k episodes is a handful of array operations. Names:

- every episodes column (`episode_id`, `task`, `embodiment`, `num_steps`, `fps`, `success`,
  `source_uri`, `source_format`, `source_episode_index`, `content_hash`, `ingested_at`);
- derived: `length` (= num_steps), `duration` (seconds), `source` (the metadata's `source`,
  'recorded' when absent; rollouts say 'rollout'), `source_path` (the file the episode came
  from), `quarantine_free` (no quarantine row names the episode's source file),
  `ingest_version` (the lake version the episode first appeared in), `meta.KEY` (any metadata
  key; missing keys are null);
- step aggregates: `max`, `min`, `mean`, `sum`, `std`, `count` over an expression of the
  episode's steps (`state`, `action`, `timestamp`, `state[i]`, `abs(...)`, arithmetic). They
  read only the step columns the expression names, once.

Functions over episode values: `abs`, `contains(text, sub)`, `startswith`, `endswith`,
`like(text, 'sql %pattern_')`, `lower`, `upper`, `isnull`.

The record of every other stream (`robolake.lake.sources.record`) is named by quoted stream:

- `stream('/imu')` is whether the episode recorded it; `stream('/imu').count`, `.rate_hz`,
  `.gaps`, `.longest_gap_s`, `.kind`, `.clock` are what the episode metadata says of it (no
  table is read): `stream('/imu').rate_hz >= 150`, `stream('/ft').gaps > 0`;
- `event('/fault')` is one value per event, so it lives inside an aggregate: `any`, `all`,
  `count`, `min`, `max`, `mean`, `sum`, `std` (`any`/`all` also take step expressions). Bare, it
  is every event: `any(event('/fault_flag'))` keeps episodes with one, `count(event('/button'))
  >= 2`. Its value is text (`true`/`false` for a flag, a label, null for a trigger), compared
  with text, with `true`/`false`, or with a number (`event('/mode') = 3`); `event('/x').t` is
  its time in seconds on the steps' axis: `any(event('/fault') = true and event('/fault').t < 2)`.
  One stream per aggregate (combine aggregates with and/or). They read the events table one
  stream at a time, filtered in Lance and reduced batch by batch (`robolake.lake._where_record`).

A stream no episode of the lake has recorded is an error naming the streams it has.

`quality.NAME` is what ingest measured of the episode (`robolake.lake.stats.quality`, kept in its
metadata): `quality.frozen_state`, `quality.idle_fraction > 0.4`, `quality.action_jumps > 0`,
`quality.frozen_camera >= 10`; the doctor's check names `action_jump` and `timestamp_gap` name
the counts behind them. An episode without quality (ingested before it, or with it off; `robolake
doctor --update` adds it) has null there, so every comparison is false. An unknown name is an
error listing the names.
"""

from __future__ import annotations

import ast
import io
import json
import math
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from robolake.lake._where_record import (
    STREAM_ATTRS,
    EventBatch,
    PerEpisode,
    event_batches,
    recorded_streams,
    stream_column,
)
from robolake.lake.lake import Lake
from robolake.lake.query import sql_quote
from robolake.lake.sources.record import EVENT_KINDS
from robolake.lake.stats.quality import QUALITY_ALIASES, QUALITY_NAMES

__all__ = [
    "Where",
    "WhereError",
    "episode_columns",
    "parse_where",
    "pushed_down",
    "select_episode_ids",
    "source_path_of",
]

_EPISODE_COLUMNS = (
    "episode_id",
    "source_uri",
    "source_format",
    "source_episode_index",
    "embodiment",
    "task",
    "num_steps",
    "fps",
    "success",
    "content_hash",
    "ingested_at",
)
_DERIVED = ("length", "duration", "source", "source_path", "quarantine_free", "ingest_version")
_STEP_NAMES = ("state", "action", "timestamp")
_AGGREGATES = ("max", "min", "mean", "sum", "std", "count", "any", "all")
_FUNCTIONS = ("abs", "contains", "startswith", "endswith", "like", "lower", "upper", "isnull")
_RECORD = ("stream", "event")  # stream('S') and event('S'): the record's streams, by quoted name
_EVENT_ATTRS = ("t", "value")
_SHOWN_STREAMS = 40  # streams an unknown-stream error lists
_SQL_WORDS = {
    "and": "and",
    "or": "or",
    "not": "not",
    "true": "True",
    "false": "False",
    "null": "None",
    "is": "is",
    "in": "in",
}


class WhereError(ValueError):
    """A `--where` expression that cannot be parsed or names something that does not exist."""


def _to_python(expr: str) -> str:
    """Rewrite SQL habits into Python tokens (`=` -> `==`, `<>` -> `!=`, AND -> and, ...)."""
    out: list[tuple[int, str]] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(expr).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError) as e:
        raise WhereError(f"--where {expr!r} is not an expression: {e}") from None
    skip = False
    for tok, nxt in zip(tokens, [*tokens[1:], None], strict=True):
        if skip:
            skip = False
            continue
        kind, text = tok.type, tok.string
        if kind == tokenize.OP and text == "=":
            text = "=="
        elif kind == tokenize.OP and text == "<" and nxt is not None and nxt.string == ">" and nxt.start == tok.end:
            text, skip = "!=", True  # SQL's <> (Python tokenizes it as < then >)
        elif kind == tokenize.NAME and text.lower() in _SQL_WORDS:
            text = _SQL_WORDS[text.lower()]
        out.append((kind, text))
    return tokenize.untokenize(out).strip()


@dataclass(frozen=True)
class Where:
    """A parsed `--where` expression and the names it uses."""

    text: str
    tree: ast.expr
    names: frozenset[str]
    step_columns: frozenset[str]
    streams: frozenset[str] = frozenset()  # named by stream('S')
    event_streams: frozenset[str] = frozenset()  # named by event('S')

    @property
    def needs_steps(self) -> bool:
        return bool(self.step_columns)


_ALLOWED = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.UAdd,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.Mod,
    ast.Pow,
    ast.Compare,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.In,
    ast.NotIn,
    ast.Is,
    ast.IsNot,
    ast.Call,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.Tuple,
    ast.List,
    ast.Subscript,
    ast.Attribute,
)


def parse_where(expr: str) -> Where:
    """Parse `expr` into a `Where`.

    Raises:
        WhereError: a syntax error, a construct outside the language, or an unknown name/function.
    """
    if not expr or not expr.strip():
        raise WhereError("--where needs an expression, e.g. \"task = 'pick' and num_steps > 50\"")
    if len(expr) > MAX_WHERE_CHARS:
        raise WhereError(
            f"--where is {len(expr):,} characters, more than a filter needs ({MAX_WHERE_CHARS:,}); to choose many "
            "episodes by id, tag them (`robolake select LAKE --where ... --tag NAME`) and filter by the tag"
        )
    try:
        tree = ast.parse(_to_python(expr), mode="eval")
    except SyntaxError as e:
        raise WhereError(f"--where {_short(expr)} is not an expression: {e.msg}") from None
    except (MemoryError, RecursionError, ValueError):  # the parser's own limits, on absurd nesting
        raise WhereError(f"--where {_short(expr)} nests too deeply to be a filter; write it flatter") from None
    _check_depth(tree, expr)
    names: set[str] = set()
    steps: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not -(2**63) <= node.value < 2**63:
            raise WhereError(f"--where {_short(expr)}: the number {node.value:.3g} is out of range of a 64-bit integer")
        if not isinstance(node, _ALLOWED):
            raise WhereError(f"--where {expr!r}: {type(node).__name__} is not allowed in a filter")
        if isinstance(node, ast.Constant) and not isinstance(node.value, (str, int, float, bool, type(None))):
            raise WhereError(f"--where {expr!r}: constant {node.value!r} is not allowed")
        if isinstance(node, ast.Call):
            fn = node.func.id if isinstance(node.func, ast.Name) else None
            if fn not in _FUNCTIONS + _AGGREGATES + _RECORD or node.keywords:
                raise WhereError(
                    f"--where {expr!r}: unknown function {ast.unparse(node.func)!r}; the functions are "
                    f"{', '.join(_AGGREGATES + _FUNCTIONS + _RECORD)}"
                )
            if fn in _RECORD and not (
                len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
            ):
                raise WhereError(f"--where {expr!r}: {fn}() takes one quoted stream name, e.g. {fn}('/imu')")
        if isinstance(node, ast.Attribute):
            _check_attribute(node, expr)
    streams: set[str] = set()
    events: set[str] = set()
    _check_names(tree.body, expr, names, steps, (streams, events), in_aggregate=False)
    return Where(
        text=expr,
        tree=tree.body,
        names=frozenset(names),
        step_columns=frozenset(steps),
        streams=frozenset(streams),
        event_streams=frozenset(events),
    )


def _record_ref(node: ast.AST) -> tuple[str, str, str | None] | None:
    """(`stream` or `event`, the stream's name, the attribute or None) of `stream('S')[.attr]` /
    `event('S')[.attr]`; None for any other node."""
    attr = None
    if isinstance(node, ast.Attribute):
        attr, node = node.attr, node.value
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _RECORD
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.func.id, node.args[0].value, attr
    return None


def _check_attribute(node: ast.Attribute, expr: str) -> None:
    if isinstance(node.value, ast.Name) and node.value.id in ("meta", "metadata"):
        return
    if isinstance(node.value, ast.Name) and node.value.id == "quality":
        if node.attr not in QUALITY_NAMES and node.attr not in QUALITY_ALIASES:
            names = "; ".join(f"{k}: {v}" for k, v in QUALITY_NAMES.items())
            raise WhereError(f"--where {_short(expr)}: there is no quality.{node.attr}; the quality names are {names}")
        return
    ref = _record_ref(node)
    inner = node.value
    if ref is None and isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id in _RECORD:
        raise WhereError(
            f"--where {expr!r}: {inner.func.id}() takes one quoted stream name, e.g. {inner.func.id}('/imu')"
        )
    if ref is None:
        raise WhereError(
            f"--where {expr!r}: only meta.KEY, quality.NAME, stream('S').ATTR and event('S').t may use a dot "
            f"({ast.unparse(node)!r})"
        )
    fn, _, attr = ref
    allowed = tuple(STREAM_ATTRS) if fn == "stream" else _EVENT_ATTRS
    if attr not in allowed:
        what = (
            "; ".join(f"{k}: {v}" for k, v in STREAM_ATTRS.items())
            if fn == "stream"
            else "t (seconds on the steps' axis), value (its text)"
        )
        raise WhereError(f"--where {expr!r}: {fn}() has no .{attr}; it has {what}")


def _event_stream_names(node: ast.AST) -> set[str]:
    return {ref[1] for n in ast.walk(node) if (ref := _record_ref(n)) is not None and ref[0] == "event"}


def _check_event_expr(node: ast.AST, expr: str) -> None:
    """An expression over one stream's events: event refs, constants, comparisons, logic, arithmetic
    and the text functions."""
    ref = _record_ref(node)
    if ref is not None:
        if ref[0] == "stream":
            raise WhereError(
                f"--where {expr!r}: {ast.unparse(node)!r} is one value per episode; use it outside the aggregate"
            )
        return
    if isinstance(node, ast.Name):
        raise WhereError(
            f"--where {expr!r}: inside an aggregate of events only event('S'), event('S').t, event('S').value and "
            f"constants are known, not {node.id!r}"
        )
    if isinstance(node, ast.Call):
        fn = node.func.id if isinstance(node.func, ast.Name) else ""
        if fn in _AGGREGATES:
            raise WhereError(f"--where {expr!r}: aggregates cannot nest ({ast.unparse(node)!r})")
        for a in node.args:
            _check_event_expr(a, expr)
        return
    if isinstance(node, (ast.Subscript, ast.Attribute)):
        raise WhereError(f"--where {expr!r}: {ast.unparse(node)!r} cannot be used inside an aggregate of events")
    for child in ast.iter_child_nodes(node):
        _check_event_expr(child, expr)


MAX_WHERE_CHARS = 100_000
MAX_WHERE_DEPTH = 100  # far past any filter a person writes; far below Python's recursion limit


def _short(expr: str) -> str:
    """`expr` quoted for a message, cut to a line."""
    return repr(expr) if len(expr) <= 120 else repr(expr[:100] + "...") + f" ({len(expr):,} characters)"


def _check_depth(tree: ast.AST, expr: str) -> None:
    """Refuse a tree nested deeper than MAX_WHERE_DEPTH (walked without recursion: the checks and the
    evaluator after it recurse, and must never meet Python's recursion limit)."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_WHERE_DEPTH:
            raise WhereError(f"--where {_short(expr)} nests more than {MAX_WHERE_DEPTH} levels deep; write it flatter")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def _check_names(
    node: ast.AST,
    expr: str,
    names: set[str],
    steps: set[str],
    record: tuple[set[str], set[str]],
    *,
    in_aggregate: bool,
) -> None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _AGGREGATES:
        if in_aggregate:
            raise WhereError(f"--where {expr!r}: aggregates cannot nest ({ast.unparse(node)!r})")
        if len(node.args) != 1:
            raise WhereError(
                f"--where {expr!r}: {node.func.id}() takes one step or event expression, e.g. max(abs(action)) "
                "or any(event('/fault'))"
            )
        events = _event_stream_names(node.args[0])
        if len(events) > 1:
            raise WhereError(
                f"--where {expr!r}: {ast.unparse(node)!r} names the events of {len(events)} streams; an aggregate "
                f"reads one: combine aggregates, e.g. {' or '.join(f'any(event({s!r}))' for s in sorted(events))}"
            )
        if events:
            _check_event_expr(node.args[0], expr)
            record[1].update(events)
            names.add("metadata")
            return
        _check_names(node.args[0], expr, names, steps, record, in_aggregate=True)
        return
    ref = _record_ref(node)
    if ref is not None:
        fn, stream, _ = ref
        if fn == "event":
            raise WhereError(
                f"--where {expr!r}: {ast.unparse(node)!r} is one value per event; wrap it in an aggregate, e.g. "
                f"any(event({stream!r})) or count(event({stream!r})) >= 2"
            )
        if in_aggregate:
            raise WhereError(
                f"--where {expr!r}: {ast.unparse(node)!r} is one value per episode; use it outside the aggregate"
            )
        record[0].add(stream)
        names.add("metadata")
        return
    if isinstance(node, ast.Attribute):
        names.add("metadata")
        return
    if isinstance(node, ast.Name):
        if node.id in _FUNCTIONS + _AGGREGATES:
            return
        if in_aggregate:
            if node.id not in _STEP_NAMES:
                raise WhereError(
                    f"--where {expr!r}: inside an aggregate only step columns ({', '.join(_STEP_NAMES)}) "
                    f"are known, not {node.id!r}"
                )
            steps.add(node.id)
        else:
            if node.id in _STEP_NAMES:
                raise WhereError(
                    f"--where {expr!r}: {node.id!r} is a step column; wrap it in an aggregate, e.g. max(abs({node.id}))"
                )
            if node.id not in _EPISODE_COLUMNS + _DERIVED:
                raise WhereError(
                    f"--where {expr!r}: unknown name {node.id!r}; the names are "
                    f"{', '.join(_EPISODE_COLUMNS + _DERIVED)}, meta.KEY, aggregates over {', '.join(_STEP_NAMES)}, "
                    "stream('S').ATTR and aggregates over event('S')"
                )
            names.add(node.id)
        return
    for child in ast.iter_child_nodes(node):
        if isinstance(node, ast.Call) and child is node.func:
            continue
        _check_names(child, expr, names, steps, record, in_aggregate=in_aggregate)


# --- evaluation ----------------------------------------------------------------------------------


def _like(pattern: str) -> re.Pattern[str]:
    out = []
    for ch in pattern:
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
    return re.compile("^" + "".join(out) + "$", re.S)


def _strings(values: Any, fn: Callable[[str], Any]) -> np.ndarray:
    arr = np.asarray(values, dtype=object)
    return np.array([None if v is None else fn(str(v)) for v in arr.ravel()], dtype=object).reshape(arr.shape)


def _truth(values: Any) -> np.ndarray:
    arr = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
    if arr.dtype == object:
        return np.array(
            [bool(v) if v is not None and not (isinstance(v, float) and math.isnan(v)) else False for v in arr.ravel()]
        ).reshape(arr.shape)
    return arr.astype(bool)


# Derived names -> the episodes columns they are computed from ("metadata" is the JSON column).
_DERIVED_FROM: dict[str, tuple[str, ...]] = {
    "length": ("num_steps",),
    "duration": ("num_steps", "fps"),
    "source": ("metadata",),
    "source_path": ("source_uri", "metadata"),
    "quarantine_free": ("source_uri", "metadata"),
    "ingest_version": (),
}


def episode_columns(where: Where) -> list[str]:
    """The episodes columns evaluating `where` reads: `episode_id` (what a filter returns), the
    columns it names, those its derived names are computed from, and `metadata` only for
    meta.KEY, quality.NAME, stream(...) and event(...) (parse_where puts "metadata" in `names`)."""
    cols = {"episode_id"}
    for name in where.names:
        if name in _EPISODE_COLUMNS or name == "metadata":
            cols.add(name)
        cols.update(_DERIVED_FROM.get(name, ()))
    return sorted(cols)


class _Episodes:
    """The episode-level columns an expression names, computed once each."""

    def __init__(self, lake: Lake, where: Where):
        self.lake = lake
        self.where = where
        # Only the columns the expression names: the metadata column (kilobytes of JSON an episode)
        # is most of the table, and reading it for `source_episode_index < 10` made select, delete
        # and tag follow the lake's size (issue 37).
        self.table = lake.episodes(where=pushed_down(where), columns=episode_columns(where))
        self.n = self.table.num_rows
        self._cache: dict[str, np.ndarray] = {}
        self._meta: list[dict[str, Any]] | None = None

    def metadata(self) -> list[dict[str, Any]]:
        if self._meta is None:
            out = []
            for m in self.table.column("metadata").to_pylist():
                try:
                    d = json.loads(m) if m else {}
                except json.JSONDecodeError:
                    d = {}
                out.append(d if isinstance(d, dict) else {})
            self._meta = out
        return self._meta

    def column(self, name: str) -> np.ndarray:
        if name not in self._cache:
            self._cache[name] = self._compute(name)
        return self._cache[name]

    def _compute(self, name: str) -> np.ndarray:
        if name in _EPISODE_COLUMNS:
            col = self.table.column(name)
            if pa.types.is_string(col.type) or pa.types.is_boolean(col.type):  # nullable: keep None
                return np.array(col.to_pylist(), dtype=object)
            return np.asarray(col.to_numpy(zero_copy_only=False))
        if name == "length":
            return self.column("num_steps")
        if name == "duration":
            fps = np.asarray(self.column("fps"), dtype=float)
            return np.asarray(self.column("num_steps"), dtype=float) / np.where(fps > 0, fps, np.nan)
        if name == "source":
            return np.array([str(m.get("source", "recorded")) for m in self.metadata()], dtype=object)
        if name == "source_path":
            return np.array(
                [
                    source_path_of(u, m)
                    for u, m in zip(self.table.column("source_uri").to_pylist(), self.metadata(), strict=True)
                ],
                dtype=object,
            )
        if name == "quarantine_free":
            bad = set(self.lake.to_arrow("quarantine", columns=["source_path"]).column("source_path").to_pylist())
            return np.array([p not in bad for p in self.column("source_path")], dtype=bool)
        if name == "ingest_version":
            first = _first_versions(self.lake)
            return np.array(
                [first.get(e, self.lake.version) for e in self.table.column("episode_id").to_pylist()], dtype=np.int64
            )
        raise WhereError(f"unknown name {name!r}")  # parse_where already refused it

    def meta_key(self, key: str) -> np.ndarray:
        return np.array([m.get(key) for m in self.metadata()], dtype=object)


_QUALITY_FLAGS = ("frozen_state", "frozen_action", "success_missing")


def quality_column(metadata: list[dict[str, Any]], name: str) -> np.ndarray:
    """One value per episode: its `quality.name`; null (None, or NaN for a number) without quality."""
    per = [m.get("quality") for m in metadata]
    values = [q.get(name) if isinstance(q, dict) else None for q in per]
    if name in _QUALITY_FLAGS:
        return np.array([None if v is None else bool(v) for v in values], dtype=object)
    return np.array([np.nan if not isinstance(v, (int, float)) else float(v) for v in values], dtype=np.float64)


def source_path_of(source_uri: str, meta: dict[str, Any]) -> str:
    for key in ("file", "data_path", "path", "bag"):
        v = meta.get(key)
        if isinstance(v, str) and v:
            if v.startswith("/") or "://" in v or not source_uri:
                return v
            return source_uri.rstrip("/") + "/" + v
    return source_uri


def _first_versions(lake: Lake) -> dict[str, int]:
    """episode id -> the first lake version (up to this one) whose episodes table holds it."""
    import lance

    first: dict[str, int] = {}
    seen_table_version: dict[int, set[str]] = {}
    for info in lake.versions():
        if info.version > lake.version:
            break
        tv = info.tables["episodes"]
        if tv not in seen_table_version:
            ds = lance.dataset(lake.table_uri("episodes"), version=tv, storage_options=lake.storage_options)
            seen_table_version[tv] = set(ds.to_table(columns=["episode_id"]).column("episode_id").to_pylist())
        for e in seen_table_version[tv]:
            first.setdefault(e, info.version)
    return first


@dataclass(frozen=True)
class _StepValue:
    """Values at step level: one per step (`level` "row") or one per element of a vector column
    (`level` "state"/"action": widths differ between embodiments, so vectors stay flat)."""

    values: np.ndarray
    level: str


class _Steps:
    """The step columns an aggregate reads, flattened, with the episode each value belongs to."""

    def __init__(self, lake: Lake, episode_ids: list[str], columns: frozenset[str]):
        order = {e: i for i, e in enumerate(episode_ids)}
        tbl = lake.to_arrow("steps", columns=["episode_id", *sorted(columns)])
        self.row_episode = np.array([order.get(e, -1) for e in tbl.column("episode_id").to_pylist()], dtype=np.int64)
        self.n = len(episode_ids)
        self.values: dict[str, _StepValue] = {}
        self.elem_row: dict[str, np.ndarray] = {}
        self.offsets: dict[str, np.ndarray] = {}
        for c in columns:
            col = tbl.column(c).combine_chunks()
            if c == "timestamp":
                self.values[c] = _StepValue(np.asarray(col, dtype=np.float64), "row")
                continue
            offsets = np.asarray(col.offsets, dtype=np.int64)
            flat = np.asarray(col.flatten(), dtype=np.float64)
            self.offsets[c] = offsets
            self.elem_row[c] = np.repeat(np.arange(len(col)), np.diff(offsets))
            self.values[c] = _StepValue(flat, c)

    def index(self, v: _StepValue, i: int) -> _StepValue:
        """Element `i` of each step's vector (NaN where a step's vector is shorter)."""
        if v.level == "row":
            raise WhereError("only state[i] / action[i] can be indexed")
        offsets = self.offsets[v.level]
        widths = np.diff(offsets)
        pos = offsets[:-1] + (i if i >= 0 else widths + i)
        ok = (widths > i) if i >= 0 else (widths >= -i)
        out = np.full(len(widths), np.nan)
        out[ok] = v.values[pos[ok]]
        return _StepValue(out, "row")

    def align(self, a: _StepValue, b: _StepValue) -> tuple[np.ndarray, np.ndarray, str]:
        """The two operands on one level (a per-step value broadcast over a vector's elements)."""
        if a.level == b.level:
            return a.values, b.values, a.level
        if a.level == "row":
            return a.values[self.elem_row[b.level]], b.values, b.level
        if b.level == "row":
            return a.values, b.values[self.elem_row[a.level]], a.level
        if np.array_equal(self.offsets[a.level], self.offsets[b.level]):
            return a.values, b.values, a.level
        raise WhereError("state and action have different widths: combine them per joint (state[i] - action[i])")

    def aggregate(self, fn: str, v: _StepValue) -> np.ndarray:
        episode = self.row_episode if v.level == "row" else self.row_episode[self.elem_row[v.level]]
        keep = episode >= 0
        episode, vals = episode[keep], np.asarray(v.values, dtype=np.float64)[keep]
        count = np.bincount(episode, minlength=self.n).astype(np.float64)
        if fn == "count":
            return count
        if fn in ("any", "all"):
            hits = np.bincount(episode, weights=(vals != 0) & ~np.isnan(vals), minlength=self.n)
            return hits > 0 if fn == "any" else hits == count
        if fn in ("max", "min"):
            ufunc, init = (np.maximum, -np.inf) if fn == "max" else (np.minimum, np.inf)
            res = np.full(self.n, init)
            ufunc.at(res, episode, vals)
            res[count == 0] = np.nan
            return res
        total = np.bincount(episode, weights=vals, minlength=self.n)
        if fn == "sum":
            return total
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = total / count
            if fn == "mean":
                return mean
            sq = np.bincount(episode, weights=vals**2, minlength=self.n)
            return np.sqrt(np.maximum(sq / count - mean**2, 0.0))


_ARITH: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: np.true_divide,
    ast.Mod: np.mod,
    ast.Pow: np.power,
}


class _Eval:
    """Evaluates a parsed expression: episode level (one value per episode) and, inside
    aggregates, step level (`_StepValue`s)."""

    def __init__(self, episodes: _Episodes, steps: _Steps | None, text: str):
        self.eps, self.steps, self.text = episodes, steps, text

    def run(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List)):
            return [self.run(e) for e in node.elts]
        if isinstance(node, ast.Name):
            return self.eps.column(node.id)
        ref = _record_ref(node)
        if ref is not None and ref[0] == "stream":
            return stream_column(self.eps.metadata(), ref[1], ref[2])
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "quality":
            return quality_column(self.eps.metadata(), QUALITY_ALIASES.get(node.attr, node.attr))
        if isinstance(node, ast.Attribute):
            return self.eps.meta_key(node.attr)
        if isinstance(node, ast.BoolOp):
            vals = [_truth(self.run(v)) for v in node.values]
            out = vals[0]
            for v in vals[1:]:
                out = (out & v) if isinstance(node.op, ast.And) else (out | v)
            return out
        if isinstance(node, ast.UnaryOp):
            v = self.run(node.operand)
            if isinstance(node.op, ast.Not):
                return ~_truth(v)
            return -np.asarray(v, dtype=float) if isinstance(node.op, ast.USub) else np.asarray(v, dtype=float)
        if isinstance(node, ast.BinOp):
            with np.errstate(all="ignore"):
                return _ARITH[type(node.op)](
                    np.asarray(self.run(node.left), dtype=float), np.asarray(self.run(node.right), dtype=float)
                )
        if isinstance(node, ast.Compare):
            left = self.run(node.left)
            out = np.ones(self.eps.n, dtype=bool)
            for op, comp in zip(node.ops, node.comparators, strict=True):
                right = self.run(comp)
                out &= _compare_one(op, left, right, self.eps.n)
                left = right
            return out
        if isinstance(node, ast.Call):
            return self._call(node)
        raise WhereError(f"--where {self.text!r}: {ast.unparse(node)!r} cannot be used here")

    def _call(self, node: ast.Call) -> Any:
        if not isinstance(node.func, ast.Name):  # parse() refuses these; kept as a real error under python -O
            raise WhereError(f"--where {self.text!r}: {ast.unparse(node.func)!r} is not a function of the language")
        fn = node.func.id
        if fn in _AGGREGATES:
            events = _event_stream_names(node.args[0])
            if events:
                return self._events(fn, next(iter(events)), node.args[0])
            v = self.step(node.args[0])
            if not isinstance(v, _StepValue):
                raise WhereError(
                    f"--where {self.text!r}: {ast.unparse(node)!r} aggregates a constant; name a step column"
                )
            return self._steps(node).aggregate(fn, v)
        return self._apply(fn, [self.run(a) for a in node.args])

    def _apply(self, fn: str, args: list[Any]) -> Any:
        """A function of the language on evaluated arguments (episode or event values)."""
        if fn == "abs":
            return np.abs(np.asarray(args[0], dtype=float))
        if fn == "isnull":
            return np.array([v is None for v in np.asarray(args[0], dtype=object).ravel()], dtype=bool)
        if fn in ("lower", "upper"):
            return _strings(args[0], str.lower if fn == "lower" else str.upper)
        if len(args) != 2 or not isinstance(args[1], str):
            raise WhereError(f"--where {self.text!r}: {fn}(text, 'pattern') takes a column and a quoted string")
        pattern = args[1]
        if fn == "like":
            rx = _like(pattern)
            return _truth(_strings(args[0], lambda s: rx.match(s) is not None))
        method = {
            "contains": lambda s: pattern in s,
            "startswith": lambda s: s.startswith(pattern),
            "endswith": lambda s: s.endswith(pattern),
        }[fn]
        return _truth(_strings(args[0], method))

    # --- events: one stream's events, batch by batch -------------------------------------------

    def _events(self, fn: str, stream: str, arg: ast.expr) -> np.ndarray:
        """Aggregate `fn` of the event expression `arg` over each episode's events of `stream`."""
        times = any((ref := _record_ref(n)) is not None and ref[0] == "event" and ref[2] == "t" for n in ast.walk(arg))
        acc = PerEpisode(self.eps.n)
        ids = self.eps.table.column("episode_id").combine_chunks()
        for batch in event_batches(self.eps.lake, stream, ids, self.eps.metadata(), times=times):
            if fn in ("any", "all", "count"):
                acc.add(batch.episode, self._event_truth(arg, batch), None)
            else:
                acc.add(batch.episode, None, _numbers(self.event(arg, batch), batch.n))
        return acc.result(fn)

    def _event_truth(self, node: ast.expr, b: EventBatch) -> np.ndarray:
        """Each event's truth; a bare `event('S')` (or its .value) is every event, whatever its text."""
        ref = _record_ref(node)
        if ref is not None and ref[2] != "t":
            return np.ones(b.n, dtype=bool)
        return np.broadcast_to(_truth(self.event(node, b)), (b.n,))

    def event(self, node: ast.expr, b: EventBatch) -> Any:
        """An event-level expression over one batch: an array of b.n values, or a constant."""
        ref = _record_ref(node)
        if ref is not None:
            return b.t if ref[2] == "t" else b.value
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List)):
            return [self.event(e, b) for e in node.elts]
        if isinstance(node, ast.BoolOp):
            vals = [self._event_truth(v, b) for v in node.values]
            out = vals[0]
            for v in vals[1:]:
                out = (out & v) if isinstance(node.op, ast.And) else (out | v)
            return out
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return ~self._event_truth(node.operand, b)
            v = _numbers(self.event(node.operand, b), b.n)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            with np.errstate(all="ignore"):
                return _ARITH[type(node.op)](
                    _numbers(self.event(node.left, b), b.n), _numbers(self.event(node.right, b), b.n)
                )
        if isinstance(node, ast.Compare):
            left = self.event(node.left, b)
            out = np.ones(b.n, dtype=bool)
            for op, comp in zip(node.ops, node.comparators, strict=True):
                right = self.event(comp, b)
                out &= _compare_event(op, left, right, b.n)
                left = right
            return out
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return self._apply(node.func.id, [self.event(a, b) for a in node.args])
        raise WhereError(f"--where {self.text!r}: {ast.unparse(node)!r} cannot be used inside an aggregate of events")

    def _steps(self, node: ast.expr) -> _Steps:
        """The episodes' steps; parse() marks every step expression, so they are loaded unless it missed one."""
        if self.steps is None:
            raise WhereError(
                f"--where {self.text!r}: {ast.unparse(node)!r} needs the episodes' steps, which were not loaded"
            )
        return self.steps

    def step(self, node: ast.expr) -> _StepValue | float:
        """A step-level expression: a `_StepValue`, or a plain number for constants."""
        steps = self._steps(node)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise WhereError(
                    f"--where {self.text!r}: inside an aggregate only numbers are allowed, not {node.value!r}"
                )
            return float(node.value)
        if isinstance(node, ast.Name):
            return steps.values[node.id]
        if isinstance(node, ast.Subscript):
            base, index = self.step(node.value), node.slice
            if not (isinstance(base, _StepValue) and isinstance(index, ast.Constant) and type(index.value) is int):
                raise WhereError(f"--where {self.text!r}: only state[i] / action[i] with an integer i can be indexed")
            return steps.index(base, index.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = self.step(node.operand)
            sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
            return _StepValue(sign * v.values, v.level) if isinstance(v, _StepValue) else sign * v
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "abs"
            and len(node.args) == 1
        ):
            v = self.step(node.args[0])
            return _StepValue(np.abs(v.values), v.level) if isinstance(v, _StepValue) else abs(v)
        if isinstance(node, (ast.BinOp, ast.Compare)):
            if isinstance(node, ast.Compare) and len(node.ops) != 1:
                raise WhereError(f"--where {self.text!r}: one comparison at a time inside an aggregate")
            left = self.step(node.left)
            right = self.step(node.right if isinstance(node, ast.BinOp) else node.comparators[0])
            op = node.op if isinstance(node, ast.BinOp) else node.ops[0]
            fn = _ARITH.get(type(op)) or _PY_OPS.get(type(op))
            if fn is None:
                raise WhereError(f"--where {self.text!r}: {ast.unparse(node)!r} cannot be used inside an aggregate")
            a: np.ndarray | float
            b: np.ndarray | float
            if isinstance(left, _StepValue) and isinstance(right, _StepValue):
                a, b, level = steps.align(left, right)
            elif isinstance(left, _StepValue):
                a, b, level = left.values, float(right), left.level  # type: ignore[arg-type]
            elif isinstance(right, _StepValue):
                a, b, level = float(left), right.values, right.level
            else:
                return float(fn(left, right))
            with np.errstate(all="ignore"):
                return _StepValue(np.asarray(fn(a, b), dtype=np.float64), level)
        raise WhereError(f"--where {self.text!r}: {ast.unparse(node)!r} cannot be used inside an aggregate")


def _numbers(values: Any, n: int) -> np.ndarray:
    """Event values as float64 [n]: text read as a number (NaN where it is none), true/false as 1/0."""
    if isinstance(values, np.ndarray) and values.dtype == object:
        return np.array([_number(v) for v in values], dtype=np.float64)
    if isinstance(values, list):
        raise WhereError("a list can only follow `in`, e.g. event('/mode') in ('a', 'b')")
    if isinstance(values, str) or values is None:
        return np.full(n, _number(values))
    return np.broadcast_to(np.asarray(values, dtype=np.float64), (n,))


def _number(v: Any) -> float:
    if isinstance(v, (bool, np.bool_)):
        return float(v)
    if v in ("true", "false"):
        return 1.0 if v == "true" else 0.0
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _as_event_text(v: Any) -> Any:
    """A constant compared with an event's text: true/false as the text a flag records."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return [_as_event_text(x) for x in v]
    return v


def _compare_event(op: ast.cmpop, left: Any, right: Any, n: int) -> np.ndarray:
    """`_compare_one` for event values: text against a number compares as numbers."""
    left, right = _as_event_text(left), _as_event_text(right)
    text = [isinstance(x, np.ndarray) and x.dtype == object for x in (left, right)]
    number = [isinstance(x, (int, float)) and not isinstance(x, bool) for x in (left, right)]
    if (text[0] and number[1]) or (text[1] and number[0]):
        left, right = _numbers(left, n), _numbers(right, n)
    return _compare_one(op, left, right, n)


def _compare_one(op: ast.cmpop, left: Any, right: Any, n: int) -> np.ndarray:
    if isinstance(op, (ast.In, ast.NotIn)):
        if not isinstance(right, list):
            raise WhereError("`in` needs a list, e.g. embodiment in ('gr1', 'so101')")
        allowed = set(right)
        res = np.array([v in allowed for v in np.asarray(left, dtype=object).ravel()], dtype=bool)
        return ~res if isinstance(op, ast.NotIn) else res
    if isinstance(op, (ast.Is, ast.IsNot)) or right is None or left is None:
        lv = np.asarray(left, dtype=object)
        rv = np.asarray(right, dtype=object)
        res = np.vectorize(lambda a, b: a is b or a == b, otypes=[bool])(
            np.broadcast_to(lv, (n,)), np.broadcast_to(rv, (n,))
        )
        return ~res if isinstance(op, (ast.IsNot, ast.NotEq)) else res
    lv, rv = np.asarray(left), np.asarray(right)
    if lv.dtype == object or rv.dtype == object:

        def cmp(a: Any, b: Any) -> bool:
            if a is None or b is None:
                return False
            try:
                return bool(_PY_OPS[type(op)](a, b))
            except TypeError:
                return False

        return np.vectorize(cmp, otypes=[bool])(np.broadcast_to(lv, (n,)), np.broadcast_to(rv, (n,)))
    with np.errstate(invalid="ignore"):
        return np.broadcast_to(np.asarray(_PY_OPS[type(op)](lv, rv), dtype=bool), (n,)).copy()


_PY_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}


# Conjuncts Lance can apply while it reads the episodes table, with the same truth as `_Eval`'s:
# a comparison of an int64 column with an integer (a null is false in both; `!=` is left out, as
# numpy's NaN != n is true where SQL's NULL != n is not), and (in)equality of a string column
# with a string (None is false either way).
_PUSHED_INT = frozenset({"source_episode_index", "num_steps", "ingested_at"})
_PUSHED_STR = frozenset({"episode_id", "source_uri", "source_format", "embodiment", "task", "content_hash"})
_SQL_OPS: dict[type, str] = {ast.Eq: "=", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_MIRROR: dict[type, type] = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE}


def pushed_down(where: Where) -> str | None:
    """The SQL of the top-level conjuncts of `where` that Lance applies while reading the episodes
    (see `_PUSHED_INT`), or None. The expression is still evaluated whole on what Lance keeps; the
    push-down only spares reading the rows it would drop, so that `tag`'s `source_episode_index <
    100` costs 100 rows, not a column of every episode (issue 37). None for an expression naming
    the record's streams (their names are checked against every episode's record)."""
    if where.streams or where.event_streams:
        return None
    parts = [sql for node in _conjuncts(where.tree) if (sql := _pushed(node)) is not None]
    return " AND ".join(parts) if parts else None


def _conjuncts(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return [c for v in node.values for c in _conjuncts(v)]
    return [node]


def _pushed(node: ast.expr) -> str | None:
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
        return None
    left, op, right = node.left, type(node.ops[0]), node.comparators[0]
    if isinstance(left, ast.Constant) and isinstance(right, ast.Name):
        left, right, op = right, left, _MIRROR.get(op, op)
    if not (isinstance(left, ast.Name) and isinstance(right, ast.Constant) and op in _SQL_OPS):
        return None
    value = right.value
    if left.id in _PUSHED_INT and isinstance(value, int) and not isinstance(value, bool) and op is not ast.NotEq:
        return f"{left.id} {_SQL_OPS[op]} {value}"
    if left.id in _PUSHED_STR and isinstance(value, str) and op in (ast.Eq, ast.NotEq):
        return f"{left.id} {_SQL_OPS[op]} {sql_quote(value)}"
    return None


def select_episode_ids(lake: Lake, where: str | Where) -> list[str]:
    """The ids of the episodes of `lake` (at its version and scope) that `where` keeps, in table order.

    Raises:
        WhereError: the expression is invalid.
    """
    parsed = parse_where(where) if isinstance(where, str) else where
    eps = _Episodes(lake, parsed)
    if eps.n == 0:
        return []
    if parsed.streams or parsed.event_streams:
        _check_streams(parsed, recorded_streams(eps.metadata()))
    ids = eps.table.column("episode_id").to_pylist()
    steps = _Steps(lake, ids, parsed.step_columns) if parsed.needs_steps else None
    mask = _truth(_Eval(eps, steps, parsed.text).run(parsed.tree))
    if mask.shape != (eps.n,):
        mask = np.broadcast_to(mask, (eps.n,))
    return [e for e, keep in zip(ids, mask.tolist(), strict=True) if keep]


def _check_streams(where: Where, known: dict[str, str]) -> None:
    """Every stream `where` names is one the lake's episodes recorded, and event() names an event stream."""
    for name in sorted(where.streams | where.event_streams):
        if name in known:
            continue
        if not known:
            raise WhereError(
                f"--where {_short(where.text)}: no episode here keeps a record of its streams (a lake of format 2, "
                f"or sources whose streams are all steps), so there is no stream {name!r}"
            )
        shown = ", ".join(list(known)[:_SHOWN_STREAMS]) + (
            f" (and {len(known) - _SHOWN_STREAMS} more)" if len(known) > _SHOWN_STREAMS else ""
        )
        raise WhereError(
            f"--where {_short(where.text)}: no episode recorded a stream {name!r}; the streams are {shown}"
        )
    for name in sorted(where.event_streams):
        if known[name] not in EVENT_KINDS:
            raise WhereError(
                f"--where {_short(where.text)}: stream {name!r} is {known[name]}, not events; test it with "
                f"stream({name!r}).count, .rate_hz or .gaps"
            )
