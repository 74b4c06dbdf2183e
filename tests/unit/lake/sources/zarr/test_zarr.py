"""Zarr replay buffers: UMI's JPEG-XL frames and Diffusion Policy's mp4 tree, end to end through
ingest and inspect, and each fault real buffers come with (one fixture and one test each)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("zarr")
pytest.importorskip("imagecodecs")

import zarr  # noqa: E402

from robolake.cli import main  # noqa: E402
from robolake.lake import Lake  # noqa: E402
from robolake.lake.intake.ingest import IngestConfig, ingest  # noqa: E402
from robolake.lake.media.frames import decode_row  # noqa: E402
from robolake.lake.sources import ReadLimits, SourceError, SourceOptions, discover_readers, formats, register_format  # noqa: E402
from robolake.lake.sources.mapping import mapping_from_dict  # noqa: E402
from robolake.lake.sources.zarr.reader import FORMAT  # noqa: E402
from robolake.testing.zarr_buffers import BUFFER_NAME, write_replay_buffer  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _registered() -> None:
    if FORMAT.name not in {f.name for f in formats()}:
        register_format(FORMAT)


def _reader(path: Path, **opts):
    found = discover_readers(str(path), options=SourceOptions(**opts))
    assert len(found) == 1, found.failed
    return found[0]


def _ingest(src: Path, lake: Path, **cfg):
    result = ingest(str(src), str(lake), IngestConfig(execution="local", **cfg))
    return result, Lake.open(str(lake))


def _quarantine(lake: Lake) -> dict[str, dict]:
    return {f"{r['source_path']}": r for r in lake.to_arrow("quarantine").to_pylist()}


def test_umi_jpegxl_frames_and_every_key_in_the_record(tmp_path: Path):
    src = write_replay_buffer(tmp_path / "umi", episodes=3, steps=12)
    r = _reader(src)
    assert (r.format_name, r.cameras, r.fps) == ("zarr-images", ("camera0_rgb",), 10.0)
    assert r.layout.state == ("data/robot_eef_pose", "data/robot_joint") and r.layout.action == ("data/action",)
    buf: Any = zarr.open_group(str(src / BUFFER_NAME), mode="r")
    ep = r.read_tabular(r.discover()[1])
    assert ep.num_steps == 13
    np.testing.assert_array_equal(ep.state[:, :6], buf["data/robot_eef_pose"][12:25].astype(np.float32))
    np.testing.assert_array_equal(ep.action, buf["data/action"][12:25])
    kept = {s.stream: s for s in ep.record.signals if s.kind == "numeric"}
    assert set(kept) == {f"data/{k}" for k in ("action", "robot_eef_pose", "robot_joint", "stage", "timestamp")} | {
        "data/robot_timestamp"
    }
    assert kept["data/robot_eef_pose"].values[0].dtype == np.float64 and kept["data/stage"].values[0].dtype == np.int64
    assert kept["data/action"].values[0].dtype == np.float32
    (cam,) = r.read_frames(ep)
    assert cam.encoding == "ffv1;size=64x48" and len(cam.images) == 13
    np.testing.assert_array_equal(decode_row(cam.images[4], cam.encoding), buf["data/camera0_rgb"][16])

    result, lake = _ingest(src, tmp_path / "lake")
    assert (result.ingested, result.quarantined, result.steps) == (3, 0, 12 + 13 + 14)
    assert {e["cameras"][0] for e in lake.episodes().to_pylist()} == {"camera0_rgb"}
    again = ingest(str(src), str(tmp_path / "lake"), IngestConfig(execution="local"))
    assert (again.ingested, again.skipped) == (0, 3)


def test_umi_without_action_takes_the_next_state(tmp_path: Path):
    r = _reader(write_replay_buffer(tmp_path / "umi", episodes=2, steps=8, action=False, image_codec=None))
    assert r.layout.action_from_state and any("action_from_state" in n for n in r.notes)
    ep = r.read_tabular(r.discover()[0])
    np.testing.assert_array_equal(ep.action[:-1], ep.state[1:])


def test_videos_tree_keeps_packets_and_lands_the_faults_by_name(tmp_path: Path):
    src = write_replay_buffer(
        tmp_path / "dp",
        episodes=4,
        steps=10,
        cameras=2,
        videos=True,
        faults=("truncated_mp4", "orphan_video", "short_video", "clock_back"),
    )
    result, lake = _ingest(src, tmp_path / "lake")
    q = _quarantine(lake)
    # truncated mp4 with no index: its episode quarantined, named; the others land
    assert result.ingested == 3 and len(q) == 1, q
    (row,) = q.values()
    assert row["reason_code"] == "corrupt_video" and "videos/1/0.mp4" in row["reason"] + row["source_path"]
    eps = {e["source_uri"] + str(e["num_steps"]): e for e in lake.episodes().to_pylist()}
    steps = sorted(e["num_steps"] for e in eps.values())
    # one video frame fewer than rows: episode 0 (10 rows) lands with 9 steps, said in a note
    assert steps == [9, 12, 13]
    notes = "\n".join(result.notes)
    assert "has 9 frames for 10 rows" in notes
    # a video folder with no matching episode, and a secondary clock going back: noted by name
    assert "videos/4: a video folder that matches no episode" in notes
    assert "data/robot_timestamp goes back between episodes" in notes
    assert all(e["cameras"] == ["camera_0", "camera_1"] for e in eps.values())
    encodings = set(lake.to_arrow("media").column("encoding").to_pylist())
    assert encodings == {"video;codec=h264"}


def test_missing_video_quarantines_its_episode_unless_state_only(tmp_path: Path):
    src = write_replay_buffer(tmp_path / "dp", episodes=3, steps=8, videos=True, faults=("missing_video",))
    result, lake = _ingest(src, tmp_path / "lake")
    (row,) = _quarantine(lake).values()
    assert result.ingested == 2 and row["reason_code"] == "missing_video" and "episode 2" in row["reason"]
    r = _reader(src, state_only=True)
    assert r.cameras == () and r.read_tabular(r.discover()[2]).num_steps == 10


def test_bad_episode_ends_fail_the_unit(tmp_path: Path):
    src = write_replay_buffer(tmp_path / "bad", episodes=3, steps=8, image_codec=None)
    ends: Any = zarr.open_group(str(src / BUFFER_NAME), mode="r+")["meta/episode_ends"]
    ends[...] = np.array([8, 5, 27])
    with pytest.raises(ValueError, match="episode_ends goes down at episode 1"):
        discover_readers(str(src))


def test_read_budget_refuses_before_reading(tmp_path: Path):
    src = write_replay_buffer(tmp_path / "big", episodes=3, steps=20, cameras=0)
    with pytest.raises(ValueError, match="data/action chunk: declares shape"):  # a chunk over it fails the unit
        discover_readers(str(src), options=SourceOptions(limits=ReadLimits(max_read_bytes=64)))
    r = _reader(src, limits=ReadLimits(max_read_bytes=1000))  # chunks of 20 rows fit; episode 2's 22 rows do not
    assert r.read_tabular(r.discover()[0], record=False).num_steps == 20
    with pytest.raises(SourceError, match="data/robot_eef_pose: declares shape \\(22, 6\\)"):
        r.read_tabular(r.discover()[2], record=False)


def test_inspect_names_every_key_and_the_suggested_map_lands_as_much(tmp_path: Path, capsys):
    src = write_replay_buffer(tmp_path / "dp", episodes=2, steps=8, cameras=1, videos=True)
    assert main(["inspect", str(src), "--json"]) == 0
    (unit,) = json.loads(capsys.readouterr().out)["units"]
    keys = unit["keys"]
    assert {"data/action", "data/robot_eef_pose", "data/timestamp", "meta/episode_ends", "videos/{i}/0.mp4"} <= set(
        keys
    )
    pose = keys["data/robot_eef_pose"]
    assert pose["type"] == "float64" and pose["shape"] == [6] and pose["count"] == 17
    assert pose["rate_hz"] == pytest.approx(10.0, rel=0.05) and pose["end_s"] > 30 and pose["role"] == "state[0]"
    assert keys["data/robot_eef_pose"]["encoding"] == "blosc/zstd"
    assert keys["data/action"]["role"] == "action[0]" and keys["videos/{i}/0.mp4"]["role"] == "camera camera_0 (video)"
    assert keys["data/stage"]["role"].startswith("in the record only")
    assert main(["inspect", str(src), "--suggest-map"]) == 0
    text = capsys.readouterr().out
    (tmp_path / "map.yaml").write_text(text)
    import yaml

    mapping = mapping_from_dict(yaml.safe_load(text), str(tmp_path / "map.yaml"))
    plain, plain_lake = _ingest(src, tmp_path / "plain")
    mapped, mapped_lake = _ingest(src, tmp_path / "mapped", mapping=mapping)
    assert (mapped.ingested, mapped.steps, mapped.frames) == (plain.ingested, plain.steps, plain.frames) == (2, 17, 17)
    a, b = plain_lake.episodes().to_pylist(), mapped_lake.episodes().to_pylist()
    assert [(e["embodiment"], e["cameras"]) for e in a] == [(e["embodiment"], e["cameras"]) for e in b]


def test_jpegxl_frames_inspect_as_cameras(tmp_path: Path, capsys):
    src = write_replay_buffer(tmp_path / "umi", episodes=2, steps=6)
    assert main(["inspect", str(src), "--json"]) == 0
    (unit,) = json.loads(capsys.readouterr().out)["units"]
    cam = unit["keys"]["data/camera0_rgb"]
    assert cam["encoding"] == "imagecodecs_jpegxl" and cam["shape"] == [48, 64, 3] and cam["role"].startswith("camera")


def test_a_video_linked_out_of_the_dataset_is_never_opened(tmp_path: Path):
    src = write_replay_buffer(tmp_path / "dp", episodes=2, steps=6, cameras=1, videos=True, size=(16, 16))
    outside = tmp_path / "elsewhere.mp4"
    video = next((src / "videos" / "1").glob("*.mp4"))
    video.rename(outside)
    video.symlink_to(outside)
    res = ingest(str(src), str(tmp_path / "lake"), IngestConfig(execution="local"))
    assert res.ingested == 1
    (row,) = [q for q in Lake.open(str(tmp_path / "lake")).to_arrow("quarantine").to_pylist()]
    assert row["reason_code"] == "outside_source" and "episode 1" in row["reason"]


def test_a_pickled_object_array_is_refused_not_unpickled(tmp_path: Path):
    import os
    import pickle

    class Boom:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {tmp_path / 'PWNED'}",))

    src = write_replay_buffer(tmp_path / "dp", episodes=1, steps=4, cameras=0, size=(16, 16))
    buf = src / BUFFER_NAME
    evil = buf / "data" / "evil"
    evil.mkdir()
    meta = {"shape": [4], "chunks": [4], "dtype": "|O", "fill_value": 0, "order": "C", "zarr_format": 2}
    (evil / ".zarray").write_text(json.dumps({**meta, "filters": [{"id": "pickle"}], "compressor": None}))
    (evil / "0").write_bytes(pickle.dumps(np.array([Boom()] * 4, dtype=object)))
    with pytest.raises(ValueError, match="evil|pickle"):  # the unit is refused, naming the array's codec
        ingest(str(src), str(tmp_path / "lake"), IngestConfig(execution="local"))
    main(["inspect", str(src)])
    assert not (tmp_path / "PWNED").exists()
