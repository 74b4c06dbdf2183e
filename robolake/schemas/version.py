"""The lake's on-disk format version, and what each version added.

Format 1 kept camera frames only as images (or key-referenced h264) in `media`. Format 2 adds
the record layout of source videos (the `streams` table) and access copies (the `access`
table). A lake of format 1 is upgraded in place by `robolake optimize LAKE --upgrade`: it creates
the two tables empty and rewrites nothing, and every lake version published before the upgrade
reads them at their first, empty, Lance version (`TABLES_ADDED`): those versions held no stream
and no access copy. Opening a format-1 lake without upgrading it fails with that instruction.

Format 3 adds the record of every other sensor: `signals` (every message of every numeric
stream, as recorded) and `events`. A format-2 lake opens and trains as it is (its steps are its
record: those tables read as absent); the first write through this robolake upgrades it in
place the same way (two empty tables, nothing rewritten), and `robolake optimize --upgrade`
does so on demand.
"""

from __future__ import annotations

__all__ = [
    "LAKE_FORMAT_VERSION",
    "SUPPORTED_FORMAT_VERSIONS",
    "UPGRADABLE_FORMAT_VERSIONS",
    "TABLES_ADDED",
    "with_added_tables",
    "UnsupportedLakeVersionError",
]

LAKE_FORMAT_VERSION = 3
SUPPORTED_FORMAT_VERSIONS = frozenset({2, 3})
UPGRADABLE_FORMAT_VERSIONS = frozenset({1, 2})  # `robolake optimize LAKE --upgrade` brings these to the current one
# Table -> the format version that added it. A lake version manifest written before it names no
# Lance version of the table; it reads the table's first Lance version, which is always empty.
TABLES_ADDED: dict[str, int] = {"streams": 2, "access": 2, "signals": 3, "events": 3}


def with_added_tables(tables: dict[str, int]) -> dict[str, int]:
    """A manifest's table versions, with version 1 (empty) for tables added after it was written."""
    return {**{t: 1 for t in TABLES_ADDED if t not in tables}, **tables}


class UnsupportedLakeVersionError(RuntimeError):
    """The lake was written by a robolake whose format this one cannot read."""
