"""`robolake bench faults`: kinds of bad input against every command, and kill -9 at every phase of every verb.

The measured claim of [30] "Trust, round two": robolake, handed a lake, a pack output, a run folder,
a mixture or a `--where` made by someone else, answers or refuses in one line, never reads or writes
outside the root it was given, and never loses or mixes episodes when a writer is killed.

- **Tampered files.** A tiny synthetic lake (a split, a tag, a clone's dependents record), its pack
  output and a checkpoint are built once. Each *kind* is one (file kind, tampering): a lake version
  manifest, the format marker, a tag, a tag set, a dependents record, the lease record, each table's
  Lance manifest, data file, transaction, index and version hint, a table folder, the pack manifest
  and shards, a checkpoint's checkpoint.json and model.safetensors; truncated, emptied, deleted,
  replaced by a symlink to a canary outside the root, renamed, overwritten with garbage, grown
  past every size cap (sparse), or edited to a hostile value (a table name `../../etc/passwd`, a
  path to another lake, numbers past 64 bits). Plus hostile `--where` expressions, mixtures and
  mappings (the fuzz suite's ideas, through the CLI). For each kind a fresh copy is tampered with
  and every relevant command runs in this process through `robolake.cli.main` (stdout and stderr
  captured), the viewer's API through its ASGI app, the pack output through `open_shards`, the
  checkpoint through `read_checkpoint` and `write_checkpoint`.
- **Outcomes.** `answer` (rc 0), `one_line` (rc != 0, one stderr line, no traceback),
  `traceback` (anything else: a failure). Per kind, also: `blocking` (a command the tampered file
  does not concern, which answered on the good copy, no longer answers), `outside` (a canary's
  content reached an output, Python opened or listed a path that resolves into the canary folder,
  or the canary folder changed), `silent` (`check` exits 0 where the damage is one check must see:
  a referenced data file or manifest, a link out of the lake, or a reader that now fails).
- **Kills.** `ROBOLAKE_FAULT=<phase>:kill` in a subprocess running ingest, delete, select,
  restore, optimize (the writer phases) and split (the tag set phases); afterwards the lake must be
  at the version before or after, every version must check clean, the episodes must be exactly the
  set before or the set after (`lost`: an expected episode missing; `mixed`: any other set, or an
  episode twice), and running the verb again must work. `select --into` and `merge` are killed at
  each phase of making their target: the target must be whole or half-created debris that `check`
  names and a re-run clears, and the source lake must be untouched.

`--quick` runs every 8th kind and one kill per verb. Outcomes are measured, not asserted: the totals
say how far robolake is from the goals (>= 150 kinds; 0 silent, blocking, outside, tracebacks, lost
or mixed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import hashlib
import importlib
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robolake.bench._common import machine, print_table, write_json
from robolake.lake import faults as lake_faults

__all__ = ["main", "run"]

# -- outcomes -------------------------------------------------------------------------------------

ANSWER, ONE_LINE, TRACEBACK = "answer", "one_line", "traceback"
SLOW_S, SLOW_X = 5.0, 20.0  # a command slower than both (seconds, x its time on the good copy) read without bound
EMBODIMENTS = ("single_arm_7dof", "bimanual_14dof")
_U64 = 2**64 - 1
TAMPERED_TABLES = ("episodes", "steps", "media", "embodiments", "streams")


@dataclass
class Outcome:
    outcome: str
    rc: int
    line: str = ""
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "rc": self.rc, "line": self.line[:300], "seconds": round(self.seconds, 3)}


def _classify(rc: int, err: str, *, report: bool = False) -> str:
    """`report`: the command's refusal is a list of problems, one a line (`check`)."""
    if rc == 0:
        return ANSWER
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return ONE_LINE if (len(lines) == 1 or report and lines) and "Traceback" not in err else TRACEBACK


def _cli(argv: list[str]) -> tuple[Outcome, str]:
    """`robolake ARGV` in this process; returns its outcome and all it printed."""
    cli_main = _cli_module().main

    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli_main(list(argv))
        except SystemExit as e:  # argparse
            rc = e.code if isinstance(e.code, int) else 2
        except BaseException as e:  # escaped the CLI's own handler: a traceback for a user
            import traceback

            err.write("Traceback (most recent call last):\n" + "".join(traceback.format_exception(e)))
            rc = 1
    text = err.getvalue()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    o = Outcome(
        _classify(rc, text, report=argv[0] == "check"), rc, lines[-1] if lines else "", time.perf_counter() - t0
    )
    return o, out.getvalue() + text


def _cli_module() -> Any:
    """`robolake.cli`, looked up by name as a user's shell finds it: the bench measures the command a
    user runs and builds on none of its code (the layers contract keeps bench below the CLI)."""
    return importlib.import_module("robolake.cli")


_USER_ERRORS = (ValueError, OSError, LookupError, RuntimeError)


def _api(fn: Callable[[], Any]) -> tuple[Outcome, str]:
    """A Python entry point: an error of the documented families in one line, or a traceback."""
    t0 = time.perf_counter()
    try:
        got = fn()
    except _USER_ERRORS as e:
        text = str(e)
        one = "\n" not in text.strip() and len(text) < 2000
        return Outcome(ONE_LINE if one else TRACEBACK, 1, text, time.perf_counter() - t0), text
    except Exception as e:
        return Outcome(TRACEBACK, 1, f"{type(e).__name__}: {e}", time.perf_counter() - t0), repr(e)
    return Outcome(ANSWER, 0, "", time.perf_counter() - t0), str(got)


def _asgi_get(app: Any, path: str) -> tuple[int, bytes]:
    """One GET through the ASGI app (no server, no HTTP client library)."""
    target, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": target,
        "raw_path": target.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    status, body = 0, bytearray()
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
        elif message["type"] == "http.response.body":
            body.extend(message.get("body", b""))

    asyncio.run(app(scope, receive, send))
    return status, bytes(body)


def _view(lake_uri: str, episode: str) -> tuple[Outcome, str]:
    logging.getLogger("robolake.view").setLevel(logging.ERROR)
    return _view_paths(lake_uri, episode)


