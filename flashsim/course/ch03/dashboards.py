"""Chapter 03 dashboards: tiled QKᵀ stepped tile by tile, and SRAM capacity vs block sizes.

    s = TiledQKtStepper(n=16, d=4, block_r=4, block_c=4); s.update(step=5); s.state["read_by_tensor"]
    t = TilingDashboard(); t.update(sram_kib=48, block_r=128); t.fits, t.error    # False, the SramCapacityError text

Both run on the chapter's own loop and formulas (:mod:`flashsim.course.ch03.tiling`), not on the answer key.
"""
from __future__ import annotations

import numpy as np

from flashsim.course.ch02.dashboards import EventStepper
from flashsim.course.ch03.figures import TilingPlot, tiling_plot_args
from flashsim.course.ch03.tiling import BLOCK_CHOICES, fa1_blocks, qkt_tile_set, tiled_qkt_bytes, tiled_qkt_loop
from flashsim.course.kit.dashboard import Dashboard, choice, int_range, slider
from flashsim.errors import FlashsimError, SramCapacityError
from flashsim.model.memory import Memory, check_tile_set_fits

__all__ = ["TiledQKtStepper", "TilingDashboard", "BLOCK_CHOICES"]


class TiledQKtStepper(EventStepper):
    """Chapter 03: S = QKᵀ tile by tile on the simulated memory (the loop of exercise 03.1), replayed one load /
    compute / store at a time. SRAM holds exactly one Q_i, one K_j and the fp32 S_ij."""

    tensors = ("Q", "K", "S")
    square = ("S",)

    def __init__(self, n: int = 16, d: int = 4, block_r: int = 4, block_c: int = 4, dtype: str = "fp16",
                 seed: int = 0):
        if n > 64:
            raise FlashsimError(f"n={n}: the stepper draws every tile; use n <= 64")
        if block_r != block_c:
            raise FlashsimError("the stepper draws square tiles: use block_r == block_c")
        rng = np.random.default_rng(seed)
        self.memory = Memory(sum(qkt_tile_set(block_r, block_c, d, dtype).values()), dtype)
        self.memory.put("Q", rng.standard_normal((n, d)).astype(np.float32))
        self.memory.put("K", rng.standard_normal((n, d)).astype(np.float32))
        self.memory.empty("S", (n, n))
        tiled_qkt_loop(self.memory, n, d, block_r, block_c)
        self.dtype = dtype
        self._row_block, i = {}, 0
        for e in self.memory.events:          # K_j loads carry j; the row block is the last Q_i loaded
            if e.tensor in ("Q", "S") and e.tile:
                i = e.tile[0]
            self._row_block[e.index] = i
        self._init_events(self.memory.events, n, d, block_r)

    def phase(self, ev) -> str:
        return f"row block i = {self._row_block.get(ev.index, 0)}"


class TilingDashboard(Dashboard):
    """Chapter 03: SRAM capacity and block sizes of the tiled QKᵀ: does the tile set fit, and what HBM traffic results?

    ``update(sram_kib=..., block_r=..., block_c=..., d=...)``. ``tile_set`` (bytes by tile), ``fits``, ``error``
    (the :class:`~flashsim.errors.SramCapacityError` message when it does not fit), ``bytes`` (HBM reads/writes
    of the tiled loop) and ``paper_blocks`` (FA1's rule for this SRAM) follow.
    """

    plot = TilingPlot
    layout = (("sram_kib", "d"), ("block_r", "block_c"))

    def __init__(self, n: int = 4096, d: int = 64, sram_kib: int = 228, block_r: int = 64, block_c: int = 64,
                 dtype: str = "fp16"):
        self.n, self.d, self.sram_kib, self.block_r, self.block_c, self.dtype = n, d, sram_kib, block_r, block_c, dtype
        self.update()

    def controls(self):
        return {"sram_kib": int_range("SRAM (KiB)", 16, 256, 4), "d": choice("d", (32, 64, 128, 256)),
                "block_r": slider("Br", BLOCK_CHOICES), "block_c": slider("Bc", BLOCK_CHOICES)}

    def apply(self, sram_kib: int | None = None, block_r: int | None = None, block_c: int | None = None,
              d: int | None = None, dtype: str | None = None):
        if sram_kib is not None:
            if not int(sram_kib) > 0:
                raise FlashsimError(f"sram_kib={sram_kib} must be positive")
            self.sram_kib = int(sram_kib)
        self.block_r = int(block_r) if block_r is not None else self.block_r
        self.block_c = int(block_c) if block_c is not None else self.block_c
        self.d = int(d) if d is not None else self.d
        self.dtype = dtype or self.dtype
        self.tile_set = qkt_tile_set(self.block_r, self.block_c, self.d, self.dtype)
        self.error = None
        try:
            check_tile_set_fits(self.tile_set, self.sram_bytes, device_name="the SRAM", fix=self._fix())
        except SramCapacityError as exc:
            self.error = str(exc)
        self.bytes = tiled_qkt_bytes(self.n, self.d, self.block_r, self.block_c, self.dtype)
        self.paper_blocks = fa1_blocks(self.sram_bytes, self.d, self.dtype)
        return self

    @property
    def sram_bytes(self) -> int:
        return self.sram_kib * 1024

    @property
    def fits(self) -> bool:
        return self.error is None

    def _fix(self) -> str:
        """Name the largest Br (for this Bc) whose tile set fits, as the error's suggested fix."""
        ok = [b for b in BLOCK_CHOICES if sum(qkt_tile_set(b, self.block_c, self.d, self.dtype).values())
              <= self.sram_bytes]
        return f"use block_r <= {max(ok)} at block_c = {self.block_c}" if ok else "use a smaller block_c"

    def hbm_bytes(self, block_r: int | None = None) -> int:
        b = tiled_qkt_bytes(self.n, self.d, block_r or self.block_r, self.block_c, self.dtype)
        return sum(b["read"].values()) + sum(b["write"].values())

    def readout(self) -> str:
        used = sum(self.tile_set.values())
        head = (f"tile set {used / 1024:.1f} KiB of {self.sram_kib} KiB SRAM: "
                + ("fits" if self.fits else f"<b>does not fit</b> — {self.error}"))
        r, w = sum(self.bytes["read"].values()), sum(self.bytes["write"].values())
        return (f"{head}<br>N = {self.n}, d = {self.d}: Q read once ({self.bytes['read']['Q'] / 2**20:.2f} MiB), "
                f"K read {-(-self.n // self.block_r)}× ({self.bytes['read']['K'] / 2**20:.2f} MiB), S written "
                f"({w / 2**20:.1f} MiB): {(r + w) / 2**20:.1f} MiB in all. FA1's rule for this SRAM: "
                f"Br = {self.paper_blocks[0]}, Bc = {self.paper_blocks[1]}")

    def plot_args(self) -> dict:
        return tiling_plot_args(self.n, self.d, self.sram_bytes, self.block_r, self.block_c, self.dtype,
                                BLOCK_CHOICES)
