"""Push-down of `--where` conjuncts into Lance's read of the episodes table.

Issue 37: `tag --where "source_episode_index < 100"` read a column of every episode and built a
Python object per row, 5x as long on 100k episodes as on 1k. The conjuncts Lance can apply with
the evaluator's own truth are now applied while reading; the expression is still evaluated whole.
These tests hold the selection equal with and without the push-down, nulls included."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

from robolake.lake import Lake
from robolake.lake import where as where_mod
from robolake.lake.where import parse_where, pushed_down, select_episode_ids

EXPRESSIONS = [
    "source_episode_index < 2",
    "2 <= source_episode_index and num_steps > 20",
    "num_steps >= 21 and embodiment = 'single_arm_7dof'",
    "embodiment != 'single_arm_7dof' and length > 3",
    "task = 'no such task'",
    "num_steps != 20 and source_episode_index >= 0",
    "num_steps > 20 or source_episode_index = 0",
    "not (num_steps < 21) and success is null",
    "max(abs(action)) > 0.5 and num_steps > 10",
    "source_episode_index > 1.5",
    "task != 'x' and source_format = 'lerobot-v2.1'",
]


@pytest.mark.parametrize(
    ("expr", "sql"),
    [
        ("source_episode_index < 100", "source_episode_index < 100"),
        ("100 > source_episode_index and task = 'pick'", "source_episode_index < 100 AND task = 'pick'"),
        ("num_steps != 5", None),  # numpy's NaN != 5 is true, SQL's NULL != 5 is not
        ("num_steps > 5 or task = 'a'", None),
        ("fps > 3", None),  # a float column: NaN orders differently in SQL
        ("num_steps > 2.5", None),
        ("success = true and embodiment != 'x'", "embodiment != 'x'"),
        ("num_steps < 10 and stream('/imu').count > 3", None),  # streams are checked against every episode
        ('task = "it\'s"', "task = 'it''s'"),
    ],
)
def test_what_is_pushed(expr: str, sql: str | None):
    assert pushed_down(parse_where(expr)) == sql


def test_the_pushed_read_keeps_only_the_matching_rows(base_lake: Path, monkeypatch):
    lake = Lake.open(str(base_lake))
    rows: list[int] = []
    real = Lake.episodes

    def spy(self, where=None, columns=None):
        out = real(self, where=where, columns=columns)
        rows.append(out.num_rows)
        return out

    monkeypatch.setattr(Lake, "episodes", spy)
    got = select_episode_ids(lake, "source_episode_index < 1")
    assert rows == [len(got)] and 0 < len(got) < lake.count("episodes")


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_the_selection_is_the_same_without_the_push_down(base_lake: Path, monkeypatch, expr: str):
    lake = Lake.open(str(base_lake))
    pushed = select_episode_ids(lake, expr)
    monkeypatch.setattr(where_mod, "pushed_down", lambda w: None)
    assert pushed == select_episode_ids(lake, expr)


def test_nulls_are_false_on_both_sides(tmp_path: Path, monkeypatch):
    """A lake whose episodes have null task and num_steps (a later writer may leave them out): the
    pushed SQL and the evaluator agree that a null compares false, `!=` included."""
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(
        pa.table(
            {
                "episode_id": ["a", "b", "c", "d"],
                "task": ["pick", None, "place", None],
                "num_steps": pa.array([5, None, 12, 7], pa.int64()),
            }
        ),
        uri,
    )
    ds = lance.dataset(uri)
    for expr in ("task = 'pick'", "task != 'pick'", "num_steps > 6", "num_steps <= 6", "num_steps = 5"):
        sql = pushed_down(parse_where(expr))
        assert sql is not None
        in_lance = ds.to_table(columns=["episode_id"], filter=sql)["episode_id"].to_pylist()
        evaluated = _evaluate(ds, expr)
        assert in_lance == evaluated, (expr, in_lance, evaluated)


def _evaluate(ds: lance.LanceDataset, expr: str) -> list[str]:
    """`expr` as the evaluator computes it, over the rows of `ds` (no push-down)."""
    import numpy as np

    t = ds.to_table()
    w = parse_where(expr)

    class _Table:
        n = t.num_rows
        table = t
        where = w

        def column(self, name: str) -> np.ndarray:
            col = t.column(name)
            if pa.types.is_string(col.type):
                return np.array(col.to_pylist(), dtype=object)
            return np.asarray(col.to_numpy(zero_copy_only=False))

    mask = where_mod._truth(where_mod._Eval(_Table(), None, expr).run(w.tree))
    keep = np.broadcast_to(mask, (t.num_rows,)).tolist()
    return [e for e, k in zip(t["episode_id"].to_pylist(), keep, strict=True) if k]
