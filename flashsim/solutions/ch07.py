"""Chapter 07 solutions (reference answers to :mod:`flashsim.course.ch07.checks`)."""
from __future__ import annotations

import numpy as np

__all__ = ["recompute_p_tile", "backward_tile"]

#: exercise id -> the functions that solve it (what flashsim.exercises.reveal shows)
SOLUTIONS = {"07.1": ("recompute_p_tile",), "07.2": ("backward_tile",)}


def recompute_p_tile(q_i, k_j, lse_i, scale):
    """P_ij = exp(τ Q_i K_jᵀ − L_i): the forward's probabilities, rebuilt from Q, K and the saved logsumexp.

    Introduced in chapter 07.
    """
    return np.exp((q_i @ k_j.T) * scale - lse_i[:, None])


def backward_tile(p, q_i, k_j, v_j, do_i, delta_i, scale):
    """One tile of Algorithm 4: returns this tile's contributions (dQ_i, dK_j, dV_j).

    dV_j += Pᵀ dO_i;  dP = dO_i V_jᵀ;  dS = P ∘ (dP − D_i);  dQ_i += τ dS K_j;  dK_j += τ dSᵀ Q_i.

    Introduced in chapter 07.
    """
    dv = p.T @ do_i
    dp = do_i @ v_j.T
    ds = p * (dp - delta_i[:, None])
    return scale * (ds @ k_j), scale * (ds.T @ q_i), dv
