"""Chapter 12, the final exercise: the learner's FlashAttention forward kernel in Triton, graded on three points.

:func:`check_flash_kernel` takes the learner's ``@triton.jit`` inner-loop body (see
:mod:`flashsim.course.ch12.template` for its signature and what the template around it does) and grades:

1. **output**: O and the logsumexp against the model's float64 attention, on ragged N (not a multiple of the
   block), a padded head dim, causal and non-causal, and scores large enough that e^s overflows float32;
2. **IO**: the bytes the kernel loads and stores must equal the simulator's kernel view
   :func:`flashsim.model.kernel_io.kernel_io` exactly, tensor by tensor. On a CPU the Triton interpreter counts
   them (:func:`flashsim.measure.count_io`: every ``tl.load`` of the source). On a GPU Nsight Compute measures the
   global load and store bytes. A source that loads a tile twice fails on both (diagnosis ``extra_loads``, from
   the source's count of ``tl.load``), also where the GPU compiler merged the repeated load so that the measured
   bytes equal the view: the verdict says so;
3. **speed** (GPU only): the median time of the learner's kernel next to the course's
   :func:`flashsim.kernels.flash_forward` and PyTorch's ``scaled_dot_product_attention`` with its backend named.
   On a CPU one line says that speed needs a GPU.

Every wrong answer gets a diagnosis from the evidence (:func:`flashsim.course.kit.checker.diagnose_attention`
for the output, the read/write table for the bytes, the learner's own line for an exception).
:func:`learner_kernel_comparison` is the chapter's "On the real GPU" section for the learner's kernel.

Without torch and triton (a lab-only install) nothing can be graded: :func:`check_flash_kernel` says so in one line
and shows the checker's verdicts recorded on a GPU (:func:`recorded_grading`), :func:`learner_kernel_comparison`
shows the course kernel's recorded measurement, and exercise 12.2 (the kernel view alone) runs as everywhere.
:func:`triton_modules` gives the exercise cell triton, or stand-ins that let it define its kernel
(:mod:`flashsim.course.ch12.standin`).
"""
from __future__ import annotations

import inspect
import os
import re
import subprocess
import tempfile
import textwrap

import numpy as np

from flashsim.course import pick
from flashsim.course.kit.checker import (LearnerError, Suspect, Verdict, call_learner, check_cases,
                                         diagnose_attention, error_verdict, exercise, io_differs, io_rows,
                                         OUT_OF_BOUNDS, verdict)
from flashsim.course.ch12.standin import triton_modules
from flashsim.course.kit.optional import missing
from flashsim.course.kit.real_gpu import Comparison, recorded
from flashsim.course.kit.results import load_result, result_source
from flashsim.errors import FlashsimError
from flashsim.kernels import runtime
from flashsim.measure import bench, count_io
from flashsim.measure.ncu import ncu_profile_script
from flashsim.model.attention.online_softmax import LN2, LOG2E
from flashsim.model.attention.reference import reference_attention
from flashsim.model.kernel_io import kernel_dram, kernel_io
from flashsim.model.table import Table

__all__ = ["check_flash_kernel", "check_kernel_kv_bytes", "learner_kernel_comparison", "run_learner_kernel",
           "recorded_grading", "sdpa_speed", "triton_modules", "CH12_SPEED_SIZES", "CH12_CHECK_CASES"]

FLASH_KERNEL = exercise(
    "12.1", "the FlashAttention forward kernel",
    "inner(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D, qk_scale, CAUSAL) -> "
    "(m_i, l_i, acc): the @triton.jit body the template calls once per K/V tile. It loads the tile's K and V "
    "itself and updates the running state so that the template's acc / l_i is attention's output and its "
    "logsumexp is right, moving exactly the bytes of the kernel view, for ragged N, a padded head dim and causal.",
    ("Chapter 05's update, now in Triton: which tensors does one tile need, and which of its rows and columns do "
     "not exist?",
     "Load K and V with a mask (key rows < N, head columns < D); S = tl.dot(q, tl.trans(k)) · qk_scale is in log2 "
     "units, so use tl.math.exp2; mask keys past N (and, if CAUSAL, keys after the query) to -inf.",
     "Load K and V with masks, compute s = q·kᵀ·qk_scale with the masked scores at −inf, then chapter 05's "
     "update with exp2 in place of exp."),
    "check_flash_kernel")

