"""`robolake bench doctor`: what measuring quality at ingest costs, and what robolake's doctor finds against the peer's.

Three figures, each measured in this run:

- `ingest`: ingest with quality on over quality off (`IngestConfig(quality=...)`), on the same
  planted-fault LeRobot v3.0 dataset (`robolake.testing.faulty_lerobot`; 40 clean episodes of 200
  steps, 12 with --quick, plus one per fault), 5 paired runs A B A B (3 with --quick) after a warm-up pair, CPU
  seconds (the work quality adds; the wall clock beside it). Goal: <= 1.1x.
- `doctor`: `robolake.lake.doctor` on a synthetic lake of 10,000 episodes (2,000 with --quick,
  or `--episodes N`; `bench curate`'s `build_lake`, 20 steps each on average, one 64 px JPEG
  camera): first `--update` once (that lake is written without quality: every episode's quality,
  frame fingerprints included, computed from its steps and media and published as a version;
  batches in one worker process per CPU), wall and CPU (the workers' too), and per 1,000
  episodes; then the doctor, the median of 3 runs with its range.
  That lake's camera cycles through 16 noise images (`(episode + step) % 16`), so episodes
  of one length whose index agrees mod 16 show the same frames at every step: the doctor
  rightly calls most of them near-duplicates by frames, which is what its count of findings says.
- `peer`: robolake's doctor and `lerobot-doctor` (PyPI, its own isolated venv like `bench
  peers`' LeRobot, run as its CLI `lerobot-doctor DATASET --json`) on the same planted-fault
  datasets, v2.1 and v3.0, each with every fault of `faulty_lerobot.ALL_FAULTS` (the peer's kinds
  and the checks only robolake has: a length outlier, out-of-range state, an overexposed run, a
  duplicate by frames alone and one by actions alone). Per planted fault: whether each found it
  and with which of its checks (a finding counts when it names the planted episode, for a
  duplicate the copy, alone or in a pair, with a check that points at the fault: `ACCEPTS`; a black run may be found
  as a dark or a frozen camera run, an idle head/tail as a partly frozen action, a zeroed row as
  an action jump, an action spike also as out of range); the findings each
  made that were not planted (on clean episodes, or a check that fits no fault of that episode),
  and its dataset-level notes; and the seconds each took: robolake's doctor on the ingested lake,
  beside the ingest it needs first, and the peer's whole CLI run (its process, start-up
  included: what a user waits for). An episode ingest refuses as a duplicate of another (same
  content hash: a `duplicate` quarantine row naming which) counts as robolake's near-duplicate.

The peer's report is text: `parse_peer` turns its messages into (its check, a robolake check
name, episodes), from the message shapes of lerobot-doctor 0.2.0 (a saved report is under the
unit tests). If the peer cannot be installed, the peer columns say why and robolake is still
measured.

Usage: robolake bench doctor --json out.json [--quick] [--cache DIR] [--sections ingest,doctor,peer]
[--episodes N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robolake.bench._common import (
    Stopwatch,
    Timing,
    interleave,
    machine,
    print_table,
    spread,
    two_clock_ratios,
    write_json,
)
from robolake.bench.peers import PeerEnv, PeerError, default_cache, ensure_env

__all__ = [
    "ACCEPTS",
    "PEER",
    "Finding",
    "compare",
    "comparison_rows",
    "main",
    "parse_peer",
    "run",
]

GOAL_INGEST_RATIO = 1.1
PEER_TIMEOUT_S = 600
PEER = PeerEnv(
    name="lerobot-doctor",
    version="0.2.0",
    python="3.12",
    requirements=("lerobot-doctor==0.2.0",),
    script="",  # run as its CLI, no robolake-side script
    check="import lerobot_doctor.cli, av",
)
# A planted fault is found by a finding on its episode with one of these checks.
ACCEPTS: dict[str, frozenset[str]] = {
    "frozen_state": frozenset({"frozen_state"}),
    "frozen_action": frozenset({"frozen_action"}),
    "zero_rows": frozenset({"zero_rows", "action_jump"}),
    "near_duplicate": frozenset({"near_duplicate"}),
    "black_camera": frozenset({"dark_camera", "black_camera", "frozen_camera"}),
    "frozen_camera": frozenset({"frozen_camera"}),
    "timestamp_gap": frozenset({"timestamp_gap"}),
    "identical_dims": frozenset({"identical_dims"}),
    "idle_head": frozenset({"idle_head", "frozen_action"}),
    "idle_tail": frozenset({"idle_tail", "frozen_action"}),
    "action_jump": frozenset({"action_jump", "out_of_range"}),  # the spike leaves the embodiment's range too
    # robolake's own checks (`EXTRA_FAULTS`), planted beside the peer's
    "length_outlier": frozenset({"length_outlier"}),
    "out_of_range": frozenset({"out_of_range"}),
    "overexposed_camera": frozenset({"dark_camera", "frozen_camera"}),
    "frame_duplicate": frozenset({"near_duplicate"}),
    "action_duplicate": frozenset({"near_duplicate"}),
}


@dataclass(frozen=True)
class Finding:
    """One finding of either tool, in robolake's vocabulary.

    Attributes:
        tool: "robolake" or "lerobot-doctor".
        check: The tool's own check name ("frozen_state"; "Per-Episode Summary").
        kind: The robolake check it corresponds to ("other" where none does).
        episodes: LeRobot episode indices it names; () for a dataset-level note.
        detail: The tool's words.
    """

    tool: str
    check: str
    kind: str
    episodes: tuple[int, ...]
    detail: str


# --- the peer's report ------------------------------------------------------------------------

_EPISODE_LINE = re.compile(r"^Episode (\d+): (.+)$")
_FROZEN = re.compile(r"of episode (\d+) is consecutive identical actions")
_JUMPS = re.compile(r"Episode (\d+) has \d+ sudden large action jumps")
_PAIRS = re.compile(r"near-duplicate episode pair\(s\) detected: (.*)")
_LENGTHS = re.compile(r"abnormally (?:long|short) episode\(s\) \(.*\): \[([\d, ]*)\]")
_REASONS = (  # (words in a per-episode reason, robolake check)
    ("frozen", "frozen_action"),
    ("dropped frame", "timestamp_gap"),
    ("non-monotonic", "timestamp_gap"),
    ("mean interval", "timestamp_gap"),
    ("action jump", "action_jump"),
    ("too short", "length_outlier"),
    ("single frame", "length_outlier"),
)


def _kind(reason: str) -> str:
    low = reason.lower()
    return next((kind for words, kind in _REASONS if words in low), "other")


def parse_peer(report: Mapping[str, Any]) -> list[Finding]:
    """lerobot-doctor's `--json` report as findings: every WARN or FAIL message, one finding per
    (check, episode, reason); messages that name no episode are dataset-level (episodes ())."""
    out: list[Finding] = []
    for check in report.get("checks", []):
        name = str(check.get("name", "?"))
        for msg in check.get("messages", []):
            if msg.get("severity") == "PASS":
                continue
            text = str(msg.get("message", ""))
            line = _EPISODE_LINE.match(text)
            pairs = _PAIRS.search(text)
            frozen, jumps, lengths = _FROZEN.search(text), _JUMPS.search(text), _LENGTHS.search(text)
            if line:
                for reason in line.group(2).split("; "):
                    out.append(Finding("lerobot-doctor", name, _kind(reason), (int(line.group(1)),), reason))
            elif frozen:
                out.append(Finding("lerobot-doctor", name, "frozen_action", (int(frozen.group(1)),), text))
            elif jumps:
                out.append(Finding("lerobot-doctor", name, "action_jump", (int(jumps.group(1)),), text))
            elif lengths:
                eps = tuple(int(x) for x in re.findall(r"\d+", lengths.group(1)))
                out.append(Finding("lerobot-doctor", name, "length_outlier", eps, text))
            elif pairs:
                for a, b in re.findall(r"\((\d+), (\d+)\)", pairs.group(1)):
                    out.append(Finding("lerobot-doctor", name, "near_duplicate", (int(a), int(b)), text))
            elif not text.startswith(("Total ", "...")):  # totals and "...and N more" repeat other lines
                out.append(Finding("lerobot-doctor", name, "other", (), text))
    return out


def run_peer(python: Path, dataset: Path) -> tuple[list[Finding], Timing]:
    """lerobot-doctor's CLI on `dataset` (exit 1 only means it saw a FAIL), timed with its process."""
    cmd = [str(python), "-c", "import sys; from lerobot_doctor.cli import main; main(sys.argv[1:])"]
    with Stopwatch() as sw:  # the child is reaped by run(): its CPU time is this process's children's
        proc = subprocess.run([*cmd, str(dataset), "--json"], capture_output=True, text=True, timeout=PEER_TIMEOUT_S)
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise PeerError(f"lerobot-doctor failed on {dataset} (exit {proc.returncode}): {last}")
    return parse_peer(json.loads(proc.stdout)), sw.timing


