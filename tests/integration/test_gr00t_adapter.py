"""The GR00T adapter's samples equal Isaac-GR00T's own `LeRobotSingleDataset.get_step_data`'s,
compared sample by sample on the real PickNPlace data (skipped without ../shared or without the
GR00T reference environment).

The reference environment is built by `scripts/build_gr00t_reference.sh` from an Isaac-GR00T
source tree (GR00T is on no package index): GR00T's `gr00t/data` and `gr00t/utils/video.py`
on the LeRobot peer environment's interpreter, decord (GR00T's default video backend) added
beside it. `scripts/gr00t_reference.py` runs GR00T's dataset there and saves its samples.

The data: the PickNPlace demo with one action slice (`right_hand`) made relative
(`"absolute": false` in modality.json, in the source both sides read), so GR00T's zero padding
is compared as well as its edge-row padding. robolake ingests the untouched parquet files; GR00T
reads them with the row timestamps rebased to start at 0 (the only change): the demo's rows start
at 0.05 s while its video starts at 0, and GR00T picks a step's frame by nearest timestamp, so on
the untouched files it shows frame i + 1 for step i where the lake pairs step i with frame i
(the second test pins that difference). Indices cover both edges of every episode.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robolake.integrations.gr00t import LakeGr00tDataset

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
REF = Path(os.environ.get("ROBOLAKE_GR00T_REF", Path.home() / ".cache" / "robolake" / "gr00t-ref"))

# Isaac-GR00T's fourier_gr1_arms_only data config, with windows long enough to reach both edges
CONFIGS = {
    "video": {"delta_indices": [-2, 0, 1], "modality_keys": ["video.ego_view"]},
    "state": {
        "delta_indices": [-1, 0],
        "modality_keys": ["state.left_arm", "state.right_arm", "state.left_hand", "state.right_hand", "state.waist"],
    },
    "action": {
        "delta_indices": list(range(16)),
        "modality_keys": ["action.left_arm", "action.right_arm", "action.left_hand", "action.right_hand"],
    },
    "language": {"delta_indices": [-1, 0], "modality_keys": ["annotation.human.action.task_description"]},
}


@pytest.fixture(scope="module")
def reference():
    python_file = REF / "python"
    if not python_file.is_file() or not (REF / "src" / "gr00t" / "data" / "dataset.py").is_file():
        pytest.skip(f"no GR00T reference environment at {REF} (build it: scripts/build_gr00t_reference.sh GR00T_SRC)")
    python = python_file.read_text().strip()
    if not Path(python).is_file():
        pytest.skip(f"the GR00T reference's interpreter {python} is gone (rebuild the LeRobot peer environment)")

    def run(root: Path, indices: list[int], work: Path, ours: dict | None = None) -> tuple[dict[str, np.ndarray], dict]:
        request = work / f"{root.name}-request.json"
        out = work / f"{root.name}-samples.npz"
        body = {"root": str(root), "configs": CONFIGS, "indices": indices, "out": str(out), "backend": "decord"}
        request.write_text(json.dumps({**body, "ours": ours}))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(REF / p) for p in ("src", "site", "stubs")))
        done = subprocess.run(
            [python, str(ROOT / "scripts" / "gr00t_reference.py"), str(request)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode:
            sys.stderr.write(done.stderr[-4000:])
        assert done.returncode == 0, done.stderr[-2000:]
        with np.load(out) as z:
            arrays = {k: z[k] for k in z.files}
        return arrays, json.loads(out.with_suffix(".json").read_text())

    return run


def _relative_right_hand(root: Path) -> None:
    path = root / "meta" / "modality.json"
    modality = json.loads(path.read_text())
    modality["action"]["right_hand"]["absolute"] = False
    path.write_text(json.dumps(modality, indent=4))


def _rebased_copy(src: Path, dst: Path) -> Path:
    """A copy of `src` whose parquet timestamps start at 0 (videos and everything else linked)."""
    for path in src.rglob("*"):
        target = dst / path.relative_to(src)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path.suffix == ".parquet":
            table = pq.read_table(path)
            ts = table["timestamp"].to_numpy()
            i = table.schema.get_field_index("timestamp")
            table = table.set_column(i, "timestamp", pa.array(ts - ts[0]))
            pq.write_table(table, target)
        else:
            target.symlink_to(path)
    return dst


def _edges(lengths: np.ndarray, picks: int, seed: int = 0) -> list[int]:
    starts = np.concatenate([[0], np.cumsum(lengths)])
    out: set[int] = set()
    for a, b in zip(starts[:-1], starts[1:], strict=True):
        out.update({int(a), int(a) + 1, int(a) + 2, int(b) - 3, int(b) - 2, int(b) - 1})
    out.update(np.random.default_rng(seed).integers(0, int(starts[-1]), picks).tolist())
    return sorted(out)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from robolake.lake import ingest
    from tests.fixtures import copy_pick_n_place

    work = tmp_path_factory.mktemp("gr00t")
    source = copy_pick_n_place(work)
    _relative_right_hand(source)
    lake = work / "lake"
    ingest(str(source), str(lake))
    return work, source, lake


def _check(ours: list[dict], arrays: dict, meta: dict, *, frame_shift: int = 0) -> float:
    """Compare every key of every sample; returns the largest pixel difference."""
    worst = 0.0
    for n, sample in enumerate(ours):
        theirs_keys = {k.split("|", 1)[1] for k in [*arrays, *meta["strings"]] if k.startswith(f"{n}|")}
        assert set(sample) == theirs_keys
        for key, value in sample.items():
            if key.startswith("annotation."):
                assert value == meta["strings"][f"{n}|{key}"], key
                continue
            theirs = arrays[f"{n}|{key}"]
            assert value.dtype == theirs.dtype and value.shape == theirs.shape, (key, value.shape, theirs.shape)
            if key.startswith("video.") and frame_shift:
                continue  # compared by the caller
            if key.startswith("video."):
                worst = max(worst, float(np.abs(value.astype(np.int16) - theirs.astype(np.int16)).max()))
            else:
                np.testing.assert_array_equal(value, theirs, err_msg=f"sample {n} {key}")
    return worst


def _save(samples: list[dict], metadata: dict, work: Path) -> dict:
    """Our samples and metadata, saved as the reference runner reads them."""
    npz, strings, meta = work / "ours.npz", work / "ours.json", work / "ours-metadata.json"
    np.savez(npz, **{f"{n}|{k}": v for n, s in enumerate(samples) for k, v in s.items() if isinstance(v, np.ndarray)})
    strings.write_text(
        json.dumps({f"{n}|{k}": v for n, s in enumerate(samples) for k, v in s.items() if isinstance(v, list)})
    )
    meta.write_text(json.dumps(metadata))
    return {"npz": str(npz), "json": str(strings), "metadata": str(meta)}


def test_samples_equal_gr00ts_own_dataset_on_the_real_data(reference, data):
    work, source, lake = data
    ds = LakeGr00tDataset(str(lake), CONFIGS)
    indices = _edges(ds.trajectory_lengths, 8)
    ours = ds.steps(indices)
    arrays, meta = reference(_rebased_copy(source, work / "rebased"), indices, work, _save(ours, ds.metadata(), work))
    assert meta["len"] == len(ds) and meta["trajectory_lengths"] == ds.trajectory_lengths.tolist()
    assert meta["trajectory_ids"] == ds.trajectory_ids.tolist()
    worst = _check(ours, arrays, meta)
    # the same h264 packets on both sides, FFmpeg's decoder on both: bit-exact
    assert worst == 0.0, f"frames differ by up to {worst} levels"
    # the relative slice was zero-padded past the episode's end, the absolute ones repeat the last row
    last = int(np.cumsum(ds.trajectory_lengths)[0]) - 1
    sample = ds.steps([last])[0]
    assert not sample["action.right_hand"][1:].any() and sample["action.right_hand"][0].any()
    assert (sample["action.left_arm"][1:] == sample["action.left_arm"][0]).all()
    # GR00T's DatasetMetadata: the same modalities; statistics as GR00T's stats.json within its
    # float32 accumulation (GR00T sums means in float32; min, max and quantiles are equal)
    theirs, mine = meta["metadata"], ds.metadata()
    for kind in ("state", "action", "video"):
        assert mine["modalities"][kind] == theirs["modalities"][kind], kind
    for kind in ("state", "action"):
        for name, stats in theirs["statistics"][kind].items():
            for stat, value in stats.items():
                np.testing.assert_allclose(mine["statistics"][kind][name][stat], value, rtol=2e-5, atol=1e-7)
    # GR00T's own transforms (fourier_gr1_arms_only's deterministic part) give the same tensors on
    # our samples with our metadata as on its samples with its metadata
    transformed = [k for k in arrays if k.startswith("t|")]
    assert {f"t|{n}|{k}" for n in range(len(indices)) for k in ("video", "state", "action")} <= set(transformed)
    for key in transformed:
        np.testing.assert_allclose(arrays["o|" + key[2:]], arrays[key], rtol=1e-6, atol=1e-6, err_msg=key)


def test_on_the_untouched_source_gr00t_shows_the_next_frame(reference, data):
    work, source, lake = data
    ds = LakeGr00tDataset(str(lake), CONFIGS)
    lengths = ds.trajectory_lengths
    indices = _edges(lengths, 4, seed=1)
    arrays, meta = reference(source, indices, work)
    _check(ds.steps(indices), arrays, meta, frame_shift=1)  # state, action, language: equal
    starts = np.concatenate([[0], np.cumsum(lengths)])
    deltas = np.asarray(CONFIGS["video"]["delta_indices"])
    for n, index in enumerate(indices):
        e = int(np.searchsorted(starts, index, side="right") - 1)
        local = np.clip(index - starts[e] + deltas, 0, lengths[e] - 1)
        shifted = np.minimum(local + 1, lengths[e] - 1)  # GR00T: the frame nearest the row's timestamp
        ours = np.stack([ds.get_step_data(e, int(s))["video.ego_view"][1] for s in shifted])
        np.testing.assert_array_equal(ours, arrays[f"{n}|video.ego_view"], err_msg=f"step {index}")
