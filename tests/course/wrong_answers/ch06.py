"""Wrong answers learners write for chapter 06, each with the diagnosis its checker must give."""


def _fits(algo, n, d, bh, b, cap):
    return bh * (4 * n * d * b + (2 * n * n * b if algo == "naive" else 4 * n)) <= cap


def _largest(cap, d, bh, b, algo):
    n = 0
    step = 1 << 40
    while step:
        if _fits(algo, n + step, d, bh, b, cap):
            n += step
        else:
            step //= 2
    return n


CATALOGUE = [
    ("06.1", lambda n, d: 4 * (2 * n * n + 2 * n + n * d), "two_nxn_buffers"),
    ("06.1", lambda n, d: 4 * n * d, "no_n2_term"),
    ("06.1", lambda n, d: 2 * (n * n + 2 * n + n * d), "two_bytes_per_float"),
    ("06.2", lambda cap, d, bh, b, algo: _largest(cap, d, bh, b, algo) + 1, "first_misfit"),
    ("06.2", lambda cap, d, bh, b, algo: _largest(cap, d, 1, b, algo), "one_head"),
    ("06.2", lambda cap, d, bh, b, algo: _largest(cap, d, bh, b, "flash"), "algo_ignored"),
]


def _largest_with(cap, fits):
    n, step = 0, 1 << 40
    while step:
        if fits(n + step):
            n += step
        else:
            step //= 2
    return n


CATALOGUE += [
    ("06.1", lambda n, d: 8 * (n * n + 2 * n + n * d), "float64_assumed"),
    ("06.1", lambda n, d: 4 * (n * n + 2 * n + 4 * n * d), "inputs_counted"),
    ("06.1", lambda n, d: 4 * (n * n + 2 * n), "output_missing"),
    ("06.2", lambda cap, d, bh, b, algo: _largest(cap, d, bh, 1, algo), "elem_bytes_ignored"),
    ("06.2", lambda cap, d, bh, b, algo: _largest_with(cap, lambda n: bh * (4 * n * d * b + (
        n * n * b if algo == "naive" else 4 * n)) <= cap), "one_nxn_matrix"),
]