# --- scoring ----------------------------------------------------------------------------------


def compare(planted: Sequence[Mapping[str, Any]], findings: Mapping[str, Sequence[Finding]]) -> dict[str, Any]:
    """Score each tool's findings against the planted faults.

    Args:
        planted: `PlantedFault`s as dicts (`fault`, `episode_index`, `of_episode`, ...).
        findings: Tool name -> its findings.

    Returns:
        {"faults": [{fault, episode_index, <tool>: [its checks that found it]}...],
        "found": {tool: count}, "planted": count, "unplanted": {tool: [finding dicts]},
        "notes": {tool: [dataset-level details]}}.
    """
    rows: list[dict[str, Any]] = []
    for p in planted:
        row: dict[str, Any] = {"fault": p["fault"], "episode_index": int(p["episode_index"])}
        for tool, got in findings.items():
            row[tool] = sorted({f.check if f.check == f.kind else f"{f.check}: {f.kind}" for f in got if _finds(f, p)})
        rows.append(row)
    unplanted: dict[str, list[dict[str, Any]]] = {}
    notes: dict[str, list[str]] = {}
    for tool, got in findings.items():
        unplanted[tool], notes[tool] = [], []
        for f in got:
            if not f.episodes:
                notes[tool].append(f"{f.check}: {f.detail}")
            elif not any(_finds(f, p) for p in planted):
                unplanted[tool].append(
                    {"check": f.check, "kind": f.kind, "episodes": list(f.episodes), "detail": f.detail}
                )
    return {
        "faults": rows,
        "planted": len(rows),
        "found": {tool: sum(1 for r in rows if r[tool]) for tool in findings},
        "unplanted": unplanted,
        "notes": notes,
    }


