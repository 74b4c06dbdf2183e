"""The end of every write: one attempt on top of the lake as read, and a re-read when it loses.

A writer reads a lake version, prepares its rows (fragments written, statistics accumulated),
then commits them in one `LakeTransaction` fenced by the version it read. When another writer
published first, the transaction raises `CommitConflictError` and has published nothing, so the
writer may simply try again on top of the new head: re-read the lake, drop what the other writer
already landed (content hashes decide), and commit what is left. `commit_with_retries` is that
loop, once for every writer (ingest, rollouts); what an attempt does is the writer's business.

Failures it survives, each tested with the fault hooks of `faults.py`
(`tests/unit/lake/protocol/test_retry.py`):

- **a lost race**: another writer published after this one read its version (seen when taking
  the lease) or took the lease over while this one was committing (seen by the fence). Nothing
  was published and the transaction rolled back its own table commits: re-read, try again.
- **a race lost `MAX_COMMIT_ATTEMPTS` times**: other writers keep changing the lake. It gives up
  with one `CommitConflictError` saying so; nothing of this write was published.
- **anything else** (an error, Ctrl-C, a killed process): not retried. The transaction aborted
  (or, if the process died, the next lease holder rolls its commits back), so the lake stays at
  the version it was; the writer's own clean-up (its uncommitted fragments) is the caller's.

Why retry the whole attempt rather than the last commit: what an attempt writes depends on the
version it writes on (which episodes are already there, the statistics it merges into, which
quarantine rows are new), so only a fresh read makes the next attempt right.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, TypeVar

from robolake.lake.protocol.versions import CommitConflictError

__all__ = ["MAX_COMMIT_ATTEMPTS", "commit_with_retries"]

log = logging.getLogger(__name__)

MAX_COMMIT_ATTEMPTS = 5  # lost races (head moved, lease taken over) before a write gives up

_H = TypeVar("_H", bound="_Rereadable")
_T = TypeVar("_T")


class _Rereadable(Protocol):
    """A handle on a lake at one version (a `Lake`) that can re-read its newest one."""

    def refresh(self: _H) -> _H: ...


def commit_with_retries(
    lake: _H,
    attempt: Callable[[_H, int], _T],
    *,
    what: str,
    max_attempts: int = MAX_COMMIT_ATTEMPTS,
) -> _T:
    """`attempt(lake, n)`, the n-th try at one whole write on top of `lake`, until it wins its race.

    Args:
        lake: The lake as the writer read it (handed to the first attempt).
        attempt: One try: prepares what is left to write against the lake it is given and commits
            it in one transaction (or returns without writing when nothing is left); `n` counts
            from 1, so an attempt knows it runs after a lost race when `n > 1`.
        what: What is being written, for the messages ("this ingest", "these rollouts").
        max_attempts: Lost races before giving up.

    Returns:
        What the winning attempt returned.

    Raises:
        CommitConflictError: it lost `max_attempts` races (nothing of this write was published).
    """
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
    for n in range(1, max_attempts + 1):
        try:
            return attempt(lake, n)
        except CommitConflictError as e:
            if n == max_attempts:
                raise CommitConflictError(
                    f"{e} (gave up after {n} attempts: other writers kept changing the lake; "
                    f"nothing of {what} was published, re-run it)"
                ) from None
            log.info("%s lost a race (%s); re-reading the lake and retrying (attempt %d)", what, e, n + 1)
            lake = lake.refresh()
    raise AssertionError("unreachable")  # the last attempt returned or raised
