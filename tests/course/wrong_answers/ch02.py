"""Wrong answers learners write for chapter 02, each with the diagnosis its checker must give."""
from flashsim.model.dtypes import dtype_bytes as b

CATALOGUE = [
    ("02.1", lambda n, d, dt: (3 * n * d * b(dt), n * d * b(dt)), "no_intermediates"),
    ("02.1", lambda n, d, dt: (3 * n * d * b(dt) + n * n * 4, n * n * 4 + n * d * b(dt)), "softmax_not_counted"),
    ("02.1", lambda n, d, dt: (2 * n * n * 4 + n * d * b(dt), 3 * n * d * b(dt) + 2 * n * n * 4),
     "reads_writes_swapped"),
    # the chapter's own formula, transcribed: S and P in the storage dtype
    ("02.1", lambda n, d, dt: ((3 * n * d + 2 * n * n) * b(dt), (2 * n * n + n * d) * b(dt)), "sp_in_storage_dtype"),
    ("02.1", lambda n, d, dt: ((3 * n * d + 2 * n * n) * 4, (2 * n * n + n * d) * 4), "all_fp32"),
    ("02.1", lambda n, d, dt: (3 * n * d * b(dt) + n * n * 4, 2 * n * n * 4 + n * d * b(dt)), "p_not_read"),
    ("02.2", lambda n, bt, h, dt: n * n * bt * b(dt), "one_head"),
    ("02.2", lambda n, bt, h, dt: n * n * h * b(dt), "no_batch"),
    ("02.2", lambda n, bt, h, dt: n * 64 * bt * h * b(dt), "n_times_d"),
]

CATALOGUE += [
    ("02.2", lambda n, bt, h, dt: 2 * n * n * bt * h * b(dt), "s_and_p"),
    ("02.2", lambda n, bt, h, dt: n * n * bt * h, "elements_not_bytes"),
]
