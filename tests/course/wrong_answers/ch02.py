"""Wrong answers learners write for chapter 02, each with the diagnosis its checker must give."""
from flashsim.model.dtypes import dtype_bytes as b

CATALOGUE = [
    ("02.1", lambda n, d, dt: (3 * n * d * b(dt), n * d * b(dt)), "no_intermediates"),
    ("02.1", lambda n, d, dt: ((3 * n * d + n * n) * b(dt), (n * n + n * d) * b(dt)), "softmax_not_counted"),
    ("02.1", lambda n, d, dt: ((2 * n * n + n * d) * b(dt), (3 * n * d + 2 * n * n) * b(dt)), "reads_writes_swapped"),
    ("02.2", lambda n, bt, h, dt: n * n * bt * b(dt), "one_head"),
    ("02.2", lambda n, bt, h, dt: n * n * h * b(dt), "no_batch"),
    ("02.2", lambda n, bt, h, dt: n * 64 * bt * h * b(dt), "n_times_d"),
]

CATALOGUE += [
    ("02.2", lambda n, bt, h, dt: 2 * n * n * bt * h * b(dt), "s_and_p"),
    ("02.2", lambda n, bt, h, dt: n * n * bt * h, "elements_not_bytes"),
]