KV_BYTES = exercise(
    "12.2", "the kernel's K and V bytes",
    "fn(n, d, block_m, block_n, causal, elem_bytes) -> int: the bytes of K plus V that one head's forward kernel "
    "(the chapter-12 template) loads.",
    ("How many programs run, and how far along the keys does each one go?",
     "One program per BLOCK_M rows; each loops over whole BLOCK_N tiles up to N (or, causal, up to the end of its "
     "own rows); a masked load counts only the rows below N.",
     "Loop over the programs and, inside, over the K/V tiles each one visits (causal: up to the end of its "
     "own rows); a tile counts min(BLOCK_N, N − start) rows, for K and for V."),
    "check_kernel_kv_bytes")

#: (n, d, heads, causal, block_m, block_n, score amplitude) cases the output and IO checks run
CH12_CHECK_CASES = (
    (80, 24, 2, False, 32, 32, 1.0),     # ragged N (80 = 2.5 blocks), head dim 24 padded to 32, two heads
    (64, 32, 1, True, 16, 32, 1.0),      # causal, BLOCK_M < BLOCK_N: a tile is partly masked
    (96, 16, 1, False, 32, 16, 40.0),    # large scores: e^s overflows fp32 without the running max
    (70, 16, 1, True, 32, 16, 1.0),      # causal and ragged
)
#: (n, d, batch, heads) of the speed check on a GPU
CH12_SPEED_SIZES = (4096, 64, 4, 16)
#: the size (n, d, heads, causal, block_m, block_n) Nsight Compute measures the learner's kernel at on a GPU
CH12_NCU_CASE = (1024, 64, 2, True, 64, 64)
#: K and V: the loads a correct body makes per tile
_VIEW_LOADS = 2


def _torch_dtype(name: str):
    import torch
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


def _inputs(b: int, h: int, n: int, d: int, dtype: str, device: str, seed: int, amplitude: float = 1.0):
    import torch
    g = torch.Generator(device="cpu").manual_seed(seed)
    q, k, v = (torch.randn(b, h, n, d, generator=g, dtype=torch.float32) for _ in range(3))
    q = q * amplitude
    return [x.to(device=device, dtype=_torch_dtype(dtype)) for x in (q, k, v)]


def _np(x) -> np.ndarray:
    return x.detach().double().cpu().numpy()


def run_learner_kernel(inner, q, k, v, causal: bool = False, block_m=None, block_n=None):
    """Launch the chapter-12 template with the learner's loop body: (o, lse) (see :mod:`flashsim.course.ch12.template`)."""
    from flashsim.course.ch12.template import flash_forward_template   # needs triton (optional dependency)
    return flash_forward_template(q, k, v, inner, causal=causal, block_m=block_m, block_n=block_n)


def _one_launch(per_tensor: dict) -> dict:
    """Merge {launch: {"loads", "stores"}} into one {"loads", "stores"} (the template is a single launch)."""
    out = {"loads": {}, "stores": {}}
    for launch in per_tensor.values():
        for kind in ("loads", "stores"):
            for t, b in launch[kind].items():
                out[kind][t] = out[kind].get(t, 0) + b
    return out


def _learner_source(inner) -> tuple[str, str, int]:
    """(source of the learner's def, its file, its first line)."""
    fn = getattr(inner, "fn", inner)
    try:
        lines, first = inspect.getsourcelines(fn)
        return "".join(lines), inspect.getsourcefile(fn) or "<your cell>", first
    except (OSError, TypeError):
        return getattr(inner, "src", ""), "<your cell>", 0


def _is_stub(inner) -> bool:
    """Whether the learner's body still raises NotImplementedError (the stub): a jit function cannot raise on a
    GPU, so the stub is recognised from its source, before anything is compiled or run."""
    src, _, _ = _learner_source(inner)
    return bool(re.search(r"\braise\s+NotImplementedError\b", "\n".join(ln.split("#")[0] for ln in src.splitlines())))


def _source_loads(inner) -> int:
    """How many ``tl.load`` calls the learner's source makes (comments ignored)."""
    src, _, _ = _learner_source(inner)
    return sum(len(re.findall(r"\btl\.load\s*\(", line.split("#")[0])) for line in src.splitlines())


def _compile_error_line(err: LearnerError, inner) -> int | None:
    """The file line of the learner's body that Triton's compiler (the GPU path) stopped at, or None.

    The compiler raises a CompilationError whose ``node.lineno`` counts from the ``def`` line of the function it
    was compiling (1 = the def); the chain holds one per function, the template's call and the learner's body."""
    src, _, first = _learner_source(inner)
    offsets = [k for k, ln in enumerate(src.splitlines()) if ln.lstrip().startswith("def ")]
    def_line = first + offsets[0] if offsets and first else None
    exc, seen = err.original, set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        lineno = getattr(getattr(exc, "node", None), "lineno", None)
        if lineno and def_line and getattr(exc, "src", None) == getattr(inner, "src", object()):
            return def_line + lineno - 1
        exc = exc.__cause__ or exc.__context__
    return None


