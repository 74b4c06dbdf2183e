"""Resampling rules, mapping validation, and `robolake inspect`."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from robolake.commands.inspect import run as inspect_run
from robolake.lake.sources import SourceError
from robolake.lake.sources.mapping import load_mapping, mapping_from_dict
from robolake.lake.sources.resample import (
    Stream,
    align,
    resample_hold,
    resample_latest,
    resample_linear,
    segments_by_flag,
    segments_by_gap,
    stack_rows,
    ticks,
)
from robolake.testing.hdf5 import CUSTOM_MAPPING, write_aloha, write_custom


def _s(name, t, v):
    return Stream(name=name, t=np.asarray(t, float), values=np.asarray(v, float).reshape(len(t), -1), path="rec.bag")


def test_rules_linear_hold_latest():
    at = ticks(0.0, 1.0, 4)
    np.testing.assert_allclose(at, [0, 0.25, 0.5, 0.75, 1.0])
    s = _s("/joints", [0.0, 0.5, 1.0], [[0.0], [1.0], [3.0]])
    np.testing.assert_allclose(resample_linear(s, at)[:, 0], [0, 0.5, 1.0, 2.0, 3.0])
    np.testing.assert_allclose(resample_hold(s, at)[:, 0], [0, 0, 1, 1, 3])
    np.testing.assert_array_equal(resample_latest(s, np.array([0.49, 0.5, 0.99])), [0, 1, 1])
    assert segments_by_gap(np.array([0, 0.1, 0.2, 5.0, 5.1]), 1.0) == [(0.0, 0.2), (5.0, 5.1)]
    assert segments_by_flag(np.arange(6.0), np.array([0, 1, 1, 0, 1, 0])) == [(1.0, 2.0), (4.0, 4.0)]


def test_align_window_rate_and_action_from_state():
    rng = np.random.default_rng(0)
    tj = np.sort(np.arange(0, 2, 0.01) + rng.uniform(0, 0.002, 200))  # 100 Hz with jitter
    tv = np.arange(0.05, 1.9, 1 / 15)  # camera 15 fps
    al = align(
        state=[_s("/j", tj, np.sin(tj))],
        cameras={"cam": Stream("cam", tv, [b""] * len(tv))},
        action_from_state=True,
        path="rec",
    )
    assert al.fps == pytest.approx(100, rel=0.05)
    assert al.timestamps[0] == pytest.approx(max(tj[0], tv[0])) and al.timestamps[-1] <= tv[-1]
    np.testing.assert_allclose(al.action[:-1], al.state[1:])
    np.testing.assert_allclose(al.action[-1], al.state[-1])
    assert al.metadata["action_from_state"] is True
    assert (tv[al.frames["cam"]] <= al.timestamps + 1e-12).all()


@pytest.mark.parametrize(
    ("case", "code", "text"),
    [
        ("backwards", "timestamps", "goes backwards at message 2"),
        ("nan", "non_finite", "first at message 1"),
        ("apart", "no_overlap", "never overlap"),
        ("empty", "empty", "no messages"),
    ],
)
def test_align_rejects_bad_streams(case, code, text):
    good = _s("/cmd", [0, 1, 2, 3], [[0], [1], [2], [3]])
    state = {
        "backwards": _s("/j", [0, 1, 0.5, 3], [[0], [1], [2], [3]]),
        "nan": _s("/j", [0, 1, 2, 3], [[0], [np.nan], [2], [3]]),
        "apart": _s("/j", [10, 11, 12], [[0], [1], [2]]),
        "empty": Stream("/j", np.zeros(0), np.zeros((0, 1)), "rec.bag"),
    }[case]
    with pytest.raises(SourceError, match=text) as info:
        align(state=[state], action=[good], fps=10, path="rec.bag")
    assert info.value.reason_code == code and info.value.path == "rec.bag"


def test_width_change_names_the_message():
    with pytest.raises(SourceError, match="3 values until message 2, then 4") as info:
        stack_rows([[1, 2, 3], [1, 2, 3], [1, 2, 3, 4]], "/joint_states.position", "a.bag")
    assert info.value.reason_code == "shape"


def test_mapping_file_validation(tmp_path: Path):
    p = tmp_path / "m.yaml"
    p.write_text(
        "embodiment: arm\nfps: 30\nstate:\n  - {source: /joint_states, field: position, names: [a, b]}\n"
        "action_from_state: true\ncameras: {wrist: /wrist/image/compressed}\nsplit: {by: gap, seconds: 2}\n"
    )
    m = load_mapping(str(p))
    assert (
        m.state[0].names == ("a", "b") and m.cameras[0].source == "/wrist/image/compressed" and m.split.seconds == 2.0
    )
    (tmp_path / "m.json").write_text(json.dumps(CUSTOM_MAPPING))
    assert load_mapping(str(tmp_path / "m.json")).state[1].stamps == "/robot/joint_t"
    bad = [
        ({"state": [{"source": "/j"}], "acton": []}, r"m\.yaml: top level: unknown key\(s\) \['acton'\]"),
        ({"state": [{"source": "/j"}]}, "give 'action' streams, or 'action_from_state: true'"),
        ({"state": [{"field": "position"}], "action_from_state": True}, r"state\[0\]: needs 'source'"),
        ({"state": ["/j"], "action": ["/c"], "fps": "fast"}, "fps: expected a number"),
        ({"state": ["/j"], "action": ["/c"], "split": {"by": "topic"}}, "needs 'source': a boolean topic"),
        ({"state": ["/j"], "action": ["/c"], "clock": "wall"}, "'clock' must be header or log"),
        ({"state": ["/j"], "action": ["/c"], "cameras": {"a": 3}}, "cameras.a: expected a source string"),
    ]
    for d, msg in bad:
        with pytest.raises(ValueError, match=msg):
            mapping_from_dict(d, "m.yaml")
    with pytest.raises(FileNotFoundError, match="robolake inspect"):
        load_mapping(str(tmp_path / "nope.yaml"))
    (tmp_path / "broken.yaml").write_text("state: [\n")
    with pytest.raises(ValueError, match=r"mapping file .*broken.yaml is not valid YAML"):
        load_mapping(str(tmp_path / "broken.yaml"))


def test_inspect_prints_keys_rates_and_unknown_layouts(tmp_path: Path, capsys):
    write_aloha(tmp_path / "ep.hdf5")
    write_custom(tmp_path / "custom.h5")
    (tmp_path / "odd.bag").write_bytes(b"not a bag at all")
    args = dict(src=str(tmp_path), format="auto", map=None, state_only=False, suggest_map=False)
    rc = inspect_run(argparse.Namespace(**args, json=False))
    out = capsys.readouterr().out
    assert rc == 0
    assert "format=hdf5-aloha" in out and "observations/qpos" in out and "[14]" in out and "state[0]" in out
    assert "ingest: quarantined" in out and "robot/joint_t" in out  # an unknown layout is still described
    assert "not read:" in out and "odd.bag" in out
    inspect_run(argparse.Namespace(**args, json=True))
    report = json.loads(capsys.readouterr().out)
    units = {Path(u["path"]).name: u for u in report["units"]}
    clock = units["custom.h5"]["keys"]["robot/joint_t"]
    assert clock["clock"] is True and clock["rate_hz"] == pytest.approx(100, rel=0.05)
    assert units["custom.h5"]["opens"] is False and [f["path"] for f in report["failed"]] == [
        str(tmp_path / "custom.h5")
    ]
    assert units["ep.hdf5"]["keys"]["observations/qpos"]["count"] == 30
    # the unknown layout gets a mapping to start from, which loads as it is
    m = mapping_from_dict(yaml.safe_load(units["custom.h5"]["suggested_mapping"]), "suggested.yaml")
    assert m.state[0].source == "robot/joints" and m.state[0].stamps == "robot/joint_t"


def test_mapping_msg_dirs_resolve_beside_the_mapping_file(tmp_path):
    from robolake.lake.sources.mapping import load_mapping

    f = tmp_path / "cfg" / "arm.yaml"
    f.parent.mkdir()
    f.write_text("state: [/joint_states]\naction_from_state: true\nmsg_dirs: [msgs, /abs/defs]\n")
    m = load_mapping(str(f))
    assert m.msg_dirs == ("msgs", "/abs/defs")
    dirs, notes = m.msg_dir_paths()
    assert dirs == [os.path.realpath(tmp_path / "cfg" / "msgs"), "/abs/defs"]
    # the one outside the mapping's folder is read, and said
    assert len(notes) == 1 and "/abs/defs" in notes[0] and "outside the mapping's folder" in notes[0]
    f.write_text("state: [/joint_states]\nmsg_dirs: 3\n")
    with pytest.raises(ValueError, match="msg_dirs"):
        load_mapping(str(f))
