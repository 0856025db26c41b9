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
