"""Chapter 13 dashboards: the ring stepped, the overlap condition, and flash-decoding's splits.

Plain classes driven by ``update(...)`` (tests use them without Jupyter); ``show()`` wraps them in ipywidgets::

    r = RingStepper(world=4, causal=True); r.update(2)["step"]["sends"]    # which devices send at step 2
    OverlapDashboard().update(block=1024, link="pcie5")                   # the transfer does not hide
    DecodingDashboard().update(splits=17).time_s                           # modelled time on the H200
"""
from __future__ import annotations

from pathlib import Path

from flashsim.course.ch00.dashboards import widget_or_figure
from flashsim.course.ch05.dashboards import play_controls, png_image_widget, set_png
from flashsim.course.kit.results import load_result, result_source

__all__ = ["RingStepper", "OverlapDashboard", "DecodingDashboard", "h200_results"]


class RingStepper:
    """Step through ring attention on P simulated devices (:func:`flashsim.model.multi.cluster.ring_attention`).

    ``update(step)`` moves to step t; the state names what every device holds, computes and sends, and the link
    bytes so far. ``set_causal(flag)`` re-runs the ring with or without the causal mask.
    """

    def __init__(self, world: int = 4, n: int | None = None, d: int = 64, heads: int = 1, dtype: str = "fp16",
                 causal: bool = False, device: str = "h200", link: str = "nvlink4"):
        self.world, self.d, self.heads, self.dtype, self.device, self.link = world, d, heads, dtype, device, link
        self.n = n or 1024 * world
        self.step = 0
        self.set_causal(causal)

    def set_causal(self, causal: bool) -> dict:
        from flashsim.model.multi.cluster import ring_attention
        self.causal = bool(causal)
        self.result = ring_attention(self.n, self.d, self.world, heads=self.heads, dtype=self.dtype,
                                     causal=self.causal, device=self.device, link=self.link)
        self.n_steps = len(self.result.steps)
        return self.update(self.step)

    def update(self, step: int) -> dict:
        """Move to ring step `step` (clamped); returns the state the picture is drawn from."""
        self.step = int(min(max(step, 0), self.n_steps - 1))
        s = self.result.steps[self.step]
        steps = [dict(held=x.held, work=x.work) for x in self.result.steps[:self.step + 1]]
        sending = [r for r in range(self.world) if s.sends[r]]
        title = (f"step {s.t} of 0–{self.n_steps - 1} ({'causal' if self.causal else 'non-causal'}): "
                 + (f"GPUs {sending} send" if sending else "no sends (last step)"))
        self.state = {"world": self.world, "step": dict(t=s.t, held=s.held, work=s.work, sends=s.sends,
                                                         link_bytes=s.link_bytes),
                      "steps_so_far": steps, "final_link_bytes": self.result.link_bytes, "title": title}
        return self.state

    def readout(self) -> str:
        s = self.result.steps[self.step]
        msg = self.result.link_bytes and max(self.result.link_bytes) // max(1, max(self.result.link_messages))
        return (f"step {s.t}: each message is K_j and V_j of one shard = {msg:,} bytes; sent so far "
                f"{sum(s.link_bytes):,} of {self.result.total_link_bytes:,} bytes")

    def figure(self):
        from flashsim.course.ch13.figures import plot_ring_step
        return plot_ring_step(self.state)

    @widget_or_figure
    def show(self, interval_ms: int = 900):
        """Play + step slider, a causal checkbox, a readout and the picture."""
        import ipywidgets as W
        img = png_image_widget(self.figure(), "flashsim-ring-plot")
        readout = W.HTML(self.readout())

        def on_step(i):
            self.update(i)
            readout.value = self.readout()
            set_png(img, self.figure())

        controls, play, slider = play_controls(self.n_steps, on_step, "ring step", interval_ms, self.step)
        causal = W.Checkbox(value=self.causal, description="causal")

        def on_causal(ch):
            self.set_causal(ch["new"])
            on_step(self.step)

        causal.observe(on_causal, names="value")
        self._widgets = {"play": play, "slider": slider, "causal": causal, "readout": readout, "image": img}
        return W.VBox([controls, causal, readout, img])


