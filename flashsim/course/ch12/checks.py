"""Chapter 12, the final exercise: the learner's FlashAttention forward kernel in Triton, graded three ways.

:func:`check_flash_kernel` takes the learner's ``@triton.jit`` inner-loop body (see
:mod:`flashsim.course.ch12.template` for its signature and what the template around it does) and grades:

1. **output**: O and the logsumexp against float64 attention, on ragged N (not a multiple of the block), a padded
   head dim, causal and non-causal, and large scores (a missing max subtraction overflows);
2. **IO** (Triton interpreter, i.e. without a GPU): the bytes the kernel loads and stores, measured by
   :func:`flashsim.measure.count_io`, must equal the simulator's kernel view
   :func:`flashsim.model.kernel_io.kernel_io` byte for byte, tensor by tensor (loading a tile twice, or a K/V tile that
   the causal mask does not need, shows up here);
3. **speed** (CUDA GPU only): the median time (``triton.testing.do_bench`` via :func:`flashsim.measure.bench`) of
   the learner's kernel against PyTorch's ``scaled_dot_product_attention`` at a realistic size, and against the
   course's own :func:`flashsim.kernels.flash_forward`. Slower than ``max_slowdown`` × SDPA fails.

It prints a verdict and a read/write table and returns a :class:`~flashsim.course.ch05.checks.Verdict` (truthy when
passed). :func:`learner_kernel_comparison` is the chapter's "On the real GPU" section for the learner's kernel:
a :class:`flashsim.course.kit.real_gpu.Comparison` (``.table()``, ``.plot()``).
"""
from __future__ import annotations

import math

import numpy as np

from flashsim.course.ch05.checks import finish

__all__ = ["check_flash_kernel", "check_kernel_kv_bytes", "learner_kernel_comparison", "run_learner_kernel", "sdpa_speed",
           "CH12_SPEED_SIZES", "CH12_CHECK_CASES"]

#: (n, d, heads, causal, block_m, block_n, score amplitude) cases the output and IO checks run in the interpreter
CH12_CHECK_CASES = (
    (80, 24, 2, False, 32, 32, 1.0),     # ragged N (80 = 2.5 blocks), head dim 24 padded to 32, two heads
    (64, 32, 1, True, 16, 32, 1.0),      # causal, BLOCK_M < BLOCK_N: a tile is partly masked
    (96, 16, 1, False, 32, 16, 12.0),    # large scores: e^s overflows fp32 without the running max
    (70, 16, 1, True, 32, 16, 1.0),      # causal and ragged
)
#: (n, d, batch, heads) of the speed check on a GPU
CH12_SPEED_SIZES = (4096, 64, 4, 16)


def _torch_dtype(name: str):
    import torch
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


def _inputs(b: int, h: int, n: int, d: int, dtype: str, device: str, seed: int, amplitude: float = 1.0):
    import torch
    g = torch.Generator(device="cpu").manual_seed(seed)
    q, k, v = (torch.randn(b, h, n, d, generator=g, dtype=torch.float32) for _ in range(3))
    q = q * amplitude
    return [x.to(device=device, dtype=_torch_dtype(dtype)) for x in (q, k, v)]


