"""A task writes one fragment per table for its whole chunk of episodes (several only past
`FRAGMENT_BYTES`), and the lake holds the same rows however the chunk's rows were cut; a bad
episode in a large chunk is quarantined alone, naming its file."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from robolake.lake import Lake
from robolake.lake.intake import ingest as ingest_mod
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("v3src")
    generate_synthetic(
        root,
        SyntheticConfig.tiny(
            version="v3.0", episodes_per_embodiment=6, episodes_per_file=3, embodiments=("single_arm_7dof",)
        ),
    )
    return root


def _rows(lake: Lake) -> dict[str, list[tuple]]:
    steps = [(s["episode_id"], s["step_index"], tuple(s["state"])) for s in lake.to_arrow("steps").to_pylist()]
    media = [(m["episode_id"], m["step_index"], m["data"]) for m in lake.to_arrow("media").to_pylist()]
    return {"steps": sorted(steps), "media": sorted(media)}


def _fragments(lake: Lake, table: str) -> int:
    return len(lake.dataset(table).get_fragments())


def test_a_chunk_writes_one_fragment_per_table(source: Path, tmp_path: Path) -> None:
    r = ingest(str(source), str(tmp_path / "lake"), IngestConfig(execution="local", episodes_per_task=6))
    assert r.ingested == 6
    lake = Lake.open(str(tmp_path / "lake"))
    assert _fragments(lake, "steps") == 1 and _fragments(lake, "media") == 1


def test_rows_past_the_fragment_size_go_to_more_fragments_and_the_lake_is_the_same(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest(str(source), str(tmp_path / "one"), IngestConfig(execution="local", episodes_per_task=6))
    monkeypatch.setattr(ingest_mod, "FRAGMENT_BYTES", 1)  # every episode's rows fill a fragment
    ingest(str(source), str(tmp_path / "many"), IngestConfig(execution="local", episodes_per_task=6))
    one, many = Lake.open(str(tmp_path / "one")), Lake.open(str(tmp_path / "many"))
    assert _fragments(many, "steps") == 6 and _fragments(many, "media") == 6
    assert _rows(one) == _rows(many)
    assert sorted(one.episodes()["content_hash"].to_pylist()) == sorted(many.episodes()["content_hash"].to_pylist())


def test_a_bad_episode_in_a_large_chunk_is_quarantined_alone(source: Path, tmp_path: Path) -> None:
    import shutil

    import pyarrow as pa
    import pyarrow.compute as pc

    src = tmp_path / "src"
    shutil.copytree(source, src)
    (data,) = [p for p in (src / "single_arm_7dof" / "data").rglob("file-000.parquet")]
    table = pq.read_table(data)
    state = table["observation.state"].to_pylist()
    first = table["episode_index"].to_pylist().index(1)
    state[first + 2] = [float("nan")] * len(state[first + 2])  # episode 1, row 2
    table = table.set_column(
        table.column_names.index("observation.state"),
        "observation.state",
        pa.array(state, table["observation.state"].type),
    )
    pq.write_table(table, data)
    assert pc.sum(pc.equal(table["episode_index"], 1)).as_py() > 0
    r = ingest(str(src), str(tmp_path / "lake"), IngestConfig(execution="local", episodes_per_task=6))
    assert (r.ingested, r.quarantined) == (5, 1)
    ((path, reason),) = r.quarantine
    assert path == str(data) and "observation.state" in reason and "NaN" in reason
