"""A suggested mapping ingests as written and never lands less than the default ingest.

For every source of `robolake.testing.suggestion_fixtures.FIXTURES` (and the real GR00T data
where ../shared holds it): the default ingest, then `inspect --suggest-map` and `ingest --map` of
what it printed, each into its own lake; the suggestion must ingest with no error and land at
least as many episodes, steps and frames. Where inspect says the unit reads without a mapping,
the suggestion is the default ingest itself. Where the suggestion cannot be ingested (a
recording with nothing to take a state from), its first line must say so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from robolake.cli import main as cli_main
from robolake.lake.intake.ingest import IngestConfig, IngestResult, ingest
from robolake.lake.sources.mapping import load_mapping
from robolake.lake.sources.topics.inspect import CANNOT_INGEST
from robolake.testing.suggestion_fixtures import FIXTURES
from tests.fixtures import copy_pick_n_place

pytest.importorskip("rosbags")
pytest.importorskip("h5py")

CANNOT = CANNOT_INGEST


def _counts(res: IngestResult) -> tuple[int, int, int]:
    return res.ingested + res.skipped, res.steps, res.frames


def _suggest(capsys: pytest.CaptureFixture[str], src: Path) -> str:
    capsys.readouterr()
    rc = cli_main(["inspect", str(src), "--suggest-map"])
    out = capsys.readouterr().out
    assert rc == 0, out
    return out


def check_suggestion(tmp_path: Path, capsys: pytest.CaptureFixture[str], src: Path) -> str:
    """Default ingest vs the suggested mapping's; returns a row of the per-format table."""
    try:
        default = _counts(ingest(str(src), str(tmp_path / "default_lake"), IngestConfig(execution="local")))
    except ValueError:  # nothing under src opens without a mapping
        default = (0, 0, 0)
    text = _suggest(capsys, src)
    if text.startswith(CANNOT):
        assert default[0] == 0, f"the default ingest lands episodes the suggestion says it cannot:\n{text}"
        return f"{default} vs none ({text.splitlines()[0]})"
    if all(line.startswith("#") or not line.strip() for line in text.splitlines()):
        assert "reads without a mapping" in text, text
        return f"{default} (no mapping needed)"
    (tmp_path / "map.yaml").write_text(text)
    mapping = load_mapping(str(tmp_path / "map.yaml"))
    res = ingest(str(src), str(tmp_path / "suggested_lake"), IngestConfig(execution="local", mapping=mapping))
    assert res.quarantined == 0, f"{res.quarantine}\n{text}"
    got, want = _counts(res), default
    assert all(g >= w for g, w in zip(got, want, strict=True)), f"suggested {got} < default {want}\n{text}"
    assert got[0] > 0, text
    return f"{want} -> {got}"


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_a_suggestion_ingests_and_lands_no_less_than_the_default(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = FIXTURES[name](tmp_path / "src")
    row = check_suggestion(tmp_path, capsys, src)
    with capsys.disabled():
        print(f"\n{name}: (episodes, steps, frames) default {row}")


def test_the_real_gr00t_data_needs_no_mapping(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = copy_pick_n_place(tmp_path)
    row = check_suggestion(tmp_path, capsys, src)
    with capsys.disabled():
        print(f"\ngr00t_pick_n_place: (episodes, steps, frames) default {row}")
