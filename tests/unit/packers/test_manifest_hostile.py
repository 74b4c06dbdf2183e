"""[30] A pack manifest robolake did not write is refused in one line naming the file: found by
`robolake bench faults` (a manifest linked elsewhere was read and raised TypeError; a shards version
of 2**70 raised OverflowError)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from robolake.packers.manifest import MANIFEST_NAME, read_manifest
from robolake.storage import OutsideRootError

GOOD = {
    "lake_uri": "/lake",
    "lake_version": 2,
    "spec": {},
    "seed": 0,
    "embodiments": ["a"],
    "num_samples": 3,
    "num_sequences": 1,
    "total_tokens": 10,
    "fill": 0.5,
    "padded_fill": 0.5,
    "shards_version": 2,
}


def _write(out: Path, doc: object) -> str:
    out.mkdir(exist_ok=True)
    (out / MANIFEST_NAME).write_text(json.dumps(doc))
    return str(out)


def test_a_good_manifest_reads(tmp_path: Path) -> None:
    assert read_manifest(_write(tmp_path / "p", {**GOOD, "from_a_newer_robolake": 1})).shards_version == 2


@pytest.mark.parametrize(
    "change",
    [
        {"shards_version": 2**70},
        {"lake_version": -1},
        {"num_samples": "3"},
        {"spec": "../../etc/passwd"},
        {"rejected": [["e", 1]]},
        {"seed": True},
    ],
)
def test_a_hostile_field_is_one_line(tmp_path: Path, change: dict) -> None:
    with pytest.raises(ValueError, match=MANIFEST_NAME) as e:
        read_manifest(_write(tmp_path / "p", {**GOOD, **change}))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("doc", [{"canary": "x"}, ["a"], 7])
def test_a_document_of_another_shape_is_one_line(tmp_path: Path, doc: object) -> None:
    with pytest.raises(ValueError, match=MANIFEST_NAME):
        read_manifest(_write(tmp_path / "p", doc))


def test_a_manifest_linked_outside_the_pack_output_is_not_followed(tmp_path: Path) -> None:
    other = Path(_write(tmp_path / "other", GOOD))
    out = tmp_path / "p"
    out.mkdir()
    os.symlink(other / MANIFEST_NAME, out / MANIFEST_NAME)
    with pytest.raises(OutsideRootError):
        read_manifest(str(out))