def _locate(err: LearnerError, inner) -> LearnerError:
    """Where the traceback has no frame of the learner's kernel, find the learner's line: on a GPU the line
    Triton's compiler stopped at; in the interpreter the line that uses the name a NameError names."""
    if err.where:
        return err
    src, path, first = _learner_source(inner)
    line = _compile_error_line(err, inner)
    if line is not None and src and first <= line < first + len(src.splitlines()):
        err.where, err.line = f"{os.path.basename(path)}:{line}", src.splitlines()[line - first].strip()
        return err
    m = re.search(r"(?:name ')?\b(\w+)'? is not defined", err.plain)
    if m and src:
        for k, line in enumerate(src.splitlines()):
            if re.search(rf"\b{m.group(1)}\b", line.split("#")[0]):
                err.where, err.line = f"{os.path.basename(path)}:{first + k}", line.strip()
                break
    return err


def sdpa_speed(inner, n: int | None = None, d: int | None = None, batch: int | None = None,
               heads: int | None = None, causal: bool = False, dtype: str = "fp16") -> dict:
    """Median ms (do_bench) of the learner's kernel, the course's flash_forward and torch SDPA on a GPU, SDPA once
    per available backend (FlashAttention-2, cuDNN, memory-efficient), each named.

    Returns {"learner_ms", "flashsim_ms", "sdpa_ms", "sdpa_backend", "sdpa_backends_ms", "slowdown_vs_sdpa",
    "tflops", "size", "device"}; "sdpa_ms" is the fastest backend's; inner None (no passing kernel yet): learner_ms
    is None and the slowdown is the course kernel's. Raises FlashsimError without a GPU.
    """
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from flashsim.kernels import flash_forward   # the course kernel (needs triton)
    if runtime.interpreting():
        raise FlashsimError("sdpa_speed needs a CUDA GPU: the interpreter's wall time says nothing about GPU speed")
    n0, d0, b0, h0 = CH12_SPEED_SIZES
    n, d, batch, heads = n or n0, d or d0, batch or b0, heads or h0
    q, k, v = _inputs(batch, heads, n, d, dtype, "cuda", seed=12)
    flashsim_ms = bench(lambda: flash_forward(q, k, v, causal=causal))
    learner_ms = bench(lambda: run_learner_kernel(inner, q, k, v, causal)) if inner is not None else None
    backends = {}
    for name, be in (("FlashAttention-2 (SDPBackend.FLASH_ATTENTION)", SDPBackend.FLASH_ATTENTION),
                     ("cuDNN (SDPBackend.CUDNN_ATTENTION)", getattr(SDPBackend, "CUDNN_ATTENTION", None)),
                     ("memory-efficient (SDPBackend.EFFICIENT_ATTENTION)", SDPBackend.EFFICIENT_ATTENTION)):
        if be is None:
            continue
        try:
            with sdpa_kernel([be]):
                backends[name] = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
        except RuntimeError:   # this backend does not run this shape or dtype here
            continue
    best = min(backends, key=backends.get)
    sdpa_ms = backends[best]
    flops = 4 * batch * heads * n * n * d * (0.5 if causal else 1.0)
    return {"learner_ms": learner_ms, "flashsim_ms": flashsim_ms, "sdpa_ms": sdpa_ms, "sdpa_backend": best,
            "sdpa_backends_ms": backends,
            "slowdown_vs_sdpa": (learner_ms if learner_ms is not None else flashsim_ms) / sdpa_ms,
            "tflops": {k_: flops / (ms * 1e-3) / 1e12 for k_, ms in
                       (("learner", learner_ms), ("flashsim", flashsim_ms), ("sdpa", sdpa_ms)) if ms is not None},
            "size": {"n": n, "d": d, "batch": batch, "heads": heads, "causal": causal, "dtype": dtype},
            "device": torch.cuda.get_device_name(0)}


