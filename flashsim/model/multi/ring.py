"""Ring attention on a simulated :class:`~flashsim.model.multi.links.Cluster` (chapter 13).

Device r keeps Q_r; for P steps it computes Q_r against the K/V block it holds (one FlashAttention-2 kernel per
block: its HBM bytes are :func:`flashsim.traffic`'s for an n×n problem, causal on the diagonal block, skipped above
it), merges the partial result into its running (O, logsumexp) in HBM with the one merge
(:func:`flashsim.model.attention.online_softmax.combine_partials`), and passes the block on.
:func:`ring_step_times` and :func:`overlap_threshold`: one ring step's compute time 4·B·H·n²·d / F against its
transfer time 2·B·H·n·d·b / W; the transfer hides behind the compute when n ≥ b·F / (2·W).
:mod:`flashsim.model.multi.closed_forms` has the closed forms the counts must equal.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flashsim.errors import SramCapacityError
from flashsim.model.attention.online_softmax import combine_partials
from flashsim.model.attention.reference import reference_attention, softmax_scale
from flashsim.model.dtypes import dtype_bytes
from flashsim.model.hardware import Hardware, get_device
from flashsim.model.multi import closed_forms as closed
from flashsim.model.multi.links import Cluster, LinkSpec, get_link
from flashsim.model.simulator import traffic
from flashsim.model.table import Table

__all__ = ["RingStep", "RingResult", "ring_attention", "ring_step_times", "overlap_threshold",
           "block_attention_numpy"]


def block_attention_numpy(q, k, v, scale: float, causal_diag: bool = False):
    """(o, lse) of q (..., n, d) against one K/V block, o normalised over the block (float64): the reference
    attention (:func:`flashsim.model.attention.reference.reference_attention`) with its logsumexp.

    causal_diag: the block is the diagonal one (same rows as Q), so key c is visible to query r iff c ≤ r.
    """
    return reference_attention(q, k, v, causal_diag, sm_scale=scale, return_lse=True)




# --- ring attention -------------------------------------------------------------------------------------------------
@dataclass
class RingStep:
    """The ring at step t: what each device holds, computes and sends, and the link bytes so far."""
    t: int
    held: list               # device r holds K/V block held[r]
    work: list               # "full", "diagonal" or "skip" (causal: the block is above the diagonal)
    sends: list              # True where device r sends its block on to r+1 this step
    link_bytes: list         # cumulative bytes device r has sent, after this step
    compute_s: list          # per device, seconds of compute this step
    comm_s: list             # per device, seconds of transfer this step
    step_s: float            # the step's time: the slowest device, transfer hidden if it overlaps
    done: np.ndarray         # (P, P) bool: done[r, j] = Q_r has seen block j (computed or skipped as masked)


@dataclass
class RingResult:
    """A simulated ring pass: per-device counters, per-link bytes, the steps, time, and (numbers=True) the error."""
    world: int
    n: int
    d: int
    heads: int
    batch: int
    dtype: str
    causal: bool
    overlap: bool
    link: LinkSpec
    device: Hardware
    steps: list
    link_bytes: list
    link_messages: list
    device_counters: list
    time_s: float
    output: np.ndarray | None = None
    max_abs_err: float | None = None

    @property
    def total_link_bytes(self) -> int:
        return sum(self.link_bytes)

    def table(self):
        rows = [[r, self.link_messages[r], self.link_bytes[r], self.device_counters[r].hbm_read_bytes,
                 self.device_counters[r].hbm_write_bytes, self.device_counters[r].flops] for r in range(self.world)]
        return Table(["device", "messages sent", "link bytes sent", "HBM read B", "HBM written B", "FLOPs"], rows,
                     f"ring attention on {self.world} × {self.device.name} over {self.link.name}, N={self.n}, "
                     f"{'causal' if self.causal else 'non-causal'}: {self.time_s * 1e3:.3g} ms")


def _block_traffic(n_loc, d, batch, heads, dtype, causal, device):
    blk = 128
    while True:
        b = max(1, min(blk, n_loc))
        try:
            return traffic("flash2", n_loc, d, block_r=b, block_c=b, batch=batch, heads=heads, dtype=dtype,
                           causal=causal, device=device)
        except SramCapacityError:
            if blk == 1:
                raise
            blk //= 2


def ring_attention(n: int, d: int, world: int = 2, heads: int = 1, batch: int = 1, dtype="fp16",
                   causal: bool = False, device="h200", link="nvlink4", overlap: bool = True,
                   numbers: bool = False, seed: int = 0) -> RingResult:
    """Ring attention forward on a simulated :class:`Cluster` (chapter 13); see the module docstring.

    Device r holds global rows [r·n, (r+1)·n), n = N/P. ``overlap``: a step's transfer runs during its compute
    (step time = max) or after it (sum). ``numbers``: compute the output in float64 from random fp-rounded inputs
    and report its max error against one-device attention.
    """
    n_loc = closed._check_ring(n, world)
    cl = Cluster(world, device, link)
    bh = int(batch) * int(heads)
    msg = closed.ring_message_bytes(n, d, world, heads, batch, dtype)
    t_full = _block_traffic(n_loc, d, batch, heads, dtype, False, cl.hw)
    t_diag = _block_traffic(n_loc, d, batch, heads, dtype, True, cl.hw) if causal else t_full
    merge_bytes = bh * n_loc * (d * 4 + 4)      # running O (fp32) and logsumexp, read twice, written once per merge
    rng = np.random.default_rng(seed)
    if numbers:
        q, k, v = (rng.standard_normal((bh, int(n), int(d))) for _ in range(3))
        o_run = [None] * world
        lse_run = [None] * world
        scale = softmax_scale(int(d))
    held = list(range(world))
    done = np.zeros((world, world), bool)
    steps, total_s = [], 0.0
    for t in range(world):
        work, sends, comp_s, comm_s = [], [], [], []
        for r in range(world):
            j = held[r]
            kind = "skip" if (causal and j > r) else ("diagonal" if (causal and j == r) else "full")
            work.append(kind)
            done[r, j] = True
            dev = cl.devices[r]
            if kind != "skip":
                tr = t_diag if kind == "diagonal" else t_full
                c = dev.counters
                for name, nb in tr.read_bytes_by_tensor.items():
                    c.add_read(name, nb)
                for name, nb in tr.write_bytes_by_tensor.items():
                    c.add_write(name, nb)
                c.flops += tr.flops
                c.sram_peak_bytes = max(c.sram_peak_bytes, tr.sram_peak_bytes)
                comp_s.append(tr.flops / cl.hw.peak_matmul_flops)
                if numbers:
                    sl = slice(j * n_loc, (j + 1) * n_loc)
                    ob, lb = block_attention_numpy(q[:, r * n_loc:(r + 1) * n_loc], k[:, sl], v[:, sl], scale,
                                                   kind == "diagonal")
                    if o_run[r] is None:
                        o_run[r], lse_run[r] = ob, lb
                    else:
                        o_run[r], lse_run[r] = combine_partials(np.stack([o_run[r], ob]),
                                                                np.stack([lse_run[r], lb]))
            else:
                comp_s.append(0.0)
            # merge into the running (O, logsumexp) in HBM, from the second computed block on
            if kind != "skip" and sum(1 for x in steps if x.work[r] != "skip") > 0:
                dev.counters.add_read("O_partial", 2 * merge_bytes)
                dev.counters.add_write("O_partial", merge_bytes)
        for r in range(world):
            # send on: every step but the last; causal: never around the wrap (no later device needs it)
            s = t < world - 1 and (not causal or (held[r] <= r and r < world - 1))
            sends.append(s)
            comm_s.append(cl.send(r, (r + 1) % world, msg) if s else 0.0)
        per_dev = [max(a, c) if overlap else a + c for a, c in zip(comp_s, comm_s)]
        step_s = max(per_dev)
        total_s += step_s
        steps.append(RingStep(t, list(held), work, sends, cl.link_bytes(), comp_s, comm_s, step_s, done.copy()))
        held = [held[(r - 1) % world] for r in range(world)]      # what r−1 held arrives at r
    res = RingResult(world, int(n), int(d), int(heads), int(batch), str(dtype), bool(causal), bool(overlap), cl.link,
                     cl.hw, steps, cl.link_bytes(), cl.link_messages(), [dv.counters for dv in cl.devices], total_s)
    if numbers:
        out = np.concatenate(o_run, axis=1)
        ref = reference_attention(q, k, v, causal, sm_scale=scale)  # one-device attention, float64
        res.output, res.max_abs_err = out, float(np.abs(out - ref).max())
    return res


# --- overlap ---------------------------------------------------------------------------------------------------------
def ring_step_times(n_block: int, d: int, heads: int = 1, batch: int = 1, dtype="fp16", device="h200",
                    link="nvlink4") -> tuple[float, float]:
    """(compute_s, comm_s) of one non-causal ring step: 4·B·H·n²·d / F against 2·B·H·n·d·b / W."""
    hw, lk = get_device(device), get_link(link)
    flops = closed.ring_step_flops(n_block, d, heads, batch)
    nbytes = 2 * int(batch) * int(heads) * int(n_block) * int(d) * dtype_bytes(dtype)
    return flops / hw.peak_matmul_flops, nbytes / lk.bandwidth_bytes_per_s


def overlap_threshold(device="h200", link="nvlink4", dtype="fp16") -> float:
    """Smallest block (rows per device) whose compute hides its transfer: b·F / (2·W) (ring-attention paper: F/W
    for 2-byte elements).

    >>> round(overlap_threshold("h200", "nvlink4")), round(overlap_threshold("h200", "infiniband_ndr"))
    (2198, 19780)
    """
    return closed.overlap_min_block(get_device(device).peak_matmul_flops, get_link(link).bandwidth_bytes_per_s, dtype)
