"""Wrong answers learners write for chapter 09, each with the diagnosis its checker must give."""
from flashsim.model.kernel_io import kernel_io


def _requested(b, h, n, d, es):
    r = kernel_io("flash_fwd", n, d, 128, 64, batch=b, heads=h, dtype={2: "fp16", 4: "fp32"}[es])
    return r.load_bytes + r.store_bytes


CATALOGUE = [
    ("09.1", lambda n, d, br, b, s: 2 * n * d * b + (n // br) * 2 * n * d * b + n * s, "floor_not_ceil"),
    ("09.1", lambda n, d, br, b, s: 2 * n * d * b + -(-n // br) * 2 * n * d * b, "lse_missing"),
    ("09.1", lambda n, d, br, b, s: 4 * n * d * b + n * s, "kv_read_once"),
    ("09.2", _requested, "requested_not_dram"),
    ("09.2", lambda b, h, n, d, es: b * h * (3 * n * d * es + 4 * n), "output_missing"),
    ("09.2", lambda b, h, n, d, es: 4 * n * d * es + 4 * n, "one_head"),
]

CATALOGUE += [
    ("09.1", lambda n, d, br, b, s: 2 * n * d * b + -(-n // br) * 2 * n * d * b + n * b, "lse_in_elem_bytes"),
    ("09.1", lambda n, d, br, b, s: 2 * n * d * b + -(-n // 64) * 2 * n * d * b + n * s, "kv_per_column_block"),
    ("09.1", lambda n, d, br, b, s: 3 * n * d * b + -(-n // br) * 2 * n * d * b + n * s, "o_read_too"),
    # issue 26: leaving out the logsumexp (4·B·H·N bytes) passed at 2 %, with ✔ next to unequal numbers
    ("09.2", lambda b, h, n, d, es: b * h * 4 * n * d * es, "lse_missing"),
    ("09.2", lambda b, h, n, d, es: b * h * (4 * n * d * es + n * es), "lse_in_elem_bytes"),
    ("09.2", lambda b, h, n, d, es: b * h * (2 * n * d * es + 4 * n), "kv_missing"),
]