_NCU_CHILD = '''import sys
sys.path.insert(0, {root!r})
from flashsim.kernels.runtime import select_backend
select_backend(False)
import torch
import triton
import triton.language as tl
from flashsim.course.ch12.template import flash_forward_template
from flashsim.course.ch12.checks import _inputs

{source}

q, k, v = _inputs(1, {heads}, {n}, {d}, "fp16", "cuda", seed=5)
flash_forward_template(q, k, v, {name}, causal={causal}, block_m={bm}, block_n={bn})
torch.cuda.synchronize()
'''


def ncu_learner_io(inner, n: int, d: int, heads: int, causal: bool, block_m: int, block_n: int,
                   timeout: float = 300.0) -> dict:
    """Nsight Compute's global load/store bytes of one launch of the template with the learner's body (fp16).

    Writes the learner's kernel source to a temporary script, runs it under ``ncu``
    (:func:`flashsim.measure.ncu.ncu_profile_script`) and returns {"backend": "ncu", "global_load_bytes",
    "global_store_bytes", "launch": {...}}; raises FlashsimError when ncu is missing or may not read the counters.
    """
    src = textwrap.dedent(_learner_source(inner)[0])
    if not src.lstrip().startswith("@"):
        src = "@triton.jit\n" + src
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    name = getattr(getattr(inner, "fn", inner), "__name__", "inner")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "learner_kernel.py")
        with open(path, "w") as f:
            f.write(_NCU_CHILD.format(root=root, source=src, heads=heads, n=n, d=d, name=name, causal=bool(causal),
                                      bm=block_m, bn=block_n))
        launch = ncu_profile_script(path, "^_flash_template_kernel$", timeout=timeout)[-1]
    return {"backend": "ncu", "global_load_bytes": int(launch["global_load_bytes"]),
            "global_store_bytes": int(launch["global_store_bytes"]), "launch": launch}


def _grade_gpu_io(inner, extra_loads: int) -> tuple[bool | None, str, dict]:
    """(io_ok or None when not measurable, message, details) from Nsight Compute against the kernel view."""
    n, d, heads, causal, bm, bn = CH12_NCU_CASE
    view = kernel_io("flash_fwd", n, d, bm, bn, causal=causal, dtype="fp16", heads=heads)
    try:
        got = ncu_learner_io(inner, n, d, heads, causal, bm, bn)
    except (FlashsimError, OSError, subprocess.SubprocessError) as exc:
        return None, f"IO not graded: {exc}", {}
    # ncu counts what the L1 serves (32-byte sectors); for this aligned case they equal the element bytes
    det = {"gpu_load_bytes": got["global_load_bytes"], "gpu_store_bytes": got["global_store_bytes"],
           "view_load_bytes": view.l1_load_bytes, "view_store_bytes": view.l1_store_bytes}
    where = f"N={n}, d={d}, heads={heads}, causal={causal}, {bm}×{bn}, fp16"
    if (got["global_load_bytes"], got["global_store_bytes"]) == (view.l1_load_bytes, view.l1_store_bytes):
        msg = f"IO: Nsight Compute's global load/store bytes equal the kernel view exactly ({where})"
        if extra_loads > 0:
            msg = (f"Nsight Compute measured the kernel view's bytes here ({where}): this GPU's compiler merged the "
                   "repeated load of the same address (the interpreter, which runs the source as written, counts "
                   "it), but the source still asks for it, and another compiler or a store in between need not "
                   "merge it")
            det["merged_by_compiler"] = True
        return True, msg, det
    return False, (f"IO: Nsight Compute measured {got['global_load_bytes']:,} B loaded / "
                   f"{got['global_store_bytes']:,} B stored, the kernel view says {view.l1_load_bytes:,} / "
                   f"{view.l1_store_bytes:,} ({where})"), det


def _all_nan_under_large_scores(key: str, why: str, q: np.ndarray, k: np.ndarray, idx: int) -> tuple[str, str]:
    """One diagnosis on every device for a body that overflows: the earlier cases (small scores) passed, and here
    e^s overflows float32. The interpreter's float32 NaNs only the rows whose scores are large ("overflow"), a GPU's
    fp16 case with its fast exp2 may NaN every row ("all_non_finite"): both are the overflow."""
    if idx == 0:                                       # the first case failed: 0/0 or worse, not the scores
        return key, why
    s_max = float(np.abs(q @ np.swapaxes(k, -1, -2)).max() / np.sqrt(q.shape[-1]))
    if s_max * LOG2E <= 100:
        return key, why
    return "overflow", (f"O is NaN/inf everywhere under large scores (|s| up to {s_max:.0f}), though the earlier "
                        "cases, with small scores, passed: e^s overflows float32. What keeps every exponent ≤ 0?")