def _view_paths(lake_uri: str, episode: str) -> tuple[Outcome, str]:
    """The viewer over the lake: a few pages and API paths. A 500 (or an escaped error) is a traceback;
    503 with one line is the damaged-data answer."""
    from urllib.parse import quote

    from robolake.lake import Lake
    from robolake.view import create_app

    t0 = time.perf_counter()
    try:  # what `robolake view` does before serving: a failure here is its one line
        app = create_app(Lake.open(lake_uri))
    except _USER_ERRORS as e:
        return Outcome(ONE_LINE, 2, str(e), time.perf_counter() - t0), str(e)
    except Exception as e:
        return Outcome(TRACEBACK, 1, f"{type(e).__name__}: {e}", time.perf_counter() - t0), repr(e)
    eid = quote(episode, safe="")
    paths = [
        "/",
        "/api/lake",
        "/api/versions",
        "/api/episodes",
        f"/api/episode?id={eid}",
        f"/api/steps?id={eid}",
        f"/api/frame?id={eid}&camera=wrist&step=0",
        "/api/quarantine",
    ]
    texts, worst, line = [], ANSWER, ""
    for p in paths:  # the app logs each damaged answer as one warning line: measured here, not printed
        try:
            status, body = _asgi_get(app, p)
        except Exception as e:
            status, body = 500, repr(e).encode()
        texts.append(body.decode("utf-8", "replace"))
        if status >= 500 and status != 503 or b"Traceback" in body:
            worst, line = TRACEBACK, f"{p}: {status}"
        elif status >= 400 and status != 404 and worst == ANSWER:
            worst, line = ONE_LINE, f"{p}: {status} {body[:200].decode('utf-8', 'replace')}"
    return Outcome(worst, 0 if worst == ANSWER else 1, line, time.perf_counter() - t0), "\n".join(texts)


# -- the canary: what must never be read, listed or changed ---------------------------------------


class Canary:
    """A folder outside every root, holding text and a whole lake nothing may read.

    `strings` are contents only found inside it (a random token, the canary lake's episode ids):
    one of them in any output means robolake read the canary. Python-level opens and listings of
    paths resolving into it are counted by an audit hook; `digest` catches writes (by any code).
    """

    def __init__(self, root: Path):
        self.root = root.resolve()
        self.token = f"robolake-canary-{uuid.uuid4().hex}"
        self.strings: list[str] = [self.token]
        self.touched: list[str] = []
        self._armed = False
        self._hooked = False

    def write_files(self) -> None:
        (self.root / "files").mkdir(parents=True, exist_ok=True)
        doc = {"canary": self.token, "version": 2, "format": "robolake-lake", "tables": {}, "name": self.token}
        (self.root / "files" / "canary.json").write_text(json.dumps(doc))
        (self.root / "files" / "canary.bin").write_bytes(self.token.encode() * 64)

    def arm(self) -> None:
        if not self._hooked:
            sys.addaudithook(self._audit)
            self._hooked = True
        self._armed = True

    def disarm(self) -> None:
        self._armed = False

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if not self._armed or event not in _AUDITED or not args:
            return
        path = args[0]
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return
        self._armed = False  # realpath itself must not recurse into the hook
        try:
            real = os.path.realpath(path)
            if real == str(self.root) or real.startswith(str(self.root) + os.sep):
                self.touched.append(f"{event} {path}")
        finally:
            self._armed = True

    def digest(self) -> str:
        h = hashlib.sha256()
        for d, dirs, files in sorted(os.walk(self.root)):
            dirs.sort()
            for name in sorted(files + [x for x in dirs if os.path.islink(os.path.join(d, x))]):
                p = os.path.join(d, name)
                st = os.lstat(p)
                h.update(f"{os.path.relpath(p, self.root)}:{st.st_size}:{st.st_mtime_ns}".encode())
        return h.hexdigest()

    def found_in(self, text: str) -> bool:
        return any(s in text for s in self.strings)


_AUDITED = {"open", "os.listdir", "os.scandir", "os.remove", "os.rename", "os.rmdir", "shutil.rmtree", "os.truncate"}


# -- the fixture: a lake, its pack output, a run, a canary ---------------------------------------


@dataclass
class Fixture:
    work: Path
    sources: Path  # synthetic sources a, b
    base: Path  # lake/, packed/, run/ to copy per kind
    canary: Canary
    episode: str = ""
    tables: dict[str, int] = field(default_factory=dict)  # the newest lake version's table versions
    data_files: dict[str, str] = field(default_factory=dict)  # per table, a data file the newest version reads


def _ingest(src: Path, uri: Path) -> None:
    from robolake.lake import ingest

    ingest(str(src), str(uri))


def build_fixture(work: Path) -> Fixture:
    from robolake import curate
    from robolake.lake import Lake, create_tag, record_dependent
    from robolake.packers import PackSpec, TokenLengthConfig
    from robolake.packers.pipeline import pack
    from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

    canary = Canary(work / "canary")
    canary.write_files()
    src, base = work / "sources", work / "base"
    tiny = {"min_length": 12, "max_length": 16, "image_size": 16}
    generate_synthetic(src / "a", SyntheticConfig.tiny(embodiments=EMBODIMENTS, seed=3, **tiny))  # type: ignore[arg-type]
    generate_synthetic(src / "b", SyntheticConfig.tiny(embodiments=EMBODIMENTS[:1], seed=4, **tiny))  # type: ignore[arg-type]
    generate_synthetic(src / "c", SyntheticConfig.tiny(embodiments=EMBODIMENTS[:1], seed=9, **tiny))  # type: ignore[arg-type]
    # The canary lake: another team's data, which no tampering may make robolake show.
    _ingest(src / "c", canary.root / "lake")
    create_tag(str(canary.root / "lake"), "canary", 2, reason=canary.token)
    canary.strings += Lake.open(str(canary.root / "lake")).episode_ids()

    # Built where every case is tried (work/case), then moved aside: the pack manifest and the
    # checkpoint's lineage name the case's own lake and pack output, as they would after a real run.
    case = work / "case"
    lake_dir = case / "lake"
    _ingest(src / "a", lake_dir)
    uri = str(lake_dir)
    ids = sorted(Lake.open(uri).episode_ids())
    curate.delete(uri, episodes=ids[:1], reason="bench faults")  # a second content version
    curate.split(uri, curate.SplitConfig(val=0.5, seed=0))
    lake = Lake.open(uri)
    create_tag(uri, "good", lake.version, reason="a tag unrelated to most commands")
    clone = work / "clone"
    shutil.copytree(lake_dir, clone)
    tables = dict(lake.version_info.tables)
    record_dependent(uri, str(clone), tables, created_by="bench")
    spec = PackSpec(max_tokens=256, tokens=TokenLengthConfig(tokens_per_view=4, state_tokens=0))
    pack(uri, spec, str(case / "packed"), execution="local")
    _checkpoint(case / "run" / "checkpoints", case / "packed", uri, lake.version)
    episode = sorted(lake.episode_ids())[0]
    data_files = {}
    for table in TAMPERED_TABLES:
        frags = lake.dataset(table).get_fragments()
        if frags:
            data_files[table] = frags[-1].metadata.files[0].path
    case.rename(base)
    return Fixture(
        work=work, sources=src, base=base, canary=canary, episode=episode, tables=tables, data_files=data_files
    )


