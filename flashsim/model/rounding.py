"""Rounding bounds and the tolerance of `simulate(..., check=True)`: how far an output may be from the float64
reference before the verdict says it is wrong (one concern, split from the simulator that uses it)."""
from __future__ import annotations

import math

import numpy as np

from flashsim.model.attention.flash import resolve_blocks
from flashsim.model.attention.reference import DEFAULT_CHUNK_BYTES, softmax_scale
from flashsim.model.attention.visibility import causal_mask, n_blocks
from flashsim.model.dtypes import UNIT_ROUNDOFF, canonical_dtype
from flashsim.model.problem import Problem

#: relative error simulate(..., dtype="fp32") must stay under
FP32_REL_TOLERANCE = 1e-6


def tolerance(dtype: str, plain_rel_error: float, rounding_bound: float = 0.0) -> float:
    """The relative error simulate --check accepts for one output: twice the plain same-dtype implementation's,
    never less than 1e-6, plus `rounding_bound`, the simulated algorithm's own rounding bound relative to the
    output's largest reference value (:func:`flash_rounding_bounds`, :func:`standard_rounding_bounds`): the plain
    error is a yardstick, not a bound, and its roundings can cancel where the simulated ones do not.

    In fp16/bf16 this is "at most twice the error of a plain implementation of the same formula"; in fp32 the
    plain error is ~1e-7, so 1e-6 is the floor, and an ill-conditioned output (a gradient that is a small
    difference of large terms, e.g. N = 2) gets twice the plain fp32 error (seen up to ~3e-6).
    """
    if not math.isfinite(plain_rel_error):
        # the plain implementation overflowed its storage dtype (e.g. an fp16 score past 65504), so it is no
        # yardstick: fall back to a few roundings of the dtype (a finite tolerance; the verdict itself still
        # requires finite outputs and a finite error)
        plain_rel_error = PLAIN_FALLBACK_ROUNDINGS * UNIT_ROUNDOFF[canonical_dtype(dtype)]
    return max(2.0 * plain_rel_error, FP32_REL_TOLERANCE) + rounding_bound


#: roundings of the storage dtype that stand in for the plain implementation's error when it overflowed
PLAIN_FALLBACK_ROUNDINGS = 4.0


#: the eager model rounds every op's output (scale, mask, softmax, dropout are separate kernels): up to about
#: twice the roundings of the plain implementation (S, P, O), so its yardstick is scaled by this
EAGER_ROUNDINGS_FACTOR = 2.0


