"""The public API: ``flashsim.traffic`` (count mode + roofline) and ``flashsim.simulate`` (step mode + error).

These two functions are what the notebooks, the widgets, the CLI and the kernel comparison call (chapters 02, 05
and 09). Both take the same arguments::

    traffic(algo, n, d, block_r=None, block_c=None, heads=1, dtype="fp16", causal=False, backward=False,
            device="h200", sram_bytes=None, *, batch=1, stats_dtype=None, dropout_p=0.0, l2=False, eager_ops=None)

``batch`` is the number of sequences B and ``heads`` the attention heads H of each, as in the kernels' (B, H, N, d)
tensors, ``flashsim.measure`` and ``flashsim traffic --batch B --heads H``. The B × H heads are independent (N, d)
problems: bytes and FLOPs are summed over all of them, so only the product enters the numbers.

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
computation by rounding error only. ``ok`` accepts twice the error of a plain implementation of the same formula
in the same dtype (at least 1e-6) plus a bound on what the simulated algorithm's own roundings can add
(:func:`tolerance`, :func:`flash_rounding_bounds`, :func:`standard_rounding_bounds`): a few roundings of the
dtype, about 1e-6 in fp32 for a well-conditioned output, and never more than 5 % of the output's own scale
(MAX_REL_TOLERANCE): where the yardstick is looser than that, the cap judges, and the note says that the check
cannot resolve a smaller error. Both yardsticks are
:mod:`flashsim.model.attention.reference`'s; the L2 replay is :mod:`flashsim.model.attention.l2_traces`'.
"""
from __future__ import annotations

import json
import math
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np

from flashsim.errors import FlashsimError, FlashsimWarning
from flashsim.model.attention.flash import count_flash, resolve_blocks, run_flash, step_host_bytes
from flashsim.model.attention.l2_traces import dram_bytes
from flashsim.model.attention.reference import DEFAULT_CHUNK_BYTES, plain_attention, reference_forward_backward
from flashsim.model.attention.standard import (NAIVE_OPS, count_standard, resolve_eager_ops, run_standard,
                                                standard_host_bytes)
from flashsim.model.attention.visibility import tile_sums
from flashsim.model.dtypes import round_to
from flashsim.model.memory import DEFAULT_HOST_BUDGET_BYTES, Counters, Memory, check_host_budget
from flashsim.model.problem import Problem, make_problem
from flashsim.model.roofline import roofline
from flashsim.model.table import Table
from flashsim.model.rounding import (EAGER_ROUNDINGS_FACTOR, FP32_REL_TOLERANCE,  # noqa: F401 (re-exported)
                                     PLAIN_FALLBACK_ROUNDINGS, ROUNDING_LAMBDA, flash_rounding_bounds,
                                     standard_rounding_bounds, tolerance)
from flashsim.model.units import format_bytes, format_seconds

__all__ = ["Traffic", "Simulation", "FlashsimWarning", "traffic", "simulate", "tolerance", "flash_rounding_bounds",
           "standard_rounding_bounds", "estimate_step_seconds",
           "strict_json"]


#: the largest relative error (of an output's own largest reference value) ``simulate(...).ok`` ever accepts:
#: where the plain same-dtype implementation is itself this far off, the check cannot tell a right output from a
#: wrong one, so the verdict is not ok and says so (an output wrong by 5 % of its size fails everywhere)
MAX_REL_TOLERANCE = 0.05


