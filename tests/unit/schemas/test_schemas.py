"""Schemas: table rows -> Arrow schemas, EmbodimentSpec <-> modality.json, varlen metadata."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from robolake.schemas import (
    TABLES,
    EmbodimentSpec,
    cu_seqlens_from_lengths,
    packed_schema,
    position_ids_from_lengths,
    schema_for_table,
)
from tests.conftest import PICK_N_PLACE


def test_every_table_has_a_documented_schema():
    for name in TABLES:
        schema = schema_for_table(name)
        assert all(f.metadata and f.metadata[b"doc"] for f in schema)
    assert schema_for_table("steps").field("state").type == pa.list_(pa.float32())
    assert schema_for_table("media").field("data").type == pa.large_binary()
    assert packed_schema().field("cu_seqlens").type == pa.list_(pa.int32())
    with pytest.raises(KeyError, match="unknown lake table"):
        schema_for_table("frames")


MODALITY = {
    "state": {"arm": {"start": 0, "end": 6, "absolute": True}, "gripper": {"start": 6, "end": 7}},
    "action": {"arm": {"start": 0, "end": 6}, "gripper": {"start": 6, "end": 7}},
    "video": {"front": {"original_key": "observation.images.front"}},
    "annotation": {"human.task_description": {"original_key": "task_index"}},
}


def test_modality_roundtrip_keeps_extra_keys():
    spec = EmbodimentSpec.from_modality_json(MODALITY, tag="arm", state_dim=7, action_dim=7, fps=20)
    assert spec.cameras == ("front",) and spec.video_key("front") == "observation.images.front"
    assert spec.to_modality_json() == MODALITY
    assert EmbodimentSpec.from_json(spec.to_json()) == spec


def test_real_modality_json_roundtrip():
    if not PICK_N_PLACE.is_dir():
        pytest.skip("shared data absent")
    modality = json.loads((PICK_N_PLACE / "meta/modality.json").read_text())
    spec = EmbodimentSpec.from_modality_json(modality, tag="gr1", state_dim=44, action_dim=44)
    assert spec.to_modality_json() == modality
    assert [s.name for s in spec.state][:2] == ["left_arm", "left_hand"]


def test_spec_contradictions_are_errors():
    with pytest.raises(ValueError, match="ends at 6 but the state vector has 5 values"):
        EmbodimentSpec.from_modality_json(MODALITY, tag="arm", state_dim=5, action_dim=7)
    with pytest.raises(ValueError, match="start"):
        EmbodimentSpec.from_modality_json({"state": {"x": {"end": 3}}}, tag="t", state_dim=3, action_dim=1)
    with pytest.raises(ValueError, match="tag"):
        EmbodimentSpec(tag="", state_dim=1, action_dim=1)


def test_varlen_metadata():
    cu = cu_seqlens_from_lengths([3, 0, 2])
    assert cu.dtype == np.int32 and cu.tolist() == [0, 3, 3, 5]
    assert position_ids_from_lengths([3, 0, 2]).tolist() == [0, 1, 2, 0, 1]
    with pytest.raises(ValueError, match=">= 0"):
        cu_seqlens_from_lengths([1, -1])


def test_model_imports_without_the_data_stack():
    """The batch contract and the model need only torch and numpy (no pyarrow, lance, PyAV, fsspec, ray)."""
    import subprocess
    import sys

    code = (
        "import sys; import robolake.training.model, robolake.training.trainer, robolake.schemas.batch; "
        "bad = [m for m in ('pyarrow', 'lance', 'av', 'fsspec', 'ray') if m in sys.modules]; "
        "print(','.join(bad)); sys.exit(1 if bad else 0)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, f"importing the model pulled in: {res.stdout.strip()} {res.stderr[-500:]}"


def test_public_api_is_lazy_and_complete():
    import subprocess
    import sys

    code = (
        "import sys, robolake; heavy = [m for m in ('lance', 'ray', 'torch') if m in sys.modules]; "
        "assert not heavy, heavy; names = [n for n in robolake.__all__ if n != '__version__']; "
        "[getattr(robolake, n) for n in names]; print(len(names))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    assert int(res.stdout.strip()) >= 10
