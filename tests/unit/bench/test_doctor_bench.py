"""`bench doctor` without running either doctor: the peer's report parsed from a saved sample and the
comparison table built from synthetic findings. The slow test at the end runs the whole benchmark --quick."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robolake.bench import available
from robolake.bench.doctor import ACCEPTS, Finding, compare, comparison_rows, main, parse_peer
from robolake.testing.faulty_lerobot import ALL_FAULTS, FAULTS

# lerobot-doctor 0.2.0 `--json` on write_faulty_lerobot(FaultySpec(version="v3.0")): 4 clean
# episodes, then FAULTS in order as episodes 4..14.
SAMPLE = Path(__file__).parent / "data" / "lerobot_doctor_0.2.0_v3.0.json"
PLANTED = [
    {"fault": f, "episode_index": 4 + i, "of_episode": 0 if f == "near_duplicate" else None}
    for i, f in enumerate(FAULTS)
]


def test_doctor_is_a_benchmark_and_every_fault_has_its_checks():
    assert "doctor" in available()
    assert set(ACCEPTS) == set(ALL_FAULTS)


def test_parse_peer_sample():
    found = parse_peer(json.loads(SAMPLE.read_text()))
    by_kind = {(f.kind, f.episodes) for f in found}
    assert ("timestamp_gap", (10,)) in by_kind
    assert ("frozen_action", (5,)) in by_kind
    assert ("frozen_action", (12,)) in by_kind and ("frozen_action", (13,)) in by_kind
    assert ("action_jump", (14,)) in by_kind
    assert ("near_duplicate", (0, 7)) in by_kind
    assert all(f.tool == "lerobot-doctor" for f in found)
    notes = [f for f in found if not f.episodes]
    assert any("chunk_size" in f.detail for f in notes)  # dataset-level, no episode
    assert not any(f.detail.startswith("Total ") for f in found)  # totals repeat the per-episode lines


def test_parse_peer_length_outliers():
    report = {
        "checks": [
            {
                "name": "Episode Health",
                "messages": [
                    {"severity": "WARN", "message": "1 abnormally long episode(s) (>3 std above mean): [19]"},
                    {"severity": "WARN", "message": "2 abnormally short episode(s) (>3 std below mean): [3, 5]"},
                ],
            }
        ]
    }
    assert [(f.kind, f.episodes) for f in parse_peer(report)] == [("length_outlier", (19,)), ("length_outlier", (3, 5))]


def test_compare_on_the_peer_sample():
    scored = compare(PLANTED, {"lerobot-doctor": parse_peer(json.loads(SAMPLE.read_text()))})
    got = {r["fault"]: r["lerobot-doctor"] for r in scored["faults"]}
    missed = {f for f, checks in got.items() if not checks}
    assert missed == {"frozen_state", "zero_rows", "black_camera", "frozen_camera", "identical_dims"}
    assert "Anomaly Detection: near_duplicate" in got["near_duplicate"]
    assert scored["found"] == {"lerobot-doctor": 6} and scored["planted"] == len(FAULTS)
    assert scored["unplanted"] == {"lerobot-doctor": []}


def test_compare_and_table_on_synthetic_findings():
    def f(check: str, *eps: int, tool: str = "robolake") -> Finding:
        return Finding(tool, check, check, eps, "d")

    findings = {
        "robolake": [
            f("frozen_state", 4),
            f("frozen_camera", 8),  # a black run found as a frozen run counts
            f("near_duplicate", 0, 7),  # a pair naming the copy counts
            f("near_duplicate", 0, 2),  # a pair naming the original and a clean episode: not planted
            f("frozen_state", 1),  # a clean episode: not planted
            f("action_jump", 11),  # identical_dims' episode, a check that fits no fault there
            Finding("robolake", "length_outlier", "length_outlier", (), "task-level note"),
        ],
        "peer": [Finding("peer", "Per-Episode Summary", "frozen_action", (12,), "29% of action frozen")],
    }
    scored = compare(PLANTED, findings)
    rows = {r["fault"]: r for r in scored["faults"]}
    assert rows["frozen_state"]["robolake"] == ["frozen_state"]
    assert rows["black_camera"]["robolake"] == ["frozen_camera"]
    assert rows["near_duplicate"]["robolake"] == ["near_duplicate"]
    assert rows["idle_head"]["peer"] == ["Per-Episode Summary: frozen_action"]
    assert rows["idle_head"]["robolake"] == []
    assert scored["found"] == {"robolake": 3, "peer": 1}
    assert [(u["check"], u["episodes"]) for u in scored["unplanted"]["robolake"]] == [
        ("near_duplicate", [0, 2]),
        ("frozen_state", [1]),
        ("action_jump", [11]),
    ]
    assert scored["notes"]["robolake"] == ["length_outlier: task-level note"]
    table = dict(comparison_rows(scored, ["robolake", "peer"]))
    assert table["frozen_state (episode 4)"] == "robolake: frozen_state | peer: MISSED"
    assert table["robolake: found"] == f"3/{len(FAULTS)}"
    assert table["robolake: not planted"] == "near_duplicate on [0, 2]; frozen_state on [1]; action_jump on [11]"
    assert table["peer: not planted"] == "none"


@pytest.mark.slow
def test_bench_doctor_quick(tmp_path):
    out = tmp_path / "doctor.json"
    assert main(["--json", str(out), "--quick"]) == 0
    res = json.loads(out.read_text())
    assert res["ingest"]["cpu"]["repeats"] == 3
    assert res["doctor"]["episodes"] == 2_000
    for version in ("v2.1", "v3.0"):
        entry = res["peer"][version]
        assert entry["planted"] == len(ALL_FAULTS)
        assert "robolake" in entry["found"]


def test_sections_are_checked(tmp_path):
    with pytest.raises(SystemExit):
        main(["--json", str(tmp_path / "x.json"), "--sections", "ingest,nonsense"])
    assert not (tmp_path / "x.json").exists()


def test_doctor_section_on_a_small_lake(tmp_path, capsys):
    out = tmp_path / "doctor.json"
    assert main(["--json", str(out), "--sections", "doctor", "--episodes", "48"]) == 0
    res = json.loads(out.read_text())
    assert set(res) == {"machine", "quick", "doctor"}
    doc = res["doctor"]
    assert doc["episodes"] == 48 and doc["cpu"]["runs"] == 3
    assert doc["update_s"]["cpu_s"] > 0 and doc["update_per_1k_episodes_s"]["cpu_s"] > doc["update_s"]["cpu_s"]
    assert sum(doc["findings_per_check"].values()) == doc["findings_after_update"]
    assert "doctor on 48 episodes" in capsys.readouterr().out