def _lse_diagnosis(lse, ref_lse) -> tuple[str, str]:
    if not np.isfinite(lse).all():
        return "lse_non_finite", "the logsumexp is NaN/inf: is m_i returned as the running max of the scores?"
    if np.allclose(lse, ref_lse / LN2, atol=1e-3):
        return "lse_units", "the logsumexp is in log2 units: m_i and l_i must be base 2 throughout (exp2)"
    return "lse_wrong", ("O is right but the logsumexp is not: return the new running max m_i (log2 units, the max "
                         "of s = q·kᵀ·qk_scale) with l_i = Σ exp2(s − m_i)")


def check_flash_kernel(inner, *, check_speed: bool | None = None, max_slowdown: float = 4.0, cases=None,
                       dtype: str | None = None, check_io: bool | None = None, quiet: bool = False) -> Verdict:
    """Exercise 12.1: grade the learner's ``@triton.jit`` inner-loop body on output, IO and speed (module docstring).

    check_speed / check_io: None = the defaults (speed on a GPU only; IO always: the interpreter's count on a CPU,
    Nsight Compute on a GPU). max_slowdown: the most times slower than SDPA's fastest backend that still passes.
    cases: (n, d, heads, causal, block_m, block_n, amplitude) tuples, default :data:`CH12_CHECK_CASES`.
    dtype: "fp32" in the interpreter (tolerance 2e-4), "fp16" on a GPU (tolerance 2e-2) by default.
    Without torch and triton: one line says so, and :func:`recorded_grading` shows what the checker said on a GPU.
    """
    if _is_stub(inner):
        return verdict(FLASH_KERNEL, False, "not attempted yet: replace the stub's raise NotImplementedError with "
                       "your loop body (exercises.hint('12.1') opens a hint)", diagnosis="not_implemented",
                       quiet=quiet)
    why = missing("kernels")
    if why:
        return recorded_grading(inner, why, quiet=quiet)
    from flashsim.course.ch12.template import INNER_SIGNATURE, is_jit_function   # needs triton
    if not is_jit_function(inner):
        return verdict(FLASH_KERNEL, False, f"expected a @triton.jit function with the signature {INNER_SIGNATURE}, "
                       f"got {type(inner).__name__}: put @triton.jit above your def", diagnosis="not_jit",
                       quiet=quiet)
    interp = runtime.interpreting()
    device = "cpu" if interp else "cuda"
    dtype = dtype or ("fp32" if interp else "fp16")
    tol = 2e-4 if dtype == "fp32" else 2e-2
    extra_loads = _source_loads(inner) - _VIEW_LOADS
    worst, worst_lse, table, io_fail, lse_fail = 0.0, 0.0, None, None, None
    for idx, (n, d, heads, causal, bm, bn, amp) in enumerate(cases or CH12_CHECK_CASES):
        where = f"N={n}, d={d}, heads={heads}, causal={causal}, BLOCK_M={bm}, BLOCK_N={bn}"
        q, k, v = _inputs(1, heads, n, d, dtype, device, seed=100 + idx, amplitude=amp)
        try:
            if interp:
                counted = call_learner(count_io, run_learner_kernel, inner, q, k, v, causal, bm, bn)
                o, lse = counted.result
            else:
                o, lse = call_learner(run_learner_kernel, inner, q, k, v, causal, bm, bn)
        except LearnerError as err:
            return error_verdict(FLASH_KERNEL, _locate(err, inner), where, quiet=quiet)
        qn, kn, vn = _np(q), _np(k), _np(v)
        key, why, ev = diagnose_attention(_np(o), qn, kn, vn, causal=causal, tol=tol, block_n=bn, block_m=bm)
        if key == "all_non_finite":
            key, why = _all_nan_under_large_scores(key, why, qn, kn, idx)
        if key != "passed":
            return verdict(FLASH_KERNEL, False, f"{why} ({where})", diagnosis=key, table=table, quiet=quiet, **ev)
        worst = max(worst, ev["max_error"])
        _, ref_lse = reference_attention(qn, kn, vn, causal, return_lse=True)
        lse_np = _np(lse)
        lse_err = float(np.abs(lse_np - ref_lse).max()) if np.isfinite(lse_np).all() else np.inf
        worst_lse = max(worst_lse, lse_err)
        if not lse_err < max(tol, 1e-3) * 10 and lse_fail is None:
            lse_fail = (*_lse_diagnosis(lse_np, ref_lse), where, lse_err)
        if interp and (check_io is None or check_io):
            measured = _one_launch(counted.per_tensor())
            simulated = _one_launch(kernel_io("flash_fwd", n, d, bm, bn, causal=causal, dtype=dtype,
                                              heads=heads).per_tensor())
            rows = io_rows(measured, simulated)
            table = rows
            differ = io_differs(rows)
            if differ and io_fail is None:
                io_fail = (differ, rows, where)
    if lse_fail is not None:
        key, why, where, err = lse_fail
        return verdict(FLASH_KERNEL, False, f"{why} (max error {err:.3g} at {where})", diagnosis=key, table=table,
                       max_error=worst, lse_error=err, quiet=quiet)
    if io_fail is not None:
        differ, rows, where = io_fail
        by = {r[0]: r for r in rows}
        extra = rows[-1][1] - rows[-1][3]
        if OUT_OF_BOUNDS in differ:
            key = "out_of_bounds_load"
            why = (f"{by[OUT_OF_BOUNDS][1]:,} B were loaded from addresses outside every tensor (an out-of-bounds load): "
                   "which rows of a tile lie past N, and does your load's mask leave them out?")
        else:
            key = "extra_loads" if extra > 0 else "missing_bytes"
            parts = ", ".join(f"{t} {by[t][1]:,} B read (view: {by[t][3]:,})" for t in differ if t != "total")
            why = f"the kernel moved {extra:+,} B against the kernel view ({parts})"
            if extra > 0 and extra_loads > 0:
                why += (f": your source makes {extra_loads} more tl.load per tile than one K and one V, and the "
                        "interpreter counts every load of the source. (A GPU compiler may merge a repeated load of "
                        "the same address, so Nsight Compute could show the view's bytes anyway; the source still "
                        "asks for them twice.)")
        return verdict(FLASH_KERNEL, False, f"the output is right, but the bytes differ (✘ rows, at {where}): {why}",
                       diagnosis=key, table=rows, max_error=worst, io_exact=False, quiet=quiet)
    details = {"max_error": worst, "lse_error": worst_lse}
    if interp:
        io_line = ("IO: the interpreter's count of every load and store equals the kernel view byte for byte"
                   if check_io is None or check_io else "IO not graded (check_io=False)")
        details["io_exact"] = True if check_io is None or check_io else None
    elif check_io is None or check_io:
        io_ok, io_line, io_det = _grade_gpu_io(inner, extra_loads)
        details.update(io_det, io_exact=io_ok)
        if extra_loads > 0:   # the same verdict as the interpreter's count, whatever the compiler merged
            details["io_exact"] = False
            return verdict(FLASH_KERNEL, False, f"the output is right, but your source makes {extra_loads} more "
                           "tl.load per tile than one K and one V, so it asks for those bytes again on every tile "
                           f"(the kernel view loads each once). {io_line}", diagnosis="extra_loads", quiet=quiet,
                           **details)
        if io_ok is False:
            return verdict(FLASH_KERNEL, False, f"the output is right, but {io_line}", diagnosis="gpu_extra_bytes",
                           quiet=quiet, **details)
    else:
        io_line = "IO not graded (check_io=False)"
        details["io_exact"] = None
    if check_speed is None:
        check_speed = not interp
    if check_speed:
        speed = sdpa_speed(inner, dtype="fp16")
        details["speed"] = speed
        line = (f"speed at N={speed['size']['n']}, d={speed['size']['d']}: yours {speed['learner_ms']:.3f} ms, the "
                f"course's flash_forward {speed['flashsim_ms']:.3f} ms, torch SDPA {speed['sdpa_ms']:.3f} ms with "
                f"the {speed['sdpa_backend']} backend ({speed['slowdown_vs_sdpa']:.2f}× SDPA)")
        if speed["slowdown_vs_sdpa"] > max_slowdown:
            return verdict(FLASH_KERNEL, False, f"correct, but {line}: more than {max_slowdown}× slower than SDPA",
                           diagnosis="too_slow", table=table, quiet=quiet, **details)
    else:
        line = "speed needs a CUDA GPU (the interpreter's time says nothing about a GPU): not graded here"
    n_cases = len(cases or CH12_CHECK_CASES)
    return verdict(FLASH_KERNEL, True, f"O and logsumexp match float64 attention on {n_cases} cases (max error "
                   f"{worst:.2e}); {io_line}; {line}", table=table, quiet=quiet, **details)


