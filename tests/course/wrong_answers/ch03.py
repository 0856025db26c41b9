"""Wrong answers learners write for chapter 03, each with the diagnosis its checker must give."""
from flashsim.model.dtypes import dtype_bytes


def tiled_qkt_reloads_q(mem, n, d, block_r, block_c):
    """Loads Q_i again for every K tile."""
    for i, r0 in enumerate(range(0, n, block_r)):
        rows = slice(r0, min(r0 + block_r, n))
        for j, c0 in enumerate(range(0, n, block_c)):
            q = mem.load("Q", rows=rows, tile=(i,))
            cols = slice(c0, min(c0 + block_c, n))
            k = mem.load("K", rows=cols, tile=(j,))
            mem.scratch("S_ij", q.shape[0] * k.shape[0] * 4)
            mem.store("S", q @ k.T, rows=rows, cols=cols, tile=(i, j))
            mem.free(f"K{(j,)}", "S_ij", f"Q{(i,)}")


def tiled_qkt_floor(mem, n, d, block_r, block_c):
    """range(n // block) drops the ragged last blocks."""
    for i in range(n // block_r):
        rows = slice(i * block_r, (i + 1) * block_r)
        q = mem.load("Q", rows=rows, tile=(i,))
        for j in range(n // block_c):
            cols = slice(j * block_c, (j + 1) * block_c)
            k = mem.load("K", rows=cols, tile=(j,))
            mem.scratch("S_ij", q.shape[0] * k.shape[0] * 4)
            mem.store("S", q @ k.T, rows=rows, cols=cols, tile=(i, j))
            mem.free(f"K{(j,)}", "S_ij")
        mem.free(f"Q{(i,)}")


def tiled_qkt_never_frees(mem, n, d, block_r, block_c):
    """Keeps every K tile on chip."""
    for i, r0 in enumerate(range(0, n, block_r)):
        rows = slice(r0, min(r0 + block_r, n))
        q = mem.load("Q", rows=rows, tile=(i,))
        for j, c0 in enumerate(range(0, n, block_c)):
            cols = slice(c0, min(c0 + block_c, n))
            k = mem.load("K", rows=cols, tile=(i, j))
            mem.store("S", q @ k.T, rows=rows, cols=cols, tile=(i, j))


def tiled_qkt_typo(mem, n, d, block_r, block_c):
    """A typo: the learner's own line must be shown."""
    for i, r0 in enumerate(range(0, n, block_r)):
        q = mem.load("Q", rows=slice(r0, min(r0 + block_r, n)), tile=(i,))
        return q @ kk.T  # noqa: F821


CATALOGUE = [
    ("03.1", tiled_qkt_reloads_q, "q_reloaded"),
    ("03.1", tiled_qkt_floor, "not_written"),
    ("03.1", tiled_qkt_never_frees, "tile_not_freed"),
    ("03.1", tiled_qkt_typo, "learner_error"),
    ("03.2", lambda bc, d, dt: 4 * d * (bc - 1) + 1, "bytes_not_elements"),
    ("03.2", lambda bc, d, dt: 4 * d * bc * dtype_bytes(dt), "not_smallest"),
    ("03.2", lambda bc, d, dt: 4 * d * (bc - 1) * dtype_bytes(dt), "one_element_short"),
    ("03.2", lambda bc, d, dt: (d * (bc - 1) + 1) * dtype_bytes(dt), "quarter_missing"),
    ("03.2", lambda bc, d, dt: (4 * d * (bc - 1) + 1) * 4, "fp32_assumed"),
    ("03.3", lambda r, c, d, dt, s: (r * d + c * d) * dtype_bytes(dt) <= s, "s_tile_missing"),
    ("03.3", lambda r, c, d, dt, s: (r * d + c * d + r * c) * dtype_bytes(dt) <= s, "s_in_storage_dtype"),
    ("03.3", lambda r, c, d, dt, s: (r * d + c * d) * dtype_bytes(dt) + r * c * 4 < s, "strict"),
]


def _qkt(mem, n, d, block_r, block_c, *, transposed=False, k_outside=False, store_twice=False):
    """The tiled loop with one learner's slip switched on; the outer operand's block stays on chip."""
    outer, inner = (("K", block_c), ("Q", block_r)) if k_outside else (("Q", block_r), ("K", block_c))
    for a, a0 in enumerate(range(0, n, outer[1])):
        arows = slice(a0, min(a0 + outer[1], n))
        x = mem.load(outer[0], rows=arows, tile=(a,))
        for b, b0 in enumerate(range(0, n, inner[1])):
            brows = slice(b0, min(b0 + inner[1], n))
            y = mem.load(inner[0], rows=brows, tile=(b,))
            (i, rows, q), (j, cols, k) = ((b, brows, y), (a, arows, x)) if k_outside else ((a, arows, x),
                                                                                           (b, brows, y))
            if transposed:   # K_j Q_iᵀ written at the mirrored place: S comes out transposed
                mem.store("S", k @ q.T, rows=cols, cols=rows, tile=(j, i))
            else:
                if store_twice:
                    mem.store("S", 0 * (q @ k.T), rows=rows, cols=cols, tile=(i, j))
                mem.store("S", q @ k.T, rows=rows, cols=cols, tile=(i, j))
            mem.free(f"{inner[0]}{(b,)}")
        mem.free(f"{outer[0]}{(a,)}")


def tiled_qkt_transposed(mem, n, d, block_r, block_c):
    _qkt(mem, n, d, block_r, block_c, transposed=True)


def tiled_qkt_k_outside(mem, n, d, block_r, block_c):
    _qkt(mem, n, d, block_r, block_c, k_outside=True)


def tiled_qkt_stores_twice(mem, n, d, block_r, block_c):
    """Stores a zeroed S tile first, then the result."""
    _qkt(mem, n, d, block_r, block_c, store_twice=True)


CATALOGUE += [
    ("03.1", tiled_qkt_transposed, "transposed"),
    ("03.1", tiled_qkt_k_outside, "loop_order_swapped"),
    ("03.1", tiled_qkt_stores_twice, "extra_stores_S"),
    ("03.3", lambda r, c, d, dt, s: (2 * r * d + 2 * c * d) * dtype_bytes(dt) + r * c * 4 <= s, "fa1_tile_set"),
    ("03.3", lambda r, c, d, dt, s: r * d + c * d + r * c <= s, "elements_not_bytes"),
]