# --- results -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Traffic:
    """Bytes, FLOPs and roofline time of one attention problem (all batch × heads heads). Field names = ``--json``
    keys; ``batch`` is the sequences B, ``heads`` the heads H of each.

    hbm_*_bytes: requested bytes between HBM and SRAM (no L2). dram_*_bytes: what reaches DRAM through the L2
    model (l2=True; else None). init_write_bytes: memsets outside the loops (flash1's O, l, m; dQ before a
    backward), not in hbm_write_bytes. forward_part/backward_part: the passes separately when backward=True.
    """

    algo: str
    n: int
    d: int
    batch: int
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
        """JSON-ready dict (the ``flashsim traffic --json`` object): strict JSON, see :func:`strict_json`."""
        return strict_json(asdict(self))

    def _problem_text(self) -> str:
        return (f"{self.algo}" + (f" ({self.eager_ops})" if self.eager_ops else "")
                + f", N={self.n}, d={self.d}, " + (f"batch={self.batch}, " if self.batch != 1 else "")
                + f"heads={self.heads}, {self.dtype}" + (", causal" if self.causal else "")
                + (", fwd+bwd" if self.backward else ""))

    def __repr__(self) -> str:
        """One line: the problem, the blocks, the HBM bytes and the roofline time (every field: :meth:`as_dict`)."""
        dram = f", DRAM {format_bytes(self.dram_bytes)}" if self.dram_bytes is not None else ""
        return (f"<Traffic {self._problem_text()}, {self.device}, Br×Bc={self.block_r}×{self.block_c}: "
                f"HBM {format_bytes(self.hbm_bytes)} (read {format_bytes(self.hbm_read_bytes)}, write "
                f"{format_bytes(self.hbm_write_bytes)}){dram}, {self.flops:.3g} FLOP, "
                f"{format_seconds(self.time_s)} {self.bound}-bound>")

    def table(self) -> Table:
        """The numbers a reader looks at, one per row, in readable units (how a notebook shows a Traffic)."""
        rows = [["blocks Br × Bc", f"{self.block_r} × {self.block_c}"],
                ["HBM read", format_bytes(self.hbm_read_bytes)],
                ["HBM write", format_bytes(self.hbm_write_bytes)],
                ["HBM total", format_bytes(self.hbm_bytes)]]
        if self.dram_bytes is not None:
            rows.append(["DRAM (L2 model)", format_bytes(self.dram_bytes)])
        rows += [["FLOPs", f"{self.flops:.4g}"],
                 ["SRAM peak", format_bytes(self.sram_peak_bytes)],
                 ["intensity", f"{self.arithmetic_intensity:.4g} FLOP/B (ridge {self.ridge_point_flops_per_byte:.4g})"],
                 ["roofline time", f"{format_seconds(self.time_s)}, {self.bound}-bound"]]
        rows += [[f"read {k}", format_bytes(v)] for k, v in self.read_bytes_by_tensor.items()]
        rows += [[f"write {k}", format_bytes(v)] for k, v in self.write_bytes_by_tensor.items()]
        return Table(["", "value"], rows, f"{self._problem_text()} on {self.device} "
                                          f"(SRAM {format_bytes(self.sram_bytes)})")

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()


