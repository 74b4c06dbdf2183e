"""A credential handed in `storage_options` stays there: it never appears in what robolake prints,
logs or raises, nor in any object, manifest, checkpoint or sample record it writes, on the
success path and on the failure paths, against a local S3 server (moto speaks the S3 protocol
on 127.0.0.1; moto does not check signatures, so any secret is accepted).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from robolake.lake import Lake
from robolake.lake.intake.ingest import ingest
from robolake.packers import PackSpec, TokenLengthConfig, pack
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic
from tests.fixtures import moto_s3

SECRET = "RL-F4KE-S3CR3T-9d1c7e0b"  # distinctive: a hit can only be a leak
KEY_ID = "RLFAKEKEYID7Q2"


@pytest.fixture()
def s3():
    with moto_s3(KEY_ID, SECRET) as server:
        yield server


def _objects_holding(client, needle: bytes) -> list[str]:
    """Keys of every object in the bucket whose bytes hold `needle`."""
    hits = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket="robolake"):
        for obj in page.get("Contents", []):
            if needle in client.get_object(Bucket="robolake", Key=obj["Key"])["Body"].read():
                hits.append(obj["Key"])
    return hits


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.mark.slow
def test_a_secret_in_storage_options_never_leaves_them(s3, tmp_path: Path, caplog, capsys) -> None:
    from robolake.training.run import RunConfig, train_on

    client, options = s3
    caplog.set_level(logging.DEBUG)
    errors: list[str] = []
    src = tmp_path / "src"
    generate_synthetic(
        src, SyntheticConfig.tiny(embodiments=("single_arm_7dof",), episodes_per_embodiment=2, image_size=16)
    )
    (src / "broken").mkdir()  # a quarantined dataset: its reason is recorded in the lake
    (src / "broken" / "meta").mkdir()
    (src / "broken" / "meta" / "info.json").write_text("{not json")

    # Success: ingest, pack, train with sample records and a checkpoint, all through the credential.
    lake = Lake.create("s3://robolake/lake", storage_options=options)
    result = ingest(str(src), lake)
    assert result.ingested == 2 and result.quarantined >= 1
    lake = Lake.open("s3://robolake/lake", storage_options=options)
    pack(
        lake,
        PackSpec(max_tokens=512, tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0)),
        "s3://robolake/packed",
    )
    out = tmp_path / "run"
    train_on(lake, RunConfig(out=str(out), steps=2, warmup_steps=0, num_workers=0, device="cpu", record_samples=True))
    assert list((out / "checkpoints").glob("step_*")), "the run wrote no checkpoint to search"

    # Failure: a missing lake, a missing pack output, a wrong key, a server that is gone.
    for fail in (
        lambda: Lake.open("s3://robolake/no-such-lake", storage_options=options),
        lambda: Lake.open("s3://no-such-bucket/lake", storage_options=options),
        lambda: train_on(
            "s3://robolake/no-such-pack", RunConfig(out=str(tmp_path / "r2"), steps=1, num_workers=0, device="cpu")
        ),
        lambda: Lake.open("s3://robolake/lake", storage_options={**options, "aws_endpoint": "http://127.0.0.1:9"}),
    ):
        with pytest.raises(Exception) as info:
            fail()
        errors.append(f"{type(info.value).__name__}: {info.value!r} {info.value}")

    printed = capsys.readouterr()
    said = "\n".join([printed.out, printed.err, caplog.text, *errors, str(result.quarantine), str(result)])
    assert SECRET not in said
    assert _objects_holding(client, SECRET.encode()) == []
    assert _files_holding(tmp_path, SECRET.encode()) == []
