"""Stream history in samples: every recorded message of a window, as tokens, packed and trained on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from robolake.lake import IngestConfig, Lake, ingest, read_record, steps_seconds
from robolake.packers import HistorySpec, PackSpec, TokenLengthConfig, build_sample_index, parse_history
from robolake.packers.materialize import materializer_for
from robolake.testing.ros import Layout, write_ros2


@pytest.fixture(scope="module")
def ft_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("history")
    rng = np.random.default_rng(0)
    t_ft = np.sort(rng.uniform(0, 1.0, 700))  # ~700 Hz with jitter: a different count in every window
    extra = {
        "/ft": ("multiarray", [(t, np.sin(np.arange(6) + t)) for t in t_ft]),
        "/button": ("empty", [(0.3, None), (0.31, None), (0.8, None)]),
    }
    write_ros2(root / "src" / "rig", Layout(seconds=1.0, extra=extra))
    ingest(str(root / "src" / "rig"), str(root / "lake"), IngestConfig(execution="local"))
    return root / "lake"


def _spec(*history: HistorySpec) -> PackSpec:
    return PackSpec(max_tokens=512, tokens=TokenLengthConfig(tokens_per_view=4, state_tokens=0), history=history)


def test_parse_history():
    assert parse_history("/ft=0.1") == HistorySpec(stream="/ft", seconds=0.1)
    assert parse_history("/ft:data=0.25") == HistorySpec(stream="/ft", seconds=0.25, field="data")
    for bad in ("/ft", "/ft=x", "/ft=-1", "=0.1"):
        with pytest.raises(ValueError):
            parse_history(bad)


def test_each_sample_holds_every_message_of_its_window(ft_lake: Path):
    lake = Lake.open(str(ft_lake))
    base = build_sample_index(lake, _spec())
    idx = build_sample_index(lake, _spec(HistorySpec(stream="/ft", seconds=0.05, field="data")))
    extra = idx.length - base.length
    assert extra.min() >= 0 and len(set(extra.tolist())) > 3  # varies from sample to sample
    # recompute one sample's window straight from the record
    rec = read_record(lake.to_arrow("signals"), lake.to_arrow("events"))
    (ft,) = rec.parts("/ft")
    h = idx.history
    assert h is not None
    meta = json.loads(lake.episodes(columns=["metadata"])["metadata"][0].as_py())
    assert ft.clock == "log" and meta["record"]["log_minus_header_ns"] == 3_000_000  # the writer's latency
    on_steps = np.round(steps_seconds(ft.t_ns, meta, log_clock=True) * 1e9).astype(np.int64)
    s = 50
    t = int(h.step_ns[0][s])
    assert t == round(lake.to_arrow("steps", columns=["timestamp"])["timestamp"][s].as_py() * 1e9)
    want = int(((on_steps > t - 50_000_000) & (on_steps <= t)).sum())
    values, dt, ids = h.tokens(0, s)
    assert len(dt) == want == extra[s] and (dt <= 0).all() and (dt > -0.05).all() and (ids == 0).all()
    assert values.shape == (want, 16) and np.allclose(values[:, 6:], 0)


def test_history_rows_collate_and_train_packed_and_padded(ft_lake: Path):
    from robolake.loaders.collate import CollateConfig, collate_rows
    from robolake.training.config import ModelConfig
    from robolake.training.model import GrootModel

    lake = Lake.open(str(ft_lake))
    spec = _spec(HistorySpec(stream="/ft", seconds=0.05, field="data"), HistorySpec(stream="/button", seconds=0.5))
    idx = build_sample_index(lake, spec)
    rows = materializer_for(lake, idx, spec).rows([np.arange(0, 6), np.arange(40, 44)], [0, 1])
    assert sum(rows["history_lengths"][0].as_py()) > 0
    batch = collate_rows(
        rows, CollateConfig(tokens_per_view=4, image_size=16, max_state_dim=8, max_action_dim=8, history_width=16)
    )
    assert batch.history_values is not None and batch.history_values.shape[0] == int(batch.history_lengths.sum())
    assert torch.equal(batch.seqlens, torch.as_tensor(np.concatenate([r.as_py() for r in rows["lengths"]])))
    model = GrootModel(
        ModelConfig(
            image_size=16,
            patch_size=8,
            tokens_per_view=4,
            max_state_dim=8,
            max_action_dim=8,
            history_streams=2,
            history_width=16,
        )
    )
    g = torch.Generator().manual_seed(0)
    noise = torch.randn(batch.action.shape, generator=g)
    t = torch.rand(batch.num_samples, generator=g)
    packed = model(batch, noise=noise, t=t)
    padded = model(batch.to_padded(), noise=noise, t=t)
    assert torch.allclose(packed.loss, padded.loss, atol=1e-5)
    packed.loss.backward()
    assert model.history_encoder is not None
    assert all(m[0].weight.grad is not None for m in model.history_encoder.mlps)
    assert batch.to_padded().padding_fraction > 0  # windows differ: padding pays for the longest


def test_history_of_a_stream_the_lake_lacks_is_named(ft_lake: Path):
    with pytest.raises(ValueError, match="/nope is in none of"):
        build_sample_index(Lake.open(str(ft_lake)), _spec(HistorySpec(stream="/nope", seconds=0.1)))
    with pytest.raises(ValueError, match="has no field .nope.; its fields: header.stamp.sec"):
        build_sample_index(
            Lake.open(str(ft_lake)), _spec(HistorySpec(stream="/joint_states", seconds=0.1, field="nope"))
        )


def test_pack_history_end_to_end_through_the_cli_and_a_loader(ft_lake: Path, tmp_path: Path):
    from robolake.cli import main
    from robolake.loaders import LoaderConfig, open_batches, open_shards
    from robolake.training.config import ModelConfig
    from robolake.training.model import GrootModel
    from robolake.training.sizing import size_model_config

    out = tmp_path / "packed"
    rc = main(
        ["pack", str(ft_lake), str(out), "--max-tokens", "256", "--tokens-per-view", "4", "--history", "/ft:data=0.05"]
    )
    assert rc == 0
    shards = open_shards(str(out))
    assert shards.manifest.pack_spec.history == (HistorySpec(stream="/ft", seconds=0.05, field="data"),)
    src = open_batches(
        shards, LoaderConfig(image_size=16, num_workers=0, shuffle=False, max_state_dim=32, max_action_dim=32)
    )
    assert src.layout.history_streams == 1 and src.layout.history_width == 16
    model = GrootModel(size_model_config(ModelConfig(image_size=16, patch_size=8, tokens_per_view=4), src.layout))
    batch = next(iter(src))
    assert batch.history_values is not None and batch.history_values.shape[0] > 0
    assert torch.isfinite(model(batch).loss)