@dataclass
class Simulation:
    """Step-mode result: numbers, counters and the error against float64.

    out: (heads, N, d) float32 as stored in HBM ((batch, heads, N, d) when batch > 1); grads: (dq, dk, dv), the
    same shape, when backward; lse: (heads, N) ((batch, heads, N) when batch > 1); memory: head 0's Memory with
    its Event log (``sim.memory.events[i]`` is step i). rel_error = max|x − ref| / max|ref| over the output (and
    the gradients); plain_rel_error the same for a plain implementation in the same dtype. ok: rel_error ≤
    tolerance (max(1e-6, 2 × plain_rel_error), per output, plus for flash the bound of
    :func:`flash_rounding_bounds`: about 1e-6 in fp32 for any well-conditioned output).
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
        return strict_json(out)


def strict_json(obj: dict) -> dict:
    """A copy of `obj` that strict JSON parsers accept: every NaN or ±inf float becomes None (null) and its
    dotted path is listed under ``"non_finite_fields"`` (the key is present only when there is one), so
    ``json.dumps(d, allow_nan=False)`` never fails and a reader still sees which numbers were not finite."""
    bad: list[str] = []

    def clean(x, path):
        if isinstance(x, dict):
            return {k: clean(v, f"{path}.{k}" if path else str(k)) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v, f"{path}[{i}]") for i, v in enumerate(x)]
        if isinstance(x, (float, np.floating)):
            if not math.isfinite(x):
                bad.append(path)
                return None
            return float(x)
        if isinstance(x, np.integer):
            return int(x)
        if isinstance(x, np.bool_):
            return bool(x)
        return x

    out = json.loads(json.dumps(clean(obj, "")))
    if bad:
        out["non_finite_fields"] = bad
    return out


# --- count mode ----------------------------------------------------------------------------------------------

def _problem(algo, n, d, block_r, block_c, heads, dtype, causal, backward, device, sram_bytes, stats_dtype,
             dropout_p, batch) -> Problem:
    return make_problem(algo, n, d, block_r=block_r, block_c=block_c, heads=heads, dtype=dtype, causal=causal,
                        backward=backward, device=device, sram_bytes=sram_bytes, stats_dtype=stats_dtype,
                        dropout_p=dropout_p, batch=batch)


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
        algo=problem.algo, n=problem.n, d=problem.d, batch=problem.batch, heads=problem.heads, dtype=problem.dtype,
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
    if problem.algo != "eager":
        if eager_ops is not None:
            raise FlashsimError(f"eager_ops only applies to algo='eager', not {problem.algo!r}: drop it")
        return None
    return resolve_eager_ops(eager_ops).name


def traffic(algo, n, d, block_r=None, block_c=None, heads=1, dtype="fp16", causal=False, backward=False,
            device="h200", sram_bytes=None, *, batch=1, stats_dtype=None, dropout_p=0.0, l2=False,
            eager_ops=None) -> Traffic:
    """Count mode: HBM bytes, FLOPs, peak SRAM and roofline time of attention, without numbers.

    batch sequences of `heads` heads each (B × H independent heads, summed).

    >>> t = traffic("naive", n=1024, d=64)
    >>> t.hbm_read_bytes == (3 * 1024 * 64 + 2 * 1024**2) * 2, t.bound
    (True, 'memory')
    """
    problem = _problem(algo, n, d, block_r, block_c, heads, dtype, causal, backward, device, sram_bytes,
                       stats_dtype, dropout_p, batch)
    name = _eager_name(problem, eager_ops)
    res = _count(problem, eager_ops)
    l2_result = None
    if l2:
        l2_result = dram_bytes(problem, res)
    return _traffic_from(problem, res, name, l2_result)


# --- step mode -----------------------------------------------------------------------------------------------

def _rel(x: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(max abs error, max abs error / max |ref|); non-finite where ref is finite counts as infinite error."""
    with np.errstate(all="ignore"):
        diff = np.abs(np.asarray(x, np.float64) - ref)
    diff = np.where(np.isfinite(ref), diff, 0.0)
    diff = np.where(np.isnan(diff), np.inf, diff)
    err = float(diff.max()) if diff.size else 0.0
    scale = float(np.abs(ref[np.isfinite(ref)]).max()) if np.isfinite(ref).any() else 1.0
    return err, err / scale if scale > 0 else err


#: step mode refuses work it estimates above this many seconds (count mode gives the bytes in microseconds)
MAX_STEP_SECONDS = 120.0
#: estimated seconds past which step mode shows a progress bar (progress=None)
PROGRESS_AFTER_SECONDS = 2.0
#: the estimate: seconds per FLOP of step mode and its two references, and per tile (Python overhead); measured
#: on this repository's 2-core CI machine (flash2 N=2048 d=64: ~1.6 s; the issue's N=20000: 54 s on a faster one)
_SECONDS_PER_FLOP, _SECONDS_PER_TILE = 1.0e-9, 3.0e-5


def _estimate(problem: Problem, res) -> float:
    """Seconds step mode will take, from count mode's FLOPs and tile count (`res` = its count result)."""
    tiles = tile_sums(problem.n, res.block_r, res.block_c, False)[0] // max(1, min(res.block_r, problem.n))
    passes = 2 if problem.backward else 1
    return _SECONDS_PER_FLOP * res.counters.flops + _SECONDS_PER_TILE * tiles * passes * problem.batch_heads


def estimate_step_seconds(algo, n, d, block_r=None, block_c=None, heads=1, dtype="fp16", causal=False,
                          backward=False, device="h200", sram_bytes=None, *, batch=1, stats_dtype=None,
                          dropout_p=0.0, eager_ops=None) -> float:
    """About how many seconds :func:`simulate` will take with these arguments (it refuses past
    ``max_step_seconds``, 120 s by default, and shows a progress bar past 2 s)."""
    problem = _problem(algo, n, d, block_r, block_c, heads, dtype, causal, backward, device, sram_bytes,
                       stats_dtype, dropout_p, batch)
    return _estimate(problem, _count(problem, eager_ops))


def _check_seed(seed) -> int:
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise FlashsimError(f"seed={seed!r} must be an integer ≥ 0 (numpy's generators take no other), e.g. seed=0")
    return int(seed)


