"""pack(): shards hold every sample exactly once, with exactly the lake's payload (its images, or the
rendition of its decoded frames), reproducibly."""

from __future__ import annotations

import json
import logging
import tarfile
from collections import Counter
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

from robolake.lake import Lake
from robolake.lake.intake.ingest import ingest
from robolake.lake.media.codecs import decode_frame, fidelity, render_rgb
from robolake.lake.media.record import is_record
from robolake.packers import (
    PackSpec,
    TokenLengthConfig,
    build_sample_index,
    export_webdataset,
    pack,
    plan_sequences,
    read_manifest,
)
from robolake.packers.pipeline import plan_ranges, window_sequences
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

TOKENS = TokenLengthConfig(tokens_per_view=16, state_tokens=0)


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    root = tmp_path_factory.mktemp("pack")
    generate_synthetic(root / "syn", SyntheticConfig.tiny())
    ingest(str(root / "syn"), str(root / "lake"))
    return Lake.open(str(root / "lake"))


def _spec(**kw) -> PackSpec:
    return PackSpec(**{"max_tokens": 512, "horizon": 8, "tokens": TOKENS, **kw})


def _rows(out: Path) -> list[dict]:
    m = read_manifest(str(out))
    return lance.dataset(str(out / "shards.lance"), version=m.shards_version).to_table().to_pylist()