def _recorded_cell(run: dict) -> str:
    """One recorded verdict in a few words: ✔ passed (and why it passed where that is the point), or ✘ the
    diagnosis."""
    if not run["passed"]:
        return f"✘ {run['diagnosis']}"
    return "✔ passed" + (" (the compiler merged the repeated load)" if run["details"].get("merged_by_compiler")
                         else "")


def recorded_grading(inner=None, why: str | None = None, quiet: bool = False):
    """Exercise 12.1 where torch and triton are missing: one line (what is missing, that the learner's kernel is not
    graded here), then the checker's verdicts recorded on a GPU and in its interpreter for the course's solution
    and two wrong kernels, as a table. Returns a Verdict that did not pass (diagnosis "not_graded") whose details
    hold the record."""
    record = load_result("grade_final_h200")
    why = why or missing("kernels") or "the Triton kernels are installed here: run check_flash_kernel"
    name = getattr(getattr(inner, "fn", inner), "__name__", None) if inner is not None else None
    yours = f"your {name} was not graded here" if name else "nothing was graded here"
    line = (f"{why} 12.1 needs them: {yours}. The checker's verdicts recorded on an {record['device']} (torch "
            f"{record['torch']}, triton {record['triton']}; {result_source('grade_final_h200')}) and in its "
            "interpreter, for the course's solution and two wrong kernels:")
    rows = []
    for kernel, gpu in record["kernels"].items():
        speed = gpu["details"].get("speed") or {}
        ratio = speed.get("slowdown_vs_sdpa")
        rows.append([kernel, _recorded_cell(gpu), _recorded_cell(record["interpreter"][kernel]) if kernel in
                     record["interpreter"] else None, f"{ratio:.2f}× SDPA's time" if ratio else None])
    table = Table(["kernel", f"on the {record['device']} (ncu bytes, speed)", "in the interpreter (counted bytes)",
                   "speed"], rows)
    v = Verdict(FLASH_KERNEL.id, FLASH_KERNEL.title, False, line, "not_graded", table,
                {"recorded": record, "source": result_source("grade_final_h200")})
    if not quiet:
        print(line)
        print(table)
        v._shown = True
    return v


