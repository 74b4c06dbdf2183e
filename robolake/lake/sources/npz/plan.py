"""Which arrays of an `.npz` / `.npy` episode become its state, action, cameras, task and success.

A mapping (`--map`) names the arrays (`state: [obs_qpos, obs_gripper]`, `action: actions`,
`cameras: {wrist: obs_wrist_rgb}`, `task` / `task_from`, `fps`). Without one, the naming that
simulation codebases share decides (robomimic, D4RL, gym recorders):

* state: every numeric `obs_*` array of one value or one row of values per step, in name order
  (else the one `obs` / `observations` / `states` / `state` / `qpos` / `proprio` array);
* action: `actions` (or `action`); without it the next step's state, said in the metadata;
* cameras: every uint8 [T, H, W, 3] array (also RGBA, grayscale [T, H, W, 1]), named without
  its `obs_` prefix;
* success: the sidecar's `success`, else the last row of `dones` / `done` / `terminals` / `success`;
* task: the sidecar's `task` / `instruction`, else a text array `task` / `instruction`.

Observations are often one more than actions (the observation after the last action is
recorded too): when every observation array (state and cameras) has T + 1 rows for T actions,
the last observation is left out of the steps, and said (the record keeps it). Any other
mismatch is a `shape` error naming each array's rows. Rows are ticks at the sidecar's or
mapping's `fps` (20 Hz assumed, and said, without one).

The plan is resolved from the unit's first readable episode's headers; `suggest_mapping` writes
it out as a mapping that ingests exactly as the default does (`robolake inspect --suggest-map`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from robolake.lake.sources.base import SourceError
from robolake.lake.sources.mapping import Mapping
from robolake.lake.sources.npz.arrays import ArrayHeader

__all__ = ["NpzPlan", "resolve_plan", "suggest_mapping", "DEFAULT_FPS", "episode_rows"]

DEFAULT_FPS = 20.0
_STATE_ONE = ("obs", "observations", "observation", "states", "state", "qpos", "proprio")
_ACTIONS = ("actions", "action")
_DONES = ("dones", "done", "terminals", "success")
_TASKS = ("task", "instruction", "language_instruction")


@dataclass(frozen=True, kw_only=True)
class NpzPlan:
    """What a unit's episodes are read as.

    Attributes:
        state: Arrays concatenated into the state, in order.
        action: Arrays concatenated into the action (empty: the next step's state).
        cameras: (camera name, array) pairs.
        state_widths: Values per row of each state array.
        action_widths: Values per row of each action array.
        task: A literal instruction (the mapping's), or None.
        task_from: A text array holding the instruction, or None.
        done: The array whose last row is success, or None.
        fps: The rate (None: the sidecar's, else `DEFAULT_FPS`).
        tag: The embodiment tag.
        mapped: Whether a mapping decided it.
    """

    state: tuple[str, ...]
    action: tuple[str, ...]
    cameras: tuple[tuple[str, str], ...]
    state_widths: tuple[int, ...]
    action_widths: tuple[int, ...]
    task: str | None = None
    task_from: str | None = None
    done: str | None = None
    fps: float | None = None
    tag: str = ""
    mapped: bool = False

    @property
    def observations(self) -> tuple[str, ...]:
        return self.state + tuple(a for _, a in self.cameras)

    def roles(self) -> dict[str, str]:
        out = {a: f"state[{i}]" for i, a in enumerate(self.state)}
        out.update({a: f"action[{i}]" for i, a in enumerate(self.action)})
        out.update({a: f"camera {c}" for c, a in self.cameras})
        if self.task_from:
            out[self.task_from] = "task"
        if self.done:
            out.setdefault(self.done, "success (its last row, unless the sidecar says)")
        return out


def _width(h: ArrayHeader) -> int:
    return 1 if len(h.shape) <= 1 else int(h.shape[1])


def _numeric_rows(h: ArrayHeader) -> bool:
    return h.kind in "biuf" and 1 <= len(h.shape) <= 2 and not h.is_image()


def camera_name(array: str) -> str:
    name = re.sub(r"^(obs|observations?)[_/.]", "", array)
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name) or "camera"


def _need(headers: dict[str, ArrayHeader], name: str, key: str, file: str) -> ArrayHeader:
    if name not in headers:
        raise SourceError(
            "missing_key",
            file,
            f"the mapping's {key} names array {name!r}, which this episode lacks; it has: "
            f"{', '.join(sorted(headers)) or 'nothing'}; fix the mapping (see `robolake inspect`)",
        )
    return headers[name]


def resolve_plan(headers: dict[str, ArrayHeader], mapping: Mapping | None, tag: str | None, file: str) -> NpzPlan:
    """The plan for episodes shaped like `headers` (the first readable episode's).

    Raises:
        SourceError: `missing_key` when a mapped array is missing or the default naming finds no
            state (the message says to write a mapping); `shape` for a mapped array that is not
            numbers of one row a step.
    """
    if mapping is not None:
        return _mapped(headers, mapping, tag, file)
    obs = [n for n in sorted(headers) if n.startswith(("obs_", "observations_", "observation_"))]
    for n in (*obs, *_STATE_ONE, *_ACTIONS):
        if n in headers and headers[n].is_object:
            raise SourceError(
                "pickled",
                file,
                f"array {n!r} is an object array, which NumPy stores with pickle; robolake never unpickles data: "
                "save it as numbers (np.asarray(x, dtype=np.float32))",
            )
    state = [n for n in obs if _numeric_rows(headers[n])]
    if not state:
        state = [n for n in _STATE_ONE if n in headers and _numeric_rows(headers[n])][:1]
    if not state:
        raise SourceError(
            "missing_key",
            file,
            "no array is named like a state (obs_*, obs, observations, states, qpos); it has "
            f"{', '.join(sorted(headers)) or 'nothing'}; write a mapping "
            "(`robolake inspect SRC --suggest-map > map.yaml`, edit it, ingest with --map map.yaml)",
        )
    action = [n for n in _ACTIONS if n in headers and _numeric_rows(headers[n])][:1]
    cameras = [(camera_name(n), n) for n in sorted(headers) if headers[n].is_image()]
    done = next((n for n in _DONES if n in headers and headers[n].kind in "biuf"), None)
    task_from = next((n for n in _TASKS if n in headers and headers[n].kind in "SU"), None)
    s_w = tuple(_width(headers[n]) for n in state)
    a_w = tuple(_width(headers[n]) for n in action) or (sum(s_w),)
    return NpzPlan(
        state=tuple(state),
        action=tuple(action),
        cameras=tuple(cameras),
        state_widths=s_w,
        action_widths=a_w,
        task_from=task_from,
        done=done,
        tag=tag or f"npz_s{sum(s_w)}_a{sum(a_w)}",
    )


def _mapped(headers: dict[str, ArrayHeader], m: Mapping, tag: str | None, file: str) -> NpzPlan:
    def numeric(key: str, name: str) -> int:
        h = _need(headers, name, key, file)
        if not _numeric_rows(h):
            raise SourceError(
                "shape",
                file,
                f"the mapping's {key} names {name!r}, a {h.dtype} {list(h.shape)} array; "
                "state and action arrays hold numbers, one value or one row of values per step",
            )
        return _width(h)

    state = tuple(s.source for s in m.state)
    action = tuple(s.source for s in m.action)
    s_w = tuple(numeric(f"state[{i}]", n) for i, n in enumerate(state))
    a_w = tuple(numeric(f"action[{i}]", n) for i, n in enumerate(action)) or (sum(s_w),)
    if m.cameras_given:
        cameras = tuple((c.name, c.source) for c in m.cameras)
        for c, a in cameras:
            if not _need(headers, a, f"cameras.{c}", file).is_image():
                raise SourceError(
                    "shape",
                    file,
                    f"the mapping's camera {c!r} names {a!r}, a {headers[a].dtype} "
                    f"{list(headers[a].shape)} array; a camera is uint8 [T, H, W, 3]",
                )
    else:
        cameras = tuple((camera_name(n), n) for n in sorted(headers) if headers[n].is_image())
    if m.task_from:
        _need(headers, m.task_from, "task_from", file)
    task_from = m.task_from
    if task_from is None and m.task is None:  # as without a mapping, so a suggested mapping ingests alike
        task_from = next((n for n in _TASKS if n in headers and headers[n].kind in "SU"), None)
    done = next((n for n in _DONES if n in headers and headers[n].kind in "biuf"), None)
    return NpzPlan(
        state=state,
        action=action,
        cameras=cameras,
        state_widths=s_w,
        action_widths=a_w,
        task=m.task,
        task_from=task_from,
        done=done,
        fps=m.fps,
        tag=tag or m.embodiment or f"npz_s{sum(s_w)}_a{sum(a_w)}",
        mapped=True,
    )


def episode_rows(plan: NpzPlan, headers: dict[str, ArrayHeader], file: str) -> tuple[int, bool]:
    """(steps, whether the last observation is dropped) of one episode.

    Raises:
        SourceError: `shape`: the arrays disagree in rows other than by one more observation.
    """
    obs = {n: headers[n].rows for n in plan.observations if n in headers}
    act = {n: headers[n].rows for n in plan.action if n in headers}
    rows = {**obs, **act}
    if not act:
        if len(set(obs.values())) > 1:
            raise _lengths(rows, file)
        return next(iter(obs.values())), False
    t = set(act.values())
    o = set(obs.values())
    if len(t) == 1 and len(o) == 1:
        (n,) = t
        (m,) = o
        if m == n:
            return n, False
        if m == n + 1:
            return n, True
    raise _lengths(rows, file)


def _lengths(rows: dict[str, int], file: str) -> SourceError:
    return SourceError(
        "shape",
        file,
        f"arrays differ in length ({', '.join(f'{k}={v}' for k, v in rows.items())}); observations may be one "
        "more than actions (the last is dropped), otherwise every array needs one row per step",
    )


def suggest_mapping(plan: NpzPlan, path: str, fps: float, fps_source: str) -> str:
    """The plan as a mapping file: it ingests exactly as the default does; edit it to change that."""
    q = json.dumps
    lines = [f"# the arrays robolake reads in {path}, as a mapping to edit; ingest with --map THIS_FILE"]
    lines.append(f"embodiment: {q(plan.tag)}")
    lines.append("state:")
    lines += [f"  - {{source: {q(a)}}}" for a in plan.state]
    if plan.action:
        lines.append("action:")
        lines += [f"  - {{source: {q(a)}}}" for a in plan.action]
    else:
        lines.append("action_from_state: true             # no actions array: the next step's state")
    lines.append("cameras: {" + ", ".join(f"{q(c)}: {q(a)}" for c, a in plan.cameras) + "}")
    if fps_source == "sidecar":  # each episode's own sidecar rate; a mapping's fps would override it
        lines.append(f"# fps: {fps:g}                            # the sidecars say it; set it to override them")
    else:
        lines.append(f"fps: {fps:g}                              # {fps_source}")
    if plan.task is not None:
        lines.append(f"task: {q(plan.task)}")
    else:
        lines.append('# task: "..."                     # default: the sidecar\'s task/instruction, else a task array')
    return "\n".join(lines) + "\n"