@pytest.mark.parametrize("algorithm", ["bfd", "ffd", "window"])
def test_every_sample_once_within_capacity(lake, tmp_path, algorithm):
    m = pack(lake, _spec(algorithm=algorithm), str(tmp_path / "p"))
    rows = _rows(tmp_path / "p")
    keys = Counter((e, s) for r in rows for e, s in zip(r["episode_id"], r["step_index"], strict=True))
    expected = {(e["episode_id"], t) for e in lake.episodes().to_pylist() for t in range(e["num_steps"])}
    assert set(keys) == expected and max(keys.values()) == 1
    assert m.num_samples == len(expected) and m.num_sequences == len(rows)
    for r in rows:
        assert r["total_tokens"] <= 512 and r["cu_seqlens"][-1] == r["total_tokens"] == sum(r["lengths"])
        assert np.array_equal(np.diff(r["cu_seqlens"]), r["lengths"])
    assert 0 < m.padded_fill < m.fill <= 1
    assert m.lake_uri == lake.uri and m.lake_version == lake.version


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def test_payload_equals_the_lake(lake, tmp_path):
    """A shard's frame is the lake's own image bytes where the lake holds an image, and otherwise
    (a recorded video's packet, FFV1, h264) the training rendition of the lake's decoded frame:
    byte for byte `render_rgb` of the pixels `FrameReader` gives, within JPEG tolerance of them."""
    spec = _spec(step_stride=3, normalization="mean_std")
    m = pack(lake, spec, str(tmp_path / "p"))
    eps = {e["episode_id"]: e for e in lake.episodes().to_pylist()}
    steps = lake.to_arrow("steps").to_pylist()
    by_key = {(s["episode_id"], s["step_index"]): s for s in steps}
    rows = {
        (f["episode_id"], f["camera"], f["step_index"]): (f["encoding"], f["data"])
        for f in lake.to_arrow("media", columns=["episode_id", "camera", "step_index", "encoding", "data"]).to_pylist()
    }
    reader = lake.frames()
    renditions = 0

    def want_frame(key: tuple[str, str, int]) -> bytes:
        nonlocal renditions
        encoding, data = rows[key]
        if fidelity(encoding) == "source" and not is_record(encoding):
            return data  # an image as the source recorded it
        rgb = reader.read(*key)
        out = render_rgb(rgb, spec.image_size)
        assert _psnr(decode_frame(out), rgb) >= 27.0  # JPEG q90 (chroma halved) of 32 px sharp discs: min 29.9 dB
        renditions += 1
        return out

    stats = {tag: lake.norm_stats(tag) for tag in m.embodiments}
    checked = 0
    for r in _rows(tmp_path / "p"):
        text = np.split(np.asarray(r["text_ids"]), np.cumsum(r["text_lengths"])[:-1])
        state = np.split(np.asarray(r["state"], np.float32), np.cumsum(r["state_dims"])[:-1])
        action = np.split(np.asarray(r["action"], np.float32), np.cumsum(np.asarray(r["action_dims"]) * 8)[:-1])
        frames = iter(zip(r["cameras"], r["frames"], strict=True))
        for i, (eid, t) in enumerate(zip(r["episode_id"], r["step_index"], strict=True)):
            ep = eps[eid]
            assert t % 3 == 0
            tag = ep["embodiment"]
            assert m.embodiments[r["embodiment_id"][i]] == tag == r["embodiment"][i]
            assert text[i].tolist() == TOKENS.encode_text(ep["task"]).tolist()
            want_state = stats[tag].state.normalize(np.asarray(by_key[(eid, t)]["state"]))
            np.testing.assert_allclose(state[i], want_state, rtol=1e-5, atol=1e-5)
            n = ep["num_steps"]
            chunk = [by_key[(eid, min(t + k, n - 1))]["action"] for k in range(8)]
            want_action = stats[tag].action.normalize(np.asarray(chunk)).reshape(-1)
            np.testing.assert_allclose(action[i], want_action, rtol=1e-5, atol=1e-5)
            assert r["action_valid"][i] == min(8, n - t)
            assert r["num_views"][i] == len(ep["cameras"])
            for cam in ep["cameras"]:
                got_cam, data = next(frames)
                assert got_cam == cam and data == want_frame((eid, cam, t))
            checked += 1
    assert checked == m.num_samples == sum((e["num_steps"] + 2) // 3 for e in eps.values())
    assert renditions  # the default lake records the synthetic videos: their frames are renditions


def test_same_inputs_same_shards_and_seed_changes_order(lake, tmp_path):
    pack(lake, _spec(seed=1), str(tmp_path / "a"))
    pack(lake, _spec(seed=1), str(tmp_path / "b"))
    pack(lake, _spec(seed=2), str(tmp_path / "c"))
    a, b, c = (_rows(tmp_path / x) for x in "abc")
    assert a == b
    assert [r["episode_id"] for r in a] != [r["episode_id"] for r in c]


def test_window_chain_packs_every_sample_once_per_seed(lake):
    index = build_sample_index(lake, _spec())
    cap = int(np.median(index.episode_length))  # some samples do not fit
    spec = _spec(algorithm="window", window=64, max_tokens=cap, on_oversize="reject")
    seqs, rejected = window_sequences(index, spec, shuffle_seed=[7, 0], packer_seed=11)
    ids = np.concatenate([*seqs, rejected])
    assert sorted(ids.tolist()) == list(range(index.num_samples))
    assert all(index.length_of(q).sum() <= cap for q in seqs)
    assert len(rejected) and np.all(index.length_of(rejected) > cap)
    again, _ = window_sequences(index, spec, shuffle_seed=[7, 0], packer_seed=11)
    other, _ = window_sequences(index, spec, shuffle_seed=[7, 1], packer_seed=11)
    assert [q.tolist() for q in again] == [q.tolist() for q in seqs] != [q.tolist() for q in other]
    planned, planned_rejected = plan_sequences(index, spec)  # pack's window plan is this chain
    chained, chained_rejected = window_sequences(index, spec, shuffle_seed=spec.seed, packer_seed=spec.seed)
    assert [q.tolist() for q in planned] == [q.tolist() for q in chained]
    assert planned_rejected.tolist() == chained_rejected.tolist()
    with pytest.raises(ValueError, match=f"more than max_tokens={cap}"):
        window_sequences(index, spec, shuffle_seed=None, packer_seed=0, on_oversize="error")


def test_pack_an_older_lake_version(lake, tmp_path):
    # Copy the lake's newest version into a new lake with one more ingest on top.
    root = tmp_path / "two"
    generate_synthetic(root / "a", SyntheticConfig.tiny(embodiments=("single_arm_7dof",), seed=5))
    generate_synthetic(root / "b", SyntheticConfig.tiny(embodiments=("humanoid_44dof",), seed=6))
    ingest(str(root / "a"), str(root / "lake"))
    ingest(str(root / "b"), str(root / "lake"))
    newest = Lake.open(str(root / "lake"))
    older = newest.checkout(newest.version - 1)
    m = pack(older, _spec(), str(tmp_path / "old"))
    assert m.lake_version == newest.version - 1
    assert m.embodiments == ["single_arm_7dof"]
    assert m.num_samples == older.count("steps") < newest.count("steps")


def test_oversize_sample_is_named_or_recorded(lake, tmp_path):
    with pytest.raises(ValueError, match=r"sample \(episode .+, step \d+\) has \d+ tokens, more than max_tokens=100"):
        pack(lake, _spec(max_tokens=100), str(tmp_path / "x"))
    m = pack(lake, _spec(max_tokens=100, on_oversize="reject"), str(tmp_path / "y"))
    assert len(m.rejected) == lake.count("steps") - m.num_samples > 0
    assert all(length > 100 for _, _, length in m.rejected)


def test_existing_output_needs_overwrite(lake, tmp_path):
    pack(lake, _spec(), str(tmp_path / "p"))
    with pytest.raises(FileExistsError, match="overwrite"):
        pack(lake, _spec(), str(tmp_path / "p"))
    pack(lake, _spec(seed=3), str(tmp_path / "p"), overwrite=True)
    assert read_manifest(str(tmp_path / "p")).seed == 3


def test_webdataset_export_roundtrip(lake, tmp_path):
    m = pack(lake, _spec(), str(tmp_path / "p"))
    tars = export_webdataset(str(tmp_path / "p"), str(tmp_path / "wds"), sequences_per_tar=5)
    assert len(tars) == -(-m.num_sequences // 5)
    seqs, views = 0, 0
    for t in tars:
        with tarfile.open(t) as tf:
            names = tf.getnames()
            for name in names:
                if name.endswith(".json"):
                    meta = json.load(tf.extractfile(name))
                    seqs += 1
                    views += sum(meta["num_views"])
                    assert meta["lake_version"] == lake.version
            assert all(
                n.split(".", 1)[1] in ("json", "text_ids.npy", "state.npy", "action.npy", "action_valid.npy")
                or n.endswith(".jpg")
                for n in names
            )
    rows = _rows(tmp_path / "p")
    assert seqs == m.num_sequences and views == sum(len(r["frames"]) for r in rows)


def _recorded_streams(lake: Lake) -> set[tuple[str, str]]:
    media = lake.to_arrow("media", columns=["episode_id", "camera", "encoding"]).to_pylist()
    return {(f["episode_id"], f["camera"]) for f in media if is_record(f["encoding"])}


def _decode_passes(caplog) -> Counter:
    """Stream decodes pack reports from its stages (each Ray task counts its own passes)."""
    records = [r for r in caplog.records if hasattr(r, "decode_passes")]
    assert len(records) == 1
    passes: Counter = Counter()
    for eid, cam, n in records[0].decode_passes:
        passes[(eid, cam)] += n
    return passes


@pytest.mark.parametrize("plan_range_samples", [4_000_000, 40])
def test_pack_decodes_each_recorded_stream_once(lake, tmp_path, caplog, plan_range_samples):
    """Sequences mix episodes at random, and each write task used to decode every stream it
    touched (each Ray worker every stream): the decode stage decodes each one once in all."""
    caplog.set_level(logging.INFO, logger="robolake.packers.pipeline")
    streams = _recorded_streams(lake)
    assert len(streams) > 2  # enough streams, and sequences over several of them, for repeats to show
    assert (len(plan_ranges(build_sample_index(lake, _spec()), _spec(), plan_range_samples)) > 1) == (
        plan_range_samples == 40
    )
    m = pack(lake, _spec(), str(tmp_path / "p"), sequences_per_task=2, plan_range_samples=plan_range_samples)
    assert m.num_sequences > 4
    passes = _decode_passes(caplog)
    assert set(passes) == streams and set(passes.values()) == {1}
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ["manifest.json", "shards.lance"]  # scratch gone


def test_pack_replaces_what_a_killed_pack_left(lake, tmp_path):
    """A killed run leaves its scratch table of renditions (and no manifest): the next run starts
    it afresh, and the shards hold the lake's frames, not the stale renditions."""
    first = pack(lake, _spec(), str(tmp_path / "p"))
    want = _rows(tmp_path / "p")
    stale = tmp_path / "p" / "_renditions.lance"
    lance.write_dataset(pa.table({"data": pa.array([b"stale"] * 5000, pa.binary())}), str(stale))
    (tmp_path / "p" / "manifest.json").unlink()
    again = pack(lake, _spec(), str(tmp_path / "p"))
    assert again.num_sequences == first.num_sequences and _rows(tmp_path / "p") == want
    assert not stale.exists()
