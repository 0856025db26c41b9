"""The sweep's configurations for benchmarks/fidelity_h200.py: the kernels, the configurations per kernel and the set
each belongs to, the previous L2 model's settings, the predictions of the kernel view and the L2 model (no GPU),
the ncu batches and the device-time estimate."""
from __future__ import annotations

import time

KERNELS = ("naive", "tiled_matmul", "online_softmax", "flash_fwd", "flash_bwd")
#: one ncu run (one child process: one python + CUDA start) per batch
BATCHES = (("naive", "tiled_matmul", "online_softmax"), ("flash_fwd", "flash_bwd"))
MIB = 1 << 20
#: the L2 model's settings before the current ones (kernel_dram keyword arguments), recorded next to them
PREVIOUS_MODEL = {"l2_fraction": 0.48, "protected_fraction": 0.6, "tile_costs": (1.0, 0.7, 1.0), "programs_per_sm": 1,
                  "dirty_fraction": None}
#: the tag of the newest configurations of every kernel (none of them used to choose the L2 model; "new6" adds
#: flash_fwd only)
NEWEST_TAG = "new5"

# (batch, heads, n, d, causal, block_m, block_n, set). set "fit": in the 2026-11-29 sweep the L2 model's settings
# were chosen on; "held_out": first measured 2026-11-30, after they were frozen; "new": first measured 2026-12-02;
# "new2": first measured after the L1 sector rules and the write-back L2 model were chosen (on the others);
# "new3": first measured after the L2 model's capacity and protected share were chosen again (on "fit" alone);
# "new4": chosen before the run that first measured them (2026-12-02_4), after the write-back measurement and the
# L2 model's tile costs were chosen (on "fit" alone); "new5": chosen before the run that first measured them
# (2026-12-02_5), with the model unchanged since new4 was chosen; "new6" (flash_fwd): 128x128 tiles, chosen before
# the run that first measured them (2026-12-02_7), with the model unchanged; "new7" (online_softmax, with a naive and a
# tiled_matmul control): chosen after the L2 model's one-program tile costs (0.63), dirty limit and the online
# softmax's 2 programs per SM were chosen (2026-12-03, on "fit" alone) and before any run measured them, each where the
# model before and after differ by more than the criterion: programs < SMs (N=3840, 4352, 4096 at 128x64, 3328 at
# 32x32) and > SMs (N=4864 32x128, N=5632 32x64 causal).
# online_softmax and tiled_matmul ignore batch and heads (d = the inner dim of tiled_matmul; 1 for softmax).
CONFIGS = {
    "naive": [
        (1, 8, 1024, 64, False, 64, 64, "fit"),
        (1, 8, 1024, 128, True, 64, 64, "fit"),
        (2, 4, 1000, 80, False, 64, 64, "fit"),
        (1, 16, 4096, 64, False, 64, 64, "fit"),
        (2, 3, 3000, 96, True, 64, 64, "held_out"),
        (2, 8, 2048, 64, False, 64, 64, "new"),      # issue 13: ncu 1668 MiB vs view 1412 MiB
        (2, 8, 2048, 64, True, 64, 64, "new"),
        (1, 8, 2048, 64, False, 32, 32, "new"),      # d=64, other blocks: is the extra P traffic the layout's?
        (1, 8, 2048, 64, False, 64, 128, "new"),
        (1, 4, 2048, 32, False, 64, 64, "new"),      # BLOCK_D = 32
        (1, 4, 3000, 128, False, 64, 64, "new"),
        (4, 4, 777, 64, False, 64, 64, "new"),
        (1, 4, 1000, 64, False, 64, 64, "new2"),     # P tile of O's shape, rows on sectors: 4 instructions each
        (2, 2, 777, 64, False, 32, 32, "new2"),      # P tile not O's shape: one element per lane
        (1, 4, 1500, 128, True, 64, 128, "new2"),    # P tile of O's shape at BLOCK_N = 128, rows mid-sector
        (1, 8, 1536, 64, False, 64, 64, "new3"),
        (2, 2, 2500, 128, True, 64, 64, "new3"),
        (1, 12, 1024, 96, False, 32, 64, "new3"),
        (1, 4, 1280, 64, False, 128, 64, "new3"),
        (1, 8, 1792, 64, False, 64, 64, "new4"),
        (2, 4, 1200, 128, True, 64, 64, "new4"),
        (1, 6, 2304, 32, False, 32, 64, "new4"),
        (1, 4, 3500, 64, False, 64, 128, "new4"),
        (1, 8, 2560, 64, False, 64, 64, "new5"),
        (2, 4, 1536, 128, True, 64, 64, "new5"),
        (1, 4, 2000, 96, False, 32, 64, "new5"),
        (1, 6, 3072, 64, False, 64, 128, "new5"),
        (1, 8, 1664, 64, False, 64, 64, "new7"),     # control
    ],
    "tiled_matmul": [
        (1, 1, 4096, 64, False, 64, 64, "fit"),
        (1, 1, 8192, 128, False, 64, 64, "fit"),
        (1, 1, 1000, 80, False, 64, 64, "fit"),
        (1, 1, 4096, 64, True, 64, 64, "fit"),
        (1, 1, 2048, 256, False, 64, 64, "fit"),
        (1, 1, 6000, 96, False, 32, 64, "held_out"),
        (1, 1, 3000, 64, True, 64, 64, "new"),
        (1, 1, 4096, 128, False, 128, 64, "new"),
        (1, 1, 2048, 32, False, 64, 64, "new"),
        (1, 1, 5000, 64, False, 64, 128, "new"),
        (1, 1, 8192, 64, True, 64, 64, "new"),
        (1, 1, 1024, 512, False, 64, 64, "new"),
        (1, 1, 777, 64, False, 32, 32, "new2"),
        (1, 1, 2048, 40, False, 64, 64, "new2"),     # d = 40: A's rows (80 B) not vectorized
        (1, 1, 1500, 96, True, 128, 64, "new2"),
        (1, 1, 5120, 64, False, 64, 64, "new3"),
        (1, 1, 6144, 128, True, 64, 64, "new3"),
        (1, 1, 2500, 96, False, 64, 32, "new3"),
        (1, 1, 4096, 256, False, 128, 64, "new3"),
        (1, 1, 3584, 64, False, 64, 64, "new4"),
        (1, 1, 7000, 128, True, 64, 64, "new4"),
        (1, 1, 1800, 192, False, 128, 64, "new4"),
        (1, 1, 4608, 32, False, 64, 32, "new4"),
        (1, 1, 3072, 128, False, 64, 64, "new5"),
        (1, 1, 5000, 64, True, 64, 64, "new5"),
        (1, 1, 2304, 96, False, 128, 64, "new5"),
        (1, 1, 6144, 32, False, 64, 32, "new5"),
        (1, 1, 3840, 96, False, 64, 64, "new7"),     # control
    ],
    "online_softmax": [
        (1, 1, 4096, 1, False, 64, 64, "fit"),
        (1, 1, 8192, 1, True, 64, 64, "fit"),
        (1, 1, 1000, 1, False, 64, 64, "fit"),
        (1, 1, 2048, 1, True, 64, 64, "fit"),
        (1, 1, 8192, 1, False, 32, 128, "fit"),
        (1, 1, 12000, 1, False, 64, 64, "held_out"),
        (1, 1, 3000, 1, True, 64, 64, "new"),
        (1, 1, 6000, 1, False, 64, 64, "new"),
        (1, 1, 4096, 1, True, 32, 64, "new"),
        (1, 1, 2048, 1, False, 128, 64, "new"),
        (1, 1, 10000, 1, True, 64, 64, "new"),
        (1, 1, 5000, 1, False, 64, 32, "new"),
        (1, 1, 777, 1, False, 128, 64, "new2"),
        (1, 1, 1500, 1, True, 32, 32, "new2"),
        (1, 1, 4000, 1, False, 64, 128, "new2"),
        (1, 1, 3072, 1, False, 64, 64, "new3"),
        (1, 1, 7000, 1, True, 64, 64, "new3"),
        (1, 1, 5120, 1, False, 32, 64, "new3"),
        (1, 1, 2500, 1, False, 64, 128, "new3"),
        (1, 1, 9000, 1, False, 128, 64, "new3"),
        (1, 1, 3584, 1, False, 64, 64, "new4"),
        (1, 1, 6144, 1, True, 64, 128, "new4"),
        (1, 1, 1800, 1, False, 32, 64, "new4"),
        (1, 1, 11000, 1, False, 64, 64, "new4"),
        (1, 1, 2560, 1, False, 64, 64, "new5"),
        (1, 1, 7168, 1, True, 64, 64, "new5"),
        (1, 1, 4500, 1, False, 32, 64, "new5"),
        (1, 1, 10240, 1, False, 64, 128, "new5"),
        (1, 1, 3840, 1, False, 64, 64, "new7"),      # model before / after (read MiB): 46.9 / 38.4
        (1, 1, 4352, 1, False, 64, 128, "new7"),     # 68.0 / 61.6
        (1, 1, 4096, 1, False, 128, 64, "new7"),     # 57.5 / 50.0 (32 programs)
        (1, 1, 3328, 1, False, 32, 32, "new7"),      # 28.2 / 21.1
        (1, 1, 4864, 1, False, 32, 128, "new7"),     # 82.2 / 89.1 (152 programs: more than SMs)
        (1, 1, 5632, 1, True, 32, 64, "new7"),       # 50.4 / 44.5 (176 programs)
    ],
    "flash_fwd": [
        (1, 16, 1024, 64, False, 128, 64, "fit"),
        (1, 16, 4096, 128, True, 128, 64, "fit"),
        (2, 16, 4096, 128, False, 128, 64, "fit"),
        (4, 8, 1000, 80, False, 128, 64, "fit"),
        (1, 8, 16384, 128, False, 128, 64, "fit"),
        (1, 4, 32768, 128, True, 128, 64, "held_out"),  # issue 13: DRAM writes predicted 1.24x of ncu
        (2, 12, 8192, 64, False, 64, 64, "held_out"),
        (3, 5, 3000, 96, True, 64, 64, "held_out"),
        (1, 8, 2048, 64, True, 64, 128, "new"),
        (2, 4, 5000, 128, False, 128, 64, "new"),
        (1, 32, 1024, 128, True, 128, 128, "new"),
        (1, 2, 24576, 64, False, 64, 64, "new"),
        (4, 16, 512, 64, False, 64, 32, "new"),
        (2, 4, 777, 64, False, 64, 64, "new2"),      # LSE rows mid-sector
        (1, 8, 1000, 128, True, 128, 64, "new2"),
        (1, 4, 3000, 64, False, 128, 128, "new2"),
        (4, 8, 3072, 128, False, 128, 64, "new3"),
        (2, 8, 6000, 96, True, 64, 64, "new3"),
        (8, 4, 3072, 80, False, 128, 64, "new3"),
        (1, 16, 8192, 128, True, 128, 128, "new3"),
        (2, 8, 3584, 64, False, 128, 64, "new4"),
        (1, 16, 2304, 128, True, 128, 64, "new4"),
        (4, 4, 5000, 96, False, 64, 64, "new4"),
        (1, 8, 10240, 64, True, 128, 128, "new4"),
        (2, 8, 2560, 64, False, 128, 64, "new5"),
        (1, 8, 6144, 128, True, 128, 64, "new5"),
        (2, 6, 3000, 80, False, 64, 64, "new5"),
        (1, 4, 12288, 64, False, 128, 128, "new5"),
        (1, 8, 8192, 64, True, 128, 128, "new6"),
        (2, 4, 4000, 32, False, 128, 128, "new6"),
        (1, 6, 7000, 64, True, 128, 128, "new6"),
        (2, 8, 2048, 128, True, 128, 128, "new6"),
    ],
    "flash_bwd": [
        (1, 16, 1024, 64, False, 64, 64, "fit"),
        (1, 16, 4096, 128, True, 64, 64, "fit"),         # issue 13: DRAM writes predicted 1.16x of ncu
        (2, 8, 4096, 80, False, 64, 64, "fit"),
        (1, 4, 16384, 128, False, 64, 64, "fit"),
        (1, 8, 8192, 64, True, 32, 64, "held_out"),
        (4, 6, 2000, 96, True, 32, 32, "held_out"),
        (1, 16, 4096, 128, False, 64, 64, "new"),
        (2, 8, 3000, 64, True, 64, 64, "new"),
        (1, 4, 6000, 128, True, 64, 64, "new"),
        (1, 32, 2048, 64, False, 64, 64, "new"),
        (1, 2, 12288, 96, False, 32, 64, "new"),
        (2, 4, 4096, 64, False, 64, 64, "new"),
        (2, 4, 777, 64, False, 64, 64, "new2"),      # N no multiple of 16: dK/dV pass loads LSE, delta twice
        (1, 8, 1000, 128, False, 64, 64, "new2"),    # and the dQ pass at 8 warps twice
        (1, 8, 2048, 64, False, 128, 64, "new2"),    # dQ pass with 128-row blocks: once
        (2, 8, 2048, 128, True, 64, 64, "new3"),
        (4, 8, 3072, 64, False, 64, 64, "new3"),
        (2, 16, 1536, 128, False, 64, 64, "new3"),
        (4, 8, 2500, 64, True, 32, 32, "new3"),
        (2, 8, 2560, 64, False, 64, 64, "new4"),
        (1, 16, 3584, 128, True, 64, 64, "new4"),
        (2, 4, 5000, 96, False, 32, 64, "new4"),
        (1, 4, 8192, 64, False, 64, 64, "new4"),
        (2, 8, 1792, 64, False, 64, 64, "new5"),
        (1, 8, 4608, 128, True, 64, 64, "new5"),
        (4, 4, 3000, 96, False, 32, 64, "new5"),
        (1, 2, 10240, 64, True, 64, 64, "new5"),
    ],
}