def learner_kernel_comparison(inner, *, n: int | None = None, d: int | None = None, block_m: int | None = None,
                              block_n: int | None = None, causal: bool = False, dtype: str | None = None,
                              quiet: bool = False):
    """"On the real GPU" for the learner's kernel (chapter 12): measured vs simulated IO as a real_gpu.Comparison.

    inner None: the course's own :func:`flashsim.kernels.flash_forward` (what the chapter runs until the learner's
    kernel passes), and the notice says so. Interpreter: bytes counted by :func:`flashsim.measure.count_io`. GPU: the kernel is timed (do_bench median),
    and the bytes it must move are the simulator's; the DRAM row is the L2 model's prediction. Without torch and
    triton: one line says so, then the course kernel's measurement recorded on a GPU
    (:func:`flashsim.course.kit.real_gpu.recorded`).
    """
    why = missing("kernels")
    if why:
        result = recorded("flash_fwd", n=n, d=d, block_m=block_m, block_n=block_n, causal=causal,
                          dtype=dtype or "fp16", notice=why)
        if not quiet:
            print(result.notice)
        return result
    from flashsim.kernels import default_blocks, flash_forward   # needs triton
    interp = runtime.interpreting()
    n = int(n or (128 if interp else pick(small=128, full=4096)))  # the interpreter is slow at GPU sizes
    d = int(d or pick(small=32, full=64))
    dtype = dtype or ("fp32" if interp else "fp16")
    bm, bn = default_blocks("flash_fwd", d)
    bm, bn = int(block_m or bm), int(block_n or bn)
    q, k, v = _inputs(1, 1, n, d, dtype, "cpu" if interp else "cuda", seed=7)
    sim = kernel_io("flash_fwd", n, d, bm, bn, causal=causal, dtype=dtype)
    cfg = {"n": n, "d": d, "block_m": bm, "block_n": bn, "causal": causal, "dtype": dtype}
    if inner is None:    # the learner's kernel has not passed yet: say that the course's kernel ran
        who, name = "The course's own flash_forward ran (your kernel has not passed the checker yet)", "course flash kernel"
        run = lambda: flash_forward(q, k, v, causal=causal, block_m=bm, block_n=bn)  # noqa: E731
    else:
        who, name = "Your kernel ran", "learner flash kernel"
        run = lambda: run_learner_kernel(inner, q, k, v, causal, bm, bn)  # noqa: E731
    if interp:
        counted = count_io(run)
        result = Comparison(name, cfg, "interpreter", counted.load_bytes, counted.store_bytes,
                            sim.load_bytes, sim.store_bytes,
                            notice=f"{who}, in the Triton interpreter (no CUDA GPU here) at a small size, and its "
                                   "loads and stores were counted byte by byte.",
                            raw={"measured": counted.per_tensor(), "simulated": sim.per_tensor()})
    else:
        ms = bench(run)
        dram = kernel_dram("flash_fwd", n, d, bm, bn, causal=causal, dtype=dtype)["total"]
        result = Comparison(name, cfg, "timing", None, None, sim.load_bytes, sim.store_bytes,
                            simulated_dram_bytes=int(dram.dram_bytes), time_s=ms * 1e-3,
                            notice=f"{who} on the GPU: {ms:.3f} ms (do_bench median); check_flash_kernel measures "
                                   "bytes with Nsight Compute, so here the simulator's bytes and the L2 model's DRAM "
                                   "bytes stand alone.",
                            raw={"simulated": sim.per_tensor(), "time_ms": ms})
    if not quiet:
        print(result.notice)
    return result


