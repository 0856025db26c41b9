"""Chapter 09 exercises: the byte count behind Θ(N²d²/M), and the DRAM bytes behind L2.

* :func:`check_flash2_bytes` (09.1): FA2 forward HBM bytes in closed form, against ``flashsim.traffic``;
* :func:`check_compulsory_dram_bytes` (09.2): the DRAM bytes when the re-reads hit in L2, against the L2 model.

Each prints a verdict and a read/write table and returns a :class:`~flashsim.course.ch05.checks.Verdict`.
Solutions: :mod:`flashsim.solutions.ch09`.
"""
from __future__ import annotations

from flashsim.course.ch05.checks import finish, rw_table

__all__ = ["check_flash2_bytes", "check_compulsory_dram_bytes"]


def check_flash2_bytes(fn):
    """Exercise 09.1: ``fn(n, d, block_r, elem_bytes, stats_bytes) -> int``, FA2 forward HBM bytes (one head).

    Compared with ``flashsim.traffic("flash2", ...)`` (reads + writes) on divisible and ragged N, fp16 and fp32,
    fp32 statistics.
    """
    from flashsim.model.simulator import traffic
    name = "flash2_bytes"
    last = None
    for n, d, br, dtype in ((1024, 64, 64, "fp16"), (1000, 64, 64, "fp16"), (4096, 128, 128, "fp16"),
                            (300, 32, 16, "fp32"), (8192, 64, 128, "fp16")):
        t = traffic("flash2", n, d, block_r=br, block_c=64, dtype=dtype, sram_bytes=4 << 20)
        last = t
        es = {"fp16": 2, "fp32": 4}[dtype]
        try:
            got = int(fn(n, d, br, es, 4))
        except Exception as exc:  # noqa: BLE001 - a learner's bug is reported, not raised
            return finish(name, False, f"raised {type(exc).__name__}: {exc}")
        if got != t.hbm_bytes:
            hint = ("ragged N: T_r = ceil(N / B_r), the last row block is short but still reads all of K and V"
                    if n % br else "Q once, K and V once per row block, O once, and N logsumexp values (4 bytes)")
            return finish(name, False, f"got {got:,} B, the simulator counts {t.hbm_bytes:,} B at N={n}, d={d}, "
                          f"B_r={br}, {dtype}: {hint}. The simulator's bytes per tensor:", rw_table(t.as_dict()))
    return finish(name, True, "FA2's bytes match the simulator: K and V are re-read ⌈N/B_r⌉ times, so the bytes "
                  "fall as 1/B_r, and B_r is bounded by what fits in SRAM: Θ(N²d²/M)", rw_table(last.as_dict()))


def check_compulsory_dram_bytes(fn):
    """Exercise 09.2: ``fn(batch, heads, n, d, elem_bytes) -> int``, the flash kernel's DRAM bytes when every K/V
    re-read hits in L2: each tensor crosses DRAM once.

    Compared with the L2 model (:func:`flashsim.model.kernel_io.kernel_dram`, H200, 60 MB L2) on configurations whose
    concurrently used K/V tiles fit in L2; within 2 %.
    """
    from flashsim.model.kernel_io import kernel_dram, kernel_io
    name = "compulsory_dram_bytes"
    rows = []
    for b, h, n, d, es in ((1, 16, 1024, 64, 2), (1, 16, 4096, 64, 2), (2, 16, 4096, 128, 2), (4, 8, 1000, 80, 2),
                           (1, 8, 2048, 64, 4)):
        dtype = {2: "fp16", 4: "fp32"}[es]
        dram = kernel_dram("flash_fwd", n, d, 128, 64, batch=b, heads=h, dtype=dtype, hardware="h200",
                           flush_writes=True)["total"]   # every written byte charged once
        requested = kernel_io("flash_fwd", n, d, 128, 64, batch=b, heads=h, dtype=dtype)
        try:
            got = int(fn(b, h, n, d, es))
        except Exception as exc:  # noqa: BLE001
            return finish(name, False, f"raised {type(exc).__name__}: {exc}")
        rows.append((f"H={h},N={n}", got, 0, int(dram.dram_bytes), 0))
        if not abs(got - dram.dram_bytes) <= 0.02 * dram.dram_bytes:
            req = requested.load_bytes + requested.store_bytes
            hint = ("that is the requested bytes (every K/V re-read counted): behind L2 the re-reads hit"
                    if abs(got - req) <= 0.02 * req else
                    "Q, K and V are read once, O written once (elem_bytes each), plus one fp32 logsumexp per row")
            return finish(name, False, f"got {got:,} B, the L2 model says {int(dram.dram_bytes):,} B of DRAM "
                          f"(requested: {req:,} B) at B={b}, H={h}, N={n}, d={d}: {hint}", rows)
    return finish(name, True, "behind L2 the kernel moves just the compulsory bytes: that is why ncu's DRAM bytes "
                  "fall far below the simulator's requested bytes", rows)
