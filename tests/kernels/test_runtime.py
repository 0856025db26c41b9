"""flashsim.kernels.runtime: one explicit backend decision, the import's default until triton is imported, one line
only where nobody chose and the interpreter runs the kernels, clear errors.

The decision depends on the machine, so each test states which machine it is about: the fresh processes of the
no-GPU tests see no GPU (``CUDA_VISIBLE_DEVICES=""`` hides any the machine has), the in-process ones replace torch's
answer; the GPU test runs only where torch sees a CUDA GPU."""
import subprocess
import sys

import pytest

from flashsim.errors import FlashsimError
from flashsim.kernels import runtime


def _fresh(code: str, gpu: bool = False, **env) -> subprocess.CompletedProcess:
    """``code`` in a fresh Python without the caller's TRITON_INTERPRET and TRITON_DEFAULT_FP_FUSION, on a machine
    with no visible CUDA GPU unless ``gpu``."""
    import os
    e = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TRITON_DEFAULT_FP_FUSION")}
    if not gpu:
        e["CUDA_VISIBLE_DEVICES"] = ""
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)


def _cuda_visible() -> bool:
    import torch
    return torch.cuda.is_available()


def _no_gpu(monkeypatch):
    """In this process, torch sees no CUDA GPU (what the backend decision asks)."""
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_the_decision_keeps_fp_fusion_on_unless_the_caller_chose():
    code = "import os, flashsim.kernels; print(os.environ['TRITON_DEFAULT_FP_FUSION'])"
    p = _fresh(code)
    assert p.returncode == 0 and p.stdout.split() == ["1"], p.stderr
    p = _fresh(code, TRITON_DEFAULT_FP_FUSION="0")
    assert p.returncode == 0 and p.stdout.split() == ["0"], p.stderr


def test_import_prints_nothing_and_decides_the_interpreter_without_a_gpu():
    p = _fresh("import os, flashsim.kernels as K; print(K.INTERPRETER, os.environ['TRITON_INTERPRET'])")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["True", "1"] and p.stderr == ""


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_visible(), reason="needs a CUDA GPU (the decision on a machine with one)")
def test_with_a_gpu_the_import_decides_the_gpu_silently_and_the_kernels_take_cuda_tensors():
    p = _fresh("import os, flashsim.kernels as K, torch; print(K.INTERPRETER, os.environ['TRITON_INTERPRET']); "
               "x = torch.randn(3, 70, device='cuda'); y, _ = K.online_softmax(x); "
               "print(y.device.type, bool(torch.allclose(y, torch.softmax(x, -1), atol=1e-6)))", gpu=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False", "0", "cuda", "True"] and "flashsim" not in p.stderr
    assert "FP_FUSION" not in p.stderr                       # triton 3.9's warning when the default is unset


def test_first_kernel_says_in_one_line_that_the_default_is_the_interpreter_unless_someone_chose():
    use = "import flashsim.kernels as K; K.online_softmax; K.naive_attention"
    p = _fresh(use)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "" and p.stderr.splitlines() == [
        "flashsim.kernels: No CUDA GPU: the Triton kernels run in Triton's interpreter on the CPU, at small sizes "
        "(TRITON_INTERPRET=1 for this process); call flashsim.kernels.select_backend() before the first kernel to "
        "choose explicitly and silence this line."]
    for chosen, env in (("from flashsim.kernels import select_backend; select_backend(); ", {}),
                        ("", {"TRITON_INTERPRET": "1"})):
        p = _fresh(chosen + use, **env)
        assert p.returncode == 0 and p.stdout == "" and p.stderr == "", p.stderr


def test_an_explicit_choice_replaces_the_import_default_until_triton_is_imported(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(runtime, "_DECIDED", runtime.Backend("gpu", "a CUDA GPU is available", device_name="GPU"))
    monkeypatch.setattr(runtime, "_IMPLICIT", True)
    triton = sys.modules.pop("triton", None)
    try:
        b = runtime.select_backend(interpret=True)         # what session.start(interpret=True) asks
    finally:
        if triton is not None:
            sys.modules["triton"] = triton
    assert b.interpreter and "asked for it" in b.reason and runtime.current() is b
    monkeypatch.setattr(runtime, "_IMPLICIT", True)
    monkeypatch.setitem(sys.modules, "triton", triton or object())   # now Triton has read the choice: fixed
    with pytest.raises(FlashsimError, match="restart"):
        runtime.select_backend(interpret=False)


def test_session_start_prints_one_calm_line_on_stdout():
    p = _fresh("from flashsim.course.kit import session; b = session.start(); session.start(); "
               "import flashsim.kernels as K; assert K.INTERPRETER and b.interpreter")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines() == [
        "No CUDA GPU: the Triton kernels run in Triton's interpreter on the CPU, at small sizes."] * 2
    assert p.stderr == ""


def test_caller_setting_is_respected_and_triton_first_is_a_clear_error():
    p = _fresh("import flashsim.kernels as K; print(K.INTERPRETER_REASON)", TRITON_INTERPRET="1")
    assert p.returncode == 0 and "TRITON_INTERPRET=1 was set by the caller" in p.stdout
    p = _fresh("import flashsim.kernels as K; K.select_backend(interpret=False)", TRITON_INTERPRET="1")
    assert p.returncode != 0 and "restart" in p.stderr          # the caller's choice holds as before
    p = _fresh("import triton; from flashsim.kernels import select_backend; select_backend()")
    assert p.returncode != 0 and "before `import triton`" in p.stderr and "FlashsimError" in p.stderr


def test_no_gpu_asked_for_gpu_and_a_second_conflicting_call(monkeypatch):
    _no_gpu(monkeypatch)
    monkeypatch.setattr(runtime, "_DECIDED", None)
    monkeypatch.setattr(runtime, "_missing", lambda: None)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(FlashsimError, match="no CUDA GPU"):
        runtime.select_backend(interpret=False)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    b = runtime.select_backend()
    assert b.interpreter and runtime.select_backend() is b
    with pytest.raises(FlashsimError, match="restart"):
        runtime.select_backend(interpret=False)


def test_without_torch_or_triton_the_backend_says_how_to_install(monkeypatch):
    monkeypatch.setattr(runtime, "_DECIDED", None)
    monkeypatch.setattr(runtime, "_missing", lambda: "triton is not installed")
    b = runtime.select_backend()
    assert b.kind == "unavailable" and not b.available and b.interpreter
    assert 'pip install "flashsim[kernels]"' in b.line() and "triton is not installed" in b.line()
    with pytest.raises(FlashsimError, match=r'pip install "flashsim\[kernels\]"'):
        b.require()