def _kv_bytes_ref(n, d, bm, bn, causal, es):
    dtype = {2: "fp16", 4: "fp32"}[es]
    per = kernel_io("flash_fwd", n, d, bm, bn, causal=causal, dtype=dtype).per_tensor()
    return sum(L["loads"].get("K", 0) + L["loads"].get("V", 0) for L in per.values())


def _kv_rows(n, bm, bn, causal, end, programs=None) -> int:
    """Key rows all programs load when program i loops over whole BLOCK_N tiles up to min(end(i), N) (causal) or
    N, each tile masked at N: a learner's hypothesis for 12.2's suspects."""
    rows = 0
    for i in range(-(-n // bm) if programs is None else programs):
        stop = min(end(i), n) if causal else n
        for start in range(0, stop, bn):
            rows += min(bn, n - start)
    return rows


def check_kernel_kv_bytes(fn, quiet: bool = False) -> Verdict:
    """Exercise 12.2: against :func:`flashsim.model.kernel_io.kernel_io` (which the interpreter's counts equal) on
    divisible and ragged N, causal and not, BLOCK_M smaller, equal and larger than BLOCK_N."""
    cases = [(256, 64, 64, 64, False, 2), (200, 64, 64, 32, False, 2), (256, 64, 64, 64, True, 2),
             (200, 32, 32, 64, True, 4), (130, 16, 16, 32, True, 2), (4096, 128, 128, 64, True, 2)]
    suspects = (Suspect("floor_not_ceil", lambda n, d, bm, bn, c, es: _kv_rows(
                    n, bm, bn, c, lambda i: (i + 1) * bm, programs=n // bm) * 2 * d * es,
                        "your count uses N // BLOCK_M programs: the ragged last row block is a program too"),
                Suspect("causal_ignored", lambda n, d, bm, bn, c, es: _kv_bytes_ref(n, d, bm, bn, False, es),
                        "your causal counts equal the non-causal ones: a causal program stops at its own last row"),
                Suspect("mask_ignored", lambda n, d, bm, bn, c, es: 2 * sum(
                    -(-(min((i + 1) * bm, n) if c else n) // bn) * bn for i in range(-(-n // bm))) * d * es,
                        "your count loads whole BLOCK_N tiles: the mask at N leaves out the rows past the end"),
                Suspect("square_blocks", lambda n, d, bm, bn, c, es: _kv_rows(n, bm, bn, c, lambda i: (i + 1) * bn)
                        * 2 * d * es,
                        "your causal program i visits i + 1 tiles, as if BLOCK_M = BLOCK_N: it visits key tiles up "
                        "to the end of its own rows, (i+1)·BLOCK_M"),
                Suspect("causal_stops_at_first_row", lambda n, d, bm, bn, c, es: _kv_rows(
                    n, bm, bn, c, lambda i: i * bm + 1) * 2 * d * es,
                        "your causal program stops at its first row: the keys up to its *last* row, (i+1)·BLOCK_M − "
                        "1, are visible to some row of the block"),
                Suspect("k_only", lambda n, d, bm, bn, c, es: _kv_bytes_ref(n, d, bm, bn, c, es) // 2,
                        "your bytes are K's alone: every tile loads V too"))
    return check_cases(KV_BYTES, fn, cases, _kv_bytes_ref, header=("N, d, BLOCK_M, BLOCK_N, causal, b",
                                                                   "kernel view B", "your B"),
                       suspects=suspects, quiet=quiet)
