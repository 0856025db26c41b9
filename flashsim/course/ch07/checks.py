"""Chapter 07 exercises: the backward pass by recomputation (Algorithm 4 in FA2's form).

07.1 grades the learner's recomputed probability tiles against the exact softmax probabilities; 07.2 plugs the
learner's tile backward into an Algorithm-4 loop on the simulated memory, compares the gradients with the model's
float64 ones and prints the loop's read/write table next to :func:`flashsim.traffic`'s backward count (they agree
byte for byte: recomputation reads Q, K, V, dO, L and D, never an N×N P).
"""
from __future__ import annotations

import numpy as np

from flashsim.course.kit.checker import (LearnerError, Verdict, call_learner, error_verdict, exercise, loop_table,
                                         random_qkv, verdict)
from flashsim.model.attention.reference import reference_attention, reference_attention_grads, softmax_scale
from flashsim.model.memory import Memory
from flashsim.model.simulator import traffic
from flashsim.model.table import Table

__all__ = ["check_recompute_p_tile", "check_backward_tile"]

RECOMPUTE_P = exercise(
    "07.1", "recompute a probability tile",
    "fn(q_i, k_j, lse_i, scale) -> P_ij (Br, Bc): the forward pass's softmax probabilities of tile (i, j), rebuilt "
    "from Q_i, K_j and the saved logsumexp L_i alone.",
    ("The forward pass saved one number per row, L = m + log ℓ. What is e^(s − L) for a score s of that row?",
     "Recompute the tile's scores exactly as the forward did (with the scale), then use L in place of both the max "
     "and the sum.",
     "Compute the tile's scores with the scale, subtract L_i from each row, then exponentiate."),
    "check_recompute_p_tile")

BACKWARD_TILE = exercise(
    "07.2", "one tile of the backward pass",
    "fn(p, q_i, k_j, v_j, do_i, delta_i, scale) -> (dq_i, dk_j, dv_j): tile (i, j)'s contributions to the three "
    "gradients, with delta_i = D_i = rowsum(dO_i ∘ O_i).",
    ("O = P V: which gradient needs only P and dO? And what does the softmax's Jacobian do to dP?",
     "dV from Pᵀ and dO; dP from dO and V; the softmax turns dP into dS using D; dQ and dK come from dS and carry "
     "the scale of S = scale·QKᵀ.",
     "Start from dV (P and dO) and dP (dO and V); the softmax's Jacobian turns dP into dS with P and D; dQ "
     "and dK are one product with dS each, times the scale."),
    "check_backward_tile")

_CASES = ((16, 8, 4, 4), (22, 8, 8, 4))  # (N, d, Br, Bc): square and ragged


def _exact_p(q, k):
    """The forward's probabilities, float64 (N, N), and its logsumexp (N,)."""
    tau = softmax_scale(q.shape[1])
    _, lse = reference_attention(q, k, k, sm_scale=tau, return_lse=True)
    return np.exp((q.astype(np.float64) @ k.T.astype(np.float64)) * tau - lse[:, None]), lse


