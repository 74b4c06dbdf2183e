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

Tags made together are published together (`create_tag_set`): `split` makes `split:train`,
`split:val` and `split:test` in one file, `_robolake/tags/split.tagset.json`, written with one
put-if-absent (or one atomic replace), so a killed split leaves all its parts or none, and every
part names the same version. A name is looked up in its set first (the part before `:`), then
in its own file, so a set written over tags of an older robolake shadows them at once.
`Lake.open(uri, tag=NAME)` resolves a tag everywhere a version is accepted.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from robolake.lake.protocol import faults
from robolake.lake.protocol.versions import list_versions, meta_uri, who
from robolake.storage import (
    exists,
    filesystem,
    list_names,
    put_if_absent,
    read_json,
    write_bytes_atomic,
)

__all__ = [
    "Tag",
    "TagExistsError",
    "check_tag_name",
    "create_tag",
    "create_tag_set",
    "delete_tag",
    "list_tags",
    "read_tag",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}$")
_SET_SUFFIX = ".tagset"


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
    return meta_uri(lake_uri, "tags")


def _tag_uri(lake_uri: str, name: str) -> str:
    return meta_uri(lake_uri, "tags", f"{check_tag_name(name)}.json")


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
    members = _read_set(lake_uri, name.split(":", 1)[0], storage_options) if ":" in name else None
    if members is not None and name in members:  # a member of a set moves inside its set
        if not replace:
            raise TagExistsError(
                f"tag {name!r} already names version {members[name].version} of {lake_uri}; pass --replace "
                "to move it, or choose another name"
            )
        others = {n.split(":", 1)[1]: t.episodes for n, t in members.items() if n != name}
        part = name.split(":", 1)[1]
        made = create_tag_set(
            lake_uri,
            name.split(":", 1)[0],
            version,
            {**others, part: episodes},
            operation=operation,
            reason=reason,
            replace=True,
            storage_options=storage_options,
        )
        return next(t for t in made if t.name == name)
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


def _set_uri(lake_uri: str, set_name: str) -> str:
    return meta_uri(lake_uri, "tags", f"{check_tag_name(set_name)}{_SET_SUFFIX}.json")


def _read_set(lake_uri: str, set_name: str, storage_options: dict[str, str] | None) -> dict[str, Tag] | None:
    """The tags of set `set_name` by name, or None when there is no such set."""
    uri = _set_uri(lake_uri, set_name)
    if not exists(uri, storage_options):
        return None
    doc = read_json(uri, storage_options, what="tag set")
    try:
        return {t.name: t for t in (Tag.from_json(d) for d in doc["tags"])}
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ValueError(
            f"tag set {uri} is damaged ({type(e).__name__}: {e}); delete it and re-make the tags"
        ) from None


def create_tag_set(
    lake_uri: str,
    set_name: str,
    version: int,
    parts: dict[str, Iterable[str] | None],
    *,
    operation: str = "tag",
    reason: str = "",
    replace: bool = False,
    storage_options: dict[str, str] | None = None,
) -> list[Tag]:
    """Create tags `set_name:PART` for every part, all naming `version`, in one publish.

    Raises:
        ValueError: a name is invalid, or the lake has no such version.
        TagExistsError: the set (or an older tag of one of its names) exists and `replace` is False.
    """
    known = list_versions(lake_uri, storage_options)
    if version not in known:
        raise ValueError(f"lake {lake_uri} has no version {version}; its versions are {known}")
    names = {part: check_tag_name(f"{set_name}:{part}") for part in parts}
    previous: dict[str, Tag] = dict(_read_set(lake_uri, set_name, storage_options) or {})
    for name in names.values():
        if name not in previous and exists(_tag_uri(lake_uri, name), storage_options):
            previous[name] = Tag.from_json(read_json(_tag_uri(lake_uri, name), storage_options, what="tag"))
    if previous and not replace:
        old = next(iter(sorted(previous.values(), key=lambda t: t.name)))
        raise TagExistsError(
            f"tag {old.name!r} already names version {old.version} of {lake_uri}; pass --replace to move it"
        )
    now, by = time.time(), who()
    tags = [
        Tag(
            name=name,
            version=version,
            episodes=None if parts[part] is None else tuple(sorted(set(parts[part]))),  # type: ignore[arg-type]
            operation=operation,
            reason=reason,
            created_by=by,
            created_at=now,
            replaced_version=previous[name].version if name in previous else None,
        )
        for part, name in names.items()
    ]
    data = json.dumps({"set": set_name, "tags": [t.to_json() for t in tags]}, indent=1, sort_keys=True).encode()
    uri = _set_uri(lake_uri, set_name)
    faults.hook("tag_set:before")
    if not exists(uri, storage_options):
        try:
            put_if_absent(uri, data, storage_options)
        except FileExistsError:
            raise TagExistsError(f"tags {set_name}:* were created by another writer just now") from None
    else:
        write_bytes_atomic(uri, data, storage_options)
    faults.hook("tag_set:published")
    for name in names.values():  # tags of an older robolake, now shadowed by the set: tidy them away
        if exists(_tag_uri(lake_uri, name), storage_options):
            filesystem(lake_uri, storage_options).rm_file(_tag_uri(lake_uri, name))
    return tags


