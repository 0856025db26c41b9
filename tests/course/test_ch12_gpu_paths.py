"""Chapter 12's checker on the GPU path, tested on a CPU: what Triton's compiled @jit, its CompilationError and a
GPU's fp16 overflow do is faked here, so that one source gets one verdict on every device.

- a kernel defined in a cell (a notebook, the tests' harness) has its source where Triton's compiled @jit reads it;
- a learner's typo is shown at the learner's line also when Triton's compiler (not a traceback) found it, wherever
  that compiler is installed (site-packages, PYTHONPATH, a source build);
- NaN everywhere under large scores, after the small-score cases passed, is the overflow;
- a body that loads K twice per tile fails with ``extra_loads`` also where Nsight Compute saw the merged load.
"""
import ast
import importlib.util
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from flashsim.course.ch12 import checks  # noqa: E402  (chooses the backend before triton is imported)
from flashsim.course.kit.checker import LearnerError, call_learner  # noqa: E402
from flashsim.course.kit.notebook_exec import compile_cell  # noqa: E402
from flashsim.model.attention.reference import reference_attention  # noqa: E402

CELL = "def body(x):\n    return x + 1\n"


def _wrong_answers():
    path = Path(__file__).parent / "wrong_answers" / "ch12.py"
    spec = importlib.util.spec_from_file_location("wrong_answers_ch12_gpu", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_cell_defines_a_compiled_jit_function():
    from triton.runtime.jit import JITFunction            # the compiled path's @jit, also under the interpreter
    plain = {}
    exec(compile(CELL, "<plain cell>", "exec"), plain)   # noqa: S102
    with pytest.raises(ValueError, match="Python file"):   # the failure on a GPU, without the source registered
        JITFunction(plain["body"])
    ns = {}
    exec(compile_cell(CELL, "<cell 1>"), ns)             # noqa: S102
    fn = JITFunction(ns["body"])
    assert fn.src.startswith("def body(x):")


def _typo_kernel():
    """The catalogued typo (``qk_scal``): the learner's function as Triton sees it (``inner``, its ``src`` from the
    def, decorators dropped), that body, the typo's line in the body (1 = the def) and in its file."""
    wrong = _wrong_answers().inner_typo
    src, path, first = checks._learner_source(wrong)
    body = src[src.index("def "):]
    typo = next(k for k, ln in enumerate(body.splitlines()) if re.search(r"\bqk_scal\b", ln))
    file_line = next(k + 1 for k, ln in enumerate(Path(path).read_text().splitlines()) if re.search(r"\bqk_scal\b", ln))
    return SimpleNamespace(fn=getattr(wrong, "fn", wrong), src=body), body, typo + 1, file_line


def test_a_compile_error_is_shown_at_the_learners_line():
    from triton.compiler.errors import CompilationError
    inner, body, body_line, file_line = _typo_kernel()
    node = ast.Name(id="qk_scal")
    node.lineno, node.col_offset = body_line, 4
    try:
        try:
            raise NameError("qk_scal is not defined")
        except NameError as name_error:
            raise CompilationError(body, node, repr(name_error)) from name_error
    except CompilationError as exc:
        err = LearnerError(exc)
    err.where, err.line = "", ""                         # no frame of the learner's: the compiler ran the body
    checks._locate(err, inner)
    assert err.where == f"ch12.py:{file_line}", err.where
    assert "qk_scal" in err.line


def test_a_compiler_outside_site_packages_is_not_taken_for_the_learner(tmp_path, monkeypatch):
    """A triton put on PYTHONPATH or built from source does not sit under site-packages: its compiler's frames are
    still a library's, so the verdict shows the learner's line, not the compiler's."""
    inner, body, body_line, file_line = _typo_kernel()
    lib = tmp_path / "fake_triton_site" / "faketriton"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text(
        "import ast\n"
        "from triton.compiler.errors import CompilationError\n"
        "def ast_to_ttir(body, lineno):\n"
        "    node = ast.Name(id='qk_scal')\n"
        "    node.lineno, node.col_offset = lineno, 4\n"
        "    try:\n"
        "        raise NameError('qk_scal is not defined')\n"
        "    except NameError as e:\n"
        "        raise CompilationError(body, node, repr(e)) from e\n")
    monkeypatch.syspath_prepend(str(lib.parent))
    import faketriton
    with pytest.raises(LearnerError) as caught:           # as the checker calls it: flashsim, then the compiler
        call_learner(faketriton.ast_to_ttir, body, body_line)
    err = caught.value
    assert err.where == "", err.where                  # the compiler's frame is not the learner's
    checks._locate(err, inner)
    assert err.where == f"ch12.py:{file_line}" and "qk_scal" in err.line, (err.where, err.line)


def test_nan_everywhere_under_large_scores_after_small_ones_passed_is_overflow():
    g = np.random.default_rng(0)
    q, k = g.standard_normal((1, 96, 16)) * 40, g.standard_normal((1, 96, 16))
    assert checks._all_nan_under_large_scores("all_non_finite", "x", q, k, idx=2)[0] == "overflow"
    assert checks._all_nan_under_large_scores("all_non_finite", "x", q, k, idx=0)[0] == "all_non_finite"
    assert checks._all_nan_under_large_scores("all_non_finite", "x", q / 40, k, idx=2)[0] == "all_non_finite"


def test_loading_k_twice_fails_on_the_gpu_path_though_ncu_saw_the_merged_load(monkeypatch):
    """The GPU path with the kernel faked: the exact output, and Nsight Compute measuring the view's bytes."""
    def exact(inner, q, k, v, causal=False, block_m=None, block_n=None):
        o, lse = reference_attention(*(x.double().numpy() for x in (q, k, v)), causal, return_lse=True)
        return torch.from_numpy(o), torch.from_numpy(lse)

    def inputs(b, h, n, d, dtype, device, seed, amplitude=1.0):
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(b, h, n, d, generator=g) for _ in range(3)]
    # the kernel modules bind runtime.interpreting by name when first imported: import them before faking it, or
    # they keep the fake after this test (and later tests in the process see "compiled for the GPU" on a CPU)
    import flashsim.course.ch12.template  # noqa: F401
    import flashsim.kernels._common  # noqa: F401
    import flashsim.kernels.flash_fwd  # noqa: F401
    monkeypatch.setattr(checks.runtime, "interpreting", lambda: False)
    monkeypatch.setattr(checks, "run_learner_kernel", exact)
    monkeypatch.setattr(checks, "_inputs", inputs)
    merged = (True, "Nsight Compute measured the kernel view's bytes here: this GPU's compiler merged the "
              "repeated load", {"merged_by_compiler": True})
    monkeypatch.setattr(checks, "_grade_gpu_io", lambda inner, extra: merged)
    wa = _wrong_answers()
    v = checks.check_flash_kernel(wa.inner_loads_k_twice, check_speed=False, quiet=True)
    assert not v and v.diagnosis == "extra_loads", v.message
    assert "merged" in v.message and "1 more tl.load" in v.message
