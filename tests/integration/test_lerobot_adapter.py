"""The LeRobot adapter's items equal LeRobot's own `LeRobotDataset` items, compared item by item
in LeRobot's isolated environment (the one `robolake bench peers` builds; skipped without it).

Two datasets: the real GR00T PickNPlace data (ingested, then exported to v3.0 with the source
h264 packets copied, so both sides decode the same bitstream: frames must be bit-exact), and an
AV1 dataset LeRobot writes itself (robolake ingests its packets as they are: the same bitstream
again). State, action, timestamps, index columns, `*_is_pad` masks and task strings must be
exactly equal; dtypes and shapes too. Indices cover both edges of every window.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from robolake.bench.peers import HERE, Peer, default_cache, lerobot_python
from robolake.integrations.lerobot import LakeLeRobotDataset, LakeSource
from robolake.integrations.lerobot.compare import compare_items, saved_items

pytestmark = pytest.mark.slow

# export-only columns LeRobot's items carry that the adapter does not serve (not features a policy reads)
EXPORT_ONLY = ("next.done", "next.success", "annotation.human.action.task_description")


@pytest.fixture(scope="module")
def peer(tmp_path_factory):
    python = lerobot_python(default_cache())
    if python is None:
        pytest.skip("no LeRobot peer environment (build it with `robolake bench peers --build-only`)")
    work = tmp_path_factory.mktemp("lerobot-peer")
    with Peer(python, HERE / "_peer_lerobot.py", work / "peer.log") as p:
        yield p, work


def _edges(starts: np.ndarray, picks: int, seed: int = 0) -> list[int]:
    """Every episode's first two and last two frames, and random ones between."""
    out = set()
    for a, b in zip(starts[:-1], starts[1:], strict=True):
        out.update({int(a), int(a) + 1, int(b) - 2, int(b) - 1})
    out.update(np.random.default_rng(seed).integers(0, int(starts[-1]), picks).tolist())
    return sorted(out)


def _compare(peer, work: Path, root: Path, lake: Path, delta: dict, *, backend: str, tolerance: float = 0.0):
    p, _ = peer
    ds = LakeLeRobotDataset(LakeSource(uri=str(lake)), delta_timestamps=delta)
    idx = _edges(ds.table.starts, 6)
    out = work / f"{root.name}-{backend}.npz"
    answer = p.request(
        "items",
        root=str(root),
        repo_id="local/test",
        delta_timestamps=delta,
        indices=idx,
        out=str(out),
        backend=backend,
    )
    theirs = saved_items(str(out), answer["meta"], idx)
    ours = ds.items(idx)
    report = compare_items(ours, theirs, ds.meta.camera_keys, max_abs_pixel=tolerance, ignore=EXPORT_ONLY)
    assert answer["len"] == len(ds) and answer["camera_keys"] == ds.meta.camera_keys
    assert answer["tasks"] == list(ds.meta.tasks.index)
    return report, ds, answer


def test_items_equal_lerobots_on_the_real_gr00t_export(peer, tmp_path, pick_n_place):
    from robolake.lake import ExportConfig, export_lerobot, ingest

    lake, root = tmp_path / "lake", tmp_path / "v3"
    ingest(str(pick_n_place), str(lake))
    export_lerobot(str(lake), root, config=ExportConfig(copy_video=True))
    fps = 20
    delta = {
        "observation.images.ego_view": [-1 / fps, 0.0],
        "observation.state": [-1 / fps, 0.0],
        "action": [i / fps for i in range(16)],
    }
    report, ds, answer = _compare(peer, tmp_path, root, lake, delta, backend="torchcodec")
    assert report.equal, report.mismatches
    assert report.frames_bit_exact and report.items > 20
    # the metadata policies read: same features (shapes, dtypes) as LeRobot's
    for key in ("observation.state", "action", "observation.images.ego_view"):
        assert ds.meta.features[key]["shape"] == answer["features"][key]["shape"]
        assert ds.meta.features[key]["dtype"] == answer["features"][key]["dtype"]
    for stat in ("mean", "std", "min", "max"):
        np.testing.assert_allclose(
            ds.meta.stats["action"][stat], np.asarray(answer["stats"]["action"][stat]), rtol=1e-5, atol=1e-6
        )


def test_items_equal_lerobots_on_a_lerobot_written_av1_dataset(peer, tmp_path):
    from robolake.lake import ingest

    p, _ = peer
    root, lake = tmp_path / "av1", tmp_path / "lake"
    p.request("make_av1", root=str(root), repo_id="local/av1", fps=20, height=96, width=128, lengths=[30, 24])
    info = json.loads((root / "meta" / "info.json").read_text())
    assert info["features"]["observation.images.front"]["info"]["video.codec"] == "av1"
    ingest(str(root), str(lake))
    delta = {"observation.images.front": [-0.05, 0.0], "action": [0.0, 0.05, 0.1, 0.15]}
    report, _, _ = _compare(peer, tmp_path, root, lake, delta, backend="torchcodec", tolerance=2 / 255)
    assert report.equal, report.mismatches
    # the same AV1 packets on both sides: bit-exact is expected; the tolerance (2 levels) is the
    # bound stated for a decoder or colour conversion that differs
    assert report.max_abs_pixel <= 2 / 255
