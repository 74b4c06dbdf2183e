"""pack() in this process and on Ray: the same stages, the same plan, the same shards.

The only test file of packers/ that starts Ray: it packs the same tiny lake both ways and
compares the manifests (but for the timestamps) and every row.
"""

from __future__ import annotations

import json
from pathlib import Path

import lance
import pytest

from robolake.lake import Lake, ingest
from robolake.packers import MixSpec, PackSpec, TokenLengthConfig, pack, pipeline, read_manifest
from robolake.packers.plan import PLAN_RANGE_SAMPLES
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

TOKENS = TokenLengthConfig(tokens_per_view=16, state_tokens=0)
TIMESTAMPS = ("created_at", "seconds")


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    root = tmp_path_factory.mktemp("execution")
    generate_synthetic(root / "syn", SyntheticConfig.tiny())
    ingest(str(root / "syn"), str(root / "lake"))  # recorded videos: the decode stage runs too
    return Lake.open(str(root / "lake"))


def _manifest(out: Path) -> dict:
    doc = json.loads((out / "manifest.json").read_text())
    return {k: v for k, v in doc.items() if k not in TIMESTAMPS}


def _rows(out: Path) -> list[dict]:
    m = read_manifest(str(out))
    return lance.dataset(str(out / "shards.lance"), version=m.shards_version).to_table().to_pylist()


@pytest.mark.parametrize(
    ("algorithm", "mix", "plan_range_samples"),
    [
        ("bfd", None, PLAN_RANGE_SAMPLES),  # one range planned on the driver
        ("window", "embodiment=single_arm_7dof:0.5,*:0.5", 40),  # ranges planned in stages, with a mixture
    ],
)
def test_in_process_and_ray_write_the_same_shards(lake, tmp_path, ray_session, algorithm, mix, plan_range_samples):
    spec = PackSpec(
        max_tokens=512, horizon=8, tokens=TOKENS, algorithm=algorithm, mix=None if mix is None else MixSpec.parse(mix)
    )
    kw = {"sequences_per_task": 2, "plan_range_samples": plan_range_samples}
    here = pack(lake, spec, str(tmp_path / "local"), execution="local", **kw)
    there = pack(lake, spec, str(tmp_path / "ray"), execution="ray", **kw)
    assert here.num_sequences == there.num_sequences > 4 and here.num_samples == there.num_samples
    assert _manifest(tmp_path / "local") == _manifest(tmp_path / "ray")
    assert _rows(tmp_path / "local") == _rows(tmp_path / "ray")
    for out in ("local", "ray"):  # the scratch table and the range plans are gone either way
        assert sorted(p.name for p in (tmp_path / out).iterdir()) == ["manifest.json", "shards.lance"]


def test_a_small_lake_packs_in_this_process_unless_ray_is_running(lake, tmp_path, monkeypatch):
    ran: list[bool] = []
    fan_out = pipeline.fan_out

    def recording_fan_out(task, num_chunks, *, local=False):
        ran.append(local)
        return fan_out(task, num_chunks, local=local)

    def no_ray(*args, **kwargs):
        raise AssertionError("pack started Ray for a small lake")

    monkeypatch.setattr(pipeline, "fan_out", recording_fan_out)
    monkeypatch.setattr(pipeline, "ensure_ray", no_ray)
    monkeypatch.setattr(pipeline, "ray_running", lambda: False)
    m = pack(lake, PackSpec(max_tokens=512, tokens=TOKENS), str(tmp_path / "p"))
    assert m.num_samples < pipeline.LOCAL_BELOW_SAMPLES and ran and all(ran)

    # A Ray this process already runs costs nothing more to start: `auto` goes to it.
    class GoesToRay(Exception):
        pass

    def to_ray(*args, **kwargs):
        raise GoesToRay

    monkeypatch.setattr(pipeline, "ray_running", lambda: True)
    monkeypatch.setattr(pipeline, "ensure_ray", to_ray)
    with pytest.raises(GoesToRay):
        pack(lake, PackSpec(max_tokens=512, tokens=TOKENS), str(tmp_path / "q"))


def test_an_unknown_execution_is_refused(lake, tmp_path):
    with pytest.raises(ValueError, match="execution must be auto, local or ray"):
        pack(lake, PackSpec(max_tokens=512, tokens=TOKENS), str(tmp_path / "p"), execution="cluster")  # type: ignore[arg-type]
