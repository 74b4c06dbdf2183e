"""The lake, packed shards and the loader on an S3-compatible object store (a local server).

moto's server speaks the S3 protocol on 127.0.0.1; Lance (object_store) and fsspec (s3fs) talk
to it exactly as they would to S3 or MinIO, with the same Lance-style `storage_options`.
"""

from __future__ import annotations

from robolake.lake import Lake
from robolake.lake.intake.ingest import ingest
from robolake.loaders import LoaderConfig, PackedLoader
from robolake.packers import PackSpec, TokenLengthConfig, pack, read_manifest
from robolake.writers.synthetic import SyntheticConfig, generate_synthetic


def test_lake_pack_and_load_on_s3(s3_options, tmp_path, ray_session):
    generate_synthetic(tmp_path / "syn", SyntheticConfig.tiny(embodiments=("single_arm_7dof", "bimanual_14dof")))
    lake = Lake.create("s3://robolake/lake", storage_options=s3_options)
    result = ingest(str(tmp_path / "syn"), lake)
    assert result.ingested == 4
    lake = Lake.open("s3://robolake/lake", storage_options=s3_options)
    assert lake.version == 2 and lake.count("episodes") == 4
    assert lake.count("steps") == sum(lake.episodes(columns=["num_steps"])["num_steps"].to_pylist())

    spec = PackSpec(max_tokens=512, tokens=TokenLengthConfig(tokens_per_view=16, state_tokens=0))
    m = pack(lake, spec, "s3://robolake/packed")
    assert read_manifest("s3://robolake/packed", s3_options).num_samples == m.num_samples == lake.count("steps")

    loader = PackedLoader(
        "s3://robolake/packed", LoaderConfig(image_size=16, num_workers=0), lake=lake, storage_options=s3_options
    )
    keys = [k for batch in loader for k in batch.sample_keys]
    assert len(keys) == len(set(keys)) == m.num_samples
