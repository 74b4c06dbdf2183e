from __future__ import annotations

import numpy as np
import pytest

from robolake.packers.suggest import suggest_max_tokens


def test_uniform_lengths_get_a_whole_multiple():
    s = suggest_max_tokens(np.full(500, 300), 2048)
    assert s.uniform and s.max_tokens % 300 == 0 and s.fill == pytest.approx(1.0)
    assert s.current_fill < 0.9  # 2048 holds 6 samples of 300: 12% left empty


def test_mixed_lengths_keep_a_capacity_near_the_request():
    lengths = np.random.default_rng(0).integers(100, 900, 5000)
    s = suggest_max_tokens(lengths, 2048)
    assert not s.uniform and s.fill >= s.current_fill - 0.002 and s.fill > 0.99
    assert s.max_tokens >= lengths.max()


def test_rejects_empty():
    with pytest.raises(ValueError):
        suggest_max_tokens(np.zeros(0, np.int64), 128)
