"""Chapter 07 exercises: the backward pass by recomputation (Algorithm 4 in FA2's form).

The checkers plug the learner's tile functions into an Algorithm-4 loop on the simulated memory, compare the
gradients with float64 ones, and print the loop's read/write table next to :func:`flashsim.traffic`'s backward
count (the two must agree byte for byte: recomputation reads Q, K, V, dO, L and D, never an N×N P).
"""
from __future__ import annotations

import math

import numpy as np

from flashsim.model.memory import Memory
from flashsim.course.ch00.checks import Verdict
from flashsim.course.ch05.checks import _qkv, finish, rw_table, raised

__all__ = ["check_recompute_p_tile", "check_backward_tile"]

_CASES = ((16, 8, 4, 4), (22, 8, 8, 4))  # (N, d, Br, Bc): square and ragged


def _forward_reference(q, k, v):
    """Float64 O and logsumexp L (the forward's saved outputs)."""
    s = (q.astype(np.float64) @ k.T.astype(np.float64)) / math.sqrt(q.shape[1])
    m = s.max(axis=1)
    e = np.exp(s - m[:, None])
    lse = m + np.log(e.sum(axis=1))
    return (e / e.sum(axis=1, keepdims=True)) @ v, lse


def _alg4_loop(recompute_p, backward_tile, q, k, v, do, block_r, block_c):
    """FA2-form Algorithm 4 on a Memory (fp32): preprocess D = rowsum(dO∘O), then outer loop over K/V blocks j,
    inner over Q blocks i, with P recomputed from L. Returns ((dq, dk, dv), counters of the backward)."""
    from flashsim.solutions import ch07 as ref
    recompute_p = recompute_p or ref.recompute_p_tile
    backward_tile = backward_tile or ref.backward_tile
    n, d = q.shape
    o, lse = _forward_reference(q, k, v)
    mem = Memory(sram_capacity_bytes=1 << 30, dtype="fp32", record_events=False)
    for name, x in (("Q", q), ("K", k), ("V", v), ("O", o), ("dO", do)):
        mem.put(name, x)
    mem.put("L", lse)
    mem.empty("D", (n,))
    mem.empty("dQ", (n, d), fill=0.0)   # zeroed before the loop: a memset, not counted
    mem.empty("dK", (n, d))
    mem.empty("dV", (n, d))
    scale = 1.0 / math.sqrt(d)
    for i, i0 in enumerate(range(0, n, block_r)):
        rs = slice(i0, min(i0 + block_r, n))
        o_i, do_i = mem.load("O", rs, tile=(i,)), mem.load("dO", rs, tile=(i,))
        mem.store("D", (do_i * o_i).sum(axis=1), rs, tile=(i,))
        mem.free(f"O{(i,)}", f"dO{(i,)}")
    for j, j0 in enumerate(range(0, n, block_c)):
        cs = slice(j0, min(j0 + block_c, n))
        k_j, v_j = mem.load("K", cs, tile=(j,)), mem.load("V", cs, tile=(j,))
        dk = np.zeros((cs.stop - cs.start, d), np.float32)
        dv = np.zeros_like(dk)
        for i, i0 in enumerate(range(0, n, block_r)):
            rs = slice(i0, min(i0 + block_r, n))
            q_i, do_i, dq_i = (mem.load(t, rs, tile=(i,)) for t in ("Q", "dO", "dQ"))
            lse_i, d_i = mem.load("L", rs, tile=(i,)), mem.load("D", rs, tile=(i,))
            with np.errstate(all="ignore"):
                p = np.asarray(recompute_p(q_i, k_j, lse_i, scale), np.float32)
                dq_c, dk_c, dv_c = (np.asarray(x, np.float32) for x in backward_tile(p, q_i, k_j, v_j, do_i, d_i,
                                                                                     scale))
            mem.compute(10 * p.shape[0] * p.shape[1] * d, tile=(i, j))
            mem.store("dQ", dq_i + dq_c, rs, tile=(i,))
            dk += dk_c
            dv += dv_c
            mem.free(*(f"{t}{(i,)}" for t in ("Q", "dO", "dQ", "L", "D")))
        mem.store("dK", dk, cs, tile=(j,))
        mem.store("dV", dv, cs, tile=(j,))
        mem.free(f"K{(j,)}", f"V{(j,)}")
    return (mem.hbm("dQ").copy(), mem.hbm("dK").copy(), mem.hbm("dV").copy()), mem.counters