def flash_rounding_bounds(problem: Problem, q, k, v, do=None, o_ref=None) -> dict[str, np.ndarray]:
    """First-order bounds on the absolute error of one head's flash outputs from what the tiled algorithm rounds
    and the plain yardstick does not: {"out", and with `do` "dq", "dk", "dv"} → arrays of the outputs' shapes.

    Why: twice the plain error is a yardstick, not a bound. On few rows or d = 1 the plain implementation's
    roundings can cancel where FlashAttention's do not (flash1, N = 10, d = 1, fp16, causal backward: dQ 2.2×
    the plain error). With u, u_s, u₃₂ the unit roundoffs of the storage dtype, the stats dtype and fp32, P the
    float64 softmax of the rounded inputs, τ the softmax scale, Tc (Tr) the K/V (Q) block counts, and
    partial(X, t) the sum of X's tile terms up to tile t:

    - **O re-read from HBM (flash1).** Algorithm 1 stores O_i (storage dtype) and l_i (stats dtype) after every
      visible K/V block j and rescales them on the next: a rounding of at most (u + u_s)·|O_i^(j)|, which the
      later blocks shrink by F_ij, row i's softmax mass up to block j's end. As F_ij·O_i^(j) =
      Σ_{c ≤ end of j} P_ic·V_c, the bound is (u + u_s)·Σ_j |partial(P·V, j)| over the blocks row i computes
      (Tc·u at worst; the last is the output's own store).
    - **Every output's own store**, u·|X|: the plain implementation has it too, but its rounding can be exact
      (N = 1: P = 1, dV = dO) where the tiled one's is not.
    - **The fp32 accumulators on chip**: flash2's O over the row's visible K/V blocks, dK and dV over the Q
      blocks, summed tile by tile, each addition rounded: u₃₂·Σ_t |partial(P·V, t)|, u₃₂·τ·Σ_t
      |partial(dSᵀ·Q, t)|, u₃₂·Σ_t |partial(Pᵀ·dO, t)|. Only fp32 runs notice it (the plain error is ~1e-7).
    - **dQ re-read from HBM**: dQ_i += τ·dS_ij·K_j is stored in the storage dtype after every tile:
      u·Σ_t |partial(τ·dS·K, t)|.
    - **P recomputed from the statistics as stored.** flash2's backward takes P = exp(S − L) with L in the stats
      dtype: every P_ij of row i is off by a factor 1 + ε_i, ε_i ≤ u_s·|L_i| + u₃₂; flash1's takes
      P = e^(S − m)/l, m used as stored and l rounded after every block: ε_i ≤ u_s·Σ_j F_ij + u₃₂. Then
      |δdS_ij| ≤ ε_i·|dS_ij|, so dQ_i gets τ·ε_i·(|dS|·|K|)_i, dK_j τ·(|dS|ᵀ·(ε∘|Q|))_j and dV_j (Pᵀ·(ε∘|dO|))_j.
    - **D = rowsum(dO∘O) from the stored O.** dS = P∘(dP − D) takes D from O as stored, off by δO (the first term
      plus the final rounding u·|O|; flash2 stores D in the stats dtype, u_s·|O| more): |δD_i| ≤ a_i =
      Σ_c |dO_ic|·|δO_ic|. It enters every dS_ij as −P_ij·δD_i, so |δdQ_i| ≤ τ·a_i·(P·|K|)_i and
      |δdK_j| ≤ τ·(Pᵀ·(a∘|Q|))_j. At d = 1 one D carries the whole row's cancellation: the counterexample.

    Worst-case (up to linear in the tile count), not probabilistic, so they hold for every seed; they are a few u
    times the data's own magnitudes, so a wrong answer still fails (under 2% relative in fp16 even with 1×1
    blocks at N = 96). Computed in chunks of query rows, like the reference.
    """
    u, us, u32 = UNIT_ROUNDOFF[problem.dtype], UNIT_ROUNDOFF[problem.stats_dtype], UNIT_ROUNDOFF["fp32"]
    n, flash1 = problem.n, problem.algo == "flash1"
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))  # (N, d) each
    tau = softmax_scale(problem.d)
    br, bc = resolve_blocks(problem)
    tc, tr = n_blocks(n, bc), n_blocks(n, br)
    block_start = np.arange(tc) * bc  # (Tc,) first column of each K/V block

    def by_block(x):  # (N, d) → (Tc, Bc, d), zero-padded
        out = np.zeros((tc * bc, x.shape[1]))
        out[:n] = x
        return out.reshape(tc, bc, x.shape[1])

    v_blocks, k_blocks, ones_blocks = by_block(v), by_block(k), by_block(np.ones((n, 1)))
    bounds = {"out": np.zeros_like(q)}
    if do is not None:
        do = np.asarray(do, np.float64)
        o_ref = np.asarray(o_ref, np.float64)
        bounds.update(dq=np.zeros_like(q), dk=np.zeros_like(k), dv=np.zeros_like(v))
    running = {"dk": np.zeros_like(k), "dv": np.zeros_like(v)}  # dK, dV summed over the Q blocks so far
    # whole Q blocks per chunk; a chunk's (Q blocks, N, d) and (rows, Tc, d) partials stay near DEFAULT_CHUNK_BYTES
    per_row = 8 * max(tc * bc, tc * q.shape[1], -(-n * q.shape[1] // br))
    chunk = min(tr, max(1, DEFAULT_CHUNK_BYTES // (per_row * br))) * br
    with np.errstate(all="ignore"):
        for r0 in range(0, n, chunk):
            rows = slice(r0, min(r0 + chunk, n))
            r = rows.stop - r0
            row_ids = np.arange(r0, rows.stop)  # (r,)
            # (r, Tc) the tiles row i computes (under causal: the blocks starting on or left of the diagonal)
            sees = block_start[None, :] <= row_ids[:, None] if problem.causal else np.ones((r, tc), bool)
            s = (q[rows] @ k.T) * tau  # (r, N)
            if problem.causal:
                s = np.where(causal_mask(r0, r, 0, n, always=True), -np.inf, s)
            s_max = s.max(axis=1, keepdims=True)  # (r, 1)
            p = np.exp(s - s_max)
            l_sum = p.sum(axis=1, keepdims=True)  # (r, 1)
            p /= l_sum  # (r, N) P

            def tile_partials(x, blocks):  # Σ_t |partial(x @ blocks, t)| over row i's computed tiles: (r, d)
                xb = np.zeros((r, tc * bc))
                xb[:, :n] = x
                per_tile = np.einsum("rjb,jbd->rjd", xb.reshape(r, tc, bc), blocks)  # (r, Tc, d)
                return (np.abs(np.cumsum(per_tile, axis=1)) * sees[:, :, None]).sum(axis=1)

            if flash1:  # every computed tile's O stored (the last one's store is the output's own rounding)
                bounds["out"][rows] = (u + us) * tile_partials(p, v_blocks)
            else:  # fp32 accumulation over the tiles, then one store
                bounds["out"][rows] = u32 * tile_partials(p, v_blocks) + u * np.abs(p @ v)
            if do is None:
                continue
            dp = do[rows] @ v.T  # (r, N) dP
            ds = p * (dp - (do[rows] * o_ref[rows]).sum(axis=1, keepdims=True))  # (r, N) dS
            d_o = bounds["out"][rows] + (0.0 if flash1 else us) * np.abs(o_ref[rows])  # (r, d) |δO| (and D's)
            a = (np.abs(do[rows]) * d_o).sum(axis=1)  # (r,) bound on |δD_i|
            # (r,) relative error of the recomputed P_i: (m, l) or L as stored, and exp in fp32
            if flash1:
                eps = us * tile_partials(p, ones_blocks)[:, 0] + u32
            else:
                eps = us * np.abs(s_max + np.log(l_sum))[:, 0] + u32
            bounds["dq"][rows] = tau * (a[:, None] * (p @ np.abs(k)) + eps[:, None] * (np.abs(ds) @ np.abs(k))
                                        + u * tile_partials(ds, k_blocks))  # (r, d)
            bounds["dk"] += tau * (p.T @ (a[:, None] * np.abs(q[rows]))
                                   + np.abs(ds).T @ (eps[:, None] * np.abs(q[rows])))  # (N, d)
            bounds["dv"] += p.T @ (eps[:, None] * np.abs(do[rows]))  # (N, d)
            # dK_j, dV_j: fp32 sums over the Q blocks, in order; the chunk holds whole Q blocks
            nb = -(-r // br)
            col_block = np.arange(n) // bc  # (N,)
            for name, left, right, scale in (("dk", ds, q[rows], tau), ("dv", p, do[rows], 1.0)):
                lb = np.zeros((nb * br, n))
                lb[:r] = left
                rb = np.zeros((nb * br, right.shape[1]))
                rb[:r] = right
                per_block = np.einsum("bri,brd->bid", lb.reshape(nb, br, n), rb.reshape(nb, br, -1))  # (nb, N, d)
                partial = running[name][None] + np.cumsum(per_block, axis=0)  # (nb, N, d)
                running[name] = partial[-1]
                q_block = r0 // br + np.arange(nb)  # (nb,)
                # tile (Q block b, K/V block of column c) computed: under causal, its first column ≤ b's last row
                done = (col_block[None, :] * bc <= np.minimum((q_block[:, None] + 1) * br, n) - 1
                        if problem.causal else np.ones((nb, n), bool))
                bounds[name] += scale * u32 * (np.abs(partial) * done[:, :, None]).sum(axis=0)
    if do is not None:  # dK, dV stored once (N = 1: the plain one can be exact where these are not)
        bounds["dk"] += u * tau * np.abs(running["dk"])
        bounds["dv"] += u * np.abs(running["dv"])
    return bounds


#: λ of the probabilistic rounding-error bound (after Higham & Mary, 2019): roundings modelled as independent
#: and uniform in [−e_k, e_k] are sub-Gaussian with variance e_k²/3, so a sum Σ_k c_k·δ_k exceeds
#: λ·sqrt(Σ_k (c_k·e_k)²) with probability at most 2·exp(−3λ²/2): 7.5e-11 at λ = 4, per output element
ROUNDING_LAMBDA = 4.0


def standard_rounding_bounds(problem: Problem, ops, q, k, v, do=None, keep=None) -> dict[str, np.ndarray]:
    """Bounds on the absolute error of one head's naive/eager outputs from every rounding of the op program
    (:mod:`flashsim.model.attention.standard.program`): {"out", and with `do` "dq", "dk", "dv"} → arrays.

    Why: the eager model rounds what the plain implementation rounds and more (S before and after a separate
    scale kernel, dS before and after the scale's gradient), and twice the plain error is a yardstick, not a
    bound: where the plain roundings happen to cancel, a valid eager output exceeded it (N = 58, d = 2, fp16:
    dK 5.7× the plain error). Every N×N intermediate is rounded, so a worst-case sum over a row is far too
    pessimistic (18% for bf16 at N = 1228, where the error is 1.8%): each rounding site s is a first-order
    perturbation δ_s, independent, mean-zero and |δ_s| ≤ e_s, and an output's error is bounded by
    λ·sqrt(Σ_s (J_s·e_s)²) (ROUNDING_LAMBDA; J_s the output's exact first-order sensitivity to site s). With
    u the storage dtype's unit roundoff, m = 2 for an unfused scale (else 1), the sites and their J:

    - S_ic stored m times (m sites of e = u·|S|): the softmax makes δP_ij = P_ij·(δ_jc − P_ic)·δS_ic, so
      O_i moves by P_ic·(V_c − O_i)·δS_ic, dS_ij = P_ij(dP_ij − D_i) by δS_ic·(δ_jc·dS_ic − P_ij·dS_ic − P_ic·dS_ij);
    - P_ic and dropout's P̃_ic stored (u·|P|): O_i by V_c·δ, dV_c by dO_i·δ, dS through P and D = rowsum(P∘dP);
    - dP̃ = dO·Vᵀ and dropout's dP stored (u·|dP|): dS_ij by P_ij·(δ_jc − P_ic)·δ;
    - dS stored m times (u·|dS| each), O, dQ, dK, dV stored once (u·|X|);
    - the fp32 sums (S over d, O and the gradients over N; softmax's row sum): min(n, λ·√n)·u₃₂ times the sum
      of the terms' magnitudes.

    The sums over sites are expanded into matrix products (no (N, N, d) arrays), in chunks of query rows. The
    bound is about the size of the plain implementation's own error, so a wrong answer still fails.
    """
    lam = ROUNDING_LAMBDA
    u, u32 = UNIT_ROUNDOFF[problem.dtype], UNIT_ROUNDOFF["fp32"]
    n, d = problem.n, problem.d
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))  # (N, d) each
    tau = softmax_scale(d)
    m_s = 1 if ops.fuse_scale else 2
    u_p = u + min(n + 3, lam * math.sqrt(n + 3)) * u32  # P's store, its fp32 row sum, exp, the fp32 round trip
    g_n, g_d = (min(x, lam * math.sqrt(x)) * u32 for x in (n, d))  # fp32 sums of N and d terms
    drop = problem.dropout_p > 0 and keep is not None
    sq = np.square

    out = np.zeros_like(q)
    if do is not None:
        do = np.asarray(do, np.float64)
        dq_b = np.zeros_like(q)
        dk_var, dv_var = np.zeros_like(k), np.zeros_like(v)  # Σ_s (J_s·e_s)² for dK, dV
        dk_acc, dv_acc = np.zeros_like(k), np.zeros_like(v)  # the fp32 sums' worst-case terms
        dk_sum, dv_sum = np.zeros_like(k), np.zeros_like(v)  # dK, dV themselves
    chunk = max(1, min(n, DEFAULT_CHUNK_BYTES // (8 * n)))
    with np.errstate(all="ignore"):
        for r0 in range(0, n, chunk):
            rows = slice(r0, min(r0 + chunk, n))
            qr = q[rows]  # (r, d)
            s = (qr @ k.T) * tau  # (r, N)
            # (r, N) |δS| of one site: S's m stores are m independent sites (their variances add)
            e_s = math.sqrt(m_s) * u * np.abs(s) + g_d * tau * (np.abs(qr) @ np.abs(k).T)
            if problem.causal:
                masked = causal_mask(r0, rows.stop - r0, 0, n, always=True)
                s = np.where(masked, -np.inf, s)
                e_s = np.where(masked, 0.0, e_s)
            p = np.exp(s - s.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)  # (r, N) P
            kf = keep[rows] / (1.0 - problem.dropout_p) if drop else np.ones_like(p)  # (r, N)
            pd = p * kf  # (r, N) P̃
            w_p = sq(u_p * p) + (sq(u * pd) if drop else 0.0)  # (r, N) e² of P's store (and P̃'s, as P)
            o = pd @ v  # (r, d)
            # O_i: Σ_c (P_ic e_ic)²(V_c − O_i)² + Σ_c e_P²·V_c²
            w = sq(p * kf * e_s)
            var_o = w @ sq(v) - 2 * o * (w @ v) + sq(o) * w.sum(axis=1, keepdims=True) + (w_p * sq(kf)) @ sq(v)
            out[rows] = lam * np.sqrt(np.maximum(var_o, 0.0)) + g_n * (pd @ np.abs(v)) + u * np.abs(o)
            if do is None:
                continue
            dor = do[rows]  # (r, d)
            dpd = dor @ v.T  # (r, N) dP̃
            dp = dpd * kf  # (r, N) dP
            e_dp = (u * np.abs(dpd) + g_d * (np.abs(dor) @ np.abs(v).T)) * kf + (u * np.abs(dp) if drop else 0.0)
            big_d = (p * dp).sum(axis=1, keepdims=True)  # (r, 1) D
            ds = p * (dp - big_d)  # (r, N) dS
            e_ds = math.sqrt(m_s) * u * np.abs(ds)  # (r, N) dS's m stores, as one site
            # (r, N) e_D, the fp32 row sum of D, enters dS_ij as −P_ij·δD_i
            e_d = g_n * (p * np.abs(dp)).sum(axis=1, keepdims=True)
            a_k, b_k = p @ k, ds @ k  # (r, d) (P·K)_i, (dS·K)_i
            # dQ_i = τ Σ_c δS_ic [dS_ic (K_c − a_i) − P_ic b_i]
            w1, w2, w3 = sq(e_s * ds), sq(e_s * p), sq(e_s) * ds * p
            var_q = (w1 @ sq(k) - 2 * a_k * (w1 @ k) + sq(a_k) * w1.sum(axis=1, keepdims=True)
                     + sq(b_k) * w2.sum(axis=1, keepdims=True) - 2 * b_k * (w3 @ k - a_k * w3.sum(axis=1, keepdims=True)))
            # + Σ_c δP_ic [(dP_ic − D_i) K_c − dP_ic a_i]
            cen = dp - big_d
            var_q += ((w_p * sq(cen)) @ sq(k) - 2 * a_k * ((w_p * cen * dp) @ k)
                      + sq(a_k) * (w_p * sq(dp)).sum(axis=1, keepdims=True))
            # + Σ_c δdP_ic P_ic (K_c − a_i), + Σ_c δdS_ic K_c
            w4 = sq(e_dp * p)
            var_q += w4 @ sq(k) - 2 * a_k * (w4 @ k) + sq(a_k) * w4.sum(axis=1, keepdims=True) + sq(e_ds) @ sq(k)
            dq = tau * b_k  # (r, d)
            dq_b[rows] = (tau * (lam * np.sqrt(np.maximum(var_q, 0.0)) + e_d * (p @ np.abs(k))
                                 + g_n * (np.abs(ds) @ np.abs(k))) + u * np.abs(dq))
            # dK_c = τ Σ_i dS_ic Q_i: per (i, c) the summed variance of row i's sites on dS_ic
            m_rows = (sq(ds) * sq(e_s * p).sum(axis=1, keepdims=True)
                      + 2 * p * ds * (sq(e_s) * p * ds).sum(axis=1, keepdims=True)
                      + sq(p) * sq(e_s * ds).sum(axis=1, keepdims=True) + sq(e_s * ds) * (1 - 4 * p))  # S sites
            m_rows += (sq(p) * (w_p * sq(dp)).sum(axis=1, keepdims=True)
                       + w_p * (sq(cen - p * dp) - sq(p * dp)))  # P's stores
            m_rows += sq(p) * ((sq(e_dp) * sq(p)).sum(axis=1, keepdims=True) + sq(e_dp) * (1 - 2 * p))  # dP
            m_rows += sq(e_ds)  # dS's stores
            dk_var += np.maximum(m_rows, 0.0).T @ sq(qr)
            dk_acc += (e_d * p).T @ np.abs(qr) + g_n * (np.abs(ds).T @ np.abs(qr))
            # dV_c = Σ_i P̃_ic dO_i: S sites through P, P's and P̃'s stores
            m_v = sq(kf * p) * ((sq(e_s * p)).sum(axis=1, keepdims=True) + sq(e_s) * (1 - 2 * p)) + w_p * sq(kf)
            dv_var += np.maximum(m_v, 0.0).T @ sq(dor)
            dv_acc += g_n * (pd.T @ np.abs(dor))
            dk_sum += tau * (ds.T @ qr)
            dv_sum += pd.T @ dor
    bounds = {"out": out}
    if do is not None:
        bounds["dq"] = dq_b
        bounds["dk"] = tau * (lam * np.sqrt(dk_var) + dk_acc) + u * np.abs(dk_sum)
        bounds["dv"] = lam * np.sqrt(dv_var) + dv_acc + u * np.abs(dv_sum)
    return bounds