def check_recompute_p_tile(fn, quiet: bool = False) -> Verdict:
    """Exercise 07.1: every tile of P against the exact probabilities, on square and ragged tilings."""
    rows, worst = [], 0.0
    for case, (n, d, br, bc) in enumerate(_CASES):
        q, k, _ = random_qkv(n, d, 20 + case)
        p, lse = _exact_p(q, k)
        tau = softmax_scale(d)
        for i0 in range(0, n, br):
            for j0 in range(0, n, bc):
                where = f"N={n}, d={d}, tile rows {i0}.., cols {j0}.."
                qi, kj, li = q[i0:i0 + br], k[j0:j0 + bc], lse[i0:i0 + br].astype(np.float32)
                try:
                    got = np.asarray(call_learner(fn, qi.copy(), kj.copy(), li.copy(), tau), np.float64)
                except LearnerError as err:
                    return error_verdict(RECOMPUTE_P, err, where, quiet=quiet)
                want = p[i0:i0 + br, j0:j0 + bc]
                if got.shape != want.shape:
                    if got.shape == want.shape[::-1]:
                        return verdict(RECOMPUTE_P, False, f"P tile has shape {got.shape}, expected {want.shape} "
                                       f"({where}): your tile is transposed (K_j Q_iᵀ); its rows are the queries",
                                       diagnosis="transposed", quiet=quiet)
                    return verdict(RECOMPUTE_P, False, f"P tile has shape {got.shape}, expected {want.shape} "
                                   f"({where})", diagnosis="wrong_shape", quiet=quiet)
                err = float(np.abs(got - want).max()) if np.isfinite(got).all() else np.inf
                worst = max(worst, err)
                if not err < 1e-5:
                    s = (qi.astype(np.float64) @ kj.T) * tau
                    with np.errstate(all="ignore"):
                        tile_softmax = np.exp(s - s.max(1, keepdims=True))
                        tile_softmax /= tile_softmax.sum(1, keepdims=True)
                        unscaled = np.exp(qi.astype(np.float64) @ kj.T - li[:, None])
                        plus_l = np.exp(s + li[:, None])
                        base2 = np.exp2(s - li[:, None])
                        scale_on_l = np.exp(s - tau * li[:, None])
                    if not np.isfinite(got).all():
                        key, why = "non_finite", "the tile holds NaN/inf where every exact probability is in [0, 1]"
                    elif np.allclose(got, tile_softmax, atol=1e-5):
                        key, why = "normalised_per_tile", ("each row of your tile sums to 1 over the tile's own "
                                                           "columns: the row's probabilities are spread over all "
                                                           "its tiles, and L says how")
                    elif np.allclose(got, unscaled, atol=1e-5, rtol=1e-4):
                        key, why = "wrong_scale", ("your tile equals exp(Q Kᵀ − L): the scores the forward "
                                                   "exponentiated were scaled")
                    elif np.allclose(got, plus_l, rtol=1e-4):
                        key, why = "sign_of_l", "your tile equals exp(s + L): L is subtracted"
                    elif np.allclose(got, base2, atol=1e-5, rtol=1e-4):
                        key, why = "exp2_not_exp", ("your tile equals 2^(s − L): the forward's L = m + log ℓ is in "
                                                    "natural-log units, so P = e^(s − L)")
                    elif np.allclose(got, scale_on_l, atol=1e-5, rtol=1e-4):
                        key, why = "scale_on_l", ("your tile equals exp(scale·(Q Kᵀ − L)): the scale belongs to the "
                                                  "scores only; L is already in the scaled units")
                    elif got.shape[::-1] == want.shape and got.shape == want.shape and np.allclose(got.T, want,
                                                                                                   atol=1e-5):
                        key, why = "transposed", ("your tile is P_ij transposed (K_j Q_iᵀ): row a of the tile is "
                                                  "query i·Br + a")
                    else:
                        key, why = "wrong_values", f"max |P − exact| = {err:.3g}"
                    rows.append([f"N={n}, Br={br}, Bc={bc}", f"{err:.2g}", "✘"])
                    return verdict(RECOMPUTE_P, False, f"{why} ({where})", diagnosis=key,
                                   table=Table(["case", "max |P − exact|", "ok"], rows), max_error=err,
                                   quiet=quiet)
        rows.append([f"N={n}, Br={br}, Bc={bc}", f"{worst:.2g}", "✔"])
    return verdict(RECOMPUTE_P, True, f"every tile equals the forward's probabilities (max error {worst:.1e}), "
                   "rebuilt from L alone", table=Table(["case", "max |P − exact|", "ok"], rows), max_error=worst,
                   quiet=quiet)


def _alg4_loop(backward_tile, q, k, v, do, block_r, block_c):
    """FA2-form Algorithm 4 on a Memory (fp32) with exact P tiles and the learner's tile backward: preprocess
    D = rowsum(dO∘O), outer loop over K/V blocks j, inner over Q blocks i. Returns ((dq, dk, dv), counters)."""
    n, d = q.shape
    o, lse = reference_attention(q, k, v, return_lse=True)
    p_all, _ = _exact_p(q, k)
    # one step's tiles, fp32: K_j, V_j; Q_i, dO_i, dQ_i; L_i, D_i (the preprocessing's O_i, dO_i fit in less)
    mem = Memory(sram_capacity_bytes=(2 * block_c * d + 3 * block_r * d + 2 * block_r) * 4, dtype="fp32",
                 record_events=False)
    for name, x in (("Q", q), ("K", k), ("V", v), ("O", o), ("dO", do)):
        mem.put(name, x)
    mem.put("L", lse)
    mem.empty("D", (n,))
    mem.empty("dQ", (n, d), fill=0.0)   # zeroed before the loop: a memset, not counted
    mem.empty("dK", (n, d))
    mem.empty("dV", (n, d))
    tau = softmax_scale(d)
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
            mem.load("L", rs, tile=(i,))          # what recomputing P reads (07.1); the exact tile is used here
            d_i = mem.load("D", rs, tile=(i,))
            p = p_all[rs, cs].astype(np.float32)
            dq_c, dk_c, dv_c = (np.asarray(x, np.float32) for x in
                                call_learner(backward_tile, p, q_i, k_j, v_j, do_i, d_i, tau))
            mem.compute(10 * p.shape[0] * p.shape[1] * d, tile=(i, j))
            mem.store("dQ", dq_i + dq_c, rs, tile=(i,))
            dk += dk_c
            dv += dv_c
            mem.free(*(f"{t}{(i,)}" for t in ("Q", "dO", "dQ", "L", "D")))
        mem.store("dK", dk, cs, tile=(j,))
        mem.store("dV", dv, cs, tile=(j,))
        mem.free(f"K{(j,)}", f"V{(j,)}")
    return (mem.hbm("dQ").copy(), mem.hbm("dK").copy(), mem.hbm("dV").copy()), mem.counters


