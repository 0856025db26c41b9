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


def p_exp2(q_i, k_j, lse_i, scale):
    return np.exp2((q_i @ k_j.T) * scale - lse_i[:, None])


def p_scale_on_l(q_i, k_j, lse_i, scale):
    return np.exp(scale * (q_i @ k_j.T - lse_i[:, None]))


def p_transposed(q_i, k_j, lse_i, scale):
    return np.exp((k_j @ q_i.T) * scale - lse_i[None, :])


def tile_ds_without_p(p, q_i, k_j, v_j, do_i, delta_i, scale):
    ds = do_i @ v_j.T - delta_i[:, None]
    return scale * (ds @ k_j), scale * (ds.T @ q_i), p.T @ do_i


def tile_sign_flipped(p, q_i, k_j, v_j, do_i, delta_i, scale):
    ds = p * (delta_i[:, None] - do_i @ v_j.T)
    return scale * (ds @ k_j), scale * (ds.T @ q_i), p.T @ do_i


def tile_scale_twice(p, q_i, k_j, v_j, do_i, delta_i, scale):
    ds = scale * p * (do_i @ v_j.T - delta_i[:, None])
    return scale * (ds @ k_j), scale * (ds.T @ q_i), p.T @ do_i


def tile_dv_not_transposed(p, q_i, k_j, v_j, do_i, delta_i, scale):
    """dV = P dO: right shape only for square tiles, wrong numbers."""
    ds = p * (do_i @ v_j.T - delta_i[:, None])
    dv = p @ do_i if p.shape[0] == p.shape[1] else p.T @ do_i * 0
    return scale * (ds @ k_j), scale * (ds.T @ q_i), dv


CATALOGUE += [
    ("07.1", p_exp2, "exp2_not_exp"),
    ("07.1", p_scale_on_l, "scale_on_l"),
    ("07.1", p_transposed, "transposed"),
    ("07.2", tile_ds_without_p, "ds_without_p"),
    ("07.2", tile_sign_flipped, "sign_flipped"),
    ("07.2", tile_scale_twice, "scale_twice"),
    ("07.2", tile_dv_not_transposed, "dv_wrong"),
]
