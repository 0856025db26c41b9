"""Wrong answers learners write for chapter 09, each with the diagnosis its checker must give."""
from flashsim.model.kernel_io import kernel_io


def _requested(b, h, n, d, es):
    r = kernel_io("flash_fwd", n, d, 128, 64, batch=b, heads=h, dtype={2: "fp16", 4: "fp32"}[es])
    return r.load_bytes + r.store_bytes


def _kv_rows(n, br, tr=None):
    return sum(min((i + 1) * br, n) for i in range(-(-n // br) if tr is None else tr))


def causal_bytes(n, d, br, b, s, *, kv_rows=None, lse=True, tr=None):
    """The right causal count, with one of a learner's slips switched on."""
    rows = _kv_rows(n, br, tr) if kv_rows is None else kv_rows
    return 2 * n * d * b + 2 * rows * d * b + (n * s if lse else 0)


CATALOGUE = [
    # the chapter's non-causal count, transcribed
    ("09.1", lambda n, d, br, b, s: 2 * n * d * b + -(-n // br) * 2 * n * d * b + n * s, "causal_ignored"),
    ("09.1", lambda n, d, br, b, s: causal_bytes(n, d, br, b, s, kv_rows=sum(
        (i + 1) * br for i in range(-(-n // br)))), "ragged_tile_full"),
    ("09.1", lambda n, d, br, b, s: 2 * n * d * b + n * s + n * d * b * (-(-n // br) + 1), "ratio_not_for_ragged"),
    ("09.1", lambda n, d, br, b, s: causal_bytes(n, d, br, b, s, kv_rows=-(-n // br) * n // 2), "exact_half"),
    ("09.1", lambda n, d, br, b, s: causal_bytes(n, d, br, b, s, lse=False), "lse_missing"),
    ("09.1", lambda n, d, br, b, s: causal_bytes(n, d, br, b, b), "lse_in_elem_bytes"),
    ("09.1", lambda n, d, br, b, s: causal_bytes(n, d, br, b, s, tr=n // br), "floor_not_ceil"),
    ("09.2", _requested, "requested_not_dram"),
    ("09.2", lambda b, h, n, d, es: b * h * (3 * n * d * es + 4 * n), "output_missing"),
    ("09.2", lambda b, h, n, d, es: 4 * n * d * es + 4 * n, "one_head"),
]

CATALOGUE += [
    # issue 26: leaving out the logsumexp (4·B·H·N bytes) passed at 2 %, with ✔ next to unequal numbers
    ("09.2", lambda b, h, n, d, es: b * h * 4 * n * d * es, "lse_missing"),
    ("09.2", lambda b, h, n, d, es: b * h * (4 * n * d * es + n * es), "lse_in_elem_bytes"),
    ("09.2", lambda b, h, n, d, es: b * h * (2 * n * d * es + 4 * n), "kv_missing"),
]