def _checkpoint(directory: Path, packed: Path, lake: str, version: int) -> None:
    import torch

    from robolake.training.checkpoint import write_checkpoint

    lineage = {
        "source": "pack",
        "pack_uri": str(packed),
        "pack_manifest_sha256": hashlib.sha256((packed / "manifest.json").read_bytes()).hexdigest(),
        "shards_version": json.loads((packed / "manifest.json").read_text())["shards_version"],
        "lake_uri": lake,
        "lake_version": version,
        "lake_tag": None,
    }
    meta = {"lineage": lineage, "note": "bench faults"}
    write_checkpoint(directory, step=1, tensors={"model": {"w": torch.zeros(4, 4)}}, meta=meta)


# -- tamperings -----------------------------------------------------------------------------------

Tamper = Callable[[Path, "Fixture"], None]


def _truncate(p: Path, fx: Fixture) -> None:
    size = p.stat().st_size
    os.truncate(p, size // 2)


def _empty(p: Path, fx: Fixture) -> None:
    os.truncate(p, 0)


def _delete(p: Path, fx: Fixture) -> None:
    shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()


def _rename(p: Path, fx: Fixture) -> None:
    p.rename(p.with_name(p.name + ".moved"))


def _garbage(p: Path, fx: Fixture) -> None:
    """Garbage over the last 64 bytes (a Lance file's footer, a JSON document's end)."""
    size = p.stat().st_size
    with open(p, "r+b") as f:
        f.seek(max(0, size - 64))
        f.write(os.urandom(min(64, size)))


def _grow(p: Path, fx: Fixture) -> None:
    """Sparse growth past every size cap (5 GiB; 512 MiB for Lance's files, which robolake does not
    parse itself: a reader that reads them whole shows as slow at that size already)."""
    os.truncate(p, (2**29 if p.suffix in (".lance", ".manifest", ".txn") else 5 * 2**30))


def _link_to(target: Callable[[Path, Fixture], Path]) -> Tamper:
    def tamper(p: Path, fx: Fixture) -> None:
        t = target(p, fx)
        _delete(p, fx)
        os.symlink(t, p)

    return tamper


def _canary_file(p: Path, fx: Fixture) -> Path:
    return fx.canary.root / "files" / ("canary.json" if p.suffix == ".json" else "canary.bin")


def _canary_twin(p: Path, fx: Fixture) -> Path:
    """The same file kind in the canary lake (a Lance file of the same table, its manifest, ...)."""
    parts = p.parts
    if "lake" not in parts:  # a pack output's file: the canary lake's steps stand in for its shards
        parts = (fx.canary.root / "lake" / "steps.lance" / p.relative_to(p.parents[1])).parts
    i = parts.index("lake")
    rel = Path(*parts[i + 1 :])
    twin = fx.canary.root / "lake" / rel
    if twin.exists():
        return twin
    siblings = sorted((fx.canary.root / "lake" / rel.parent).glob("*" + p.suffix))
    return siblings[-1] if siblings else _canary_file(p, fx)


def _edit_json(change: Callable[[Any, Fixture], Any]) -> Tamper:
    def tamper(p: Path, fx: Fixture) -> None:
        doc = json.loads(p.read_text())
        p.write_text(json.dumps(change(doc, fx)))

    return tamper


def _write_deep(p: Path, fx: Fixture) -> None:
    p.write_text("[" * 100_000 + "]" * 100_000)


BASIC: dict[str, Tamper] = {
    "truncate": _truncate,
    "empty": _empty,
    "delete": _delete,
    "symlink_out": _link_to(_canary_file),
    "rename": _rename,
    "garbage": _garbage,
    "grow_5GiB": _grow,
}
LANCE: dict[str, Tamper] = {**BASIC, "symlink_other_lake": _link_to(_canary_twin)}


def _not_json(p: Path, fx: Fixture) -> None:
    p.write_bytes(b"\xff\xfe{{{")


JSON_EXTRA: dict[str, Tamper] = {"deep_nesting": _write_deep, "not_json": _not_json}


def _set(key: str, value: Any) -> Tamper:
    return _edit_json(lambda d, fx: {**d, key: value})


def _set_table(name: str) -> Tamper:
    def change(d: Any, fx: Fixture) -> Any:
        tables = dict(d["tables"])
        tables[name] = tables.pop("episodes")
        return {**d, "tables": tables}

    return _edit_json(change)


VERSION_EDITS: dict[str, Tamper] = {
    "table_name_etc_passwd": _set_table("../../etc/passwd"),
    "table_name_other_lake": _edit_json(
        lambda d, fx: {**d, "tables": {**d["tables"], str(fx.canary.root / "lake" / "episodes"): 2}}
    ),
    "table_version_2pow70": _edit_json(lambda d, fx: {**d, "tables": {**d["tables"], "episodes": 2**70}}),
    "table_version_negative": _edit_json(lambda d, fx: {**d, "tables": {**d["tables"], "episodes": -1}}),
    "tables_is_text": _set("tables", "episodes"),
    "version_mismatch": _set("version", 7),
}
LAKE_JSON_EDITS: dict[str, Tamper] = {
    "format_other": _set("format", "not-robolake"),
    "format_version_999": _set("format_version", 999),
    "format_version_text": _set("format_version", "../../x"),
}
TAG_EDITS: dict[str, Tamper] = {
    "version_999": _set("version", 999),
    "version_negative": _set("version", -5),
    "name_path": _set("name", "../../../etc/passwd"),
    "episodes_hostile": _set("episodes", ["../../etc/passwd", None, 7]),
    "episodes_text": _set("episodes", "all"),
}


def _tagset_edit(change: Callable[[dict[str, Any]], dict[str, Any]]) -> Tamper:
    return _edit_json(lambda d, fx: {**d, "tags": [change(dict(t)) for t in d["tags"]]})


TAGSET_EDITS: dict[str, Tamper] = {
    "part_versions_differ": _edit_json(
        lambda d, fx: {**d, "tags": [{**t, "version": t["version"] - i} for i, t in enumerate(d["tags"])]}
    ),
    "part_name_path": _tagset_edit(lambda t: {**t, "name": "../../etc/passwd"}),
    "part_version_2pow70": _tagset_edit(lambda t: {**t, "version": 2**70}),
    "tags_is_text": _set("tags", "split:train"),
}
DEPENDENT_EDITS: dict[str, Tamper] = {
    "uri_canary_lake": _edit_json(lambda d, fx: {**d, "uri": str(fx.canary.root / "lake")}),
    "uri_etc": _set("uri", "/etc"),
    "table_name_path": _edit_json(lambda d, fx: {**d, "tables": {"../../etc/passwd": 1}}),
}
PACK_EDITS: dict[str, Tamper] = {
    "lake_uri_canary": _edit_json(lambda d, fx: {**d, "lake_uri": str(fx.canary.root / "lake")}),
    "shards_version_2pow70": _set("shards_version", 2**70),
    "num_samples_negative": _set("num_samples", -1),
    "spec_is_text": _set("spec", "../../etc/passwd"),
}
CHECKPOINT_EDITS: dict[str, Tamper] = {
    "format_other": _set("format", "not-a-checkpoint"),
    "step_negative": _set("step", -3),
    "pack_uri_relative": _edit_json(lambda d, fx: {**d, "lineage": {**d["lineage"], "pack_uri": "../../../etc"}}),
    "shards_version_2pow70": _edit_json(lambda d, fx: {**d, "lineage": {**d["lineage"], "shards_version": 2**70}}),
    "lineage_is_text": _set("lineage", "../../etc/passwd"),
}


# -- commands -------------------------------------------------------------------------------------

Runner = Callable[["Case"], tuple[Outcome, str]]


@dataclass
class Case:
    fx: Fixture
    dir: Path

    @property
    def lake(self) -> str:
        return str(self.dir / "lake")

    def fresh(self, name: str) -> str:
        return str(self.dir / "out" / f"{name}-{uuid.uuid4().hex[:6]}")


_PACK_OPTS = ["--max-tokens", "256", "--tokens-per-view", "4", "--no-progress"]


def _read_shards(c: Case) -> Any:
    from robolake.loaders import open_shards

    shards = open_shards(str(c.dir / "packed"), lake=c.lake)
    return shards.num_rows


def _read_checkpoint(c: Case) -> Any:
    from robolake.training.checkpoint import read_checkpoint

    ck = read_checkpoint(str(c.dir / "run"))
    return sorted(ck.meta) if hasattr(ck, "meta") else ck


def _save_checkpoint(c: Case) -> Any:
    import torch

    from robolake.training.checkpoint import write_checkpoint

    return write_checkpoint(c.dir / "run" / "checkpoints", step=2, tensors={"model": {"w": torch.ones(2)}}, meta={})


LAKE_COMMANDS: dict[str, Runner] = {
    "info": lambda c: _cli(["info", c.lake]),
    "info_json": lambda c: _cli(["info", c.lake, "--json"]),
    "episodes": lambda c: _cli(["info", c.lake, "--episodes"]),
    "check": lambda c: _cli(["check", c.lake]),
    "pack": lambda c: _cli(["pack", c.lake, c.fresh("pack"), *_PACK_OPTS]),
    "export": lambda c: _cli(["export", c.lake, c.fresh("export"), "--no-progress"]),
    "select_tag": lambda c: _cli(["select", c.lake, "--where", "num_steps > 0", "--tag", "picked"]),
    "info_tag": lambda c: _cli(["info", c.lake, "--tag", "good"]),
    "info_split": lambda c: _cli(["info", c.lake, "--split", "val"]),
    "tags": lambda c: _cli(["tag", c.lake, "--list"]),
    "diff": lambda c: _cli(["diff", c.lake, "2", "3"]),
    "gc": lambda c: _cli(["gc", c.lake, "--dry-run"]),
    "view": lambda c: _view(c.lake, c.fx.episode),
}
READERS = ("info", "info_json", "episodes", "pack", "export", "select_tag", "view")  # read the newest version's data
PACK_COMMANDS: dict[str, Runner] = {
    "open_shards": lambda c: _api(lambda: _read_shards(c)),
    "pack_overwrite": lambda c: _cli(["pack", c.lake, str(c.dir / "packed"), "--overwrite", *_PACK_OPTS]),
}
RUN_COMMANDS: dict[str, Runner] = {
    "lineage": lambda c: _cli(["lineage", str(c.dir / "run"), "--json"]),
    "read_checkpoint": lambda c: _api(lambda: _read_checkpoint(c)),
    "save_checkpoint": lambda c: _api(lambda: _save_checkpoint(c)),
}


@dataclass(frozen=True)
class Kind:
    """One kind of bad input: a tampering of one file kind (or one hostile argument)."""

    name: str
    commands: dict[str, Runner]
    tamper: Callable[[Case], None]
    unrelated: frozenset[str] = frozenset()  # commands the damage does not concern: they must still answer
    check_sees: bool = False  # damage `check` must report
    cross_root: bool = False  # the file names another root by design (a clone's URI): listing it is no leak


def _on(glob: str, tamper: Tamper) -> Callable[[Case], None]:
    def apply(c: Case) -> None:
        hits = sorted(c.dir.glob(glob))
        if not hits:
            raise FileNotFoundError(f"nothing matches {glob}")
        tamper(hits[-1], c.fx)

    return apply


def _lance_manifest(table: str, version: int) -> str:
    return f"lake/{table}.lance/_versions/{_U64 - version}.manifest"


def _kinds(fx: Fixture) -> list[Kind]:
    lake_all = frozenset(LAKE_COMMANDS)
    ks: list[Kind] = []

    def add(prefix: str, glob: str, tampers: dict[str, Tamper], cmds: dict[str, Runner], **kw: Any) -> None:
        for name, t in tampers.items():
            ks.append(Kind(f"{prefix}/{name}", cmds, _on(glob, t), **kw))

    newest = "lake/_robolake/versions/*.json"
    # Deleted or renamed away, the newest manifest leaves the lake as a writer killed before publishing
    # does: an intact earlier version, which check rightly passes (noting the unpublished table commits).
    gone = ("delete", "rename")
    damaged = {k: t for k, t in {**BASIC, **JSON_EXTRA, **VERSION_EDITS}.items() if k not in gone}
    add("version_manifest_newest", newest, damaged, LAKE_COMMANDS, check_sees=True)
    add("version_manifest_newest", newest, {k: BASIC[k] for k in gone}, LAKE_COMMANDS)
    oldest = "lake/_robolake/versions/00000001.json"
    add("version_manifest_oldest", oldest, {**BASIC, **JSON_EXTRA}, LAKE_COMMANDS, unrelated=frozenset(READERS))
    add(
        "lake_json",
        "lake/_robolake/lake.json",
        {**BASIC, **JSON_EXTRA, **LAKE_JSON_EDITS},
        LAKE_COMMANDS,
        check_sees=True,
    )
    tag_free = lake_all - {"info_tag", "tags", "check", "gc"}
    add("tag", "lake/_robolake/tags/good.json", {**BASIC, **JSON_EXTRA, **TAG_EDITS}, LAKE_COMMANDS, unrelated=tag_free)
    split_free = lake_all - {"info_split", "tags", "check", "gc"}
    tagset = "lake/_robolake/tags/split.tagset.json"
    add("tag_set", tagset, {**BASIC, **JSON_EXTRA, **TAGSET_EDITS}, LAKE_COMMANDS, unrelated=split_free)
    dep_free = lake_all - {"gc", "check"}
    deps = "lake/_robolake/dependents/*.json"
    add("dependents", deps, {**BASIC, **JSON_EXTRA}, LAKE_COMMANDS, unrelated=dep_free)
    add("dependents", deps, DEPENDENT_EDITS, LAKE_COMMANDS, unrelated=dep_free, cross_root=True)
    add(
        "lease_record",
        "lake/_robolake/lease/*.json",
        {**BASIC},
        LAKE_COMMANDS,
        unrelated=frozenset(READERS) - {"select_tag"},
    )
    damaging = {k: t for k, t in LANCE.items() if k != "grow_5GiB"}  # zeros past the end: every byte read is intact
    for table in TAMPERED_TABLES:
        data = f"lake/{table}.lance/data/{fx.data_files.get(table, 'none')}"
        add(f"data_file:{table}", data, damaging, LAKE_COMMANDS, check_sees=True)
        add(f"data_file:{table}", data, {"grow_5GiB": _grow}, LAKE_COMMANDS)
    for table in ("episodes", "steps", "media"):
        glob = _lance_manifest(table, fx.tables[table])
        add(f"table_manifest:{table}", glob, LANCE, LAKE_COMMANDS, check_sees=True)
    old = {k: BASIC[k] for k in ("delete", "garbage", "symlink_out")}
    add("table_manifest_old:episodes", _lance_manifest("episodes", 1), old, LAKE_COMMANDS, unrelated=frozenset(READERS))
    small = {k: BASIC[k] for k in ("delete", "garbage", "symlink_out", "grow_5GiB")}
    add("version_hint:steps", "lake/steps.lance/_versions/latest_version_hint.json", small, LAKE_COMMANDS,
        unrelated=frozenset(READERS))  # fmt: skip
    add("transaction:episodes", "lake/episodes.lance/_transactions/*.txn", small, LAKE_COMMANDS,
        unrelated=frozenset(READERS))  # fmt: skip
    add("index:episodes", "lake/episodes.lance/_indices/*/page_data.lance", small, LAKE_COMMANDS)
    add("deletion_file", "lake/*.lance/_deletions/*", small, LAKE_COMMANDS, check_sees=True)
    for table in ("episodes", "steps", "media"):
        ks.append(
            Kind(
                f"table_folder:{table}/symlink_other_lake",
                LAKE_COMMANDS,
                _on(f"lake/{table}.lance", _link_to(_in_canary_lake(f"{table}.lance"))),
                check_sees=True,
            )
        )
    for folder in ("versions", "tags"):
        ks.append(
            Kind(
                f"meta_folder:{folder}/symlink_other_lake",
                LAKE_COMMANDS,
                _on(f"lake/_robolake/{folder}", _link_to(_in_canary_lake(f"_robolake/{folder}"))),
                check_sees=True,
            )
        )
    ks.append(Kind("meta_folder:_robolake/delete", LAKE_COMMANDS, _on("lake/_robolake", _delete), check_sees=True))
    # the pack output
    add("pack_manifest", "packed/manifest.json", {**BASIC, **JSON_EXTRA, **PACK_EDITS}, PACK_COMMANDS)
    add("pack_shard", "packed/shards.lance/data/*.lance", LANCE, PACK_COMMANDS)
    add("pack_shards_manifest", "packed/shards.lance/_versions/*.manifest", BASIC, PACK_COMMANDS)
    ks.append(
        Kind(
            "pack_shards_folder/symlink_out",
            PACK_COMMANDS,
            _on("packed/shards.lance", _link_to(lambda p, fx: fx.canary.root / "lake" / "steps.lance")),
        )
    )
    # the run
    ck = "run/checkpoints/step_*/"
    add("checkpoint_json", ck + "checkpoint.json", {**BASIC, **JSON_EXTRA, **CHECKPOINT_EDITS}, RUN_COMMANDS)
    add("model_safetensors", ck + "model.safetensors", BASIC, RUN_COMMANDS)
    for folder, glob in (("checkpoints", "run/checkpoints"), ("step_N", "run/checkpoints/step_*")):
        ks.append(Kind(f"run_folder:{folder}/symlink_out", RUN_COMMANDS, _on(glob, _link_to(_canary_dir))))
    ks += _argument_kinds()
    return ks


def _in_canary_lake(rel: str) -> Callable[[Path, Fixture], Path]:
    def target(p: Path, fx: Fixture) -> Path:
        return fx.canary.root / "lake" / rel

    return target


def _canary_dir(p: Path, fx: Fixture) -> Path:
    d = fx.canary.root / "files"
    return d


# -- hostile arguments: --where, mixtures, mappings --------------------------------------------------

WHERES = [
    "not " * 20000 + "success",
    "(" * 5000 + "1" + ")" * 5000,
    "state[10**23] > 0",
    "state[99999999999999999999999] > 0",
    "__import__('os').system('touch /tmp/robolake-pwned')",
    "().__class__.__bases__[0].__subclasses__()",
    "num_steps > 1e308 * 10",
    "task = 'x' ; DROP TABLE episodes",
    "max(abs(action)) > 10**10**10",
    "meta.\x00 = 1",
    "lower(" * 3000 + "task" + ")" * 3000,
    "num_steps in (" + ",".join(["1"] * 200_000) + ")",
    "'" * 10001,
    "like(task, '" + "%" * 50000 + "')",
    "episode_id = '../../etc/passwd'",
]
MIXES = [
    "embodiment=single_arm_7dof:1e309",
    "embodiment=single_arm_7dof:nan",
    "embodiment=single_arm_7dof:-1",
    "embodiment=single_arm_7dof:0",
    "tag=../../etc/passwd:1",
    "embodiment=" + "x" * 100_000 + ":1",
    "FILE:epoch_size: 100000000000000\nweights:\n  embodiment=single_arm_7dof: 1\n",
    "FILE:epoch_size: .inf\nweights:\n  embodiment=single_arm_7dof: 1\n",
    "FILE:weights:\n  a: 1\n  a: 2\n",
    "FILE:" + "[" * 100_000,
    "FILE:!!python/object/apply:os.system ['touch /tmp/robolake-pwned']\n",
    "FILE:weights: {embodiment=single_arm_7dof: 1.7976931348623157e308,"
    " embodiment=bimanual_14dof: 1.7976931348623157e308}\n",
]
MAPPINGS = [
    "embodiment: arm\nfps: 30\nstate:\n  - {source: ../../../../etc/passwd, field: position}\n",
    "!!python/object/apply:os.system ['touch /tmp/robolake-pwned']\n",
    "embodiment: arm\nembodiment: other\n",
    "[" * 100_000,
    "embodiment: arm\nfps: 1e400\n",
]


def _arg_file(c: Case, text: str, name: str) -> str:
    p = c.dir / name  # a file the user names is theirs to name: no symlink kinds here
    p.write_text(text)
    return str(p)


def _argument_kinds() -> list[Kind]:
    ks = []
    for i, expr in enumerate(WHERES):
        cmds: dict[str, Runner] = {
            "select_tag": functools.partial(_select_where, expr=expr),
            "pack_where": functools.partial(_pack_where, expr=expr),
            "view_where": functools.partial(_view_where, expr=expr),
        }
        ks.append(Kind(f"where/{i:02d}", cmds, lambda c: None))
    for i, mix in enumerate(MIXES):

        def run_mix(c: Case, m: str = mix) -> tuple[Outcome, str]:
            arg = _arg_file(c, m[len("FILE:") :], "mix.yaml") if m.startswith("FILE:") else m
            return _cli(["pack", c.lake, c.fresh("mix"), "--mix", arg, *_PACK_OPTS])

        ks.append(Kind(f"mixture/{i:02d}", {"pack_mix": run_mix}, lambda c: None))
    for i, text in enumerate(MAPPINGS):

        def run_map(c: Case, t: str = text) -> tuple[Outcome, str]:
            return _cli(["inspect", str(c.fx.sources / "a"), "--map", _arg_file(c, t, "map.yaml")])

        ks.append(Kind(f"mapping/{i:02d}", {"inspect_map": run_map}, lambda c: None))
    return ks


def _select_where(c: Case, expr: str) -> tuple[Outcome, str]:
    return _cli(["select", c.lake, "--where", expr, "--tag", "w"])


def _pack_where(c: Case, expr: str) -> tuple[Outcome, str]:
    if not _has_option("pack", "--where"):
        return Outcome(ANSWER, 0, "pack has no --where option"), ""
    return _cli(["pack", c.lake, c.fresh("p"), "--where", expr, *_PACK_OPTS])


def _has_option(command: str, option: str) -> bool:
    sub = next(a for a in _cli_module().build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return option in sub.choices[command]._option_string_actions


def _view_where(c: Case, expr: str) -> tuple[Outcome, str]:
    from urllib.parse import quote

    from robolake.lake import Lake
    from robolake.view import create_app

    t0 = time.perf_counter()
    status, body = _asgi_get(create_app(Lake.open(c.lake)), f"/api/episodes?where={quote(expr, safe='')}")
    text = body.decode("utf-8", "replace")
    outcome = ANSWER if status == 200 else ONE_LINE if status in (400, 503) and len(text) < 4000 else TRACEBACK
    return Outcome(outcome, 0 if status == 200 else 1, f"{status} {text[:200]}", time.perf_counter() - t0), text


# -- one kind ---------------------------------------------------------------------------------------


def _copy_case(fx: Fixture, dest: Path) -> Case:
    shutil.copytree(fx.base, dest, symlinks=True)
    return Case(fx=fx, dir=dest)


def _try_kind(fx: Fixture, kind: Kind, dest: Path, baseline: dict[str, Outcome]) -> dict[str, Any]:
    case = _copy_case(fx, dest)
    before = fx.canary.digest()
    row: dict[str, Any] = {"kind": kind.name, "commands": {}}
    try:
        kind.tamper(case)
    except FileNotFoundError as e:
        shutil.rmtree(dest, ignore_errors=True)
        return {"kind": kind.name, "skipped": str(e)}
    fx.canary.touched.clear()
    fx.canary.arm()
    flags: dict[str, list[str]] = {"blocking": [], "outside": [], "traceback": [], "slow": []}
    try:
        for cmd, runner in kind.commands.items():
            outcome, text = runner(case)
            good = baseline.get(cmd)
            row["commands"][cmd] = outcome.as_dict()
            if outcome.outcome == TRACEBACK:
                flags["traceback"].append(cmd)
            if fx.canary.found_in(text):
                flags["outside"].append(f"{cmd}: canary content in its output")
            if fx.canary.touched and not kind.cross_root:
                flags["outside"].append(f"{cmd}: {fx.canary.touched[0]}")
                fx.canary.touched.clear()
            if outcome.seconds > max(SLOW_S, SLOW_X * (good.seconds if good else 0.0)):
                flags["slow"].append(f"{cmd}: {outcome.seconds:.0f} s")
            if cmd in kind.unrelated and good is not None and good.outcome == ANSWER and outcome.outcome != ANSWER:
                flags["blocking"].append(cmd)
    finally:
        fx.canary.disarm()
    if fx.canary.digest() != before:
        flags["outside"].append("the canary folder changed")
    check = row["commands"].get("check")
    readers_failed = [c for c in READERS if row["commands"].get(c, {}).get("outcome", ANSWER) != ANSWER]
    row["silent"] = bool(check and check["rc"] == 0 and (kind.check_sees or readers_failed))
    row.update({k: v for k, v in flags.items()})
    row["clean"] = not (row["silent"] or any(flags.values()))
    shutil.rmtree(dest, ignore_errors=True)
    return row


def _baseline(fx: Fixture, work: Path) -> dict[str, Outcome]:
    """Every command on an untampered copy: what `blocking` is measured against."""
    case = _copy_case(fx, work / "case")
    out = {}
    for cmds in (LAKE_COMMANDS, PACK_COMMANDS, RUN_COMMANDS):
        for name, runner in cmds.items():
            out[name] = runner(case)[0]
    shutil.rmtree(case.dir, ignore_errors=True)
    return out


# -- kills per verb and phase -----------------------------------------------------------------------

WRITER_PHASES = list(lake_faults.INGEST_PHASES)
VERB_PHASES = [
    "lease_acquired",
    "after_commit:episodes",
    "after_commit:steps",
    "after_commit:embodiments",
    "before_publish",
    "manifest_written",
]
KILLS: dict[str, list[str]] = {
    "ingest": WRITER_PHASES,
    "delete": VERB_PHASES,
    "select": VERB_PHASES,
    "restore": VERB_PHASES,
    "optimize": [p for p in VERB_PHASES if p != "after_commit:embodiments"] + ["after_commit:media"],
    "split": ["tag_set:before", "tag_set:published"],
}
QUICK_KILLS: dict[str, list[str]] = {
    "ingest": ["after_commit:steps"],
    "delete": ["before_publish"],
    "split": ["tag_set:before"],
}
_SCRIPTS = {
    "ingest": "from robolake.lake import ingest\ningest(a[2], uri)",
    "delete": f"curate.delete(uri, where=\"embodiment = '{EMBODIMENTS[1]}'\", reason='bench')",
    "select": "curate.select(uri, 'num_steps >= 14', reason='bench')",
    "restore": "curate.restore_episodes(uri, a[2].split(','))",
    "optimize": "curate.optimize(uri)",
    "split": "curate.split(uri, curate.SplitConfig(val=0.5))",
}


def _verb_here(verb: str, uri: str, arg: str) -> int:
    """The verb in this process (a reference run, a re-run after a kill): 0, or 1 on an error."""
    try:
        exec(f"from robolake import curate\n{_SCRIPTS[verb]}\n", {"a": ["", uri, arg], "uri": uri})
    except Exception:
        return 1
    return 0


def _verb(verb: str, uri: str, arg: str, fault: str) -> int:
    from robolake.lake import faults

    code = f"import sys\nfrom robolake import curate\na = sys.argv\nuri = a[1]\n{_SCRIPTS[verb]}\n"
    repo = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", ""), faults.ENV_VAR: fault}
    if not fault:
        env.pop(faults.ENV_VAR)
    proc = subprocess.run(
        [sys.executable, "-c", code, uri, arg], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300
    )
    return proc.returncode


def _state(uri: str) -> tuple[int, list[str], dict[str, int]]:
    from robolake.lake import Lake, list_tags

    lake = Lake.open(uri)
    ids = lake.episodes(columns=["episode_id"])["episode_id"].to_pylist()
    return lake.version, ids, {t.name: t.version for t in list_tags(uri) if t.name.startswith("split:")}


def _kill_case(fx: Fixture, verb: str, phase: str, dest: Path) -> dict[str, Any]:
    from robolake import curate
    from robolake.lake import Lake, check_lake, list_versions

    uri = str(dest / "lake")
    _ingest(fx.sources / "a", Path(uri))
    arg = ""
    if verb == "ingest":
        arg = str(fx.sources / "b")
    elif verb == "restore":
        arg = ",".join(sorted(Lake.open(uri).episode_ids())[:2])
        curate.delete(uri, episodes=arg.split(","), reason="to restore")
    elif verb == "optimize":
        _ingest(fx.sources / "b", Path(uri))
    v0, ids0, _ = _state(uri)
    # the set after: the verb run to completion on a copy
    ref = str(dest / "ref")
    shutil.copytree(uri, ref)
    rc_ref = _verb_here(verb, ref, arg)
    v1, ids1, tags1 = _state(ref)
    row: dict[str, Any] = {"verb": verb, "phase": phase, "reference_rc": rc_ref}
    t0 = time.perf_counter()
    rc = _verb(verb, uri, arg, f"{phase}:kill")
    row["killed"] = rc == -9
    try:
        v, ids, tags = _state(uri)
        bad = [f"version {v}: {p}" for v_ in list_versions(uri) for p in check_lake(uri, v_).problems[:1]]
        row["version"] = "before" if v == v0 else "after" if v == v0 + (0 if verb == "split" else 1) else f"other {v}"
        sets = {"before": sorted(ids0), "after": sorted(ids1)}
        row["episodes"] = next((k for k, s in sets.items() if sorted(ids) == s), "mixed")
        row["lost"] = len((set(ids0) & set(ids1)) - set(ids))  # in the lake before and after, gone now
        row["mixed"] = row["episodes"] == "mixed" or len(ids) != len(set(ids))
        if verb == "split":
            row["split"] = (
                "none" if not tags else "whole" if set(tags) == set(tags1) and len(set(tags.values())) == 1 else "half"
            )
            row["mixed"] = row["mixed"] or row["split"] == "half"
        row["check_problems"] = bad
        published = row["episodes"] == "after" and v != v0 or verb == "split" and bool(tags)
        rerun = 0 if published else _verb_here(verb, uri, arg)  # killed before publishing: the verb runs again
        v2, ids2, tags2 = _state(uri)
        row["rerun_rc"] = rerun
        row["rerun_ok"] = rerun == 0 and sorted(set(ids2)) == sorted(set(ids1))
        row["rerun_check_problems"] = [str(p) for p in check_lake(uri).problems[:2]]
    except Exception as e:  # the lake does not even open: the worst outcome
        row.update({"error": f"{type(e).__name__}: {e}", "mixed": True, "lost": -1})
    row["seconds"] = round(time.perf_counter() - t0, 2)
    row["clean"] = (
        row.get("killed", False)
        and not row.get("mixed")
        and not row.get("lost")
        and not row.get("check_problems")
        and row.get("rerun_ok", False)
        and not row.get("rerun_check_problems")
    )
    shutil.rmtree(dest, ignore_errors=True)
    return row


# -- kills of the verbs that make a new lake (select --into, merge) --------------------------------

INTO_PHASES = ["creating:marked", "after_commit:media", "before_publish"]
_INTO_SCRIPTS = {
    "select --into": f"curate.select_into(uri, \"embodiment = '{EMBODIMENTS[1]}'\", into)",
    "merge": "curate.merge([uri, other], into)",
}


def _into_here(verb: str, uri: str, into: str, other: str) -> None:
    exec(f"from robolake import curate\n{_INTO_SCRIPTS[verb]}\n", {"uri": uri, "into": into, "other": other})


def _into_kill_case(fx: Fixture, verb: str, phase: str, dest: Path) -> dict[str, Any]:
    """Kill `verb` at `phase`: the target is published whole or is debris that `check` names and a
    re-run clears; the source lake is untouched."""
    from robolake.lake import Lake, check_lake, faults

    uri, other = str(dest / "lake"), str(dest / "other")
    _ingest(fx.sources / "a", Path(uri))
    _ingest(fx.sources / "b", Path(other))
    v0, ids0, _ = _state(uri)
    ref = str(dest / "ref")
    _into_here(verb, uri, ref, other)
    want = sorted(Lake.open(ref).episode_ids())
    into = str(dest / "into")
    code = f"import sys\nfrom robolake import curate\nuri, into, other = sys.argv[1:4]\n{_INTO_SCRIPTS[verb]}\n"
    repo = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env[faults.ENV_VAR] = f"{phase}:kill"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, uri, into, other], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    row: dict[str, Any] = {"verb": verb, "phase": phase, "killed": proc.returncode == -9}
    try:
        problems = [str(p) for p in check_lake(into).problems[:1]]
        row["target"] = "whole" if not problems else "half-created" if "half-created" in problems[0] else "damaged"
        if row["target"] != "whole":
            _into_here(verb, uri, into, other)  # re-running clears the debris and makes the target
        row["rerun_check_problems"] = [str(p) for p in check_lake(into).problems[:2]]
        row["rerun_ok"] = sorted(Lake.open(into).episode_ids()) == want
        v, ids, _ = _state(uri)
        row["source_untouched"] = v == v0 and sorted(ids) == sorted(ids0)
        row["lost"] = 0
        row["mixed"] = not row["rerun_ok"]
    except Exception as e:
        row.update({"error": f"{type(e).__name__}: {e}", "mixed": True, "lost": -1})
    row["seconds"] = round(time.perf_counter() - t0, 2)
    row["clean"] = (
        row["killed"]
        and row.get("target") in ("whole", "half-created")
        and row.get("rerun_ok", False)
        and not row.get("rerun_check_problems")
        and row.get("source_untouched", False)
    )
    shutil.rmtree(dest, ignore_errors=True)
    return row


# -- the run ---------------------------------------------------------------------------------------


def run(quick: bool, *, work_dir: str | None = None) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="robolake-bench-faults-", dir=work_dir))
    t0 = time.perf_counter()
    try:
        fx = build_fixture(work)
        build_s = time.perf_counter() - t0
        baseline = _baseline(fx, work)
        kinds = _kinds(fx)
        # --quick: every 8th kind, leaving out index and deletion files (growing one costs Lance ~40 s)
        chosen = [k for k in kinds if not k.name.startswith(("index:", "deletion_file"))][::8] if quick else kinds
        rows = [_try_kind(fx, k, work / "case", baseline) for k in chosen]
        kills = QUICK_KILLS if quick else KILLS
        kill_rows = [
            _kill_case(fx, verb, phase, work / f"kill-{verb}-{phase.replace(':', '_')}")
            for verb, phases in kills.items()
            for phase in phases
        ]
        kill_rows += [
            _into_kill_case(fx, verb, phase, work / f"kill-{verb.split()[0]}-into-{phase.replace(':', '_')}")
            for verb in _INTO_SCRIPTS
            for phase in (INTO_PHASES[-1:] if quick else INTO_PHASES)
        ]
        tried = [r for r in rows if "skipped" not in r]
        totals = {
            "kinds": len(tried),
            "kinds_defined": len(kinds),
            "skipped": len(rows) - len(tried),
            "commands_run": sum(len(r["commands"]) for r in tried),
            "silent": sum(r["silent"] for r in tried),
            "blocking": sum(bool(r["blocking"]) for r in tried),
            "outside": sum(bool(r["outside"]) for r in tried),
            "tracebacks": sum(len(r["traceback"]) for r in tried),
            "kinds_with_tracebacks": sum(bool(r["traceback"]) for r in tried),
            "slow": sum(bool(r["slow"]) for r in tried),
            "kills": len(kill_rows),
            "kills_clean": sum(bool(r["clean"]) for r in kill_rows),
            "lost_episodes": sum(max(0, int(r.get("lost", 0))) for r in kill_rows),
            "mixed": sum(bool(r.get("mixed")) for r in kill_rows),
        }
        return {
            "machine": machine(),
            "quick": quick,
            "seconds": {"build": round(build_s, 2), "total": round(time.perf_counter() - t0, 2)},
            "baseline": {k: v.as_dict() for k, v in baseline.items()},
            "kinds": rows,
            "kills": kill_rows,
            "totals": totals,
            "goals": {"kinds": 150, "silent": 0, "blocking": 0, "outside": 0, "tracebacks": 0, "lost_or_mixed": 0},
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _report(res: dict[str, Any]) -> None:
    t = res["totals"]
    print_table(
        f"bad input and kills ({'quick' if res['quick'] else 'full'}; {res['seconds']['total']:.0f} s)",
        [
            ("kinds of bad input tried", t["kinds"]),
            ("commands run on them", t["commands_run"]),
            ("silent (check OK on damage)", t["silent"]),
            ("blocking a good dataset", t["blocking"]),
            ("read or written outside a root", t["outside"]),
            ("tracebacks", t["tracebacks"]),
            (f"kinds with a command > {SLOW_X:.0f}x its time (and {SLOW_S:.0f} s)", t["slow"]),
            ("kills (verb x phase)", t["kills"]),
            ("kills clean", t["kills_clean"]),
            ("lost episodes", t["lost_episodes"]),
            ("mixed (episodes or split)", t["mixed"]),
        ],
    )
    bad = [r for r in res["kinds"] if "skipped" not in r and not r["clean"]]
    if bad:
        print("\nkinds not clean")
        for r in bad:
            what = [f"{k}: {', '.join(r[k])}" for k in ("traceback", "blocking", "outside", "slow") if r[k]]
            what += ["silent: check exits 0"] if r["silent"] else []
            print(f"  {r['kind']:<48} {'; '.join(what)}")
            for cmd in r["traceback"] + r["blocking"]:
                print(f"      {cmd}: {r['commands'][cmd]['line'][:150]}")
    for k in (k for k in res["kills"] if not k["clean"]):
        print(
            f"  kill {k['verb']} at {k['phase']}: " + json.dumps({x: k.get(x) for x in k if x not in ("verb", "phase")})
        )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="robolake bench faults", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--json", required=True, help="where to write the results")
    p.add_argument("--quick", action="store_true", help="every 8th kind, one kill for each of three verbs")
    args = p.parse_args(argv)
    res = run(args.quick)
    _report(res)
    write_json(args.json, res)


if __name__ == "__main__":
    main()
