"""[30] A mixture file is data: each bad one is refused in one ValueError line, before anything is allocated."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from robolake.packers.mixspec import MAX_EPOCH_SIZE, MixSpec, load_mix
from robolake.storage import MAX_DOCUMENT_BYTES


def _file(tmp_path: Path, text: str, name: str = "mix.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("key: embodiment\nweights: {'*': 1}\nepoch_size: 100000000000000000\n", "more than robolake plans"),
        ("key: embodiment\nweights: {'*': 1}\nepoch_size: .inf\n", "whole number"),
        ("key: embodiment\nweights: {'*': 1}\nepoch_size: .nan\n", "whole number"),
        ("key: embodiment\nweights: {'*': 1}\nepoch_size: 2.5\n", "whole number"),
        ("key: embodiment\nweights: {'*': 1}\nepoch_size: many\n", "whole number"),
        ("key: embodiment\nweights: {a: 1.0e308, b: 1.0e308}\n", "more than a float holds"),
        ("key: embodiment\nweights: {a: 1, a: 2}\n", "appears twice"),
        ("key: embodiment\nkey: task\nweights: {a: 1}\n", "appears twice"),
        ("key: [" * 5000 + "\n", "mixture file"),
    ],
)
def test_a_bad_mixture_file_is_one_value_error(tmp_path: Path, text: str, match: str) -> None:
    load_mix(_file(tmp_path, "key: embodiment\nweights: {a: 1}\n", "warm.yaml"))  # imports, outside the count
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=match):
            load_mix(_file(tmp_path, text))
        assert tracemalloc.get_traced_memory()[1] < 64 * 2**20  # refused before any epoch-sized allocation
    finally:
        tracemalloc.stop()


def test_json_nesting_and_size_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"mixture file .*mix\.json nests deeper"):
        load_mix(_file(tmp_path, "[" * 100_000, "mix.json"))
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(MAX_DOCUMENT_BYTES + 1)  # sparse: nothing is written, nothing may be read
    with pytest.raises(ValueError, match=r"big\.json is larger than"):
        load_mix(str(big))


def test_good_mixtures_still_load(tmp_path: Path) -> None:
    spec = load_mix(_file(tmp_path, "key: embodiment\nweights: {gr1: 0.5, '*': 0.5}\nepoch_size: 1000000\n"))
    assert spec.epoch_size == 1_000_000 and spec.weights == (("gr1", 0.5), ("*", 0.5))
    assert MixSpec(key="task", weights=(("a", 1.0),), epoch_size=MAX_EPOCH_SIZE).epoch_size == MAX_EPOCH_SIZE
