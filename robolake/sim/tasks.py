"""The task suite: Meta-World tasks that differ in language and motion, each with its instruction.

A task is a Meta-World environment name, the scripted expert that solves it, the sentence a
policy is conditioned on, and an episode step limit. The default suite spans five motions on one
robot (a Sawyer arm): reaching a point, pushing a puck, pick-and-place, pulling a drawer open and
pressing a button from above. Reach, push and pick-place start from near-identical scenes with a
puck on the table, so the instruction is what tells the policy which of the three to do.

Seeds: an episode is fully determined by (task, seed). Demonstrations draw seeds from
`TRAIN_SEEDS` and evaluation from `EVAL_SEEDS`, two disjoint ranges, so a policy is never
evaluated on an initial scene it was trained on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "SimTask",
    "SUITE",
    "DEFAULT_TASKS",
    "TRAIN_SEEDS",
    "EVAL_SEEDS",
    "resolve_tasks",
    "episode_seed",
]

TRAIN_SEEDS = range(0, 1_000_000)
EVAL_SEEDS = range(1_000_000, 2_000_000)


@dataclass(frozen=True, kw_only=True)
class SimTask:
    """One task of the suite.

    Attributes:
        name: Short name used on the command line and in reports ("push").
        env_name: Meta-World environment name ("push-v3").
        instruction: The language instruction the policy is conditioned on.
        expert: Class name of the scripted expert in `metaworld.policies`.
        max_steps: Episode step limit (Meta-World's own is 500; experts finish in well under 150).
    """

    name: str
    env_name: str
    instruction: str
    expert: str
    max_steps: int = 150

    def __post_init__(self) -> None:
        if not self.name or not self.env_name or not self.instruction:
            raise ValueError("SimTask needs a name, an env_name and an instruction")
        if self.max_steps < 1:
            raise ValueError(f"SimTask.max_steps must be >= 1, got {self.max_steps}")


SUITE: dict[str, SimTask] = {
    t.name: t
    for t in (
        SimTask(name="reach", env_name="reach-v3", instruction="reach the goal", expert="SawyerReachV3Policy"),
        SimTask(name="push", env_name="push-v3", instruction="push the puck to the goal", expert="SawyerPushV3Policy"),
        SimTask(
            name="pick-place",
            env_name="pick-place-v3",
            instruction="pick and place the puck",
            expert="SawyerPickPlaceV3Policy",
        ),
        SimTask(
            name="drawer-open",
            env_name="drawer-open-v3",
            instruction="open the drawer",
            expert="SawyerDrawerOpenV3Policy",
        ),
        SimTask(
            name="button-press",
            env_name="button-press-topdown-v3",
            instruction="press the button",
            expert="SawyerButtonPressTopdownV3Policy",
        ),
        SimTask(
            name="door-open",
            env_name="door-open-v3",
            instruction="open the door",
            expert="SawyerDoorOpenV3Policy",
            max_steps=200,
        ),
        SimTask(
            name="window-open",
            env_name="window-open-v3",
            instruction="open the window",
            expert="SawyerWindowOpenV3Policy",
            max_steps=200,
        ),
    )
}

DEFAULT_TASKS: tuple[str, ...] = ("reach", "push", "pick-place", "drawer-open", "button-press")


def resolve_tasks(names: Sequence[str] | str | None = None) -> list[SimTask]:
    """Tasks by short name (or Meta-World env name); a comma-separated string works too.

    Raises:
        ValueError: an unknown task (the message lists the suite).
    """
    if names is None:
        names = DEFAULT_TASKS
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    by_env = {t.env_name: t for t in SUITE.values()}
    out = []
    for n in names:
        task = SUITE.get(n) or by_env.get(n)
        if task is None:
            raise ValueError(f"unknown sim task {n!r}; choose from {sorted(SUITE)}")
        out.append(task)
    if not out:
        raise ValueError(f"no tasks given; choose from {sorted(SUITE)}")
    return out


def episode_seed(seeds: range, base_seed: int, task_index: int, episode: int) -> int:
    """Seed of episode `episode` of task `task_index` in a seed range, for a run seeded `base_seed`.

    Distinct (base_seed, task, episode) give distinct seeds for up to 1000 tasks and 1000 episodes
    per task, and the result stays inside `seeds`.
    """
    offset = (base_seed * 1_000_003 + task_index * 1000 + episode) % len(seeds)
    return seeds.start + offset