def _simulated_backward(n, d, br, bc):
    """flashsim.traffic's flash2 backward part (fp32, fp32 statistics), as a Counters-like dict."""
    from flashsim.model.simulator import traffic
    t = traffic("flash2", n, d, block_r=br, block_c=bc, dtype="fp32", stats_dtype="fp32", backward=True,
                sram_bytes=1 << 30)
    return t.backward_part


def _check(name, recompute_p=None, backward_tile=None, quiet: bool = False):
    from flashsim.model.attention.flash import reference_attention_grads
    table = []
    for case, (n, d, br, bc) in enumerate(_CASES):
        q, k, v, do = (*_qkv(n, d, 20 + case), _qkv(n, d, 40 + case)[0])
        try:
            grads, counters = _alg4_loop(recompute_p, backward_tile, q, k, v, do, br, bc)
        except Exception as exc:  # noqa: BLE001
            return finish(name, False, f"{raised(exc)} (N={n}, d={d}, Br={br}, Bc={bc})", quiet=quiet)
        table = rw_table(counters, _simulated_backward(n, d, br, bc))
        want = reference_attention_grads(q, k, v, do)
        worst = {}
        for g_name, got, ref in zip(("dQ", "dK", "dV"), grads, want):
            err = float(np.abs(got - ref).max() / np.abs(ref).max()) if np.isfinite(got).all() else math.inf
            worst[g_name] = err
        bad = {g: e for g, e in worst.items() if not e < 1e-4}
        if bad:
            g = next(x for x in ("dV", "dK", "dQ") if x in bad)  # dV depends on P alone: check it first
            hint = {"dV": "dV_j = Σ_i P_ijᵀ dO_i needs the forward's P exactly: P = exp(S − L) with the row's L",
                    "dK": "dS = P ∘ (dP − D) and dK_j = τ Σ_i dS_ijᵀ Q_i (mind the τ = 1/√d)",
                    "dQ": "dQ_i = τ Σ_j dS_ij K_j with dS = P ∘ (dP − D)"}[g]
            errs = ", ".join(f"{k_} {v_:.2g}" for k_, v_ in worst.items())
            return finish(name, False, f"relative gradient errors {errs} at N={n}, d={d}, Br={br}, Bc={bc}: {hint}",
                          table, errors=worst, quiet=quiet)
    return finish(name, True, "dQ, dK, dV match float64 autograd's; the loop read Q, K, V, dO, L, D and never an "
                              "N×N P (bytes = the simulator's flash2 backward)", table, errors=worst, quiet=quiet)


def check_recompute_p_tile(fn, quiet: bool = False) -> Verdict:
    """Exercise 07.1: ``fn(q_i, k_j, lse_i, scale) -> P_ij`` (Br, Bc), the forward's probabilities recomputed from
    Q_i, K_j and the saved logsumexp L_i = m_i + log l_i, without any other statistic.

    Introduced in chapter 07.
    """
    return _check("recompute_p_tile", recompute_p=fn, quiet=quiet)


def check_backward_tile(fn, quiet: bool = False) -> Verdict:
    """Exercise 07.2: ``fn(p, q_i, k_j, v_j, do_i, delta_i, scale) -> (dq_i, dk_j, dv_j)``, one tile's
    contributions to the three gradients (delta_i = D_i = rowsum(dO_i ∘ O_i)).

    Introduced in chapter 07.
    """
    return _check("backward_tile", backward_tile=fn, quiet=quiet)
