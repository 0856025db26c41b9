"""Wrong answers learners write for chapter 01, each with the diagnosis its checker must give."""
from flashsim.model.dtypes import dtype_bytes
from flashsim.model.hardware import get_device


def _hw(dev):
    return get_device(dev)


CATALOGUE = [
    ("01.1", lambda m, n, k, dt: m * n * k / ((m * k + k * n + m * n) * dtype_bytes(dt)), "one_flop_per_mac"),
    ("01.1", lambda m, n, k, dt: 2 * m * n * k / ((m * k + k * n) * dtype_bytes(dt)), "c_not_written"),
    ("01.1", lambda m, n, k, dt: 2 * m * n * k / (m * k + k * n + m * n), "elements_not_bytes"),
    ("01.2", lambda i, dev: "memory" if i >= _hw(dev).ridge_point_flops_per_byte else "compute", "reversed"),
    ("01.2", lambda i, dev: "compute" if i >= 200 else "memory", "fixed_ridge"),
    ("01.2", lambda i, dev: "compute" if i > 100 else "memory", "fixed_ridge"),
    ("01.3", lambda f, b, dev: b / _hw(dev).hbm_bandwidth_bytes_per_s + f / _hw(dev).peak_matmul_flops,
     "sum_not_max"),
    ("01.3", lambda f, b, dev: b / _hw(dev).hbm_bandwidth_bytes_per_s, "memory_only"),
    ("01.3", lambda f, b, dev: f / _hw(dev).peak_matmul_flops, "compute_only"),
]

CATALOGUE += [
    ("01.1", lambda m, n, k, dt: 2 * m * n * k / ((m * k + k * n + 2 * m * n) * dtype_bytes(dt)), "c_read_too"),
    ("01.1", lambda m, n, k, dt: (m * k + k * n + m * n) * dtype_bytes(dt) / (2 * m * n * k), "bytes_per_flop"),
    ("01.2", lambda i, dev: "compute" if i > _hw(dev).ridge_point_flops_per_byte else "memory", "strict_ridge"),
    ("01.2", lambda i, dev: "memory", "always_memory"),
    ("01.3", lambda f, b, dev: min(b / _hw(dev).hbm_bandwidth_bytes_per_s, f / _hw(dev).peak_matmul_flops),
     "min_not_max"),
    ("01.3", lambda f, b, dev: max(b / _hw(dev).hbm_bandwidth_bytes_per_s, f / _hw(dev).peak_fp32_flops), "fp32_peak"),
]
