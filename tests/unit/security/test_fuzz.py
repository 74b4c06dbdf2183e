"""[30] Property-based fuzzing of every document and expression robolake reads from a user or a file.

Each input either parses or is refused with one ValueError-family line (never another exception,
never a traceback's worth of text), within a time bound (hypothesis' deadline) and a memory bound
(tracemalloc around the call). Covered: `--where` expressions, mixtures (inline and files),
mappings, version manifests and checkpoint.json.
"""

from __future__ import annotations

import json
import string
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from robolake.lake.protocol.versions import LakeVersion  # noqa: E402
from robolake.lake.sources.mapping import load_mapping  # noqa: E402
from robolake.lake.where import parse_where  # noqa: E402
from robolake.packers.mixspec import MixSpec, load_mix  # noqa: E402
from robolake.storage import parse_json, parse_yaml  # noqa: E402
from robolake.training.checkpoint import read_checkpoint  # noqa: E402

FUZZ = settings(
    max_examples=100,
    deadline=2000,  # ms per example: a parse that hangs (10**10**10, deep nesting) fails here
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
MEMORY_BOUND = 64 * 2**20

# Pieces of the real languages, so that the fuzzer reaches past the first syntax error.
_WHERE_TOKENS = [
    "num_steps", "task", "success", "embodiment", "fps", "meta.source", "state[0]", "action[3]", "max(", "mean(",
    "abs(", "lower(", "like(", "contains(", ")", "(", " and ", " or ", "not ", " > ", " <= ", " = ", " != ", " in ",
    "'pick'", "'%a%'", "1", "0.5", "-3", "10**23", "99999999999999999999999", "1e308", "**", "+", "*", "/", "%",
    ",", "[", "]", "null", "true", "__class__", "import", ";", "\\", "'", '"', "\x00", "é",
]  # fmt: skip
_MIX_TOKENS = ["embodiment", "task", "source", "tag", "split", "=", ":", ",", "*", "gr1", "0.5", "1e308", "inf",
               "nan", "-1", "0", " ", "=="]  # fmt: skip


def _bounded(fn: Callable[[], Any]) -> None:
    """Run `fn`: a result or a ValueError with one short line; anything else, or too much memory, fails."""
    tracemalloc.start()
    try:
        fn()
    except ValueError as e:
        text = str(e)
        assert "\n" not in text.strip() and len(text) < 2000, text
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < MEMORY_BOUND, peak


@FUZZ
@given(st.one_of(st.text(max_size=300), st.lists(st.sampled_from(_WHERE_TOKENS), max_size=40).map("".join)))
def test_where_parses_or_is_one_line(expr: str) -> None:
    _bounded(lambda: parse_where(expr))


@pytest.mark.parametrize("depth", [50, 5000, 20000])
def test_where_nesting_is_one_line(depth: int) -> None:
    for expr in ("not " * depth + "success", "(" * depth + "1" + ")" * depth, "-" * depth + "1 > 0"):
        _bounded(lambda expr=expr: parse_where(expr))


@FUZZ
@given(st.lists(st.sampled_from(_MIX_TOKENS), max_size=30).map("".join))
def test_inline_mixtures_parse_or_are_one_line(text: str) -> None:
    _bounded(lambda: MixSpec.parse(text))


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=30,
)
_MIX_DOC = st.fixed_dictionaries(
    {},
    optional={
        "key": st.sampled_from(["embodiment", "task", "tag", "bogus"]) | _JSON,
        "weights": st.dictionaries(st.text(string.ascii_letters + "*", max_size=5), _JSON, max_size=4) | _JSON,
        "share": st.sampled_from(["samples", "tokens", "x"]) | _JSON,
        "epoch_size": st.integers() | st.floats() | _JSON,
    },
)


@FUZZ
@given(doc=_MIX_DOC | _JSON, as_yaml=st.booleans())
def test_mixture_files_load_or_are_one_line(tmp_path: Path, doc: Any, as_yaml: bool) -> None:
    path = tmp_path / ("mix.yaml" if as_yaml else "mix.json")
    path.write_text(json.dumps(doc, allow_nan=True))  # JSON is YAML too
    _bounded(lambda: load_mix(str(path)))


@FUZZ
@given(text=st.text(max_size=400))
def test_mapping_files_load_or_are_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "map.yaml"
    path.write_text(text)
    _bounded(lambda: load_mapping(str(path)))


@FUZZ
@given(doc=_JSON | st.fixed_dictionaries({"version": _JSON, "tables": _JSON | st.dictionaries(st.text(), _JSON)}))
def test_manifests_read_or_are_one_line(doc: Any) -> None:
    def read() -> None:
        try:
            LakeVersion.from_json(doc)
        except (KeyError, TypeError, AttributeError, OverflowError) as e:  # what `_parse` turns into DamagedManifest
            raise ValueError(f"damaged manifest: {type(e).__name__}") from None

    _bounded(read)


@FUZZ
@given(text=st.text(max_size=300) | _JSON.map(json.dumps))
def test_documents_parse_or_are_one_line(text: str) -> None:
    _bounded(lambda: parse_json(text, "fuzz.json"))
    _bounded(lambda: parse_yaml(text, "fuzz.yaml"))


@FUZZ
@given(doc=_JSON | st.fixed_dictionaries({"format": st.just("robolake-checkpoint"), "format_version": _JSON}))
def test_checkpoint_json_reads_or_is_one_line(tmp_path: Path, doc: Any) -> None:
    step = tmp_path / "step_00000001"
    step.mkdir(exist_ok=True)
    (step / "checkpoint.json").write_text(json.dumps(doc, allow_nan=True))
    _bounded(lambda: read_checkpoint(step))
