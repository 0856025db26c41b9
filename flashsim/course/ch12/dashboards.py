"""Chapter 12 dashboard: the learner's kernel under block-size controls, measured IO against the kernel view.

:class:`KernelBlockDashboard` (on the course's dashboard base) is driven by ``update(block_m=..., block_n=...,
causal=...)`` and keeps ``current``, so tests drive it without Jupyter. In the interpreter each move runs the
kernel at a small N and counts its loads and stores; on a GPU it times the kernel (``do_bench`` median) at a full
size instead. Until the learner's kernel passes, it runs the course's own kernel (:func:`learner_or_course_kernel`).

Without torch and triton (a lab-only install) the dashboard shows the simulator's kernel view alone, and the
template's source is read from its file.

What an H200 adds to this kernel (tuning, pipelining, TMA, warp roles) is chapter 14's (:mod:`flashsim.course.ch14`).
"""
from __future__ import annotations

import ast
import inspect
from importlib.resources import files

from flashsim import kernels            # the kernels load on first use (torch and triton): importing it is cheap
from flashsim.course import pick
from flashsim.course.ch12.figures import KernelIOPlot
from flashsim.course.kit.dashboard import Dashboard, slider, toggle
from flashsim.course.kit.optional import missing
from flashsim.course.kit.real_gpu import measured_on
from flashsim.course.kit.results import load_result
from flashsim.measure import bench, count_io, make_inputs
from flashsim.model.kernel_io import kernel_io

__all__ = ["KernelBlockDashboard", "template_source", "learner_or_course_kernel", "recorded_sdpa_speed"]

BLOCKS = (16, 32, 64, 128)


def recorded_sdpa_speed() -> dict:
    """The speed part of exercise 12.1's grading as recorded on a GPU, in the form :func:`flashsim.exercises.sdpa_speed`
    returns, without the learner's time (it was the answer key's): the course's ``flash_forward`` and SDPA's fastest
    backend, with "recorded" = "measured on <GPU>, <date>" from the record's own metadata (what the plot's title
    shows where no GPU is here)."""
    speed = dict(load_result("grade_final_h200")["kernels"]["solution"]["details"]["speed"])
    speed["learner_ms"] = None
    speed["recorded"] = measured_on("grade_final_h200")
    return speed


def template_source() -> str:
    """The Triton source of the chapter-12 template kernel (:mod:`flashsim.course.ch12.template`), to read; without
    torch and triton read from the module's file (the same lines, decorator included)."""
    if missing("kernels"):
        text = (files("flashsim.course.ch12") / "template.py").read_text(encoding="utf-8")
        (node,) = [n for n in ast.parse(text).body if getattr(n, "name", None) == "_flash_template_kernel"]
        first = min([node.lineno, *(dec.lineno for dec in node.decorator_list)])
        return "".join(text.splitlines(keepends=True)[first - 1:node.end_lineno])
    from flashsim.course.ch12.template import _flash_template_kernel     # lazy: the template imports triton
    return inspect.getsource(getattr(_flash_template_kernel, "fn", _flash_template_kernel))


def learner_or_course_kernel(inner, verdict):
    """The learner's inner-loop function if its verdict passed, else None: the cells below then run the course's
    own kernel, :func:`flashsim.kernels.flash_forward` (the same FA2 forward, argument names and bytes)."""
    if verdict:
        print("using your kernel")
        return inner
    if getattr(verdict, "diagnosis", None) == "not_graded":   # no torch and triton here: nothing can run
        print("without torch and triton the cells below show the simulator's kernel view and the course kernel's "
              "recorded measurement")
        return None
    print("your kernel did not pass yet: the cells below use the course's kernel (flashsim.kernels.flash_forward)")
    return None


def _nonzero(io: dict) -> dict:
    return {kind: {t: b for t, b in io[kind].items() if b} for kind in ("loads", "stores")}


def _one_launch(per_tensor: dict) -> dict:
    """The {"loads", "stores"} of a call that launches one kernel (the template, or the course's forward)."""
    (launch,) = per_tensor.values()
    return launch


