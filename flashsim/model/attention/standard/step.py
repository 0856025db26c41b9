"""Step mode of standard attention (chapter 02): each op tile by tile on real numbers through the simulated memory.

One Event per load, store and compute; storage dtypes are emulated by rounding on store.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from flashsim.errors import FlashsimError
from flashsim.model.attention.online_softmax import online_softmax_update
from flashsim.model.attention.reference import softmax_scale
from flashsim.model.attention.standard.blocks import resolve_standard_blocks
from flashsim.model.attention.standard.program import EagerOps, Op, Program, program_for
from flashsim.model.attention.visibility import causal_mask, n_blocks
from flashsim.model.blas import single_blas_thread
from flashsim.model.memory import MASK_DTYPE, Counters, Memory, check_host_budget, storage_bytes
from flashsim.model.problem import Problem


@dataclass
class StandardRun:
    """Step-mode result. Arrays are (B·H, N, d) float32 as HBM holds them (rounded to the storage dtype)."""

    out: np.ndarray
    grads: tuple | None  # (dq, dk, dv) when backward
    counters: Counters  # all heads
    forward: Counters
    backward: Counters | None
    memory: Memory  # head 0, with its Event log
    block_r: int
    block_c: int
    eager_ops: EagerOps
    program: Program
    init_write_bytes: int = 0
    lse: np.ndarray | None = None  # standard attention saves P, not a logsumexp
    extra: dict = field(default_factory=dict)


def standard_host_bytes(problem: Problem, eager_ops=None, record_events: bool = True) -> int:
    """Host memory step mode needs for one head (float32 holders of every tensor) plus all heads' in/outputs."""
    prog, _ = program_for(problem, eager_ops)
    n, d = problem.n, problem.d
    per_head = sum(4 * (n * n if prog.shapes[t] == "nn" else n * d) for t in prog.dtypes)
    per_head += n * n  # the dropout keep mask (RNG stream) when present, bool
    br, bc = resolve_standard_blocks(problem, eager_ops)
    tiles = n_blocks(n, br) * n_blocks(n, bc) * (len(prog.forward) + len(prog.backward))
    events = tiles * 6 * 200 if record_events else 0  # ~6 events of ~200 bytes per tile
    return per_head + events + problem.batch_heads * n * d * 4 * 8


def run_standard(problem: Problem, q, k, v, do=None, *, eager_ops=None, keep=None, memory: Memory | None = None,
                 record_events: bool = True, host_budget_bytes: int | None = None,
                 on_event=None) -> StandardRun:
    """Step mode: run naive or eager attention on numbers through the simulated Memory (chapter 02).

    q, k, v, do: float arrays (B·H, N, d), the problem's batch × heads heads (or (N, d) for one head); stored in
    HBM rounded to ``problem.dtype``.
    keep: dropout keep masks (B·H, N, N) bool, the random stream the dropout kernel draws from (generated from
    seed 0 when None and dropout_p > 0). memory: a Memory for head 0 (e.g. with an on_event callback); other
    heads run in fresh ones without events. on_event: a callback given every Event of the heads in Memories made
    here (simulate's progress bar). Returns outputs, (dq, dk, dv) when backward, and the counters.
    """
    prog, ops = program_for(problem, eager_ops)
    br, bc = resolve_standard_blocks(problem, ops)
    budget = {} if host_budget_bytes is None else {"budget_bytes": host_budget_bytes}
    check_host_budget(standard_host_bytes(problem, ops, record_events), **budget)
    arrays = [_as_heads(name, a, problem) for name, a in (("q", q), ("k", k), ("v", v))]
    if problem.backward:
        if do is None:
            raise FlashsimError("backward=True needs do (the gradient of the output), shape (batch × heads, N, d)")
        arrays.append(_as_heads("do", do, problem))
    if problem.dropout_p and keep is None:
        keep = np.random.default_rng(0).random((problem.batch_heads, problem.n, problem.n)) >= problem.dropout_p
    heads, n, d = problem.batch_heads, problem.n, problem.d
    out = np.empty((heads, n, d), np.float32)
    grads = tuple(np.empty((heads, n, d), np.float32) for _ in range(3)) if problem.backward else None
    fwd_total, bwd_total, first = Counters(), Counters(), None
    for h in range(heads):
        if h == 0 and memory is not None:
            mem = memory
        else:
            mem = Memory(problem.sram_bytes, problem.dtype, record_events=record_events and h == 0,
                         on_event=on_event)
        for name, a in zip(("Q", "K", "V", "dO"), arrays):
            mem.put(name, a[h], prog.dtypes[name])
        if "causal_mask" in prog.dtypes:
            mem.put("causal_mask", causal_mask(0, n, 0, n, always=True), MASK_DTYPE)  # True = key right of query
        for name, dt in prog.dtypes.items():
            if name not in ("Q", "K", "V", "dO", "causal_mask"):
                mem.empty(name, (n, n) if prog.shapes[name] == "nn" else (n, d), dt)
        ctx = _StepContext(mem, n, d, br, bc, softmax_scale(d), problem.dropout_p,
                           keep[h] if keep is not None else None)
        with np.errstate(all="ignore"), single_blas_thread():  # fp16 overflow to ±inf is part of the lesson
            for op in prog.forward:
                ctx.run(op)
            fwd_c = mem.counters
            if problem.backward:
                mem.counters = Counters()
                for op in prog.backward:
                    ctx.run(op)
                bwd_c = mem.counters
                mem.counters = fwd_c + bwd_c
                bwd_total = bwd_total + bwd_c
                for g, name in zip(grads, ("dQ", "dK", "dV")):
                    g[h] = mem.hbm(name)
        fwd_total = fwd_total + fwd_c
        out[h] = mem.hbm("O")
        first = first or mem
    bwd = bwd_total if problem.backward else None
    total = fwd_total + bwd if bwd is not None else fwd_total + Counters()
    return StandardRun(out, grads, total, fwd_total, bwd, first, br, bc, ops, prog)


