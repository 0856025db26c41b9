"""Chapter 05: HBM traffic of the FlashAttention forward pass at each K/V block size (FA1 Fig. 2 middle), shared by
the traffic dashboard and the ``make figures`` figure."""
from __future__ import annotations

import numpy as np

from flashsim.errors import SramCapacityError
from flashsim.model.paper import PAPER_FIG2_MIDDLE_GB
from flashsim.model.simulator import traffic

__all__ = ["BlockSweep", "BLOCK_CS"]

BLOCK_CS = (16, 32, 64, 128, 256, 512)


class BlockSweep:
    """flashsim.traffic of one problem at each block size Bc, memoised per (algo, device, Bc).

    Defaults are the paper's: N=1024, d=64, batch 64 × 16 heads (1024 independent heads), fp16 storage with fp16
    statistics, Algorithm 1 (flash1). Algorithm 1's bytes do not depend on Br, so the largest Br ≤ ``block_r`` (halving)
    whose tile set fits the device's SRAM is used: at Bc = 512 on an A100 that is Br = 8.
    """

    def __init__(self, n: int = 1024, d: int = 64, heads: int = 16, algo: str = "flash1", dtype: str = "fp16",
                 stats_dtype: str = "fp16", block_r: int = 16, block_cs=BLOCK_CS, batch: int = 64):
        self.n, self.d, self.heads, self.algo, self.dtype, self.stats_dtype = n, d, heads, algo, dtype, stats_dtype
        self.batch = batch
        self.block_r, self.block_cs = block_r, tuple(block_cs)
        self._cache: dict = {}

    def traffic_for(self, block_c: int, device: str, algo: str | None = None):
        """flashsim.traffic at this block size, or the SramCapacityError when no Br makes the tiles fit."""
        algo = algo or self.algo
        key = (algo, device, int(block_c))
        if key not in self._cache:
            br, err = min(self.block_r, block_c), None
            while br >= 1:
                try:
                    self._cache[key] = traffic(algo, self.n, self.d, block_r=br, block_c=block_c, batch=self.batch,
                                               heads=self.heads, dtype=self.dtype, stats_dtype=self.stats_dtype,
                                               device=device)
                    break
                except SramCapacityError as exc:
                    err, br = exc, br // 2
            else:
                self._cache[key] = err
        return self._cache[key]

    @property
    def is_paper_setting(self) -> bool:
        return (self.n, self.d, self.batch * self.heads, self.dtype, self.stats_dtype, self.algo) == (
            1024, 64, 64 * 16, "fp16", "fp16", "flash1")  # only B × H enters the bytes

    def plot_args(self, device: str, current: int | None = None) -> dict:
        """The arguments of :class:`flashsim.course.ch05.figures.TrafficVsBlockPlot` for this sweep on `device`."""
        gb = [np.nan if isinstance(t, Exception) else t.hbm_bytes / 1e9
              for t in (self.traffic_for(bc, device) for bc in self.block_cs)]
        return {"block_cs": list(self.block_cs), "simulated_gb": gb, "current": current,
                "paper": PAPER_FIG2_MIDDLE_GB if self.is_paper_setting else None,
                "title": f"{self.algo} forward on {device}, N={self.n}, d={self.d}, batch {self.batch} × "
                         f"{self.heads} heads, {self.dtype}; red: Bc = {current}"}