def _finds(f: Finding, p: Mapping[str, Any]) -> bool:
    """Whether `f` finds planted fault `p`: a check that points at it, naming its episode. For a
    duplicate that is the copy (alone, or in a pair with the original): several copies of one
    original are planted, and a pair naming the original only says which copy it found."""
    return f.kind in ACCEPTS.get(p["fault"], frozenset({p["fault"]})) and int(p["episode_index"]) in f.episodes


def comparison_rows(scored: Mapping[str, Any], tools: Sequence[str]) -> list[tuple[str, str]]:
    """The table `main` prints: a row per planted fault, then the unplanted findings per tool."""
    rows: list[tuple[str, str]] = []
    for r in scored["faults"]:
        cells = [f"{t}: {', '.join(r[t]) if r[t] else 'MISSED'}" for t in tools]
        rows.append((f"{r['fault']} (episode {r['episode_index']})", " | ".join(cells)))
    for t in tools:
        rows.append((f"{t}: found", f"{scored['found'][t]}/{scored['planted']}"))
        extra = scored["unplanted"][t]
        text = "; ".join(f"{u['check']} on {u['episodes']}" for u in extra) or "none"
        rows.append((f"{t}: not planted", text))
    return rows


# --- robolake's side --------------------------------------------------------------------------


def _ingest(src: Path, dest: Path, *, quality: bool) -> None:
    from robolake.lake import IngestConfig, ingest

    shutil.rmtree(dest, ignore_errors=True)
    ingest(str(src), str(dest), IngestConfig(execution="local", quality=quality))


def robolake_findings(lake_dir: Path) -> tuple[list[Finding], Timing]:
    """robolake's doctor on the lake, its findings named by LeRobot episode_index, and its time.

    An episode ingest refused as a duplicate of another (same content hash) is robolake's
    near-duplicate finding too: it never reached the lake, and its quarantine row says of which.
    """
    from robolake.lake import Lake, doctor

    lake = Lake.open(str(lake_dir))
    eps = lake.episodes(columns=["episode_id", "source_episode_index"]).to_pylist()
    index = {r["episode_id"]: int(r["source_episode_index"]) for r in eps}
    with Stopwatch() as sw:
        report = doctor(lake)
    out = []
    for f in report.findings:
        where = getattr(f, "stream", None) or getattr(f, "camera", None)
        detail = f"{where}: {f.detail}" if where else str(f.detail)
        eid = getattr(f, "episode_id", None)
        out.append(Finding("robolake", f.check, f.check, (index[eid],) if eid in index else (), detail))
    for q in lake.to_arrow("quarantine", columns=["reason_code", "source_episode_index", "reason"]).to_pylist():
        if q["reason_code"] == "duplicate":
            out.append(
                Finding("robolake", "near_duplicate", "near_duplicate", (int(q["source_episode_index"]),), q["reason"])
            )
    return out, sw.timing