def read_tag(lake_uri: str, name: str, storage_options: dict[str, str] | None = None) -> Tag:
    """Tag `name` of the lake (from its set, if it has one, else its own file).

    Raises:
        KeyError: no such tag (the message lists the tags there are).
    """
    check_tag_name(name)
    if ":" in name:
        members = _read_set(lake_uri, name.split(":", 1)[0], storage_options)
        if members is not None and name in members:
            return members[name]
    uri = _tag_uri(lake_uri, name)
    if not exists(uri, storage_options):
        raise KeyError(
            f"lake {lake_uri} has no tag {name!r}; its tags are {_tag_names(lake_uri, storage_options) or 'none'}"
        )
    return Tag.from_json(read_json(uri, storage_options, what="tag"))


def _tag_names(lake_uri: str, storage_options: dict[str, str] | None) -> list[str]:
    """The tags' names from the folder listing (a set's members from its name: `split` -> split:*)."""
    out = []
    for f in list_names(_tags_dir(lake_uri), storage_options):
        if f.endswith(_SET_SUFFIX + ".json"):
            out.append(f[: -len(_SET_SUFFIX + ".json")] + ":*")
        elif f.endswith(".json") and _NAME.match(f[:-5]):
            out.append(f[:-5])
    return sorted(out)


def list_tags(lake_uri: str, storage_options: dict[str, str] | None = None) -> list[Tag]:
    """Every tag of the lake, by name (a set's members as tags)."""
    files = list_names(_tags_dir(lake_uri), storage_options)
    out: dict[str, Tag] = {}
    for f in files:
        if f.endswith(_SET_SUFFIX + ".json"):
            out.update(_read_set(lake_uri, f[: -len(_SET_SUFFIX + ".json")], storage_options) or {})
    for f in files:
        n = f[:-5]
        if f.endswith(".json") and not f.endswith(_SET_SUFFIX + ".json") and _NAME.match(n) and n not in out:
            out[n] = Tag.from_json(read_json(_tag_uri(lake_uri, n), storage_options, what="tag"))
    return [out[n] for n in sorted(out)]


def delete_tag(lake_uri: str, name: str, storage_options: dict[str, str] | None = None) -> Tag:
    """Remove tag `name` (the version it named is untouched); returns what it was.

    A member of a set is removed from its set (one atomic rewrite); the set goes with its last member.

    Raises:
        KeyError: no such tag.
    """
    tag = read_tag(lake_uri, name, storage_options)
    fs = filesystem(lake_uri, storage_options)
    set_name = name.split(":", 1)[0]
    members = _read_set(lake_uri, set_name, storage_options) if ":" in name else None
    if members is not None and name in members:
        rest = [t for n, t in sorted(members.items()) if n != name]
        uri = _set_uri(lake_uri, set_name)
        if rest:
            doc = {"set": set_name, "tags": [t.to_json() for t in rest]}
            write_bytes_atomic(uri, json.dumps(doc, indent=1, sort_keys=True).encode(), storage_options)
        else:
            fs.rm_file(uri)
    else:
        fs.rm_file(_tag_uri(lake_uri, name))
    return tag