def configs(kernels=KERNELS) -> list[dict]:
    """The runs, in order: dicts of measure.kernel_runner's arguments plus "set"."""
    out = []
    for k in kernels:
        for b, h, n, d, causal, bm, bn, tag in CONFIGS[k]:
            out.append(dict(kernel=k, n=n, d=d, block_m=bm, block_n=bn, causal=causal, dtype="fp16", batch=b,
                            heads=h, set=tag))
    return out


def runner_args(cfg: dict) -> dict:
    return {k: v for k, v in cfg.items() if k != "set"}


# --- predictions (no GPU) --------------------------------------------------------------------------------------

#: the GPU the L2 model's constants were fitted on (every other GPU's run is a hold-out: nothing is refitted)
FIT_GPU = "h200"


def run_hardware(info: dict, hardware=None):
    """The Hardware a run's predictions are made for: ``hardware`` (a preset name or Hardware) when given, else
    the run's GPU (``info["gpu"]``: its preset, with the SM count and L2 size the device reported, ``info["sms"]``
    and ``info["l2_bytes"]``, where they differ), else (no GPU: a dry run) :data:`FIT_GPU`. Only properties of
    the GPU come from the GPU; every constant of the L2 model stays as fitted on :data:`FIT_GPU`."""
    from flashsim.model.hardware import get_device, preset_from_properties
    if hardware is not None:
        return get_device(hardware)
    if not info.get("gpu"):
        return get_device(FIT_GPU)
    sms, l2 = int(info.get("sms") or 0), int(info.get("l2_bytes") or 0)
    hw = preset_from_properties(info["gpu"], sms or 132, l2 or 50 * MIB, 227 * 1024)
    return hw.replace(**{k: v for k, v in (("num_sms", sms), ("l2_bytes", l2)) if v and getattr(hw, k) != v})


