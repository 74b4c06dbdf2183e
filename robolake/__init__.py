"""robolake: a Lance lake of robot episodes, packed cu_seqlens batches, a thin varlen/FP8 trainer.

The public API, resolved on first use so `import robolake` stays light (no lance, ray or torch
until a name that needs them is touched):

    import robolake
    robolake.ingest("raw/", "lake/", robolake.IngestConfig())          # logs -> lake version
    lake = robolake.Lake.open("lake/")
    robolake.pack(lake, robolake.PackSpec(max_tokens=2048), "packed/")   # lake -> cu_seqlens shards
    for batch in robolake.open_batches("packed/", robolake.LoaderConfig()):  # shards or a lake
        ...
    robolake.train_on("packed/", robolake.RunConfig(out="run/"))       # the thin GR00T-style model
"""

from __future__ import annotations

from robolake._lazy import lazy_attributes

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Lake": "robolake.lake",
    "EpisodeFilter": "robolake.lake",
    "ingest": "robolake.lake",
    "IngestConfig": "robolake.lake",
    "IngestResult": "robolake.lake",
    "pack": "robolake.packers.pipeline",
    "PackSpec": "robolake.packers.spec",
    "TokenLengthConfig": "robolake.packers.lengths",
    "open_batches": "robolake.loaders.open",
    "stream": "robolake.loaders.stream",
    "LoaderConfig": "robolake.loaders.config",
    "BatchSource": "robolake.schemas.batch",
    "PackedBatch": "robolake.schemas.batch",
    "train_on": "robolake.training.run",
    "RunConfig": "robolake.training.run",
    "ModelConfig": "robolake.training.config",
}

__all__ = ["__version__", *_EXPORTS]


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