def _from_torch(name: str, a):
    """A torch tensor as a float32 numpy array (bf16, requires_grad, GPU tensors included), found by duck typing:
    the model imports no torch. Anything else is returned as np.asarray gives it."""
    if type(a).__module__.split(".")[0] != "torch" or not hasattr(a, "detach"):
        return np.asarray(a)
    if a.is_complex():
        raise FlashsimError(f"input {name} is a complex torch tensor ({a.dtype}): attention here is real; pass its "
                            f"real part ({name}.real) if that is what you mean")
    if not (a.is_floating_point() or str(a.dtype) in ("torch.bool",) or "int" in str(a.dtype)):
        raise FlashsimError(f"input {name} is a torch tensor of dtype {a.dtype}: pass a float tensor, e.g. "
                            f"{name}.float()")
    try:
        return a.detach().to("cpu").float().numpy()
    except (RuntimeError, TypeError) as exc:
        raise FlashsimError(f"input {name}, a torch tensor ({a.dtype}, on {a.device}), cannot be read as numbers "
                            f"({exc}): pass {name}.detach().float().cpu().numpy()") from None


def _input_shapes(problem: Problem) -> tuple[tuple, list[tuple]]:
    """The shape simulate's inputs are named by, (batch, heads, N, d) or (heads, N, d) when batch is 1, and every
    shape accepted for it: (batch, heads, N, d) always, (heads, N, d) when batch is 1, (N, d) for one head."""
    b, h, n, d = problem.batch, problem.heads, problem.n, problem.d
    shape = (b, h, n, d) if b > 1 else (h, n, d)
    accepted = [(b, h, n, d)] + ([(h, n, d)] if b == 1 else []) + ([(n, d)] if b * h == 1 else [])
    return shape, accepted


def _per_batch(x, problem: Problem):
    """A (B·H, ...) array as the caller named it: (batch, heads, ...) when batch > 1, else unchanged."""
    if x is None or problem.batch == 1:
        return x
    return x.reshape((problem.batch, problem.heads) + x.shape[1:])


def _check_inputs(inputs, problem: Problem) -> tuple[list, list[str]]:
    """The given (q, k, v[, do]) as float32 (B·H, N, d) arrays, and the warnings they deserve. Only the shapes of
    :func:`_input_shapes` are accepted (the (B, H) axes flattened in order); nothing else is reshaped."""
    names = ("q", "k", "v", "do")
    shape, accepted = _input_shapes(problem)
    named = "(batch, heads, N, d)" if problem.batch > 1 else "(heads, N, d)"
    if not isinstance(inputs, (list, tuple)) or len(inputs) not in (3, 4):
        got = f"{len(inputs)} arrays" if isinstance(inputs, (list, tuple)) else type(inputs).__name__
        raise FlashsimError(f"inputs must be (q, k, v) or (q, k, v, do), each of shape {named} = {shape}: "
                            f"got {got}")
    arrays, problems = [], []
    for name, a in zip(names, inputs):
        x = _from_torch(name, a)
        if np.iscomplexobj(x):
            raise FlashsimError(f"input {name} is complex ({x.dtype}): attention here is real; pass its real part "
                                f"(np.real({name})) if that is what you mean")
        if x.dtype.kind not in "fiub":
            raise FlashsimError(f"input {name} has dtype {x.dtype}: pass a float array of shape {shape}")
        if x.shape not in accepted:
            others = [s for s in accepted if s != shape]
            raise FlashsimError(f"input {name} has shape {x.shape}: expected {named} = {shape}"
                                + (f" (or {' or '.join(map(str, others))})" if others else "")
                                + "; it is not reshaped, transpose or reshape it yourself if that is what you mean")
        x = x.reshape((problem.batch_heads, problem.n, problem.d))  # (B·H, N, d)
        with np.errstate(over="ignore", invalid="ignore"):
            x32 = x.astype(np.float32)
        finite = np.isfinite(x32)
        if not finite.all():
            kinds = ("NaN" if np.isnan(x32).any() else "") + ("/" if np.isnan(x32).any() and np.isinf(x32).any()
                                                                 else "") + ("inf" if np.isinf(x32).any() else "")
            problems.append(f"input {name} contains {kinds} ({int((~finite).sum())} values)")
        elif not np.isfinite(round_to(x32, problem.dtype)).all():
            big = float(np.abs(x32).max())
            problems.append(f"input {name} (max |x| {big:.3g}) overflows {problem.dtype} storage (largest finite "
                            f"{float(np.finfo(np.float16).max) if problem.dtype == 'fp16' else 3.39e38:.6g}): "
                            "scale it down or use dtype='fp32'")
        arrays.append(x32)
    return arrays, problems


