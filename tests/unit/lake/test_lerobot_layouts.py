"""The LeRobot reader on every layout: v2.0, v2.1 (h264) and v3.0 (AV1, many episodes per file)."""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from robolake.lake import EpisodeFilter, Lake
from robolake.lake.intake.ingest import ingest
from robolake.lake.sources import LeRobotReader, discover_readers
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic, synthetic_episodes

LAYOUTS = [("v2.0", "h264"), ("v2.1", "h264"), ("v3.0", "av1")]


@pytest.fixture(scope="module", params=LAYOUTS, ids=[f"{v}-{c}" for v, c in LAYOUTS])
def layout(request, tmp_path_factory):
    version, codec = request.param
    root = tmp_path_factory.mktemp(version)
    cfg = SyntheticConfig.tiny(version=version, codec=codec, episodes_per_embodiment=3, episodes_per_file=2)
    generate_synthetic(root / "syn", cfg)
    result = ingest(str(root / "syn"), str(root / "lake"))
    return cfg, root, result, Lake.open(str(root / "lake"))


def test_every_episode_lands(layout):
    cfg, _, result, lake = layout
    assert (result.ingested, result.quarantined) == (9, 0)
    assert {e["source_format"] for e in lake.episodes().to_pylist()} == {f"lerobot-{cfg.version}"}


@pytest.mark.parametrize("robot", ["single_arm_7dof", "bimanual_14dof"])
def test_values_and_frames_match_what_was_written(layout, robot):
    cfg, _, _, lake = layout
    written = synthetic_episodes(cfg, robot)
    frames = lake.frames()
    for ep in lake.episodes(EpisodeFilter(embodiment=robot)).to_pylist():
        src = written[ep["source_episode_index"]]
        assert ep["task"] == src.task and ep["num_steps"] == len(src.state)
        steps = lake.to_arrow("steps", where=EpisodeFilter(episode_ids=[ep["episode_id"]])).sort_by("step_index")
        np.testing.assert_array_equal(np.stack(steps["state"].to_numpy(zero_copy_only=False)), src.state)
        np.testing.assert_array_equal(np.stack(steps["action"].to_numpy(zero_copy_only=False)), src.action)
        np.testing.assert_allclose(steps["timestamp"].to_numpy(), np.arange(len(src.state)) / cfg.fps, atol=1e-5)
        for cam in ep["cameras"]:
            want = src.frames[f"observation.images.{cam}"]
            for t in (0, len(want) // 2, len(want) - 1):  # first, middle and last frame of the segment
                got = frames.read(ep["episode_id"], cam, t).astype(np.int16)
                err = np.abs(got - want[t]).mean()
                assert err < 12, f"{cam} step {t}: mean abs error {err:.1f}"
                if t:
                    assert np.abs(got - want[0]).mean() > err, "frames are not aligned with steps"


def test_v3_episode_segments_are_separate(layout):
    cfg, root, _, _ = layout
    if cfg.version != "v3.0":
        pytest.skip("v3.0 only")
    reader = LeRobotReader(str(root / "syn" / "single_arm_7dof"))
    refs = reader.discover()
    assert len({r.get("video:front") for r in refs}) == 2  # 3 episodes, 2 per file
    assert refs[1].get("from:front") > 0


def test_v3_bad_episode_in_a_shared_file_is_the_only_one_quarantined(layout, tmp_path):
    cfg, root, _, _ = layout
    if cfg.version != "v3.0":
        pytest.skip("v3.0 only")
    src = tmp_path / "single_arm_7dof"
    shutil.copytree(root / "syn" / "single_arm_7dof", src)
    data = next((src / "data").rglob("file-000.parquet"))
    t = pq.read_table(data)
    ts = t["timestamp"].to_numpy().copy()
    rows = np.flatnonzero(t["episode_index"].to_numpy() == 1)
    ts[rows[2]], ts[rows[3]] = ts[rows[3]], ts[rows[2]]
    pq.write_table(
        t.set_column(t.column_names.index("timestamp"), "timestamp", pa.array(ts, t["timestamp"].type)), data
    )
    result = ingest(str(src), str(tmp_path / "lake"))
    assert (result.ingested, result.quarantined) == (2, 1)
    q = Lake.open(str(tmp_path / "lake")).to_arrow("quarantine").to_pylist()
    assert q[0]["source_episode_index"] == 1 and q[0]["reason_code"] == "timestamps"
    assert pc.sum(pc.equal(t["episode_index"], 0)).as_py() > 0


def test_discovery_errors_are_actionable(tmp_path):
    with pytest.raises(ValueError, match="no dataset found"):
        discover_readers(str(tmp_path))
    with pytest.raises(ValueError, match="unknown source format"):
        discover_readers(str(tmp_path), format="no-such-format")


# --- metadata that points outside the dataset is never followed (issue 17) ---------------------


def _edit_info(ds, edit):
    import json

    p = ds / "meta" / "info.json"
    info = json.loads(p.read_text())
    edit(info)
    p.write_text(json.dumps(info))


@pytest.mark.parametrize(
    "field,template",
    [
        ("data_path", "../../outside/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"),
        ("data_path", "/{episode_chunk}/outside/episode_{episode_index:06d}.parquet"),
        ("video_path", "videos/../../../outside/{video_key}/episode_{episode_index:06d}.mp4"),
        ("video_path", "/tmp/outside/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"),
    ],
)
def test_a_template_pointing_outside_the_dataset_is_refused_and_the_rest_lands(tmp_path, field, template):
    src = tmp_path / "src"
    generate_synthetic(src, SyntheticConfig.tiny(version="v2.1", episodes_per_embodiment=2))
    bad = src / "single_arm_7dof"
    if template.startswith("../"):  # a readable copy where the template points: following it would ingest it
        import json

        info = json.loads((bad / "meta" / "info.json").read_text())
        for i in range(2):
            rel = template.format(episode_chunk=0, episode_index=i)
            (bad / rel).resolve().parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(bad / info[field].format(episode_chunk=0, episode_index=i), (bad / rel).resolve())
    _edit_info(bad, lambda info: info.__setitem__(field, template))
    result = ingest(str(src), str(tmp_path / "lake"))
    assert result.quarantined == 2 and result.ingested == result.discovered - 2 > 0  # the other datasets land
    reasons = {reason for _, reason in result.quarantine}
    assert len(reasons) == 1 and f"{field} {template!r} points outside the dataset" in reasons.pop()
    q = Lake.open(str(tmp_path / "lake")).to_arrow("quarantine").to_pylist()
    assert {r["reason_code"] for r in q} == {"bad_metadata"}


def test_a_feature_key_climbing_out_of_the_dataset_is_refused(tmp_path):
    src = tmp_path / "src"
    generate_synthetic(src, SyntheticConfig.tiny(version="v2.1", episodes_per_embodiment=1))
    ds = src / "single_arm_7dof"

    def rename(info):
        key = next(k for k, v in info["features"].items() if v["dtype"] == "video")
        info["features"]["../../escaped"] = info["features"].pop(key)

    _edit_info(ds, rename)
    (ds / "meta" / "modality.json").unlink(missing_ok=True)
    result = ingest(str(src), str(tmp_path / "lake"))
    assert result.ingested == result.discovered - 1 > 0
    (reason,) = {r for _, r in result.quarantine}
    assert "features key '../../escaped' makes video_path point outside the dataset" in reason
