"""The public API: ``flashsim.traffic`` (count mode + roofline) and ``flashsim.simulate`` (step mode + error).

These two functions are what the notebooks, the widgets, the CLI and the kernel comparison call (chapters 02, 05
and 09). Both take the same arguments::

    traffic(algo, n, d, block_r=None, block_c=None, heads=1, dtype="fp16", causal=False, backward=False,
            device="h200", sram_bytes=None, *, stats_dtype=None, dropout_p=0.0, l2=False, eager_ops=None)

``algo`` is "naive" (Algorithm 0), "eager" (the op-by-op framework model, ``eager_ops`` says which ops are
separate kernels), "flash1" or "flash2". Every argument is validated by :func:`flashsim.model.problem.make_problem`
first, so bad input gets one clear :class:`~flashsim.errors.FlashsimError` naming the fix.

:func:`traffic` runs *count mode*: bytes and FLOPs without numbers, fast enough for a slider (flash2 at
N = 65536 in about a millisecond, see ``benchmarks/sim_speed.py``), plus the roofline time
(:mod:`flashsim.model.roofline`). With ``l2=True`` it also runs the L2 model (:mod:`flashsim.model.l2`) and reports
the bytes that reach DRAM.

:func:`simulate` runs *step mode* on random inputs (normal, so the scaled scores τ·QKᵀ are O(1)): real numbers
through the simulated memory, every stored tensor rounded to its dtype, every tile computed in fp32. It returns the
output, the counters (equal to :func:`traffic`'s), and the error against a float64 reference next to the error of a
plain implementation of the same formula in the same dtype. **The simulation is exact in real arithmetic, not
bitwise**: tiling and the online softmax reorder the floating-point sums, so the result differs from a float64
computation by rounding error only; in fp32 that is below 1e-6 relative, in fp16/bf16 at most twice the error of
the plain implementation (``ok``, see :func:`tolerance`). Both yardsticks are
:mod:`flashsim.model.attention.reference`'s; the L2 replay is :mod:`flashsim.model.attention.l2_traces`'.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np

from flashsim.errors import FlashsimError
from flashsim.model.attention.flash import count_flash, resolve_blocks, run_flash, step_host_bytes
from flashsim.model.attention.l2_traces import dram_bytes
from flashsim.model.attention.reference import DEFAULT_CHUNK_BYTES, plain_attention, reference_forward_backward
from flashsim.model.attention.standard import count_standard, resolve_eager_ops, run_standard, standard_host_bytes
from flashsim.model.dtypes import round_to
from flashsim.model.memory import DEFAULT_HOST_BUDGET_BYTES, Counters, Memory, check_host_budget
from flashsim.model.problem import Problem, make_problem
from flashsim.model.roofline import roofline

__all__ = ["Traffic", "Simulation", "traffic", "simulate", "tolerance"]

#: relative error simulate(..., dtype="fp32") must stay under
FP32_REL_TOLERANCE = 1e-6


# --- results -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Traffic:
    """Bytes, FLOPs and roofline time of one attention problem (all heads). Field names = ``--json`` keys.

    hbm_*_bytes: requested bytes between HBM and SRAM (no L2). dram_*_bytes: what reaches DRAM through the L2
    model (l2=True; else None). init_write_bytes: memsets outside the loops (flash1's O, l, m; dQ before a
    backward), not in hbm_write_bytes. forward_part/backward_part: the passes separately when backward=True.
    """

    algo: str
    n: int
    d: int
    heads: int
    dtype: str
    stats_dtype: str
    causal: bool
    backward: bool
    dropout_p: float
    device: str
    sram_bytes: int
    block_r: int
    block_c: int
    eager_ops: str | None
    hbm_read_bytes: int
    hbm_write_bytes: int
    hbm_bytes: int
    flops: int
    sram_peak_bytes: int
    reuse_bytes: int
    init_write_bytes: int
    read_bytes_by_tensor: dict
    write_bytes_by_tensor: dict
    time_s: float
    memory_time_s: float
    compute_time_s: float
    arithmetic_intensity: float
    ridge_point_flops_per_byte: float
    bound: str
    forward_part: dict | None = None
    backward_part: dict | None = None
    l2: bool = False
    dram_read_bytes: int | None = None
    dram_write_bytes: int | None = None
    dram_bytes: int | None = None

    def as_dict(self) -> dict:
        """JSON-ready dict (the ``flashsim traffic --json`` object)."""
        return json.loads(json.dumps(asdict(self)))


@dataclass
class Simulation:
    """Step-mode result: numbers, counters and the error against float64.

    out: (heads, N, d) float32 as stored in HBM; grads: (dq, dk, dv) when backward; memory: head 0's Memory with
    its Event log (``sim.memory.events[i]`` is step i). rel_error = max|x − ref| / max|ref| over the output (and
    the gradients); plain_rel_error the same for a plain implementation in the same dtype. ok: rel_error ≤
    tolerance (max(1e-6, 2 × plain_rel_error), per output: 1e-6 in fp32 for any well-conditioned output).
    """

    traffic: Traffic
    counters: Counters
    out: np.ndarray
    grads: tuple | None
    lse: np.ndarray | None
    memory: Memory
    max_abs_error: float
    rel_error: float
    plain_max_abs_error: float
    plain_rel_error: float
    tolerance: float
    ok: bool
    seed: int
    errors_by_output: dict = field(default_factory=dict)  # "out"/"dq"/"dk"/"dv" -> {"rel_error", "plain_rel_error"}
    note: str = ""

    @property
    def events(self) -> list:
        return self.memory.events

    def as_dict(self) -> dict:
        """JSON-ready dict (``flashsim simulate --json``): the traffic fields plus the error fields."""
        out = self.traffic.as_dict()
        for f in ("max_abs_error", "rel_error", "plain_max_abs_error", "plain_rel_error", "tolerance", "ok",
                  "seed", "errors_by_output", "note"):
            out[f] = getattr(self, f)
        out["n_events"] = len(self.memory.events)
        return json.loads(json.dumps(out))


# --- count mode ----------------------------------------------------------------------------------------------

def _problem(algo, n, d, block_r, block_c, heads, dtype, causal, backward, device, sram_bytes, stats_dtype,
             dropout_p) -> Problem:
    return make_problem(algo, n, d, block_r=block_r, block_c=block_c, heads=heads, dtype=dtype, causal=causal,
                        backward=backward, device=device, sram_bytes=sram_bytes, stats_dtype=stats_dtype,
                        dropout_p=dropout_p)


def _count(problem: Problem, eager_ops=None):
    """Count-mode result of any algo: an object with counters, forward, backward, block_r, block_c,
    init_write_bytes."""
    if problem.algo in ("naive", "eager"):
        return count_standard(problem, eager_ops)
    return count_flash(problem)


def _part(c: Counters | None, problem: Problem) -> dict | None:
    if c is None:
        return None
    rl = roofline(c.flops, c.hbm_bytes, problem.hardware, problem.dtype)
    return {**c.as_dict(), "hbm_bytes": c.hbm_bytes, "time_s": rl.time_s, "arithmetic_intensity":
            rl.arithmetic_intensity, "bound": rl.bound}


def _traffic_from(problem: Problem, res, eager_ops_name: str | None, l2=None) -> Traffic:
    c = res.counters
    dram_r = dram_w = None
    if l2 is not None:
        dram_r, dram_w = l2.dram_read_bytes, l2.dram_write_bytes
    moved = c.hbm_bytes if l2 is None else dram_r + dram_w
    rl = roofline(c.flops, moved, problem.hardware, problem.dtype)
    return Traffic(
        algo=problem.algo, n=problem.n, d=problem.d, heads=problem.heads, dtype=problem.dtype,
        stats_dtype=problem.stats_dtype, causal=problem.causal, backward=problem.backward,
        dropout_p=problem.dropout_p, device=problem.hardware.name, sram_bytes=problem.sram_bytes,
        block_r=int(res.block_r), block_c=int(res.block_c), eager_ops=eager_ops_name,
        hbm_read_bytes=int(c.hbm_read_bytes), hbm_write_bytes=int(c.hbm_write_bytes), hbm_bytes=int(c.hbm_bytes),
        flops=int(c.flops), sram_peak_bytes=int(c.sram_peak_bytes), reuse_bytes=int(c.reuse_bytes),
        init_write_bytes=int(res.init_write_bytes),
        read_bytes_by_tensor={k: int(v) for k, v in sorted(c.read_bytes_by_tensor.items()) if v},
        write_bytes_by_tensor={k: int(v) for k, v in sorted(c.write_bytes_by_tensor.items()) if v},
        time_s=rl.time_s, memory_time_s=rl.memory_time_s, compute_time_s=rl.compute_time_s,
        arithmetic_intensity=rl.arithmetic_intensity, ridge_point_flops_per_byte=rl.ridge_point_flops_per_byte,
        bound=rl.bound,
        forward_part=_part(res.forward, problem) if problem.backward else None,
        backward_part=_part(res.backward, problem) if problem.backward else None,
        l2=l2 is not None, dram_read_bytes=dram_r, dram_write_bytes=dram_w,
        dram_bytes=None if l2 is None else dram_r + dram_w)


def _eager_name(problem: Problem, eager_ops) -> str | None:
    if problem.algo == "naive":
        return None
    if problem.algo != "eager":
        if eager_ops is not None:
            raise FlashsimError(f"eager_ops only applies to algo='eager', not {problem.algo!r}: drop it")
        return None
    return resolve_eager_ops(eager_ops).name


def traffic(algo, n, d, block_r=None, block_c=None, heads=1, dtype="fp16", causal=False, backward=False,
            device="h200", sram_bytes=None, *, stats_dtype=None, dropout_p=0.0, l2=False,
            eager_ops=None) -> Traffic:
    """Count mode: HBM bytes, FLOPs, peak SRAM and roofline time of attention, without numbers.

    >>> t = traffic("naive", n=1024, d=64)
    >>> t.hbm_read_bytes == (3 * 1024 * 64 + 2 * 1024**2) * 2, t.bound
    (True, 'memory')
    """
    problem = _problem(algo, n, d, block_r, block_c, heads, dtype, causal, backward, device, sram_bytes,
                       stats_dtype, dropout_p)
    name = _eager_name(problem, eager_ops)
    res = _count(problem, eager_ops)
    l2_result = None
    if l2:
        l2_result = dram_bytes(problem, res)
    return _traffic_from(problem, res, name, l2_result)


# --- step mode -----------------------------------------------------------------------------------------------

def tolerance(dtype: str, plain_rel_error: float) -> float:
    """The relative error simulate --check accepts for one output: twice the plain same-dtype implementation's,
    and never less than 1e-6.

    In fp32 the plain error is ~1e-7, so this is the 1e-6 the course promises; only an ill-conditioned output
    (a gradient that is a small difference of large terms, e.g. N = 2, d = 1) gets the plain fp32 error's slack.
    In fp16/bf16 it is "at most twice the error of a plain fp16 implementation of the same formula".
    """
    return max(2.0 * plain_rel_error, FP32_REL_TOLERANCE)


def _rel(x: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(max abs error, max abs error / max |ref|); non-finite where ref is finite counts as infinite error."""
    with np.errstate(all="ignore"):
        diff = np.abs(np.asarray(x, np.float64) - ref)
    diff = np.where(np.isfinite(ref), diff, 0.0)
    diff = np.where(np.isnan(diff), np.inf, diff)
    err = float(diff.max()) if diff.size else 0.0
    scale = float(np.abs(ref[np.isfinite(ref)]).max()) if np.isfinite(ref).any() else 1.0
    return err, err / scale if scale > 0 else err


