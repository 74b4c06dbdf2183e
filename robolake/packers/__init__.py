"""Packers: token lengths, bin-packing, the pack plan, and the pipeline from a lake to packed shards."""

from robolake.packers.binpack import (
    PackPlan,
    best_fit_decreasing,
    first_fit_decreasing,
    reference_best_fit_decreasing,
)
from robolake.packers.export import export_webdataset
from robolake.packers.history import HistorySpec, parse_history
from robolake.packers.lengths import (
    ByteTokenizer,
    TokenLengthConfig,
    sample_lengths,
    text_token_lengths,
)
from robolake.packers.manifest import LineageError, PackManifest, read_manifest
from robolake.packers.mix import MixSpec, Mixture, bind_mixture, load_mix
from robolake.packers.pipeline import pack
from robolake.packers.plan import padded_fill, plan_sequences
from robolake.packers.samples import SampleIndex, build_sample_index
from robolake.packers.spec import PackSpec
from robolake.packers.window import WindowPacker

__all__ = [
    "PackPlan",
    "WindowPacker",
    "best_fit_decreasing",
    "first_fit_decreasing",
    "reference_best_fit_decreasing",
    "ByteTokenizer",
    "TokenLengthConfig",
    "sample_lengths",
    "text_token_lengths",
    "PackSpec",
    "MixSpec",
    "Mixture",
    "bind_mixture",
    "load_mix",
    "SampleIndex",
    "build_sample_index",
    "plan_sequences",
    "padded_fill",
    "pack",
    "PackManifest",
    "read_manifest",
    "LineageError",
    "export_webdataset",
    "HistorySpec",
    "parse_history",
]
