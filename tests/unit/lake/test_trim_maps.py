"""KeptSteps (which frames a trimmed episode's steps show) and the --where-steps language."""

from __future__ import annotations

import numpy as np
import pytest

from robolake.lake import KeptSteps, WhereError, kept_of, parse_where_steps, steps_matching


def test_kept_steps_ranges_compose_and_round_trip() -> None:
    k = KeptSteps.of(10, np.array([2, 3, 4, 7, 8]))
    assert k.ranges == ((2, 5), (7, 9)) and k.num_steps == 5
    assert k.then(np.array([0, 3, 4])).frame_steps.tolist() == [2, 7, 8]
    assert kept_of({"trim": k.to_json()}) == k
    assert kept_of('{"quality": {}}') is None and kept_of(None) is None
    assert KeptSteps.untrimmed(4).frame_steps.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="damaged"):
        KeptSteps(5, ((3, 6),))
    with pytest.raises(ValueError, match="damaged"):
        KeptSteps(9, ((4, 6), (2, 3)))


def _episode(n: int = 10) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    state = np.zeros((n, 2))
    state[3:7, 0] = np.arange(1, 5)  # moves from step 3 to step 6
    state[7:, 0] = 4
    action = state.copy()
    return state, action, np.arange(n) / 10.0


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        ("step < 2", [0, 1]),
        ("t >= 0.8", [8, 9]),
        ("steps_from_end = 0", [9]),
        ("t_from_end < 0.15", [8, 9]),
        ("idle_head", [0, 1, 2]),
        ("idle_tail", [7, 8, 9]),
        ("idle and not idle_tail", [0, 1, 2]),
        ("state[0] > 3", [6, 7, 8, 9]),
        ("action[-2] = 4 AND step <> 9", [6, 7, 8]),
        ("max(abs(state)) = 0", [0, 1, 2]),
        ("norm(action) >= 4", [6, 7, 8, 9]),
        ("all(state = 0)", [0, 1, 2]),
        ("motion > 0", [3, 4, 5, 6]),
    ],
)
def test_where_steps_picks_steps(expr: str, want: list[int]) -> None:
    state, action, ts = _episode()
    got = steps_matching(parse_where_steps(expr), state, action, ts)
    assert np.flatnonzero(got).tolist() == want


@pytest.mark.parametrize(
    ("expr", "match"),
    [
        ("speed < 1", "unknown name 'speed'"),
        ("__import__('os')", "calls take one argument|unknown name"),
        ("state.real > 0", "Attribute is not part"),
        ("state[i] > 0", "only state\\[i\\]"),
        ("lambda: 1", "not part of the step language"),
        ("", "needs an expression"),
    ],
)
def test_where_steps_refuses(expr: str, match: str) -> None:
    with pytest.raises(WhereError, match=match):
        parse_where_steps(expr)


def test_where_steps_vectors_must_be_reduced_and_indices_fit() -> None:
    state, action, ts = _episode()
    with pytest.raises(WhereError, match="reduce it"):
        steps_matching(parse_where_steps("abs(state) > 1"), state, action, ts)
    with pytest.raises(WhereError, match="past its 2 dims"):
        steps_matching(parse_where_steps("state[2] > 1"), state, action, ts)
