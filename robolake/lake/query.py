"""Episode filters, turned into Lance SQL predicates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["EpisodeFilter", "sql_quote", "sql_in"]


def sql_quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Sequence[str]) -> str:
    if not values:
        return "false"
    return f"{column} IN ({', '.join(sql_quote(v) for v in values)})"


def _as_tuple(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    return tuple(value)


@dataclass(frozen=True, kw_only=True)
class EpisodeFilter:
    """Which episodes to read. Unset fields do not filter.

    Attributes:
        embodiment: Embodiment tag(s) to keep.
        task: Exact instruction(s) to keep.
        task_contains: Keep instructions containing this substring.
        success: Keep only episodes with this success flag.
        episode_ids: Keep only these episode ids.
        source_format: Keep only episodes read by this reader.
    """

    embodiment: str | Sequence[str] | None = None
    task: str | Sequence[str] | None = None
    task_contains: str | None = None
    success: bool | None = None
    episode_ids: Sequence[str] | None = None
    source_format: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "embodiment", _as_tuple(self.embodiment))
        object.__setattr__(self, "task", _as_tuple(self.task))
        if self.episode_ids is not None:
            if isinstance(self.episode_ids, str):
                raise ValueError("episode_ids must be a sequence of ids, not one string; wrap it in a list")
            object.__setattr__(self, "episode_ids", tuple(self.episode_ids))

    @property
    def is_empty(self) -> bool:
        return self.to_sql() is None

    @property
    def only_episode_ids(self) -> bool:
        """True when nothing but episode ids is filtered (usable on steps/media directly)."""
        return (
            self.embodiment is None
            and self.task is None
            and self.task_contains is None
            and self.success is None
            and self.source_format is None
        )

    def to_sql(self) -> str | None:
        """The predicate over the episodes table, or None when nothing is filtered."""
        parts = []
        if self.embodiment is not None:
            parts.append(sql_in("embodiment", self.embodiment))  # type: ignore[arg-type]
        if self.task is not None:
            parts.append(sql_in("task", self.task))  # type: ignore[arg-type]
        if self.task_contains is not None:
            like = self.task_contains.replace("'", "''").replace("%", "\\%").replace("_", "\\_")
            parts.append(f"task LIKE '%{like}%'")
        if self.success is not None:
            parts.append(f"success = {'true' if self.success else 'false'}")
        if self.episode_ids is not None:
            parts.append(sql_in("episode_id", self.episode_ids))  # type: ignore[arg-type]
        if self.source_format is not None:
            parts.append(f"source_format = {sql_quote(self.source_format)}")
        return " AND ".join(f"({p})" for p in parts) if parts else None
