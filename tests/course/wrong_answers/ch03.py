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


def tiled_qkt_transposed(mem, n, d, block_r, block_c):
    """Writes K_j Q_iᵀ at the mirrored place: S comes out transposed."""
    for i, r0 in enumerate(range(0, n, block_r)):
        rows = slice(r0, min(r0 + block_r, n))
        q = mem.load("Q", rows=rows, tile=(i,))
        for j, c0 in enumerate(range(0, n, block_c)):
            cols = slice(c0, min(c0 + block_c, n))
            k = mem.load("K", rows=cols, tile=(j,))
            mem.store("S", k @ q.T, rows=cols, cols=rows, tile=(j, i))
            mem.free(f"K{(j,)}")
        mem.free(f"Q{(i,)}")


def tiled_qkt_k_outside(mem, n, d, block_r, block_c):
    """The outer loop over K blocks: K read once, Q once per K block."""
    for j, c0 in enumerate(range(0, n, block_c)):
        cols = slice(c0, min(c0 + block_c, n))
        k = mem.load("K", rows=cols, tile=(j,))
        for i, r0 in enumerate(range(0, n, block_r)):
            rows = slice(r0, min(r0 + block_r, n))
            q = mem.load("Q", rows=rows, tile=(i,))
            mem.store("S", q @ k.T, rows=rows, cols=cols, tile=(i, j))
            mem.free(f"Q{(i,)}")
        mem.free(f"K{(j,)}")


def tiled_qkt_stores_twice(mem, n, d, block_r, block_c):
    """Stores a zeroed S tile first, then the result."""
    for i, r0 in enumerate(range(0, n, block_r)):
        rows = slice(r0, min(r0 + block_r, n))
        q = mem.load("Q", rows=rows, tile=(i,))
        for j, c0 in enumerate(range(0, n, block_c)):
            cols = slice(c0, min(c0 + block_c, n))
            k = mem.load("K", rows=cols, tile=(j,))
            mem.store("S", 0 * (q @ k.T), rows=rows, cols=cols, tile=(i, j))
            mem.store("S", q @ k.T, rows=rows, cols=cols, tile=(i, j))
            mem.free(f"K{(j,)}")
        mem.free(f"Q{(i,)}")


CATALOGUE += [
    ("03.1", tiled_qkt_transposed, "transposed"),
    ("03.1", tiled_qkt_k_outside, "loop_order_swapped"),
    ("03.1", tiled_qkt_stores_twice, "extra_stores_S"),
    ("03.3", lambda r, c, d, dt, s: (2 * r * d + 2 * c * d) * dtype_bytes(dt) + r * c * 4 <= s, "fa1_tile_set"),
    ("03.3", lambda r, c, d, dt, s: r * d + c * d + r * c <= s, "elements_not_bytes"),
]
