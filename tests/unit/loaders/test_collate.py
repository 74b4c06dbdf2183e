from __future__ import annotations

import numpy as np
import pytest

from robolake.loaders import CollateConfig, collate_rows, open_shards


@pytest.fixture(scope="module")
def shards(packed_data):
    return open_shards(str(packed_data.packed))


def _config(shards, **kw):
    base = dict(
        tokens_per_view=shards.tokens_per_view,
        image_size=24,
        max_state_dim=shards.max_state_dim,
        max_action_dim=shards.max_action_dim,
    )
    return CollateConfig(**{**base, **kw})


def test_one_row_matches_stored_values(shards):
    row = shards.read_rows([0])
    batch = collate_rows(row, _config(shards))
    r = row.to_pylist()[0]
    assert batch.cu_seqlens.tolist() == r["cu_seqlens"]
    assert batch.num_samples == r["num_samples"]
    assert batch.sample_keys == tuple(zip(r["episode_id"], r["step_index"], strict=True))
    assert tuple(batch.pixels.shape) == (sum(r["num_views"]), 3, 24, 24)
    assert batch.embodiment_id.tolist() == r["embodiment_id"]
    d0 = r["state_dims"][0]
    np.testing.assert_allclose(batch.state[0, :d0].numpy(), np.asarray(r["state"][:d0], np.float32))
    assert batch.state_mask[0].sum() == d0
    a0 = r["action_dims"][0]
    np.testing.assert_allclose(
        batch.action[0, :, :a0].numpy().reshape(-1), np.asarray(r["action"][: 16 * a0], np.float32)
    )
    assert batch.text_ids[: r["text_lengths"][0]].tolist() == r["text_ids"][: r["text_lengths"][0]]


def test_several_rows_lay_boundaries_end_to_end(shards):
    rows = shards.read_rows([2, 0, 1])
    batch = collate_rows(rows, _config(shards))
    lengths = np.concatenate([np.diff(cu) for cu in rows.column("cu_seqlens").to_pylist()])
    assert batch.cu_seqlens.tolist() == [0, *np.cumsum(lengths).tolist()]
    assert batch.num_samples == sum(rows.column("num_samples").to_pylist())
    assert (batch.position_ids[batch.cu_seqlens[:-1].long()] == 0).all()


def test_mismatched_token_model_is_an_error(shards):
    with pytest.raises(ValueError, match="disagree with the stored cu_seqlens.*re-run `robolake pack`"):
        collate_rows(shards.read_rows([0]), _config(shards, tokens_per_view=shards.tokens_per_view + 1))


def test_too_narrow_padding_is_an_error(shards):
    with pytest.raises(ValueError, match="raise them in the loader config"):
        collate_rows(shards.read_rows([0, 1, 2, 3]), _config(shards, max_state_dim=2))


def test_empty_and_bad_config():
    with pytest.raises(ValueError, match="image_size must be a positive integer"):
        CollateConfig(tokens_per_view=4, image_size=0, max_state_dim=1, max_action_dim=1)


def test_zero_rows_is_an_error(shards):
    with pytest.raises(ValueError, match="zero packed rows"):
        collate_rows(shards.read_rows([0]).slice(0, 0), _config(shards))
