"""Wrong answers learners write for chapter 07, each with the diagnosis its checker must give."""
import numpy as np


def p_local_softmax(q_i, k_j, lse_i, scale):
    """Normalises each tile on its own instead of using the row's logsumexp."""
    s = (q_i @ k_j.T) * scale
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def p_no_scale(q_i, k_j, lse_i, scale):
    return np.exp(q_i @ k_j.T - lse_i[:, None])


def p_plus_l(q_i, k_j, lse_i, scale):
    return np.exp((q_i @ k_j.T) * scale + lse_i[:, None])


def tile_no_delta(p, q_i, k_j, v_j, do_i, delta_i, scale):
    """Forgets the softmax Jacobian's second term: dS = P ∘ dP."""
    ds = p * (do_i @ v_j.T)
    return scale * (ds @ k_j), scale * (ds.T @ q_i), p.T @ do_i


def tile_no_scale(p, q_i, k_j, v_j, do_i, delta_i, scale):
    """Forgets the 1/√d of S = τ QKᵀ in dQ and dK."""
    ds = p * (do_i @ v_j.T - delta_i[:, None])
    return ds @ k_j, ds.T @ q_i, p.T @ do_i


def tile_dp_not_transposed(p, q_i, k_j, v_j, do_i, delta_i, scale):
    dp = do_i @ v_j          # shapes (Br, d) @ (Bc, d): raises
    ds = p * (dp - delta_i[:, None])
    return scale * (ds @ k_j), scale * (ds.T @ q_i), p.T @ do_i


CATALOGUE = [
    ("07.1", p_local_softmax, "normalised_per_tile"),
    ("07.1", p_no_scale, "wrong_scale"),
    ("07.1", p_plus_l, "sign_of_l"),
    ("07.2", tile_no_delta, "missing_delta"),
    ("07.2", tile_no_scale, "missing_scale"),
    ("07.2", tile_dp_not_transposed, "learner_error"),
]