def _timings(ts: Iterable[Timing]) -> dict[str, Any]:
    ts = list(ts)
    return {
        clock: {
            "median": statistics.median(getattr(t, f"{clock}_s") for t in ts),
            "min": min(getattr(t, f"{clock}_s") for t in ts),
            "max": max(getattr(t, f"{clock}_s") for t in ts),
            "runs": len(ts),
        }
        for clock in ("wall", "cpu")
    }


def _seconds(s: Mapping[str, Any]) -> str:
    return f"{s['median']:.3f} s ({s['min']:.3f}-{s['max']:.3f}, {s['runs']} runs)"


# --- the run ----------------------------------------------------------------------------------


def measure_ingest(root: Path, quick: bool) -> dict[str, Any]:
    from robolake.testing.faulty_lerobot import FaultySpec, write_faulty_lerobot

    data = write_faulty_lerobot(root / "ingest-src", FaultySpec(clean=12 if quick else 40, length=200, seed=1))

    def arm(quality: bool) -> Any:
        def go() -> Timing:
            with Stopwatch() as sw:
                _ingest(data.root, root / f"ingest-{quality}", quality=quality)
            return sw.timing

        return go

    arms = interleave({"off": arm(False), "on": arm(True)}, repeats=3 if quick else 5, warmup=1)
    ratios = two_clock_ratios(arms["on"], arms["off"], target_applies_to="cpu")
    return {
        **ratios,
        "episodes": len(data.episodes),
        "steps": sum(e.length for e in data.episodes),
        "goal_at_most": GOAL_INGEST_RATIO,
        "meets_goal": ratios["median"] <= GOAL_INGEST_RATIO,
        "note": "quality-on seconds over quality-off seconds (above 1: what quality costs)",
        "on_cpu_s": [t.cpu_s for t in arms["on"]],
        "off_cpu_s": [t.cpu_s for t in arms["off"]],
    }


def measure_doctor(root: Path, quick: bool, episodes: int | None = None) -> dict[str, Any]:
    """doctor on a synthetic lake of 10,000 episodes (2,000 with --quick, or `episodes`): first
    `--update` (the quality of every episode computed from its steps and media and published as a
    version: what an older lake costs once), then the doctor itself, three times."""
    from robolake.bench.curate import build_lake
    from robolake.lake import doctor

    n = episodes or (2_000 if quick else 10_000)
    with Stopwatch() as sw:
        lake_dir = build_lake(str(root / "lake10k"), n, steps=20)
    with Stopwatch() as up:
        updated = doctor(lake_dir, update=True)
    timings = []
    for _ in range(3):
        _, t = robolake_findings(Path(lake_dir))
        timings.append(t)
    return {
        "episodes": n,
        "build_s": sw.timing.as_dict(),
        "update_s": up.timing.as_dict(),
        "update_per_1k_episodes_s": {k: v * 1000 / n for k, v in up.timing.as_dict().items()},
        "update_workers": "default: one process per CPU from 1,024 episodes on",
        "cpus": os.cpu_count(),
        "findings_after_update": len(updated.findings),
        "findings_per_check": updated.counts(),
        **_timings(timings),
    }


