"""Change which episodes a lake version holds: `delete`, `select` (keep), `restore_episodes`.

Each verb is one new lake version, written through the lease in one `LakeTransaction`, with
who, what and why in its manifest summary. Deleting is Lance's own row deletion on the
episodes, steps and media tables: a deletion file per touched fragment, no data file
rewritten, so every earlier version still reads every row and the version costs metadata.
`gc` frees the bytes once no retained version (nor a tag, nor a lake cloned from this one)
needs them.

Statistics follow the change. `delete` and `select` read the removed episodes' rows and steps
(by the `episode_id` index: the cost of what goes, not of the lake) and take them out of their
embodiments' statistics and counts (`refresh_embodiments` told what was removed; exact, or recomputed from the steps
kept where a subtraction would not be, e.g. when most of an embodiment goes). `restore_episodes`
merges the restored episodes' back in (an embodiment a deletion had dropped is recomputed), and
given trimmed episodes recomputes their embodiments from the steps the new version holds. Embodiments a change did not
touch keep their row as it was; an embodiment left with no episode loses its row.

`restore_episodes` brings deleted episodes back from the newest version that still held them.
Lance cannot undo a deletion file for some rows and not others, so their rows are written
again (the one place a curation verb copies bytes); their ids and content hashes are unchanged.
Given trimmed episodes (`robolake trim`), it brings their dropped steps back instead: their
episodes and steps rows as the newest earlier version held them untrimmed (frames never moved).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from robolake.lake import (
    EPISODE_TABLES,
    Lake,
    add_embodiments,
    kept_of,
    parse_where,
    refresh_embodiments,
    select_episode_ids,
    sql_in,
    who,
)

__all__ = [
    "CurationResult",
    "EPISODE_TABLES",
    "delete",
    "id_batches",
    "refresh_embodiments",
    "restore_episodes",
    "select",
    "tag_selection",
]

log = logging.getLogger(__name__)

_BATCH = 2000  # ids per Lance predicate: long IN lists are parsed, not indexed


@dataclass(frozen=True, kw_only=True)
class CurationResult:
    """What a curation verb did.

    Attributes:
        lake: The lake URI written to.
        version: The new lake version (None when nothing was published, e.g. a tag only).
        episodes: The episode ids the verb acted on (removed, kept, restored), sorted.
        summary: The manifest summary it published.
    """

    lake: str
    version: int | None
    episodes: tuple[str, ...]
    summary: dict[str, Any] = field(default_factory=dict)


def id_batches(ids: Sequence[str]) -> Iterable[list[str]]:
    """`ids` in runs short enough for one Lance `IN` predicate (`sql_in`)."""
    ids = list(ids)
    for i in range(0, len(ids), _BATCH):
        yield ids[i : i + _BATCH]


def _open(lake: Lake | str, storage_options: dict[str, str] | None) -> Lake:
    if isinstance(lake, Lake):
        if lake.scope is not None:
            raise ValueError(
                f"{lake!r} is opened at tag {lake.tag.name!r} (a subset); curation verbs change the lake itself: "  # type: ignore[union-attr]
                "open it without the tag"
            )
        return lake.refresh()
    return Lake.open(lake, storage_options=storage_options)


def _resolve(lake: Lake, episodes: Sequence[str] | None, where: str | None) -> list[str]:
    if (episodes is None) == (where is None):
        raise ValueError("name the episodes (--episodes ID ...) or a filter (--where EXPR), one of the two")
    if where is not None:
        return select_episode_ids(lake, parse_where(where))
    have = set(lake.episode_ids())
    unknown = sorted(set(episodes or ()) - have)
    if unknown:
        more = f" (and {len(unknown) - 3} more)" if len(unknown) > 3 else ""
        raise ValueError(
            f"lake {lake.uri} version {lake.version} has no episode {', '.join(map(repr, unknown[:3]))}{more}; "
            "list them with `robolake info LAKE --episodes` or select with --where"
        )
    return sorted(set(episodes or ()))


def _embodiments_of(lake: Lake, ids: Sequence[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for chunk in id_batches(ids):
        for e in (
            lake.to_arrow("episodes", columns=["embodiment"], where=sql_in("episode_id", chunk))
            .column("embodiment")
            .to_pylist()
        ):
            counts[e] = counts.get(e, 0) + 1
    return counts


def _remove(lake: Lake, ids: list[str], operation: str, summary: dict[str, Any]) -> CurationResult:
    touched = _embodiments_of(lake, ids)
    # Up to half the lake: take what goes out of the statistics; beyond it, recount what stays.
    subtract = ids if 2 * len(ids) <= lake.count("episodes") else None
    with lake.begin() as tx:
        for table in EPISODE_TABLES:
            for chunk in id_batches(ids):
                tx.delete(table, sql_in("episode_id", chunk))
        refresh_embodiments(tx, touched, removed=subtract)
        full = {"who": who(), **summary, "episodes_removed": len(ids), "removed": ids, "embodiments_removed": touched}
        lv = tx.commit(operation, full)
    log.info("lake %s: version %d %s removed %d episodes", lake.uri, lv.version, operation, len(ids))
    return CurationResult(lake=lake.uri, version=lv.version, episodes=tuple(ids), summary=full)


def delete(
    lake: Lake | str,
    *,
    episodes: Sequence[str] | None = None,
    where: str | None = None,
    reason: str,
    storage_options: dict[str, str] | None = None,
) -> CurationResult:
    """Remove episodes (their steps and frames too) from a new version of the lake.

    Args:
        lake: The lake (its newest version is changed).
        episodes: Episode ids to remove; every one must exist.
        where: Or a filter (`robolake.lake.where`) choosing them.
        reason: Why, kept in the version's manifest (required: a lake of record says why data went).

    Raises:
        ValueError: no reason, an unknown episode id, a filter that selects nothing, or both/neither
            of `episodes` and `where`; nothing is published.
        CommitConflictError: another writer published first (re-run).
    """
    if not reason or not reason.strip():
        raise ValueError("say why the episodes go (--reason TEXT): it is kept with the new lake version")
    lake = _open(lake, storage_options)
    ids = _resolve(lake, episodes, where)
    if not ids:
        raise ValueError(
            f"--where {where!r} selects no episode of lake {lake.uri} version {lake.version}; nothing changed"
        )
    return _remove(lake, ids, "delete", {"reason": reason, "where": where, "base_version": lake.version})


def select(
    lake: Lake | str,
    where: str,
    *,
    reason: str = "",
    storage_options: dict[str, str] | None = None,
) -> CurationResult:
    """Keep only the episodes `where` selects, as a new version of the same lake.

    (`robolake.curate.select_into` writes them to another lake; `robolake.curate.tag_selection`
    names them with a tag without changing the lake.)

    Raises:
        ValueError: the filter keeps nothing, or keeps everything (nothing would change).
    """
    lake = _open(lake, storage_options)
    keep = select_episode_ids(lake, parse_where(where))
    if not keep:
        raise ValueError(
            f"--where {where!r} keeps no episode of lake {lake.uri} version {lake.version}; nothing changed"
        )
    kept = set(keep)
    drop = sorted(e for e in lake.episode_ids() if e not in kept)
    if not drop:
        raise ValueError(
            f"--where {where!r} keeps every episode of lake {lake.uri} version {lake.version}; nothing changed"
        )
    result = _remove(
        lake,
        drop,
        "select",
        {"reason": reason, "where": where, "base_version": lake.version, "episodes_kept": len(keep)},
    )
    return CurationResult(
        lake=result.lake, version=result.version, episodes=tuple(sorted(keep)), summary=result.summary
    )


def _last_holder(lake: Lake, ids: Sequence[str], untrimmed: bool = False) -> dict[str, int]:
    """episode id -> the newest lake version before this one whose episodes table holds it (with
    `untrimmed`: holds it with all its steps, not trimmed)."""
    import lance

    want, found = set(ids), {}
    for info in reversed(lake.versions()):
        if info.version >= lake.version or not want:
            continue
        ds = lance.dataset(
            lake.table_uri("episodes"), version=info.tables["episodes"], storage_options=lake.storage_options
        )
        for chunk in id_batches(sorted(want)):
            t = ds.to_table(columns=["episode_id", "metadata"], filter=sql_in("episode_id", chunk))
            for e, meta in zip(t["episode_id"].to_pylist(), t["metadata"].to_pylist(), strict=True):
                if not untrimmed or kept_of(meta) is None:
                    found[e] = info.version
        want -= set(found)
    return found


def restore_episodes(
    lake: Lake | str,
    episodes: Sequence[str],
    *,
    reason: str = "",
    storage_options: dict[str, str] | None = None,
) -> CurationResult:
    """Bring deleted episodes back (rows from the newest earlier version that held them).

    Raises:
        ValueError: an id is in the lake already, or no earlier version ever held it.
    """
    lake = _open(lake, storage_options)
    ids = sorted(set(episodes))
    present = set(lake.episode_ids()) & set(ids)
    trimmed = set(lake.trimmed(sorted(present)))
    if present - trimmed:
        raise ValueError(
            f"episodes {sorted(present - trimmed)[:3]} are in lake {lake.uri} version {lake.version} already "
            "with all their steps; nothing to restore"
        )
    if trimmed:
        if trimmed != set(ids):
            raise ValueError(
                "restore either trimmed episodes (their dropped steps back) or deleted ones, one kind a call: "
                f"{sorted(trimmed)[:3]} are trimmed, {sorted(set(ids) - trimmed)[:3]} are not in the lake"
            )
        return _untrim(lake, ids, reason)
    holders = _last_holder(lake, ids)
    missing = [e for e in ids if e not in holders]
    if missing:
        raise ValueError(f"no earlier version of lake {lake.uri} holds episode {missing[0]!r}; nothing was restored")
    by_version: dict[int, list[str]] = {}
    for e, v in holders.items():
        by_version.setdefault(v, []).append(e)
    touched: dict[str, int] = {}
    with lake.begin() as tx:
        for v, vids in sorted(by_version.items()):
            old = lake.checkout(v)
            specs = old.to_arrow("embodiments").to_pylist()
            for table in EPISODE_TABLES:
                for chunk in id_batches(sorted(vids)):
                    data = old.to_arrow(table, where=sql_in("episode_id", chunk))
                    tx.append_table(table, data)
                    if table == "episodes":
                        for emb in data.column("embodiment").to_pylist():
                            touched[emb] = touched.get(emb, 0) + 1
            add_embodiments(tx, [r for r in specs if r["embodiment"] in touched])  # rows a deletion dropped
        refresh_embodiments(tx, touched, added=ids)  # theirs merged in: the cost of what comes back
        tx.index_episodes()
        summary = {
            "who": who(),
            "reason": reason,
            "restored": ids,
            "from_versions": sorted(by_version),
            "base_version": lake.version,
        }
        lv = tx.commit("restore_episodes", summary)
    return CurationResult(lake=lake.uri, version=lv.version, episodes=tuple(ids), summary=summary)


def _untrim(lake: Lake, ids: list[str], reason: str) -> CurationResult:
    """Trimmed episodes' steps back as the newest earlier version held them untrimmed: only their
    episodes and steps rows change (a trim never touched their frames)."""
    found = _last_holder(lake, ids, untrimmed=True)
    want = set(ids) - set(found)
    if want:
        raise ValueError(f"no earlier version of lake {lake.uri} holds episode {sorted(want)[0]!r} untrimmed")
    touched: set[str] = set()
    by_version: dict[int, list[str]] = {}
    for e, v in found.items():
        by_version.setdefault(v, []).append(e)
    with lake.begin() as tx:
        for chunk in id_batches(ids):
            tx.delete("steps", sql_in("episode_id", chunk))
            tx.delete("episodes", sql_in("episode_id", chunk))
        for v, vids in sorted(by_version.items()):
            old = lake.checkout(v)
            for chunk in id_batches(sorted(vids)):
                rows = old.to_arrow("episodes", where=sql_in("episode_id", chunk))
                touched.update(rows["embodiment"].to_pylist())
                tx.append_table("steps", old.to_arrow("steps", where=sql_in("episode_id", chunk)))
                tx.append_table("episodes", rows)
        refresh_embodiments(tx, touched)
        tx.index_episodes()
        summary = {
            "who": who(),
            "reason": reason,
            "untrimmed": ids,
            "from_versions": sorted(by_version),
            "base_version": lake.version,
        }
        lv = tx.commit("restore_episodes", summary)
    return CurationResult(lake=lake.uri, version=lv.version, episodes=tuple(ids), summary=summary)


def summary_json(result: CurationResult) -> str:
    """The result as one JSON line (what `--json` prints)."""
    return json.dumps(
        {
            "lake": result.lake,
            "version": result.version,
            "episodes": len(result.episodes),
            **{k: v for k, v in result.summary.items() if k not in ("removed", "restored")},
        },
        sort_keys=True,
        default=str,
    )


def tag_selection(
    lake: Lake | str,
    where: str,
    name: str,
    *,
    reason: str = "",
    replace: bool = False,
    storage_options: dict[str, str] | None = None,
) -> CurationResult:
    """Name the episodes `where` keeps with tag `name` (the lake does not change: no new version).

    Raises:
        ValueError: the filter keeps nothing, or the name is invalid.
        TagExistsError: the tag exists and `replace` is False.
    """
    from robolake.lake import create_tag

    lake = lake if isinstance(lake, Lake) else Lake.open(lake, storage_options=storage_options)
    keep = select_episode_ids(lake, parse_where(where))
    if not keep:
        raise ValueError(
            f"--where {where!r} keeps no episode of lake {lake.uri} version {lake.version}; no tag was made"
        )
    tag = create_tag(
        lake.uri,
        name,
        lake.version,
        episodes=keep,
        operation="select",
        reason=reason or where,
        replace=replace,
        storage_options=lake.storage_options,
    )
    return CurationResult(
        lake=lake.uri,
        version=None,
        episodes=tag.episodes or (),
        summary={"tag": name, "where": where, "at_version": lake.version},
    )