class KernelBlockDashboard(Dashboard):
    """BLOCK_M / BLOCK_N / causal controls over the learner's kernel, or the course's (``inner=None``) (chapter 12).

    In the interpreter each move runs the kernel at a small N and counts its loads and stores; on a GPU it times it
    (``do_bench`` median) at a full size instead. ``current`` = {"block_m", "block_n", "causal", "simulated":
    {"loads", "stores"}, "measured": ... or None, "time_ms": ... or None, "exact": bool or None}. Without torch and
    triton (``runnable`` False) nothing runs: "measured" and "time_ms" stay None, the kernel view alone is shown.
    """

    plot = KernelIOPlot

    def __init__(self, inner=None, n: int | None = None, d: int | None = None, block_m: int = 32,
                 block_n: int = 32, causal: bool = False):
        self.inner = inner
        self.runnable = missing("kernels") is None
        self.interpreter = bool(kernels.INTERPRETER)
        self.n = int(n or (96 if self.interpreter else pick(small=1024, full=4096)))
        self.d = int(d or (32 if self.interpreter else 64))
        self.dtype = "fp32" if self.interpreter else "fp16"
        self.block_m, self.block_n, self.causal = int(block_m), int(block_n), bool(causal)
        self._cache: dict = {}
        self.current: dict = {}
        self.update()

    def controls(self):
        return {"block_m": slider("BLOCK_M", BLOCKS), "block_n": slider("BLOCK_N", BLOCKS),
                "causal": toggle("causal")}

    def _run(self, q, k, v, causal: bool, block_m: int, block_n: int):
        if self.inner is None:
            return kernels.flash_forward(q, k, v, causal=causal, block_m=block_m, block_n=block_n)
        from flashsim.course.ch12.template import flash_forward_template
        return flash_forward_template(q, k, v, self.inner, causal=causal, block_m=block_m, block_n=block_n)

    def measure(self, block_m: int, block_n: int, causal: bool) -> dict:
        key = (int(block_m), int(block_n), bool(causal))
        if key in self._cache:
            return self._cache[key]
        sim = _one_launch(kernel_io("flash_fwd", self.n, self.d, block_m, block_n, causal=causal,
                                    dtype=self.dtype).per_tensor())
        out = {"block_m": key[0], "block_n": key[1], "causal": key[2], "simulated": sim, "measured": None,
               "time_ms": None, "exact": None}
        if not self.runnable:
            self._cache[key] = out
            return out
        q, k, v = make_inputs("flash_fwd", self.n, self.d, self.dtype, device="cpu" if self.interpreter else "cuda",
                              seed=3)
        if self.interpreter:
            counted = count_io(self._run, q, k, v, causal=key[2], block_m=key[0], block_n=key[1])
            out["measured"] = _one_launch(counted.per_tensor())
            out["exact"] = _nonzero(out["measured"]) == _nonzero(sim)
        else:
            out["time_ms"] = bench(lambda: self._run(q, k, v, key[2], key[0], key[1]))
        self._cache[key] = out
        return out

    def apply(self, block_m: int | None = None, block_n: int | None = None, causal: bool | None = None) -> dict:
        self.block_m = int(block_m if block_m is not None else self.block_m)
        self.block_n = int(block_n if block_n is not None else self.block_n)
        self.causal = bool(causal if causal is not None else self.causal)
        self.current = self.measure(self.block_m, self.block_n, self.causal)
        return self.current

    def readout(self) -> str:
        c = self.current
        sim = sum(c["simulated"]["loads"].values()) + sum(c["simulated"]["stores"].values())
        text = (f"{'your kernel' if self.inner is not None else 'the course kernel'}, N={self.n}, d={self.d}, "
                f"BLOCK_M={c['block_m']}, BLOCK_N={c['block_n']}, causal={c['causal']}: simulated {sim:,} B")
        if c["measured"] is not None:
            meas = sum(c["measured"]["loads"].values()) + sum(c["measured"]["stores"].values())
            text += f", measured {meas:,} B ({'equal' if c['exact'] else 'DIFFERENT'})"
        if c["time_ms"] is not None:
            text += f", {c['time_ms']:.3f} ms on the GPU"
        if not self.runnable:
            text += " (the kernel view alone: torch and triton are not installed)"
        return text

    def plot_args(self) -> dict:
        c = self.current
        return {"simulated": c["simulated"], "measured": c["measured"],
                "title": f"N={self.n}, d={self.d}, BLOCK_M={c['block_m']}, BLOCK_N={c['block_n']}, "
                         f"{'causal' if c['causal'] else 'non-causal'}"}