def _reference(q, k, v, causal: bool):
    """float64 attention and logsumexp, (B, H, N, d) and (B, H, N), on the CPU."""
    q, k, v = (np.asarray(x.detach().float().cpu().numpy(), np.float64) for x in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(-1, keepdims=True)
    return (p / l) @ v, (m + np.log(l))[..., 0]


def run_learner_kernel(inner, q, k, v, causal: bool = False, block_m=None, block_n=None):
    """Launch the chapter-12 template with the learner's loop body: (o, lse) (see :mod:`flashsim.course.ch12.template`)."""
    from flashsim.course.ch12.template import flash_forward_template
    return flash_forward_template(q, k, v, inner, causal=causal, block_m=block_m, block_n=block_n)


def _io_rows(measured, simulated) -> list:
    """rw_table-style rows (tensor, measured read, measured write, simulated read, simulated write)."""
    names = sorted(set(measured["loads"]) | set(measured["stores"]) | set(simulated["loads"]) |
                   set(simulated["stores"]))
    rows = [(n, measured["loads"].get(n, 0), measured["stores"].get(n, 0), simulated["loads"].get(n, 0),
             simulated["stores"].get(n, 0)) for n in names]
    rows.append(("total", sum(r[1] for r in rows), sum(r[2] for r in rows), sum(r[3] for r in rows),
                 sum(r[4] for r in rows)))
    return rows


def _one_launch(per_tensor: dict) -> dict:
    """Merge {launch: {"loads", "stores"}} into one {"loads", "stores"} (the template is a single launch)."""
    out = {"loads": {}, "stores": {}}
    for launch in per_tensor.values():
        for kind in ("loads", "stores"):
            for t, b in launch[kind].items():
                out[kind][t] = out[kind].get(t, 0) + b
    return out


def _interpreting() -> bool:
    from flashsim import kernels
    return bool(kernels.INTERPRETER)


def sdpa_speed(inner, n: int | None = None, d: int | None = None, batch: int | None = None,
               heads: int | None = None, causal: bool = False, dtype: str = "fp16") -> dict:
    """Median ms of the learner's kernel, the course's flash_forward and torch SDPA on a GPU (do_bench medians).

    Returns {"learner_ms", "flashsim_ms", "sdpa_ms", "slowdown_vs_sdpa", "tflops": {...}, "size": {...}}.
    Raises FlashsimError without a GPU (the interpreter's wall time says nothing about a GPU).
    """
    import torch
    import torch.nn.functional as F

    from flashsim.errors import FlashsimError
    from flashsim.kernels import flash_forward
    from flashsim.measure import bench
    if _interpreting():
        raise FlashsimError("sdpa_speed needs a CUDA GPU: the interpreter's wall time says nothing about GPU speed")
    n0, d0, b0, h0 = CH12_SPEED_SIZES
    n, d, batch, heads = n or n0, d or d0, batch or b0, heads or h0
    q, k, v = _inputs(batch, heads, n, d, dtype, "cuda", seed=12)
    learner_ms = bench(lambda: run_learner_kernel(inner, q, k, v, causal))
    flashsim_ms = bench(lambda: flash_forward(q, k, v, causal=causal))
    sdpa_ms = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    flops = 4 * batch * heads * n * n * d * (0.5 if causal else 1.0)
    return {"learner_ms": learner_ms, "flashsim_ms": flashsim_ms, "sdpa_ms": sdpa_ms,
            "slowdown_vs_sdpa": learner_ms / sdpa_ms,
            "tflops": {k_: flops / (ms * 1e-3) / 1e12 for k_, ms in
                       (("learner", learner_ms), ("flashsim", flashsim_ms), ("sdpa", sdpa_ms))},
            "size": {"n": n, "d": d, "batch": batch, "heads": heads, "causal": causal, "dtype": dtype},
            "device": torch.cuda.get_device_name(0)}


def check_flash_kernel(inner, *, check_speed: bool | None = None, max_slowdown: float = 4.0,
                       cases=None, dtype: str | None = None):
    """Exercise 12: grade the learner's ``@triton.jit`` FlashAttention inner-loop body (see the module docstring).

    check_speed: None = on a GPU only; max_slowdown: the most times slower than torch SDPA that still passes.
    cases: (n, d, heads, causal, block_m, block_n, amplitude) tuples, default :data:`CH12_CHECK_CASES`.
    dtype: "fp32" in the interpreter (tight tolerance, 2e-4), "fp16" on a GPU (tolerance 2e-2) by default.
    """
    from flashsim.model.kernel_io import kernel_io
    from flashsim.course.ch12.template import INNER_SIGNATURE, is_jit_function

    name = "flash_kernel"
    if not is_jit_function(inner):
        return finish(name, False, f"expected a @triton.jit function with the signature {INNER_SIGNATURE}, got "
                      f"{type(inner).__name__}: put @triton.jit above your def")
    interp = _interpreting()
    device = "cpu" if interp else "cuda"
    dtype = dtype or ("fp32" if interp else "fp16")
    tol = 2e-4 if dtype == "fp32" else 2e-2
    worst, worst_lse, table = 0.0, 0.0, []
    io_exact = None
    for idx, (n, d, heads, causal, bm, bn, amp) in enumerate(cases or CH12_CHECK_CASES):
        where = f"N={n}, d={d}, heads={heads}, causal={causal}, BLOCK_M={bm}, BLOCK_N={bn}"
        q, k, v = _inputs(1, heads, n, d, dtype, device, seed=100 + idx, amplitude=amp)
        try:
            with np.errstate(all="ignore"):   # a stub's 0/0 is reported below, not warned about
                if interp:
                    from flashsim.measure import count_io
                    counted = count_io(run_learner_kernel, inner, q, k, v, causal, bm, bn)
                    o, lse = counted.result
                else:
                    o, lse = run_learner_kernel(inner, q, k, v, causal, bm, bn)
        except Exception as exc:  # noqa: BLE001 - a learner's bug is reported, not raised
            msg = str(exc).strip().splitlines()
            return finish(name, False, f"your kernel raised {type(exc).__name__} at {where}: "
                          f"{msg[-1] if msg else exc!r} (signature: {INNER_SIGNATURE})")
        ref_o, ref_lse = _reference(q, k, v, causal)
        o_np = o.detach().float().cpu().numpy().astype(np.float64)
        lse_np = lse.detach().float().cpu().numpy().astype(np.float64)
        if not np.isfinite(o_np).all():
            bad = int((~np.isfinite(o_np)).sum())
            return finish(name, False, f"{bad} output elements are NaN/inf at {where}: l_i stayed 0 (did the body "
                          "add Σ p to l_i?) or exp overflowed (subtract the running max m_new before exp2)",
                          max_error=math.inf)
        err = float(np.abs(o_np - ref_o).max())
        lse_err = float(np.abs(lse_np - ref_lse).max())
        worst, worst_lse = max(worst, err), max(worst_lse, lse_err)
        if not err < tol:
            hint = ("missing rescale? when the running max grows, acc and l_i must both be multiplied by alpha = "
                    "exp2(m_i - m_new)"
                    if not causal else "keys after the query (offs_m[:, None] < cols[None, :]) must score -inf, "
                    "and so must keys past N; and rescale acc and l_i by exp2(m_i - m_new)")
            return finish(name, False, f"max |O - exact| = {err:.3g} at {where} (tolerance {tol:g}): {hint}",
                          max_error=err)
        if not lse_err < max(tol, 1e-3) * 10:
            return finish(name, False, f"O is right but the logsumexp is off by {lse_err:.3g} at {where}: keep m_i "
                          "in log2 units (the max of s = q·kᵀ·qk_scale) and l_i = Σ exp2(s - m_i)",
                          max_error=err, lse_error=lse_err)
        if interp:
            measured = _one_launch(counted.per_tensor())
            simulated = kernel_io("flash_fwd", n, d, bm, bn, causal=causal, dtype=dtype, heads=heads).per_tensor()
            table = _io_rows(measured, _one_launch(simulated))
            io_exact = all(r[1] == r[3] and r[2] == r[4] for r in table)
            if not io_exact:
                extra = table[-1][1] - table[-1][3]
                return finish(name, False, f"the output is right, but the kernel moved {extra:+,} bytes more than "
                              f"the simulator's kernel view at {where} (rows marked <--): load each K and V "
                              "tile exactly once per tile, with the mask cols < N and offs_d < D",
                              table, max_error=err, io_exact=False)
    speed = None
    if check_speed is None:
        check_speed = not interp
    if check_speed:
        speed = sdpa_speed(inner, dtype="fp16")
        line = (f"speed at N={speed['size']['n']}, d={speed['size']['d']}: yours {speed['learner_ms']:.3f} ms, "
                f"flashsim.kernels.flash_forward {speed['flashsim_ms']:.3f} ms, torch SDPA {speed['sdpa_ms']:.3f} ms "
                f"({speed['slowdown_vs_sdpa']:.2f}x SDPA)")
        if speed["slowdown_vs_sdpa"] > max_slowdown:
            return finish(name, False, f"correct, but {line}: more than {max_slowdown}x slower than SDPA",
                          table, max_error=worst, speed=speed, io_exact=io_exact)
    else:
        line = "speed not graded (no CUDA GPU: the interpreter's time says nothing about a GPU)"
    io_line = ("IO equals the simulator's kernel view byte for byte" if io_exact else
               "IO not measured (count_io needs the interpreter; on a GPU the timing is graded instead)")
    return finish(name, True, f"O and logsumexp match float64 attention on {len(cases or CH12_CHECK_CASES)} cases "
                  f"(max error {worst:.2e}); {io_line}; {line}", table, max_error=worst, lse_error=worst_lse,
                  io_exact=io_exact, speed=speed)


def learner_kernel_comparison(inner, *, n: int | None = None, d: int | None = None, block_m: int | None = None,
                              block_n: int | None = None, causal: bool = False, dtype: str | None = None,
                              quiet: bool = False):
    """"On the real GPU" for the learner's kernel (chapter 12): measured vs simulated IO as a real_gpu.Comparison.

    Interpreter: bytes counted by :func:`flashsim.measure.count_io`. GPU: the kernel is timed (do_bench median),
    and the bytes it must move are the simulator's; the DRAM row is the L2 model's prediction.
    """
    from flashsim.course import pick
    from flashsim.model.kernel_io import kernel_dram, kernel_io
    from flashsim.kernels import default_blocks
    from flashsim.measure import bench
    from flashsim.course.kit.real_gpu import Comparison

    interp = _interpreting()
    n = int(n or (128 if interp else pick(small=128, full=4096)))  # the interpreter is slow at GPU sizes
    d = int(d or pick(small=32, full=64))
    dtype = dtype or ("fp32" if interp else "fp16")
    bm, bn = default_blocks("flash_fwd", d)
    bm, bn = int(block_m or bm), int(block_n or bn)
    q, k, v = _inputs(1, 1, n, d, dtype, "cpu" if interp else "cuda", seed=7)
    sim = kernel_io("flash_fwd", n, d, bm, bn, causal=causal, dtype=dtype)
    cfg = {"n": n, "d": d, "block_m": bm, "block_n": bn, "causal": causal, "dtype": dtype}
    if interp:
        from flashsim.measure import count_io
        counted = count_io(run_learner_kernel, inner, q, k, v, causal, bm, bn)
        result = Comparison("learner flash kernel", cfg, "interpreter", counted.load_bytes, counted.store_bytes,
                            sim.load_bytes, sim.store_bytes,
                            notice="No CUDA GPU here: your kernel ran in the Triton interpreter at a small size, "
                                   "and its loads and stores were counted byte by byte.",
                            raw={"measured": counted.per_tensor(), "simulated": sim.per_tensor()})
    else:
        ms = bench(lambda: run_learner_kernel(inner, q, k, v, causal, bm, bn))
        dram = kernel_dram("flash_fwd", n, d, bm, bn, causal=causal, dtype=dtype)["total"]
        result = Comparison("learner flash kernel", cfg, "timing", None, None, sim.load_bytes, sim.store_bytes,
                            simulated_dram_bytes=int(dram.dram_bytes), time_s=ms * 1e-3,
                            notice=f"GPU: your kernel took {ms:.3f} ms (do_bench median); count_io needs the "
                                   "interpreter, so the measured byte columns are empty and the simulator's bytes "
                                   "and the L2 model's DRAM bytes stand alone.",
                            raw={"simulated": sim.per_tensor(), "time_ms": ms})
    if not quiet:
        print(result.notice)
    return result


def check_kernel_kv_bytes(fn):
    """Exercise 12.2: ``fn(n, d, block_m, block_n, causal, elem_bytes) -> int``, the K + V bytes the kernel loads.

    Compared with :func:`flashsim.model.kernel_io.kernel_io` (which the interpreter's counts equal) on divisible and
    ragged N, causal and not, BLOCK_M smaller, equal and larger than BLOCK_N.
    """
    from flashsim.model.kernel_io import kernel_io
    name = "kernel_kv_bytes"
    rows = []
    for n, d, bm, bn, causal, es in ((256, 64, 64, 64, False, 2), (200, 64, 64, 32, False, 2),
                                     (256, 64, 64, 64, True, 2), (200, 32, 32, 64, True, 4),
                                     (130, 16, 16, 32, True, 2), (4096, 128, 128, 64, True, 2)):
        dtype = {2: "fp16", 4: "fp32"}[es]
        want_t = kernel_io("flash_fwd", n, d, bm, bn, causal=causal, dtype=dtype).per_tensor()
        want = sum(L["loads"].get("K", 0) + L["loads"].get("V", 0) for L in want_t.values())
        try:
            got = int(fn(n, d, bm, bn, causal, es))
        except Exception as exc:  # noqa: BLE001 - a learner's bug is reported, not raised
            return finish(name, False, f"raised {type(exc).__name__}: {exc} (n={n}, d={d}, BLOCK_M={bm}, "
                          f"BLOCK_N={bn}, causal={causal})")
        rows.append((f"N={n} {bm}×{bn}{' causal' if causal else ''}", got, 0, want, 0))
        if got != want:
            if causal:
                hint = "causal: program i stops at min((i+1)*BLOCK_M, N), rounded up to whole BLOCK_N tiles"
            elif n % bm or n % bn:
                hint = "ragged N: ceil(N / BLOCK_M) programs, and the last K/V tile is masked at N"
            else:
                hint = "each of the ceil(N / BLOCK_M) programs loads all N rows of K and of V"
            return finish(name, False, f"got {got:,} B, the kernel view says {want:,} B at n={n}, d={d}, "
                          f"BLOCK_M={bm}, BLOCK_N={bn}, causal={causal}: {hint}", rows)
    return finish(name, True, f"K + V bytes match the kernel view on {len(rows)} cases", rows)