def hardware_record(hw) -> dict:
    """What a result stores of the Hardware its predictions were made for."""
    return {"name": hw.name, "num_sms": hw.num_sms, "l2_bytes": hw.l2_bytes, "source": hw.source}


def hardware_of_result(result: dict):
    """The Hardware a stored result's predictions were made for (older results: :data:`FIT_GPU`)."""
    from flashsim.model.hardware import get_device, preset_from_properties
    rec = result.get("hardware")
    if not rec:
        return get_device(FIT_GPU)
    hw = preset_from_properties(rec["name"], rec["num_sms"], rec["l2_bytes"], 227 * 1024)
    return hw.replace(**{k: rec[k] for k in ("num_sms", "l2_bytes") if getattr(hw, k) != rec[k]})


def predict(cfg: dict, hardware=FIT_GPU) -> dict:
    """Per launch: the kernel view's element and L1 (sector) bytes, per tensor, and the DRAM bytes of the L2 model
    (its defaults, on ``hardware``: a preset name or Hardware) and of the previous model's settings
    (``PREVIOUS_MODEL``, for comparison)."""
    from flashsim.model.calibration import (L2_DIRTY_FRACTION, L2_PROTECTED_FRACTION, L2_SHARED_FRACTION,
                                            L2_TILE_COSTS, LAUNCH_PROGRAMS_PER_SM, PROGRAMS_PER_SM)
    from flashsim.model.kernel_io import kernel_dram, kernel_io
    t0 = time.time()
    args = (cfg["kernel"], cfg["n"], cfg["d"], cfg["block_m"], cfg["block_n"], cfg["causal"], cfg["dtype"],
            cfg["batch"], cfg["heads"])
    io = kernel_io(*args)
    dram = kernel_dram(*args, hardware=hardware)
    alt = kernel_dram(*args, hardware=hardware, **PREVIOUS_MODEL)
    launches = {}
    for L in io.launches:
        launches[L.name] = {"loads": dict(L.loads), "stores": dict(L.stores), "load_bytes": L.load_bytes,
                            "store_bytes": L.store_bytes, "l1_loads": dict(L.l1_loads),
                            "l1_stores": dict(L.l1_stores), "l1_load_bytes": L.l1_load_bytes,
                            "l1_store_bytes": L.l1_store_bytes,
                            "dram_read_bytes": dram[L.name].dram_read_bytes,
                            "dram_write_bytes": dram[L.name].dram_write_bytes,
                            "dram_write_flushed_bytes": dram[L.name].dram_write_bytes + dram[L.name].dirty_end_bytes,
                            "alt_dram_read_bytes": alt[L.name].dram_read_bytes,
                            "alt_dram_write_bytes": alt[L.name].dram_write_bytes,
                            "alt_dram_write_flushed_bytes": alt[L.name].dram_write_bytes
                            + alt[L.name].dirty_end_bytes}
    return {"launches": launches, "load_bytes": io.load_bytes, "store_bytes": io.store_bytes,
            "l1_load_bytes": io.l1_load_bytes, "l1_store_bytes": io.l1_store_bytes,
            "l2_model": {"l2_fraction": L2_SHARED_FRACTION, "protected_fraction": L2_PROTECTED_FRACTION,
                         "programs_per_sm": PROGRAMS_PER_SM, "launch_programs_per_sm": LAUNCH_PROGRAMS_PER_SM,
                         "tile_costs": L2_TILE_COSTS, "dirty_fraction": L2_DIRTY_FRACTION,
                         "alternative": "previous model: " + ", ".join(f"{k}={v}" for k, v in PREVIOUS_MODEL.items())},
            "sim_seconds": round(time.time() - t0, 2)}


def batches(kernels) -> list[tuple]:
    return [b for b in (tuple(k for k in batch if k in kernels) for batch in BATCHES) if b]


def estimate_device_seconds(cfgs: list[dict]) -> float:
    """Rough device time of the per-kernel window ncu runs: per ncu run 25 s (python, torch, CUDA, ncu start),
    per config 2 s (Triton compile when the constexprs are new, inputs) and each launch replayed ~10 times (one
    pass per metric group, caches flushed) at ~2 TB/s over its requested bytes plus ~50 ms of ncu overhead per
    pass; the write-back measurement (WB_REPEATS calls, each launch with WB_BEFORE + WB_AFTER + WB_BASE flushes)
    is not in it (run 2026-12-02_4: 242 s of wall time for an estimated 389 s, both measurements)."""
    from flashsim.model.kernel_io import kernel_io
    replay = 0.0
    for c in cfgs:
        io = kernel_io(**{k: v for k, v in runner_args(c).items() if k != "dtype"}, dtype=c["dtype"])
        replay += 10 * (io.load_bytes + io.store_bytes) / 2e12 + 0.05 * len(io.launches) * 10
    return 25.0 * len(batches({c["kernel"] for c in cfgs})) + 2.0 * len(cfgs) + replay