def measure_peer(root: Path, quick: bool, cache: Path) -> dict[str, Any]:
    from robolake.testing.faulty_lerobot import ALL_FAULTS, FaultySpec, write_faulty_lerobot

    out: dict[str, Any] = {"peer": {"name": PEER.name, "version": PEER.version}}
    try:
        python: Path | None = ensure_env(PEER, cache)
    except PeerError as e:
        python, out["peer"]["unavailable"] = None, str(e)
    for version in ("v2.1", "v3.0"):
        data = write_faulty_lerobot(
            root / f"faulty-{version}", FaultySpec(version=version, clean=8, length=64, faults=ALL_FAULTS)
        )
        planted = data.manifest()["planted"]
        lake_dir = root / f"faulty-{version}-lake"
        with Stopwatch() as ingest_sw:
            _ingest(data.root, lake_dir, quality=True)
        mine, mine_t = robolake_findings(lake_dir)
        findings: dict[str, list[Finding]] = {"robolake": mine}
        entry: dict[str, Any] = {
            "episodes": len(data.episodes),
            "robolake_doctor_s": mine_t.as_dict(),
            "robolake_ingest_s": ingest_sw.timing.as_dict(),
        }
        if python is not None:
            try:
                theirs, their_t = run_peer(python, data.root)
                findings["lerobot-doctor"] = theirs
                entry["peer_s"] = their_t.as_dict()
            except (PeerError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
                entry["peer_error"] = str(e).splitlines()[0]
        entry.update(compare(planted, findings))
        out[version] = entry
    return out


SECTIONS = ("ingest", "doctor", "peer")


def run(
    quick: bool,
    *,
    cache: Path | None = None,
    sections: Sequence[str] = SECTIONS,
    episodes: int | None = None,
) -> dict[str, Any]:
    """The figures of the module docstring (those of `sections`)."""
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        raise ValueError(f"unknown sections {unknown}; choose from {', '.join(SECTIONS)}")
    with tempfile.TemporaryDirectory(prefix="robolake-bench-doctor-") as tmp:
        root = Path(tmp)
        out: dict[str, Any] = {"machine": machine(), "quick": quick}
        if "ingest" in sections:
            out["ingest"] = measure_ingest(root, quick)
        if "doctor" in sections:
            out["doctor"] = measure_doctor(root, quick, episodes)
        if "peer" in sections:
            out["peer"] = measure_peer(root, quick, cache or default_cache())
        return out


def print_result(res: Mapping[str, Any]) -> None:
    rows: list[tuple[str, str]] = []
    if "ingest" in res:
        ing = res["ingest"]
        flag = "" if ing["meets_goal"] else "  above goal"
        rows.append(
            (
                f"ingest quality on / off ({ing['episodes']} episodes, CPU; goal <= {ing['goal_at_most']:.2f}x)",
                f"{spread(ing['cpu'])}{flag}; wall {spread(ing['wall'])}",
            )
        )
    if "doctor" in res:
        doc = res["doctor"]
        up = doc["update_s"]
        rows += [
            (
                f"doctor --update on {doc['episodes']:,} episodes (once)",
                f"wall {up['wall_s']:.2f} s, CPU {up['cpu_s']:.2f} s "
                f"({doc['update_per_1k_episodes_s']['cpu_s']:.2f} CPU s per 1,000)",
            ),
            (f"doctor on {doc['episodes']:,} episodes, wall", _seconds(doc["wall"])),
            (f"doctor on {doc['episodes']:,} episodes, CPU", _seconds(doc["cpu"])),
            ("findings per check on that lake", ", ".join(f"{k} {v}" for k, v in doc["findings_per_check"].items())),
        ]
    if rows:
        print_table("quality at ingest and the doctor's time", rows)
    if "peer" not in res:
        return
    peer = res["peer"]
    for version in ("v2.1", "v3.0"):
        entry = peer[version]
        tools = [t for t in ("robolake", "lerobot-doctor") if t in entry["found"]]
        rows = comparison_rows(entry, tools)
        rows.append(
            (
                "robolake seconds (doctor; ingest first)",
                f"{entry['robolake_doctor_s']['wall_s']:.3f}; {entry['robolake_ingest_s']['wall_s']:.3f}",
            )
        )
        if "peer_s" in entry:
            rows.append(("lerobot-doctor seconds (whole CLI run)", f"{entry['peer_s']['wall_s']:.3f}"))
        else:
            rows.append(("lerobot-doctor", peer["peer"].get("unavailable") or entry.get("peer_error", "not run")))
        print_table(f"planted faults, LeRobot {version} ({entry['episodes']} episodes)", rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="robolake bench doctor", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--json", required=True, help="where to write the results")
    p.add_argument("--quick", action="store_true", help="a smaller ingest, 3 pairs, a 2,000-episode lake")
    p.add_argument("--cache", default=None, help="peer environments (default ~/.cache/robolake/peers)")
    p.add_argument(
        "--sections", default=",".join(SECTIONS), help="which figures, comma-separated (default: all of %(default)s)"
    )
    p.add_argument("--episodes", type=int, default=None, help="the doctor's lake size (default 10,000; 2,000 --quick)")
    args = p.parse_args(argv)
    sections = [x.strip() for x in args.sections.split(",") if x.strip()]
    if args.episodes is not None and args.episodes < 2:
        p.error(f"--episodes must be >= 2, got {args.episodes}")
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown or not sections:
        p.error(f"--sections: unknown {unknown or 'none given'}; choose from {', '.join(SECTIONS)}")
    res = run(args.quick, cache=Path(args.cache) if args.cache else None, sections=sections, episodes=args.episodes)
    print_result(res)
    write_json(args.json, res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
