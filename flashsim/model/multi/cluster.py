"""Several simulated devices joined by links: ring attention and flash-decoding schedules (chapter 13).

A :class:`Cluster` holds P devices, each with its own HBM/SRAM counters (:class:`flashsim.model.memory.Counters`, one per
device), and a ring of directed links r → r+1 (mod P), each with a bandwidth preset and byte counters. Schedules
run their loops on it and count; :mod:`flashsim.model.multi.closed_forms` has the closed forms they must equal, and
:mod:`flashsim.multi.distributed` runs the same ring on real processes (``torch.distributed``) and measures the bytes.

* :func:`ring_attention`: device r keeps Q_r; for P steps it computes Q_r against the K/V block it holds (one
  FlashAttention-2 kernel per block: its HBM bytes are :func:`flashsim.traffic`'s for an n×n problem, causal on
  the diagonal block, skipped above it), merges the partial result into its running (O, logsumexp) in HBM, and
  passes the block on. A send reads the block from the sender's HBM and writes it into the receiver's; the link
  counts it. ``numbers=True`` also computes the output (numpy, float64) to show it is exact.
* :func:`flash_decoding`: one device; the split kernel's programs and the combine kernel's, their bytes, and a
  time model in which one SM streams at most its share of HBM bandwidth (HBM bandwidth / number of SMs): one
  program alone cannot saturate HBM, which is why splitting K/V over more programs pays off (measured, see
  benchmarks/results/distributed_h200_2026-11-29.md).
* :func:`ring_step_times`, :func:`overlap_threshold`: one ring step's compute time 4·B·H·n²·d / F against its
  transfer time 2·B·H·n·d·b / W; the transfer hides behind the compute when n ≥ b·F / (2·W).

Link presets are per direction (a link's datasheet "bidirectional" figure is twice that); the model has no
latency term (bandwidth only), which is fine for the MiB-sized messages of attention.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from flashsim.errors import FlashsimError, SramCapacityError
from flashsim.model.attention.online_softmax import combine_partials
from flashsim.model.attention.reference import reference_attention
from flashsim.model.dtypes import dtype_bytes
from flashsim.model.hardware import Hardware, get_device
from flashsim.model.memory import Counters
from flashsim.model.multi import closed_forms as closed
from flashsim.model.simulator import traffic
from flashsim.model.table import Table

__all__ = ["LinkSpec", "LINK_PRESETS", "get_link", "Cluster", "RingStep", "RingResult", "ring_attention",
           "FlashDecodingResult", "flash_decoding", "ring_step_times", "overlap_threshold", "split_partials",
           "combine_partials", "block_attention_numpy"]


# --- links ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LinkSpec:
    """A device-to-device link: bandwidth per direction in bytes/s, and where the number comes from."""
    name: str
    bandwidth_bytes_per_s: float
    source: str = ""


LINK_PRESETS: dict[str, LinkSpec] = {
    # NVIDIA H100 / H200 SXM datasheets: "NVLink: 900 GB/s" (bidirectional, 18 NVLink 4 links) = 450 GB/s per
    # direction.
    "nvlink4": LinkSpec("NVLink 4 (H100/H200 SXM)", 450e9,
                        "NVIDIA H100/H200 SXM datasheets: 900 GB/s bidirectional = 450 GB/s per direction"),
    # NVIDIA A100 datasheet: "NVLink: 600 GB/s" (bidirectional, 12 NVLink 3 links) = 300 GB/s per direction.
    "nvlink3": LinkSpec("NVLink 3 (A100 SXM)", 300e9,
                        "NVIDIA A100 datasheet: 600 GB/s bidirectional = 300 GB/s per direction"),
    # PCI Express Base Specification 5.0 (PCI-SIG): 32 GT/s per lane, 128b/130b encoding; x16 = 63 GB/s per
    # direction (NVIDIA's H100 PCIe datasheet: "PCIe Gen5: 128 GB/s", both directions).
    "pcie5": LinkSpec("PCIe 5.0 x16", 63e9,
                      "PCI-SIG PCIe 5.0: 32 GT/s x 16 lanes, 128b/130b = 63 GB/s per direction"),
    # PCI Express Base Specification 4.0: 16 GT/s per lane, 128b/130b; x16 = 31.5 GB/s per direction.
    "pcie4": LinkSpec("PCIe 4.0 x16", 31.5e9,
                      "PCI-SIG PCIe 4.0: 16 GT/s x 16 lanes, 128b/130b = 31.5 GB/s per direction"),
    # NVIDIA ConnectX-7 / Quantum-2 datasheets: InfiniBand NDR, 400 Gb/s per port = 50 GB/s per direction
    # (one NIC per GPU, as in a DGX H100/H200, for traffic between nodes).
    "infiniband_ndr": LinkSpec("InfiniBand NDR (400 Gb/s)", 50e9,
                               "NVIDIA ConnectX-7 datasheet: NDR 400 Gb/s per port = 50 GB/s per direction"),
}


def get_link(link="nvlink4", **overrides) -> LinkSpec:
    """A link preset by name (see :data:`LINK_PRESETS`) or a LinkSpec; ``bandwidth_bytes_per_s`` can be overridden."""
    if isinstance(link, LinkSpec):
        spec = link
    else:
        key = str(link).lower().replace("-", "_").replace(" ", "_")
        key = {"nvlink": "nvlink4", "pcie": "pcie5", "infiniband": "infiniband_ndr", "ib": "infiniband_ndr",
               "ndr": "infiniband_ndr"}.get(key, key)
        if key not in LINK_PRESETS:
            raise FlashsimError(f"unknown link {link!r}: use one of {sorted(LINK_PRESETS)}")
        spec = LINK_PRESETS[key]
    bw = overrides.get("bandwidth_bytes_per_s")
    if bw is not None:
        if not bw > 0:
            raise FlashsimError(f"bandwidth_bytes_per_s={bw!r} must be > 0")
        spec = LinkSpec(spec.name + " (overridden)", float(bw), spec.source)
    return spec


# --- the cluster ---------------------------------------------------------------------------------------------------
@dataclass
class LinkCounter:
    """Bytes and messages that went over one directed link src → dst."""
    src: int
    dst: int
    spec: LinkSpec
    bytes_sent: int = 0
    messages: int = 0


@dataclass
class SimDevice:
    """One device: its hardware preset and its own HBM/SRAM counters."""
    index: int
    hw: Hardware
    counters: Counters = field(default_factory=Counters)
    busy_s: float = 0.0


class Cluster:
    """P devices of one preset in a ring of links of one preset (chapter 13).

    >>> c = Cluster(4, device="h200", link="nvlink4")
    >>> seconds = c.send(0, 1, 1024); c.link_bytes()
    [1024, 0, 0, 0]
    """

    def __init__(self, world: int = 2, device="h200", link="nvlink4"):
        world = int(world)
        if world < 1:
            raise FlashsimError(f"world={world} must be >= 1 device")
        self.world = world
        self.hw = get_device(device)
        self.link = get_link(link)
        self.devices = [SimDevice(r, self.hw) for r in range(world)]
        self.links = {(r, (r + 1) % world): LinkCounter(r, (r + 1) % world, self.link)
                      for r in range(world)} if world > 1 else {}

    def send(self, src: int, dst: int, nbytes: int, tensor: str = "KV") -> float:
        """Move `nbytes` from src's HBM to dst's over the link src → dst; returns the transfer time in seconds."""
        key = (int(src), int(dst))
        if key not in self.links:
            raise FlashsimError(f"no link {src} → {dst}: the ring links r → r+1 (mod {self.world})")
        lk = self.links[key]
        lk.bytes_sent += int(nbytes)
        lk.messages += 1
        self.devices[src].counters.add_read(tensor, nbytes)     # the sender reads the block out of its HBM
        self.devices[dst].counters.add_write(tensor, nbytes)    # the receiver writes it into its HBM
        return nbytes / lk.spec.bandwidth_bytes_per_s

    def link_bytes(self) -> list[int]:
        """Bytes each device sent on its outgoing link (device r → r+1), one entry per device."""
        return [self.links[(r, (r + 1) % self.world)].bytes_sent if self.world > 1 else 0
                for r in range(self.world)]

    def link_messages(self) -> list[int]:
        return [self.links[(r, (r + 1) % self.world)].messages if self.world > 1 else 0 for r in range(self.world)]


# --- numbers (numpy, float64): one block, and the logsumexp merge ---------------------------------------------------
# combine_partials is flashsim.model.attention.online_softmax.combine_partials (the one merge), re-exported here.
def block_attention_numpy(q, k, v, scale: float, causal_diag: bool = False):
    """(o, lse) of q (..., n, d) against one K/V block, o normalised over the block (float64): the reference
    attention (:func:`flashsim.model.attention.reference.reference_attention`) with its logsumexp.

    causal_diag: the block is the diagonal one (same rows as Q), so key c is visible to query r iff c ≤ r.
    """
    return reference_attention(q, k, v, causal_diag, sm_scale=scale, return_lse=True)


def split_partials(q, k, v, splits: int, scale: float | None = None):
    """Flash-decoding's first kernel in numpy: K/V cut into `splits` contiguous chunks (as equal as possible);
    returns (o_parts (S, nq, d), lse_parts (S, nq))."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    bounds = np.linspace(0, k.shape[0], int(splits) + 1).round().astype(int)
    parts = [block_attention_numpy(q, k[a:b], v[a:b], scale) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    return np.stack([p[0] for p in parts]), np.stack([p[1] for p in parts])


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


def _block_traffic(n_loc, d, bh, dtype, causal, device):
    blk = 128
    while True:
        b = max(1, min(blk, n_loc))
        try:
            return traffic("flash2", n_loc, d, block_r=b, block_c=b, heads=bh, dtype=dtype, causal=causal,
                           device=device)
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
    t_full = _block_traffic(n_loc, d, bh, dtype, False, cl.hw)
    t_diag = _block_traffic(n_loc, d, bh, dtype, True, cl.hw) if causal else t_full
    merge_bytes = bh * n_loc * (d * 4 + 4)      # running O (fp32) and logsumexp, read twice, written once per merge
    rng = np.random.default_rng(seed)
    if numbers:
        q, k, v = (rng.standard_normal((bh, int(n), int(d))) for _ in range(3))
        o_run = [None] * world
        lse_run = [None] * world
        scale = int(d) ** -0.5
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


# --- flash-decoding --------------------------------------------------------------------------------------------------
@dataclass
class FlashDecodingResult:
    """Split-KV decoding on one simulated device: programs, bytes by kernel and tensor, and modelled time."""
    n: int
    d: int
    heads: int
    batch: int
    nq: int
    splits: int
    dtype: str
    device: Hardware
    programs: int                 # of the split kernel
    waves: int                    # ceil(programs / SMs)
    sm_busy_fraction: float       # SMs with work in the first wave / SMs
    counters: dict                # {"split": Counters, "combine": Counters}
    split_s: float
    combine_s: float

    @property
    def time_s(self) -> float:
        return self.split_s + self.combine_s

    @property
    def hbm_bytes(self) -> int:
        return sum(c.hbm_bytes for c in self.counters.values())


def _stream_time(programs: int, bytes_per_program: float, hw: Hardware) -> tuple[float, int]:
    """Seconds for `programs` equal programs each streaming `bytes_per_program`: each SM streams at most
    HBM bandwidth / SMs, programs run in waves of one per SM; never faster than all bytes at full bandwidth."""
    waves = math.ceil(programs / hw.num_sms)
    per_sm = hw.hbm_bandwidth_bytes_per_s / hw.num_sms
    return max(waves * bytes_per_program / per_sm, programs * bytes_per_program / hw.hbm_bandwidth_bytes_per_s), waves


def flash_decoding(n: int, d: int, heads: int = 1, batch: int = 1, splits: int = 1, nq: int = 1, dtype="fp16",
                   device="h200", block_n: int = 64) -> FlashDecodingResult:
    """Simulate :mod:`flashsim.kernels.split_kv` (chapter 13): one program per (chunk, batch·head) reads Q and its
    chunk of K/V; with splits > 1 a combine program per batch·head merges the partials by their logsumexps.

    Chunks are whole ``block_n`` tiles, as the kernel cuts them, so ``splits`` may shrink for tiny N.
    """
    hw = get_device(device)
    b, bh, nq, n, d = dtype_bytes(dtype), int(batch) * int(heads), int(nq), int(n), int(d)
    tiles = math.ceil(n / block_n)
    chunk = math.ceil(tiles / min(int(splits), tiles)) * block_n
    s = math.ceil(n / chunk)
    split, comb = Counters(), Counters()
    longest = 0
    for i in range(s):                                       # one chunk; the bh programs of it are alike
        rows = min(chunk, n - i * chunk)
        split.add_read("Q", bh * nq * d * b)
        split.add_read("K", bh * rows * d * b)
        split.add_read("V", bh * rows * d * b)
        split.flops += bh * 4 * nq * rows * d
        if s == 1:
            split.add_write("OP", bh * nq * d * b)
        else:
            split.add_write("OP", bh * nq * d * closed.STATS_BYTES)
        split.add_write("LSEP", bh * nq * closed.STATS_BYTES)
        longest = max(longest, rows)
    per_prog = nq * d * b + 2 * longest * d * b
    split_s, waves = _stream_time(s * bh, per_prog, hw)
    combine_s = 0.0
    if s > 1:
        comb.add_read("OP", bh * s * nq * d * closed.STATS_BYTES)
        comb.add_read("LSEP", bh * s * nq * closed.STATS_BYTES)
        comb.add_write("O", bh * nq * d * b)
        comb.add_write("LSE", bh * nq * closed.STATS_BYTES)
        combine_s, _ = _stream_time(bh, s * nq * (d + 1) * closed.STATS_BYTES + nq * d * b, hw)
    counters = {"split": split} if s == 1 else {"split": split, "combine": comb}
    return FlashDecodingResult(n, d, int(heads), int(batch), nq, s, str(dtype), hw, s * bh, waves,
                               min(s * bh, hw.num_sms) / hw.num_sms, counters, split_s, combine_s)
