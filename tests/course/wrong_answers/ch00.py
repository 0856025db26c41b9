"""Wrong answers learners write for chapter 00, each with the diagnosis its checker must give."""
import math

from flashsim.model.hardware import get_device

CATALOGUE = [
    ("00.1", lambda shape, dtype: math.prod(shape), "elements_not_bytes"),
    ("00.1", lambda shape, dtype: 2 * math.prod(shape), "fixed_element_size"),
    ("00.1", lambda shape, dtype: sum(shape) * {"fp32": 4}.get(dtype, 2), "sum_not_product"),
    ("00.2", lambda n, dev: n * get_device(dev).hbm_bandwidth_bytes_per_s, "multiplied"),
    ("00.2", lambda n, dev: 8 * n / get_device(dev).hbm_bandwidth_bytes_per_s, "bits"),
    ("00.2", lambda n, dev: n / get_device("h200").hbm_bandwidth_bytes_per_s, "same_device"),
]

CATALOGUE += [
    ("00.1", lambda shape, dtype: 8 * math.prod(shape) * {"fp32": 4}.get(dtype, 2), "bits_not_bytes"),
    ("00.1", lambda shape, dtype: math.prod(shape) * {"fp16": 2}.get(dtype, 4), "bf16_as_fp32"),
    ("00.2", lambda n, dev: 1e3 * n / get_device(dev).hbm_bandwidth_bytes_per_s, "milliseconds"),
    ("00.2", lambda n, dev: n / (get_device(dev).hbm_bandwidth_bytes_per_s / 1e9), "bandwidth_in_gb"),
]