def _as_heads(name: str, a, problem: Problem) -> np.ndarray:
    a = np.asarray(a, dtype=np.float32)
    if a.ndim == 2:
        a = a[None]
    want = (problem.batch_heads, problem.n, problem.d)
    if a.shape != want:
        raise FlashsimError(f"{name} has shape {a.shape}, expected (batch × heads, N, d) = {want}")
    return a


class _StepContext:
    """Runs ops tile by tile on one head's Memory. Loop order = the count-mode grid."""

    def __init__(self, mem: Memory, n: int, d: int, br: int, bc: int, scale: float, dropout_p: float, keep):
        self.mem, self.n, self.d, self.scale, self.p, self.keep = mem, n, d, scale, dropout_p, keep
        self.rows = [(i, slice(i * br, min((i + 1) * br, n))) for i in range(n_blocks(n, br))]
        self.cols = [(j, slice(j * bc, min((j + 1) * bc, n))) for j in range(n_blocks(n, bc))]

    def run(self, op: Op) -> None:
        getattr(self, "_" + op.kind)(op)
        self.mem.forget_reuse()

    def _gemm_nn(self, op: Op) -> None:  # out[i, j] = s · A_i B_jᵀ
        mem, (a_name, b_name) = self.mem, op.ins
        s = self.scale if op.scale else 1.0
        for i, ri in self.rows:
            for j, cj in self.cols:
                a = mem.load(a_name, rows=ri, tile=(i,), as_name="A", count_once=True)  # (r, d)
                b = mem.load(b_name, rows=cj, tile=(j,), as_name="B", count_once=True)  # (c, d)
                mem.scratch("acc", a.shape[0] * b.shape[0] * 4)
                tile = (a @ b.T) * np.float32(s)  # (r, c), fp32 accumulate
                mem.compute(2 * tile.size * self.d, tensor=op.out, tile=(i, j),
                            note=f"{op.out} = {a_name}·{b_name}ᵀ")
                mem.store(op.out, tile, rows=ri, cols=cj, tile=(i, j))
                mem.free("A", "B", "acc")

    def _gemm_nd(self, op: Op) -> None:  # out_i = s · Σ_j X_ij Y_j  (transpose: out_j = s · Σ_i X_ijᵀ Y_i)
        mem, (x_name, y_name) = self.mem, op.ins
        s = np.float32(self.scale if op.scale else 1.0)
        outer, inner = (self.cols, self.rows) if op.transpose else (self.rows, self.cols)
        for o, ro in outer:
            acc = np.zeros((ro.stop - ro.start, self.d), np.float32)  # (rows of the out block, d)
            mem.scratch("acc", acc.size * 4)
            for t, rt in inner:
                ij, (ri, cj) = ((t, o), (rt, ro)) if op.transpose else ((o, t), (ro, rt))
                x = mem.load(x_name, rows=ri, cols=cj, tile=ij, as_name="X", count_once=True)  # (r, c)
                y = mem.load(y_name, rows=rt, tile=(t,), as_name="Y", count_once=True)  # (rows of t, d)
                acc += (x.T if op.transpose else x) @ y
                mem.compute(2 * x.size * self.d, tensor=op.out, tile=ij, note=f"{op.out} += {x_name}·{y_name}")
                mem.free("X", "Y")
            mem.store(op.out, acc * s, rows=ro, tile=(o,))
            mem.free("acc")

    def _eltwise(self, op: Op) -> None:
        mem = self.mem
        for i, ri in self.rows:
            for j, cj in self.cols:
                ins = [mem.load(name, rows=ri, cols=cj, tile=(i, j), as_name=f"in{k}")
                       for k, name in enumerate(op.ins)]  # each (r, c)
                r, c = ins[0].shape
                mem.scratch("out", r * c * storage_bytes(mem.dtype_of(op.out)))
                if op.extra_out:
                    mem.scratch("out2", r * c * storage_bytes(mem.dtype_of(op.extra_out)))
                y = self._elementwise_value(op, ins, ri, cj)
                mem.compute(0, tensor=op.out, tile=(i, j), note=f"{op.out} = {op.fn}({', '.join(op.ins)})")
                mem.store(op.out, y, rows=ri, cols=cj, tile=(i, j))
                if op.extra_out:
                    mem.store(op.extra_out, self.keep[ri, cj], rows=ri, cols=cj, tile=(i, j))
                mem.free(*[f"in{k}" for k in range(len(ins))], "out", "out2")

    def _elementwise_value(self, op: Op, ins: list, ri: slice, cj: slice) -> np.ndarray:
        x = ins[0]
        if op.fn == "scale":
            return x * np.float32(self.scale)
        if op.fn == "cast":
            return x  # the store rounds to the output's dtype
        if op.fn == "mask":  # masked_fill(mask, -inf): the mask tile says which entries are in the future
            return np.where(ins[1] != 0, np.float32(-np.inf), x)
        if op.fn == "mask_bwd":
            return np.where(ins[1] != 0, np.float32(0), x)
        if op.fn == "dropout":  # the keep bits come from the on-chip RNG stream (not HBM)
            return x * self.keep[ri, cj] / np.float32(1 - self.p)
        if op.fn == "dropout_bwd":
            return x * ins[1] / np.float32(1 - self.p)
        raise AssertionError(op)  # pragma: no cover

    def _softmax(self, op: Op) -> None:  # two passes per row block: (m, l) online, then P = exp(S − m) / l
        mem, x_name = self.mem, op.ins[0]
        for i, ri in self.rows:
            r = ri.stop - ri.start
            m = np.full(r, -np.inf, np.float32)  # running row max, (r,)
            l = np.zeros(r, np.float32)  # running row sum of exp(S − m), (r,)
            mem.scratch("m, l", 2 * r * 4)
            for j, cj in self.cols:
                s = self._masked(mem.load(x_name, rows=ri, cols=cj, tile=(i, j), as_name="x", count_once=True),
                                 op, ri, cj)
                m, l, _ = online_softmax_update(m, l, None, s, None)  # statistics only: P is written in pass 2
                mem.compute(0, tensor=op.out, tile=(i, j), note="online max and sum", stats={"m": m.copy(),
                                                                                         "l": l.copy()})
                mem.free("x")
            for j, cj in self.cols:
                s = self._masked(mem.load(x_name, rows=ri, cols=cj, tile=(i, j), as_name="x", count_once=True),
                                 op, ri, cj)
                mem.scratch("out", s.size * storage_bytes(mem.dtype_of(op.out)))
                p = np.exp(s - m[:, None]) / l[:, None]  # (r, c)
                mem.compute(0, tensor=op.out, tile=(i, j), note=f"{op.out} = exp({x_name} − m) / l")
                mem.store(op.out, p, rows=ri, cols=cj, tile=(i, j))
                mem.free("x", "out")
            mem.free("m, l")

    def _masked(self, s: np.ndarray, op: Op, ri: slice, cj: slice) -> np.ndarray:
        if not op.mask:
            return s
        future = causal_mask(ri.start, ri.stop - ri.start, cj.start, cj.stop - cj.start, always=True)
        return np.where(future, np.float32(-np.inf), s)

    def _softmax_bwd(self, op: Op) -> None:  # D = rowsum(P ∘ dP) in pass 1, dX = P ∘ (dP − D) in pass 2
        mem, (p_name, dp_name) = self.mem, op.ins
        for i, ri in self.rows:
            r = ri.stop - ri.start
            dsum = np.zeros(r, np.float32)  # (r,)
            mem.scratch("D", r * 4)
            for j, cj in self.cols:
                p = mem.load(p_name, rows=ri, cols=cj, tile=(i, j), as_name="p", count_once=True)
                dp = mem.load(dp_name, rows=ri, cols=cj, tile=(i, j), as_name="dp", count_once=True)
                dsum += (p * dp).sum(axis=1)
                mem.compute(0, tensor=op.out, tile=(i, j), note="D += rowsum(P∘dP)", stats={"D": dsum.copy()})
                mem.free("p", "dp")
            for j, cj in self.cols:
                p = mem.load(p_name, rows=ri, cols=cj, tile=(i, j), as_name="p", count_once=True)
                dp = mem.load(dp_name, rows=ri, cols=cj, tile=(i, j), as_name="dp", count_once=True)
                mem.scratch("out", p.size * storage_bytes(mem.dtype_of(op.out)))
                mem.compute(0, tensor=op.out, tile=(i, j), note=f"{op.out} = P∘(dP − D)")
                mem.store(op.out, p * (dp - dsum[:, None]), rows=ri, cols=cj, tile=(i, j))
                mem.free("p", "dp", "out")
            mem.free("D")