class OverlapDashboard:
    """One ring step's compute time vs transfer time as the block (rows per device) and the link change."""

    BLOCKS = tuple(2 ** k for k in range(7, 17))

    def __init__(self, block: int = 4096, link: str = "nvlink4", device: str = "h200", d: int = 128,
                 heads: int = 16, dtype: str = "fp16"):
        self.block, self.link, self.device, self.d, self.heads, self.dtype = block, link, device, d, heads, dtype
        self.update()

    def update(self, block: int | None = None, link: str | None = None, device: str | None = None) -> dict:
        from flashsim.model.multi.cluster import overlap_threshold, ring_step_times
        if block is not None:
            self.block = int(block)
        if link is not None:
            self.link = link
        if device is not None:
            self.device = device
        c, m = ring_step_times(self.block, self.d, self.heads, 1, self.dtype, self.device, self.link)
        self.state = {"compute_s": c, "comm_s": m, "hidden": c >= m,
                      "threshold": overlap_threshold(self.device, self.link, self.dtype)}
        return self.state

    def readout(self) -> str:
        s = self.state
        verdict = "the transfer hides behind the compute" if s["hidden"] else "the ring waits for the link"
        return (f"n = {self.block:,} rows per device on {self.device} over {self.link}: compute "
                f"{s['compute_s'] * 1e6:,.1f} µs, transfer {s['comm_s'] * 1e6:,.1f} µs per step: <b>{verdict}</b> "
                f"(threshold n ≥ {s['threshold']:,.0f})")

    def figure(self):
        from flashsim.course.ch13.figures import plot_overlap
        links = [self.link] + [x for x in ("nvlink4", "pcie5", "infiniband_ndr") if x != self.link]
        return plot_overlap(self.device, links, self.d, self.heads, self.dtype, current=self.block)

    @widget_or_figure
    def show(self):
        import ipywidgets as W
        from flashsim.model.hardware import PRESETS
        from flashsim.model.multi.cluster import LINK_PRESETS
        slider = W.SelectionSlider(options=list(self.BLOCKS), value=self.block, description="block n",
                                   continuous_update=False, layout=W.Layout(width="480px"))
        link = W.Dropdown(options=sorted(LINK_PRESETS), value=self.link, description="link")
        dev = W.Dropdown(options=sorted(PRESETS), value=self.device, description="device")
        readout = W.HTML(self.readout())
        img = png_image_widget(self.figure(), "flashsim-overlap-plot")

        def redraw(_=None):
            self.update(block=slider.value, link=link.value, device=dev.value)
            readout.value = self.readout()
            set_png(img, self.figure())

        for w in (slider, link, dev):
            w.observe(redraw, names="value")
        self._widgets = {"slider": slider, "link": link, "device": dev, "readout": readout, "image": img}
        return W.VBox([slider, W.HBox([link, dev]), readout, img])


class DecodingDashboard:
    """Flash-decoding on one simulated GPU: time and SM use as num_splits and the number of heads change."""

    SPLITS = (1, 2, 4, 8, 16, 32, 64, 128, 256)

    def __init__(self, n: int = 65536, d: int = 128, heads: int = 16, splits: int = 1, device: str = "h200",
                 measured: dict | None = None):
        self.n, self.d, self.heads, self.splits, self.device = n, d, heads, splits, device
        self.measured = measured
        self.update()

    def update(self, splits: int | None = None, heads: int | None = None):
        from flashsim.model.multi.cluster import flash_decoding
        if splits is not None:
            self.splits = int(splits)
        if heads is not None:
            self.heads = int(heads)
        self.current = flash_decoding(self.n, self.d, self.heads, splits=self.splits, device=self.device)
        self.base = flash_decoding(self.n, self.d, self.heads, splits=1, device=self.device)
        return self.current

    def readout(self) -> str:
        r = self.current
        return (f"{r.programs} programs for {r.device.num_sms} SMs ({r.waves} wave(s), "
                f"{r.sm_busy_fraction:.0%} of SMs busy): {r.time_s * 1e6:,.1f} µs modelled, "
                f"{self.base.time_s / r.time_s:.2f}× faster than no split; HBM bytes {r.hbm_bytes / 1e6:,.1f} MB")

    def figure(self):
        from flashsim.course.ch13.figures import plot_decoding_splits
        return plot_decoding_splits(self.n, self.d, self.heads, self.SPLITS, self.device,
                                    measured=self.measured if self.heads == 16 else None, current=self.splits)

    @widget_or_figure
    def show(self):
        import ipywidgets as W
        slider = W.SelectionSlider(options=list(self.SPLITS), value=self.splits, description="num_splits",
                                   continuous_update=False, layout=W.Layout(width="480px"))
        heads = W.Dropdown(options=[1, 8, 16, 32], value=self.heads, description="heads")
        readout = W.HTML(self.readout())
        img = png_image_widget(self.figure(), "flashsim-decoding-plot")

        def redraw(_=None):
            self.update(splits=slider.value, heads=heads.value)
            readout.value = self.readout()
            set_png(img, self.figure())

        slider.observe(redraw, names="value")
        heads.observe(redraw, names="value")
        self._widgets = {"slider": slider, "heads": heads, "readout": readout, "image": img}
        return W.VBox([slider, heads, readout, img])


def h200_results() -> dict:
    """The recorded H200 runs of chapter 13 (:mod:`flashsim.course.kit.results`): {"flash_decoding": the split-KV
    kernel timed over num_splits, "distributed": ring attention on 2 GPUs}, each with "file" (the raw record)."""
    return {key: {**load_result(f"{key}_h200"), "file": Path(result_source(f"{key}_h200")).name}
            for key in ("flash_decoding", "distributed")}
