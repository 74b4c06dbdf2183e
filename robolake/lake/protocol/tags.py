"""Lake tags: names for a lake version, optionally narrowed to a set of its episodes.

A tag is how a team pins data: `v1-release` names lake version 12, `split:val` names version 12
restricted to the validation episodes. A tag is a small JSON file, `_robolake/tags/<name>.json`,
created with put-if-absent (so two writers can never both create one name, and a tag, once
made, never silently moves: LeRobot's stale `v3.0` tag serving other data than it did is the
failure this avoids). A tag holds:

- `version`: the lake version it names (which must exist when the tag is made);
- `episodes`: None for the whole version, or the sorted episode ids it keeps (splits and
  `select --tag`), so a subset costs metadata, never a copy of steps or frames;
- who made it, when, with which operation and why.

Moving a tag is an explicit `replace=True` that records the version it used to name. Tag names
are short identifiers (letters, digits, `._:+-`), never paths: a name is looked up, not joined.
`Lake.open(uri, tag=NAME)` resolves a tag everywhere a version is accepted.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from robolake.lake.protocol.versions import META_DIR, list_versions, who
from robolake.storage import (
    exists,
    join_uri,
    list_names,
    put_if_absent,
    read_json,
    write_bytes_atomic,
)

__all__ = ["Tag", "TagExistsError", "check_tag_name", "create_tag", "delete_tag", "list_tags", "read_tag"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}$")


class TagExistsError(FileExistsError):
    """The tag name is taken (pass replace=True / --replace to move it)."""


@dataclass(frozen=True, kw_only=True)
class Tag:
    """A named lake version, optionally narrowed to some of its episodes.

    Attributes:
        name: The tag's name.
        version: The lake version it names.
        episodes: Episode ids it keeps (sorted), or None for the whole version.
        operation: What made it (`tag`, `split`, `select`).
        reason: Why (free text from the user, or the split/selection that made it).
        created_by: user@host of the process that made it.
        created_at: Unix seconds.
        replaced_version: The version the name pointed at before a `replace`, if any.
    """

    name: str
    version: int
    episodes: tuple[str, ...] | None = None
    operation: str = "tag"
    reason: str = ""
    created_by: str = ""
    created_at: float = 0.0
    replaced_version: int | None = None

    @property
    def num_episodes(self) -> int | None:
        return None if self.episodes is None else len(self.episodes)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "episodes": None if self.episodes is None else list(self.episodes),
            "operation": self.operation,
            "reason": self.reason,
            "created_by": self.created_by,
            "created_at": self.created_at,
            "replaced_version": self.replaced_version,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Tag:
        eps = d.get("episodes")
        replaced = d.get("replaced_version")
        return cls(
            name=str(d["name"]),
            version=int(d["version"]),
            episodes=None if eps is None else tuple(str(e) for e in eps),
            operation=str(d.get("operation", "tag")),
            reason=str(d.get("reason", "")),
            created_by=str(d.get("created_by", "")),
            created_at=float(d.get("created_at", 0.0)),
            replaced_version=None if replaced is None else int(replaced),
        )


def check_tag_name(name: str) -> str:
    """`name` if it is a valid tag name.

    Raises:
        ValueError: it is empty, too long, or holds characters other than letters, digits and `._:+-`.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"tag name {name!r} is not valid: use 1-128 letters, digits and . _ : + - "
            "(starting with a letter or digit), e.g. 'release-1' or 'split:val'"
        )
    return name


def _tags_dir(lake_uri: str) -> str:
    return join_uri(lake_uri, META_DIR, "tags")


def _tag_uri(lake_uri: str, name: str) -> str:
    return join_uri(_tags_dir(lake_uri), f"{check_tag_name(name)}.json")


def create_tag(
    lake_uri: str,
    name: str,
    version: int,
    *,
    episodes: Iterable[str] | None = None,
    operation: str = "tag",
    reason: str = "",
    replace: bool = False,
    storage_options: dict[str, str] | None = None,
) -> Tag:
    """Create tag `name` naming lake `version` (narrowed to `episodes` when given).

    Raises:
        ValueError: the name is invalid, or the lake has no such version.
        TagExistsError: the tag exists and `replace` is False.
    """
    uri = _tag_uri(lake_uri, name)
    known = list_versions(lake_uri, storage_options)
    if version not in known:
        raise ValueError(f"lake {lake_uri} has no version {version}; its versions are {known}")
    previous = read_tag(lake_uri, name, storage_options) if exists(uri, storage_options) else None
    if previous is not None and not replace:
        raise TagExistsError(
            f"tag {name!r} already names version {previous.version} of {lake_uri}; pass --replace "
            "to move it, or choose another name"
        )
    tag = Tag(
        name=name,
        version=version,
        episodes=None if episodes is None else tuple(sorted(set(episodes))),
        operation=operation,
        reason=reason,
        created_by=who(),
        created_at=time.time(),
        replaced_version=None if previous is None else previous.version,
    )
    data = json.dumps(tag.to_json(), indent=1, sort_keys=True).encode()
    if previous is None:
        try:
            put_if_absent(uri, data, storage_options)
        except FileExistsError:
            raise TagExistsError(f"tag {name!r} was created by another writer just now; choose another name") from None
    else:
        write_bytes_atomic(uri, data, storage_options)
    return tag


def read_tag(lake_uri: str, name: str, storage_options: dict[str, str] | None = None) -> Tag:
    """Tag `name` of the lake.

    Raises:
        KeyError: no such tag (the message lists the tags there are).
    """
    uri = _tag_uri(lake_uri, name)
    if not exists(uri, storage_options):
        names = [t[:-5] for t in list_names(_tags_dir(lake_uri), storage_options) if t.endswith(".json")]
        raise KeyError(f"lake {lake_uri} has no tag {name!r}; its tags are {sorted(names) or 'none'}")
    return Tag.from_json(read_json(uri, storage_options))


def list_tags(lake_uri: str, storage_options: dict[str, str] | None = None) -> list[Tag]:
    """Every tag of the lake, by name."""
    names = sorted(t[:-5] for t in list_names(_tags_dir(lake_uri), storage_options) if t.endswith(".json"))
    return [read_tag(lake_uri, n, storage_options) for n in names if _NAME.match(n)]


def delete_tag(lake_uri: str, name: str, storage_options: dict[str, str] | None = None) -> Tag:
    """Remove tag `name` (the version it named is untouched); returns what it was.

    Raises:
        KeyError: no such tag.
    """
    from robolake.storage import filesystem

    tag = read_tag(lake_uri, name, storage_options)
    filesystem(lake_uri, storage_options).rm_file(_tag_uri(lake_uri, name))
    return tag