def _rel(got, ref) -> float:
    return float(np.abs(got - ref).max() / np.abs(ref).max()) if np.isfinite(got).all() else np.inf


def _gradient_diagnosis(grads, want, bad, q, k, v, do) -> tuple[str, str]:
    """(key, why) for wrong gradients: which known wrong dS (or scale) the learner's dQ and dK equal."""
    if any(not np.isfinite(x).all() for x in grads):
        return "non_finite", "a gradient holds NaN/inf"
    tau = softmax_scale(q.shape[1])
    p, _ = _exact_p(q, k)
    dp = do.astype(np.float64) @ v.T.astype(np.float64)
    o = p @ v.astype(np.float64)
    delta = (do.astype(np.float64) * o).sum(1, keepdims=True)
    if "dV" in bad:
        return "dv_wrong", ("dV is wrong, and dV depends on P and dO alone: a key's dV sums over the queries that "
                            "saw it")
    cands = (("missing_delta", p * dp, tau, "dV is right; dQ and dK equal what dS = P ∘ dP gives: the softmax's "
              "Jacobian also subtracts D = rowsum(dO ∘ O) from dP"),
             ("ds_without_p", dp - delta, tau, "dV is right; dQ and dK equal what dS = dP − D gives: the softmax's "
              "Jacobian multiplies by P, dS = P ∘ (dP − D)"),
             ("sign_flipped", p * (delta - dp), tau, "dV is right; dQ and dK have the wrong sign: dS = P ∘ (dP − D), "
              "not P ∘ (D − dP)"),
             ("missing_scale", p * (dp - delta), 1.0, f"dV is right; dQ and dK are {1 / tau:.4g}× the exact ones, "
              "= √d: S = scale·QKᵀ, so its gradient carries the scale"),
             ("scale_twice", p * (dp - delta), tau * tau, "dV is right; dQ and dK carry the scale twice: S = scale·QKᵀ "
              "gives one factor of scale"))
    for key, ds, sc, why in cands:
        if _rel(grads[0], sc * ds @ k.astype(np.float64)) < 1e-4 and \
                _rel(grads[1], sc * ds.T @ q.astype(np.float64)) < 1e-4:
            return key, why
    if _rel(grads[0], want[0]) < 1e-4 and "dK" in bad:
        return "dk_wrong", "dV and dQ are right, dK is not: a key's gradient sums dS over the queries (dSᵀ)"
    return "wrong_gradients", f"{', '.join(bad)} wrong, dV right"


def check_backward_tile(fn, quiet: bool = False) -> Verdict:
    """Exercise 07.2: dQ, dK, dV of the Algorithm-4 loop against the model's float64 gradients."""
    table, worst = None, {}
    for case, (n, d, br, bc) in enumerate(_CASES):
        where = f"N={n}, d={d}, Br={br}, Bc={bc}"
        q, k, v = random_qkv(n, d, 20 + case)
        do = random_qkv(n, d, 40 + case)[0]
        try:
            grads, counters = _alg4_loop(fn, q, k, v, do, br, bc)
        except LearnerError as err:
            return error_verdict(BACKWARD_TILE, err, where, quiet=quiet)
        sim = traffic("flash2", n, d, block_r=br, block_c=bc, dtype="fp32", stats_dtype="fp32", backward=True,
                      sram_bytes=1 << 30).backward_part
        table = loop_table(counters, sim, label="the checker's Algorithm-4 loop",
                           want_label="flashsim.traffic backward")
        want = reference_attention_grads(q, k, v, do)
        worst = {g: _rel(got, ref) for g, got, ref in zip(("dQ", "dK", "dV"), grads, want)}
        bad = [g for g, e in worst.items() if not e < 1e-4]
        if not bad:
            continue
        errs = ", ".join(f"{g} {e:.2g}" for g, e in worst.items())
        key, why = _gradient_diagnosis(grads, want, bad, q, k, v, do)
        return verdict(BACKWARD_TILE, False, f"relative errors {errs} at {where} (✘ gradients): {why}",
                       diagnosis=key, table=table, errors=worst, quiet=quiet)
    return verdict(BACKWARD_TILE, True, "dQ, dK, dV match the float64 gradients; the loop read Q, K, V, dO, L, D and "
                   "never an N×N P (bytes = the simulator's flash2 backward)", table=table, errors=worst,
                   quiet=quiet)