def _progress(total_flops: int, est_s: float):
    """A tqdm bar over FLOPs done and the on_event callback that advances it; (None, None) without tqdm."""
    try:
        from tqdm.auto import tqdm  # optional, heavy: imported only when a bar is shown
    except ImportError:
        return None, None
    bar = tqdm(total=total_flops, unit="FLOP", unit_scale=True, leave=False,
               desc=f"flashsim step mode (~{est_s:.0f} s; count mode: flashsim.traffic)")

    def on_event(ev):
        if ev.flops:
            bar.update(ev.flops)
    return bar, on_event


def simulate(algo, n, d, block_r=None, block_c=None, heads=1, dtype="fp16", causal=False, backward=False,
             device="h200", sram_bytes=None, *, batch=1, stats_dtype=None, dropout_p=0.0, l2=False, eager_ops=None,
             seed=0, inputs=None, record_events=True, memory: Memory | None = None,
             host_budget_bytes: int = DEFAULT_HOST_BUDGET_BYTES, progress: bool | None = None,
             max_step_seconds: float | None = MAX_STEP_SECONDS) -> Simulation:
    """Step mode on random inputs: the numbers, the counters, and the error against a float64 reference.

    batch, heads: B sequences of H heads each, as in :func:`traffic`. inputs: optional (q, k, v) or (q, k, v, do)
    arrays of shape (batch, heads, N, d) ((heads, N, d) when batch is 1, (N, d) for one head) instead of
    the seeded normal ones (e.g. extreme scores); any other shape, a complex array or another count is a
    FlashsimError (never reshaped). NaN/inf inputs, or finite ones that overflow the storage dtype, warn
    (FlashsimWarning) and the verdict is not ok. memory: head 0's Memory (an on_event callback for a live view).
    Sizes whose host memory would exceed `host_budget_bytes` raise MemoryBudgetError, and work estimated
    (:func:`estimate_step_seconds`) above `max_step_seconds` (None: no limit) a FlashsimError, both before
    anything runs: use :func:`traffic` there, it needs no numbers. progress: a tqdm bar on stderr (None: only
    when the estimate exceeds 2 s).

    ok: every output finite wherever the float64 reference is, the reference finite (NaN/inf inputs have
    nothing to compare), and each output's error finite and within its tolerance: :func:`tolerance` of the
    plain same-dtype implementation's error (scaled by EAGER_ROUNDINGS_FACTOR for eager; FlashAttention's own
    D = rowsum(dO∘O) for flash) plus, for flash, :func:`flash_rounding_bounds` relative to the output's
    largest reference value (what tiling rounds in addition: O and dQ re-read from HBM, the statistics' dtype,
    fp32 accumulation over tiles), capped at MAX_REL_TOLERANCE (5 % of the output's own largest reference value),
    so that ok is never said about a check that could not have failed. Where an output's yardstick exceeds the cap,
    the cap judges it, ``errors_by_output[name]["resolved"]`` is False and the note says that smaller errors cannot
    be told from rounding there. Torch tensors are accepted as inputs (converted to float32:
    bf16, requires_grad and GPU tensors included).

    Exact in real arithmetic, not bitwise: see the module docstring.
    """
    problem = _problem(algo, n, d, block_r, block_c, heads, dtype, causal, backward, device, sram_bytes,
                       stats_dtype, dropout_p, batch)
    name = _eager_name(problem, eager_ops)
    seed = _check_seed(seed)
    _check_step_budget(problem, eager_ops, record_events, host_budget_bytes)
    est = _estimate(problem, _count(problem, eager_ops))
    if max_step_seconds is not None and est > max_step_seconds:
        raise FlashsimError(
            f"step mode at N={problem.n}, d={problem.d}, batch={problem.batch}, heads={problem.heads} would take "
            f"about {est:.0f} s (over "
            f"max_step_seconds={max_step_seconds:g}): use count mode, flashsim.traffic(...) / `flashsim traffic`, "
            "for the bytes and FLOPs (exact, no numbers, microseconds), a smaller n, or max_step_seconds=None to "
            "run it anyway")
    rng = np.random.default_rng(seed)
    shape = (problem.batch_heads, problem.n, problem.d)  # (B·H, N, d): the heads run one after another
    input_problems = []
    if inputs is None:
        arrays = [rng.standard_normal(shape, dtype=np.float32) for _ in range(4 if problem.backward else 3)]
    else:
        arrays, input_problems = _check_inputs(inputs, problem)
        if problem.backward and len(arrays) < 4:
            arrays.append(rng.standard_normal(shape, dtype=np.float32))
    for msg in input_problems:
        warnings.warn(f"simulate: {msg}; the verdict will not be ok", FlashsimWarning, stacklevel=2)
    q, k, v = arrays[:3]
    do = arrays[3] if problem.backward else None
    keep, note = None, ""
    bar, on_event = (None, None)
    if progress or (progress is None and est > PROGRESS_AFTER_SECONDS):
        bar, on_event = _progress(int(_count(problem, eager_ops).counters.flops), est)
    try:
        if problem.algo in ("naive", "eager"):
            if problem.dropout_p:
                keep = rng.random((problem.batch_heads, problem.n, problem.n)) >= problem.dropout_p
            run = run_standard(problem, q, k, v, do, eager_ops=eager_ops, keep=keep, memory=memory,
                               record_events=record_events, host_budget_bytes=host_budget_bytes, on_event=on_event)
        else:
            if problem.dropout_p:
                note = "flash step mode runs without dropout (regenerated on chip, no HBM bytes): compared without it"
            run = run_flash(problem, q, k, v, do, memory=memory, record_events=record_events, on_event=on_event)
    finally:
        if bar is not None:
            bar.close()
    l2_result = None
    if l2:
        l2_result = dram_bytes(problem, run)
    tr = _traffic_from(problem, run, name, l2_result)

    # errors against float64, next to a plain implementation in the same dtype (both on the rounded inputs)
    names = ["out"] + (["dq", "dk", "dv"] if problem.backward else [])
    per_name = {nm: [0.0, 0.0, 0.0, 0.0] for nm in names}
    finite = {"sim": True, "ref": True}
    data_extra = {nm: 0.0 for nm in names}  # the rounding bounds relative to each output's scale
    std_ops = NAIVE_OPS if problem.algo == "naive" else resolve_eager_ops(eager_ops)  # read by naive/eager only
    delta = "softmax" if problem.algo in ("naive", "eager") else "output"
    for h in range(problem.batch_heads):
        qh, kh, vh = (round_to(x[h], problem.dtype) for x in (q, k, v))
        doh = round_to(do[h], problem.dtype) if do is not None else None
        kp = keep[h] if keep is not None else None
        ref_o, ref_g = reference_forward_backward(qh, kh, vh, doh, problem.causal, keep=kp,
                                                  dropout_p=problem.dropout_p)
        pl_o, pl_g = plain_attention(qh, kh, vh, doh, problem.causal, keep=kp, dropout_p=problem.dropout_p,
                                     dtype=problem.dtype, delta=delta)
        sims = [run.out[h]] + ([g[h] for g in run.grads] if problem.backward else [])
        refs = [ref_o] + (list(ref_g) if problem.backward else [])
        plains = [pl_o] + (list(pl_g) if problem.backward else [])
        if problem.algo in ("flash1", "flash2"):
            bounds = flash_rounding_bounds(problem, qh, kh, vh, doh, ref_o)
        else:
            bounds = standard_rounding_bounds(problem, std_ops, qh, kh, vh, doh, kp)
        for nm, s, r, p in zip(names, sims, refs, plains):
            finite["ref"] &= bool(np.isfinite(r).all())
            finite["sim"] &= bool(np.isfinite(s).all())
            a, rel = _rel(s, r)
            pa, prel = _rel(p, r)
            acc = per_name[nm]
            acc[0], acc[1], acc[2], acc[3] = max(acc[0], a), max(acc[1], rel), max(acc[2], pa), max(acc[3], prel)
            if nm in bounds:
                # the bound relative to the reference's scale, as _rel measures the error (0 if not finite:
                # non-finite data is never ok anyway, and the tolerance stays a number)
                fin = np.isfinite(r)
                scale = float(np.abs(r[fin]).max()) if fin.any() else 0.0
                bound = float(np.max(bounds[nm])) if bounds[nm].size else 0.0
                b_rel = bound / scale if scale > 0 else bound
                data_extra[nm] = max(data_extra[nm], b_rel if math.isfinite(b_rel) else 0.0)
    lse = getattr(run, "lse", None)
    factor = EAGER_ROUNDINGS_FACTOR if problem.algo == "eager" else 1.0
    by_output, unresolved = {}, []
    for nm, (a, rel, pa, prel) in per_name.items():
        wanted = tolerance(problem.dtype, factor * prel, data_extra[nm])
        tol = min(wanted, MAX_REL_TOLERANCE)
        resolved = wanted <= MAX_REL_TOLERANCE
        if not resolved:
            unresolved.append(f"{nm} (its own yardstick, {wanted:.3g} of its largest value, is looser: the plain "
                              f"{problem.dtype} implementation is itself off by {prel:.3g})")
        by_output[nm] = {"max_abs_error": a, "rel_error": rel, "plain_max_abs_error": pa, "plain_rel_error": prel,
                         "tolerance": tol, "resolved": resolved, "ok": bool(math.isfinite(rel) and rel <= tol)}
    # the check is per output: each output's error against its own tolerance; the one reported is the output's
    # whose error is closest to (or furthest past) its tolerance
    worst = max(by_output.values(), key=lambda e: e["rel_error"] / e["tolerance"] if e["tolerance"] > 0
                else math.inf)
    ok = all(e["ok"] for e in by_output.values()) and finite["sim"] and finite["ref"] and not input_problems
    notes = [note] if note else []
    if input_problems:
        notes.append("not ok: " + "; ".join(input_problems))
    elif not finite["ref"]:
        notes.append("not ok: the float64 reference is not finite (nothing to compare)")
    elif not finite["sim"]:
        notes.append("not ok: the output has NaN/inf where the float64 reference is finite")
    if unresolved:
        notes.append(f"judged against the cap of {MAX_REL_TOLERANCE:g} of the output's scale, which rounding can "
                     f"reach here, so a smaller error cannot be told from rounding: {'; '.join(unresolved)}; for a "
                     "sharper check use inputs whose scaled scores are O(1)"
                     + (" or dtype='fp32'" if problem.dtype != "fp32" else ""))
    grads = tuple(_per_batch(g, problem) for g in run.grads) if run.grads is not None else None
    return Simulation(tr, run.counters, _per_batch(run.out, problem), grads, _per_batch(lse, problem), run.memory,
                      max(e["max_abs_error"] for e in by_output.values()),
                      max(e["rel_error"] for e in by_output.values()),
                      max(e["plain_max_abs_error"] for e in by_output.values()),
                      max(e["plain_rel_error"] for e in by_output.values()), worst["tolerance"], bool(ok), seed,
                      by_output, "; ".join(notes))


def _check_step_budget(problem: Problem, eager_ops, record_events: bool, budget: int) -> None:
    """Refuse, before allocating anything, step-mode runs whose host memory would exceed the budget."""
    n, d, h = problem.n, problem.d, problem.batch_heads
    if problem.algo in ("naive", "eager"):
        algo_bytes = standard_host_bytes(problem, eager_ops, record_events)
        algo_bytes += h * n * n if problem.dropout_p else 0  # the keep masks (RNG stream), 1 byte each
    else:
        br, bc = resolve_blocks(problem)
        algo_bytes = step_host_bytes(problem, br, bc, record_events)
    inputs = h * n * d * 4 * (4 if problem.backward else 3)
    reference = 2 * 6 * DEFAULT_CHUNK_BYTES + 8 * n * d * 8  # two chunked references: a few (chunk, N) float64 blocks
    check_host_budget(algo_bytes + inputs + reference, budget,
                      fix=f"use a smaller n (n={n}), fewer heads or a smaller batch (heads={problem.heads}, "
                          f"batch={problem.batch}), "
                          + ("record_events=False, " if record_events else "")
                          + "or count mode (flashsim.traffic / `flashsim traffic`), which needs no numbers")
