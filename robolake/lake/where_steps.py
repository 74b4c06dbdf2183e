"""`--where-steps EXPR`: which steps of an episode an expression picks, in the `--where` language.

`robolake trim LAKE --where-steps "idle and t < 2"` drops the steps an expression is true on.
The expression is parsed like `--where` (Python's `ast` after the same SQL-habit token pass; a
fixed set of node types, names and functions; nothing is `eval`'d) and evaluated over one
episode's steps at a time, as numpy arrays: one value per step.

Names (one value per step):

- `step` (or `step_index`), `t` (or `timestamp`: seconds on the steps' axis), `steps_from_end`
  (0 at the last step), `t_from_end` (seconds before the last step);
- `idle` (nothing moves, quality's definition from the data's own scale), `idle_head` and
  `idle_tail` (the step is in the idle run that opens or closes the episode), `motion` (the
  step's largest move in units of each dimension's spread);
- `state[i]`, `action[i]` (negative i counts from the end); bare `state` / `action` are vectors
  and must be reduced per step: `max(...)`, `min(...)`, `mean(...)`, `norm(...)`, `any(...)`,
  `all(...)`, e.g. `norm(action) < 0.01`, `all(state = 0)`.

Functions: `abs` and the reductions above. An unknown name is an error listing the names.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from robolake.lake.stats.quality import idle_steps, step_motion
from robolake.lake.where import _ALLOWED, WhereError, _check_depth, _to_python

__all__ = ["StepWhere", "STEP_NAMES", "parse_where_steps", "steps_matching"]

STEP_NAMES = (
    "step",
    "step_index",
    "t",
    "timestamp",
    "steps_from_end",
    "t_from_end",
    "idle",
    "idle_head",
    "idle_tail",
    "motion",
    "state",
    "action",
)
_REDUCE: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "max": lambda x: x.max(axis=1) if x.shape[1] else np.full(len(x), np.nan),
    "min": lambda x: x.min(axis=1) if x.shape[1] else np.full(len(x), np.nan),
    "mean": lambda x: x.mean(axis=1) if x.shape[1] else np.full(len(x), np.nan),
    "norm": lambda x: np.sqrt((x.astype(np.float64) ** 2).sum(axis=1)),
    "any": lambda x: (x != 0).any(axis=1),
    "all": lambda x: (x != 0).all(axis=1),
}
_FUNCTIONS = ("abs", *_REDUCE)
# The `--where` language's nodes, less those with no per-step meaning here (membership, powers, modulo).
_NODES = tuple(
    n
    for n in _ALLOWED
    if n not in (ast.In, ast.NotIn, ast.Is, ast.IsNot, ast.Pow, ast.Mod, ast.Tuple, ast.List, ast.Attribute)
)
_ARITH: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: np.true_divide,
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
}


@dataclass(frozen=True)
class StepWhere:
    """A parsed `--where-steps` expression."""

    text: str
    tree: ast.expr


def parse_where_steps(expr: str) -> StepWhere:
    """Parse `expr`.

    Raises:
        WhereError: a syntax error, a construct outside the language, or an unknown name or function.
    """
    if not expr or not expr.strip():
        raise WhereError('--where-steps needs an expression, e.g. "idle and t < 2" or "norm(action) < 0.01"')
    try:
        tree = ast.parse(_to_python(expr), mode="eval")
    except SyntaxError as e:
        raise WhereError(f"--where-steps {expr!r} is not an expression: {e.msg}") from None
    _check_depth(tree, expr)
    for node in ast.walk(tree):
        if not isinstance(node, _NODES):
            raise WhereError(f"--where-steps {expr!r}: {type(node).__name__} is not part of the step language")
        if isinstance(node, ast.Name) and node.id not in STEP_NAMES and node.id not in _FUNCTIONS:
            raise WhereError(f"--where-steps {expr!r}: unknown name {node.id!r}; the names are {', '.join(STEP_NAMES)}")
        if isinstance(node, ast.Call) and (
            not isinstance(node.func, ast.Name)
            or node.func.id not in _FUNCTIONS
            or len(node.args) != 1
            or node.keywords
        ):
            raise WhereError(f"--where-steps {expr!r}: calls take one argument and are one of {', '.join(_FUNCTIONS)}")
        if isinstance(node, ast.Subscript) and not (
            isinstance(node.value, ast.Name) and node.value.id in ("state", "action") and _index(node.slice) is not None
        ):
            raise WhereError(f"--where-steps {expr!r}: only state[i] and action[i] (an integer i) can be indexed")
    return StepWhere(text=expr, tree=tree.body)


def _index(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return int(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _index(node.operand)
        return None if inner is None else -inner
    return None


def steps_matching(where: StepWhere, state: np.ndarray, action: np.ndarray, timestamps: np.ndarray) -> np.ndarray:
    """bool [T]: the steps of one episode `where` is true on.

    Raises:
        WhereError: a vector (bare `state`/`action`) left unreduced, or an index past a vector's width.
    """
    n = len(timestamps)
    state = np.asarray(state, dtype=np.float64).reshape(n, -1)
    action = np.asarray(action, dtype=np.float64).reshape(n, -1)
    ts = np.asarray(timestamps, dtype=np.float64)
    names = _Names(state, action, ts)
    out = _Eval(where.text, names).value(where.tree)
    if isinstance(out, np.ndarray) and out.ndim == 2:
        raise WhereError(f"--where-steps {where.text!r} is a vector per step; reduce it: max(...), norm(...), all(...)")
    return np.broadcast_to(np.asarray(out, dtype=bool), (n,)).copy()


class _Names:
    """The per-step values of one episode, built on first use."""

    def __init__(self, state: np.ndarray, action: np.ndarray, ts: np.ndarray):
        self.state, self.action, self.ts = state, action, ts
        self._idle: np.ndarray | None = None

    @property
    def idle(self) -> np.ndarray:
        if self._idle is None:
            self._idle = idle_steps(self.state, self.action)
        return self._idle

    def get(self, name: str) -> np.ndarray:
        n = len(self.ts)
        if name in ("step", "step_index"):
            return np.arange(n, dtype=np.float64)
        if name in ("t", "timestamp"):
            return self.ts
        if name == "steps_from_end":
            return np.arange(n - 1, -1, -1, dtype=np.float64)
        if name == "t_from_end":
            return (self.ts[-1] - self.ts) if n else self.ts
        if name == "idle":
            return self.idle
        if name in ("idle_head", "idle_tail"):
            mask = self.idle if name == "idle_head" else self.idle[::-1]
            run = n if mask.all() else int(np.argmin(mask))
            head = np.arange(n) < run
            return head if name == "idle_head" else head[::-1]
        if name == "motion":
            return step_motion(self.state, self.action)
        return self.state if name == "state" else self.action


class _Eval:
    def __init__(self, text: str, names: _Names):
        self.text, self.names = text, names

    def value(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or isinstance(node.value, int | float):
                return node.value
            raise WhereError(f"--where-steps {self.text!r}: {node.value!r} is not a number or true/false")
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.Subscript):
            vec = self.names.get(node.value.id)  # type: ignore[attr-defined]
            i = _index(node.slice)
            width = vec.shape[1]
            if i is None or not -width <= i < width:
                raise WhereError(f"--where-steps {self.text!r}: {node.value.id}[{i}] is past its {width} dims")  # type: ignore[attr-defined]
            return vec[:, i]
        if isinstance(node, ast.Call):
            fn = node.func.id  # type: ignore[attr-defined]
            arg = self.value(node.args[0])
            if fn == "abs":
                return np.abs(arg)
            x = np.asarray(arg, dtype=np.float64)
            return _REDUCE[fn](x if x.ndim == 2 else x.reshape(len(x), 1))
        if isinstance(node, ast.UnaryOp):
            v = self.value(node.operand)
            if isinstance(node.op, ast.Not):
                return ~np.asarray(self._flat(v), dtype=bool)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            return _ARITH[type(node.op)](self.value(node.left), self.value(node.right))
        if isinstance(node, ast.BoolOp):
            parts = [np.asarray(self._flat(self.value(v)), dtype=bool) for v in node.values]
            out = parts[0]
            for p in parts[1:]:
                out = (out & p) if isinstance(node.op, ast.And) else (out | p)
            return out
        if isinstance(node, ast.Compare):
            left = self.value(node.left)
            result: Any = True
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = self.value(right_node)
                result = np.logical_and(result, _COMPARE[type(op)](left, right))
                left = right
            return result
        raise WhereError(f"--where-steps {self.text!r}: {type(node).__name__} is not part of the step language")

    def _flat(self, v: Any) -> Any:
        if isinstance(v, np.ndarray) and v.ndim == 2:
            raise WhereError(
                f"--where-steps {self.text!r} combines a vector per step; reduce it: max(...), norm(...), all(...)"
            )
        return v
