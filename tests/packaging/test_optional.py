"""Without an optional extra a course section says in one line what is missing and how to install it
(flashsim.course.kit.optional), and a kernel section then shows the measurement recorded on a GPU
(flashsim.course.kit.real_gpu.recorded). Torch and triton are hidden here by blocking their import."""
from __future__ import annotations

import re
import sys

import pytest

from flashsim.course.kit import optional, real_gpu
from flashsim.errors import FlashsimError


@pytest.fixture
def no_kernels(monkeypatch):
    """As if torch and triton were not installed (``import torch`` raises ImportError)."""
    for name in ("torch", "triton"):
        monkeypatch.setitem(sys.modules, name, None)


def test_nothing_missing_here():
    import importlib.util
    absent = [m for m in ("ipywidgets", "ipykernel") if importlib.util.find_spec(m) is None]
    if absent:   # a bare machine (a GPU image without Jupyter): nothing to claim complete
        pytest.skip(f"the [lab] extra is not installed here ({', '.join(absent)} missing): make venv installs it")
    assert optional.missing("lab") is None
    optional.require("lab")


def test_missing_kernels_is_one_line_naming_what_and_how(no_kernels):
    why = optional.missing("kernels")
    assert why == ('torch and triton are not installed, so the Triton kernels cannot run here: '
                   'pip install "flashsim[kernels]" adds them.')
    with pytest.raises(optional.MissingExtra, match=r'pip install "flashsim\[kernels\]"') as err:
        optional.require("kernels")
    assert isinstance(err.value, ImportError) and isinstance(err.value, FlashsimError)


def test_one_definition_below_the_layers_that_the_kernels_backend_shares(no_kernels):
    from flashsim import errors
    from flashsim.kernels import runtime
    assert optional.missing is errors.missing and optional.MissingExtra is errors.MissingExtra
    assert runtime._missing() == errors.not_installed("kernels") == "torch and triton are not installed"
    assert optional.missing("kernels").startswith(runtime._missing())


def test_one_missing_module_is_singular(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)
    assert optional.missing("cpu").startswith("numba is not installed, so the numba CPU kernel cannot run here")


def test_triton_off_linux_says_linux_or_colab(no_kernels, monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    why = optional.missing("kernels")
    assert "Triton, which ships for Linux only (darwin here)" in why and "Colab" in why and "\n" not in why


def test_unknown_extra_names_the_extras():
    with pytest.raises(FlashsimError, match="kernels, cpu, lab"):
        optional.missing("gpu")


@pytest.mark.parametrize("kernel", sorted(real_gpu.KERNELS))
def test_recorded_is_an_ncu_run_of_that_kernel(kernel):
    r = real_gpu.recorded(kernel)
    assert r.kernel == kernel and r.backend.startswith("ncu on ")
    assert r.measured_load_bytes > 0 and r.measured_store_bytes > 0 and r.simulated_load_bytes > 0
    assert r.measured_dram_bytes and r.time_s and r.time_s > 0
    run = r.raw["recorded"]
    assert run["set"] == "sweep" and run["config"]["kernel"] == kernel
    assert r.raw["source"].startswith("benchmarks/results/") and r.raw["source"] not in r.notice  # kept for maintainers
    assert re.search(r"measured on an NVIDIA H[12]00[^,]*, 2026-", r.notice)   # the learner reads the GPU and the date
    r.table()
    r.plot()


def test_recorded_prefers_the_asked_causal_blocks_and_size():
    r = real_gpu.recorded("flash_fwd", n=4096, d=128, causal=True)
    assert (r.config["n"], r.config["d"], r.config["causal"]) == (4096, 128, True)
    r = real_gpu.recorded("online_softmax", block_m=32, block_n=128)
    assert (r.config["block_m"], r.config["block_n"]) == (32, 128)


def test_compare_without_kernels_prints_one_line_then_shows_the_recording(no_kernels, capsys):
    r = real_gpu.compare("tiled_matmul")
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("torch and triton are not installed")
    assert 'pip install "flashsim[kernels]"' in out and "Nsight Compute's counters, measured on an NVIDIA H" in out
    assert r.backend.startswith("ncu on ") and r.exact
    real_gpu.compare("tiled_matmul", quiet=True)
    assert capsys.readouterr().out == ""