def simulate(algo, n, d, block_r=None, block_c=None, heads=1, dtype="fp16", causal=False, backward=False,
             device="h200", sram_bytes=None, *, stats_dtype=None, dropout_p=0.0, l2=False, eager_ops=None,
             seed=0, inputs=None, record_events=True, memory: Memory | None = None,
             host_budget_bytes: int = DEFAULT_HOST_BUDGET_BYTES) -> Simulation:
    """Step mode on random inputs: the numbers, the counters, and the error against a float64 reference.

    inputs: optional (q, k, v) or (q, k, v, do) arrays (heads, N, d) instead of the seeded normal ones (e.g.
    extreme scores). memory: head 0's Memory (an on_event callback for a live view). Sizes whose host memory
    would exceed `host_budget_bytes` raise MemoryBudgetError (use :func:`traffic` there: it needs no numbers).

    Exact in real arithmetic, not bitwise: see the module docstring.
    """
    problem = _problem(algo, n, d, block_r, block_c, heads, dtype, causal, backward, device, sram_bytes,
                       stats_dtype, dropout_p)
    name = _eager_name(problem, eager_ops)
    _check_step_budget(problem, eager_ops, record_events, host_budget_bytes)
    rng = np.random.default_rng(seed)
    shape = (problem.heads, problem.n, problem.d)
    if inputs is None:
        arrays = [rng.standard_normal(shape, dtype=np.float32) for _ in range(4 if problem.backward else 3)]
    else:
        arrays = [np.asarray(a, np.float32).reshape(shape) if np.size(a) == np.prod(shape) else _bad_shape(a, shape)
                  for a in inputs]
        if problem.backward and len(arrays) < 4:
            arrays.append(rng.standard_normal(shape, dtype=np.float32))
    q, k, v = arrays[:3]
    do = arrays[3] if problem.backward else None
    keep, note = None, ""
    if problem.algo in ("naive", "eager"):
        if problem.dropout_p:
            keep = rng.random((problem.heads, problem.n, problem.n)) >= problem.dropout_p
        run = run_standard(problem, q, k, v, do, eager_ops=eager_ops, keep=keep, memory=memory,
                           record_events=record_events, host_budget_bytes=host_budget_bytes)
    else:
        if problem.dropout_p:
            note = "flash step mode runs without dropout (regenerated on chip, no HBM bytes): compared without it"
        run = run_flash(problem, q, k, v, do, memory=memory, record_events=record_events)
    l2_result = None
    if l2:
        l2_result = dram_bytes(problem, run)
    tr = _traffic_from(problem, run, name, l2_result)

    # errors against float64, next to a plain implementation in the same dtype (both on the rounded inputs)
    names = ["out"] + (["dq", "dk", "dv"] if problem.backward else [])
    worst = {"abs": 0.0, "rel": 0.0, "pabs": 0.0, "prel": 0.0}
    by_output = {}
    per_name = {nm: [0.0, 0.0, 0.0, 0.0] for nm in names}
    for h in range(problem.heads):
        qh, kh, vh = (round_to(x[h], problem.dtype) for x in (q, k, v))
        doh = round_to(do[h], problem.dtype) if do is not None else None
        kp = keep[h] if keep is not None else None
        ref_o, ref_g = reference_forward_backward(qh, kh, vh, doh, problem.causal, keep=kp,
                                                  dropout_p=problem.dropout_p)
        pl_o, pl_g = plain_attention(qh, kh, vh, doh, problem.causal, keep=kp, dropout_p=problem.dropout_p,
                                     dtype=problem.dtype)
        sims = [run.out[h]] + ([g[h] for g in run.grads] if problem.backward else [])
        refs = [ref_o] + (list(ref_g) if problem.backward else [])
        plains = [pl_o] + (list(pl_g) if problem.backward else [])
        for nm, s, r, p in zip(names, sims, refs, plains):
            a, rel = _rel(s, r)
            pa, prel = _rel(p, r)
            acc = per_name[nm]
            acc[0], acc[1], acc[2], acc[3] = max(acc[0], a), max(acc[1], rel), max(acc[2], pa), max(acc[3], prel)
    for nm, (a, rel, pa, prel) in per_name.items():
        by_output[nm] = {"max_abs_error": a, "rel_error": rel, "plain_max_abs_error": pa, "plain_rel_error": prel}
        worst = {"abs": max(worst["abs"], a), "rel": max(worst["rel"], rel), "pabs": max(worst["pabs"], pa),
                 "prel": max(worst["prel"], prel)}
    # the check is per output: each output's error against its own plain error
    tol = tolerance(problem.dtype, worst["prel"])
    ok = all(v["rel_error"] <= tolerance(problem.dtype, v["plain_rel_error"]) for v in by_output.values())
    return Simulation(tr, run.counters, run.out, run.grads, getattr(run, "lse", None), run.memory, worst["abs"],
                      worst["rel"], worst["pabs"], worst["prel"], tol, bool(ok), int(seed), by_output, note)


def _bad_shape(a, shape):
    raise FlashsimError(f"an input has shape {np.shape(a)}: expected (heads, N, d) = {shape}")


def _check_step_budget(problem: Problem, eager_ops, record_events: bool, budget: int) -> None:
    """Refuse, before allocating anything, step-mode runs whose host memory would exceed the budget."""
    n, d, h = problem.n, problem.d, problem.heads
    if problem.algo in ("naive", "eager"):
        algo_bytes = standard_host_bytes(problem, eager_ops, record_events)
        algo_bytes += h * n * n if problem.dropout_p else 0  # the keep masks (RNG stream), 1 byte each
    else:
        br, bc = resolve_blocks(problem)
        algo_bytes = step_host_bytes(problem, br, bc, record_events)
    inputs = h * n * d * 4 * (4 if problem.backward else 3)
    reference = 2 * 6 * DEFAULT_CHUNK_BYTES + 8 * n * d * 8  # two chunked references: a few (chunk, N) float64 blocks
    check_host_budget(algo_bytes + inputs + reference, budget,
                      fix=f"use a smaller n (n={n}), fewer heads (heads={h}), record_events=False, or count mode "
                          "(flashsim.traffic / `flashsim traffic`), which needs no numbers")
