"""gpu_check's sections dry-run on the CPU (tiny preset), so the script a GPU session runs once is not its first run."""

from __future__ import annotations

import pytest
import torch

from robolake.bench import gpu_check


@pytest.fixture(autouse=True)
def _one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def test_sections_cover_both_families() -> None:
    names = list(gpu_check.sections(True, torch.device("cpu"), preset="tiny"))
    assert names == [
        "attention",
        "prefix_lm",
        "packed_vs_padded/groot",
        "packed_vs_padded/pi0",
        "fp8/groot",
        "fp8/pi0",
    ]


@pytest.mark.slow
def test_prefix_lm_and_pi0_sections_run_on_cpu(capsys) -> None:
    device = torch.device("cpu")
    checks = gpu_check.sections(True, device, preset="tiny")
    result = gpu_check.run_sections(
        {"cuda": True, "device": "cpu", "capability": [0, 0], "torch": torch.__version__},
        {k: checks[k] for k in ("prefix_lm", "packed_vs_padded/pi0", "fp8/pi0")},
    )
    assert result["prefix_lm"]["cpu"]["max_abs_err_suffix"] == 0.0  # the reference against itself
    pv = result["packed_vs_padded/pi0"]
    assert "error" not in pv and pv["family"] == "pi0" and 0 < pv["padding_fraction"] < 1
    assert pv["packed"]["peak_mib"] is None  # no CUDA allocator here
    assert "no FP8 tensor cores" in result["fp8/pi0"]["skipped"]
    gpu_check.print_table(result)
    assert "pi0    packed" in capsys.readouterr().out


def test_without_cuda_it_says_so(capsys) -> None:
    if torch.cuda.is_available():
        pytest.skip("measures for real on CUDA")
    assert gpu_check.main([]) == 0
    assert "gpu_check: CUDA is not available" in capsys.readouterr().out
