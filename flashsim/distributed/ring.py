"""Ring attention forward on a real distributed engine: ``torch.distributed`` (chapter 13).

NCCL when every process has a CUDA GPU, gloo on CPU processes (what CI runs: 2 processes on one machine).

Each of the P processes ("devices") holds one contiguous shard of the sequence: Q_r, K_r, V_r of n = N/P rows.
It keeps Q_r and, for P steps, computes attention of Q_r against the K/V block it holds while that block is
sent on to device r+1 and the next one arrives from device r−1 (``batch_isend_irecv`` is posted before the
compute and waited on after it: transfer and compute overlap). Partial results merge exactly with the logsumexp
(chapter 04's (m, l) merge, :func:`merge_on_device`, as :mod:`flashsim.kernels.split_kv`'s combine): the result equals single-device
attention to rounding, causal or not. Causal: block j is needed only by devices r ≥ j, so it is never sent
around the wrap (see :mod:`flashsim.model.multi.closed_forms`).

Bytes sent per device are measured two ways and returned next to the closed form:

* ``sent_bytes``: bytes of the tensors each process handed to ``torch.distributed`` and whose send completed
  (the matching receive on the neighbour checks that it got a tensor of the same size);
* ``os_bytes`` (gloo only): the growth of the process's ``wchar`` counter in ``/proc/self/io`` around the ring,
  i.e. the bytes gloo's threads wrote to their TCP sockets, message headers included;
* ``nvlink_bytes`` (NCCL only, where NVML exposes it): the GPU's NVLink data TX counter around the ring.

:func:`run_ring` launches it: ``torch.multiprocessing.spawn`` of ``world`` local processes, MASTER_ADDR=127.0.0.1
and a free port. The inputs are generated from a seed in every process (no input transfer), and rank 0's parent
compares the gathered output with one-device attention in float64.

The module imports without torch (torch is imported where it is used, an optional extra); :func:`run_ring` and
:func:`pick_backend` then raise :class:`~flashsim.errors.MissingExtra` with the one line of
:func:`flashsim.errors.missing` (chapter 13 shows the ring recorded on two H200s instead).
"""
from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from dataclasses import asdict, dataclass, field

from flashsim.errors import FlashsimError, MissingExtra, absent, missing
from flashsim import kernels
from flashsim.model.attention.reference import reference_attention
from flashsim.model.multi.closed_forms import ring_link_bytes
from flashsim.model.table import Table

#: the dtypes the ring runs in (torch's names: torch.float32, torch.float16, torch.bfloat16)
DTYPES = ("fp32", "fp16", "bf16")


def _require_torch() -> None:
    """Raise MissingExtra (what is missing, how to install it) unless torch can be imported here."""
    if absent("torch"):
        raise MissingExtra(missing("kernels"))


def _torch_dtype(name: str):
    import torch                          # lazy: torch is an optional extra
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


# --- the math of one block and the merge ---------------------------------------------------------------------

def block_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float, causal_diag: bool = False,
                    use_triton: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of a Q shard against one K/V block: (o fp32 normalised over the block, lse fp32 (..., n)).

    causal_diag: the block is the diagonal one (same rows as Q): key c is visible to query r iff c ≤ r.
    use_triton: compute with the course's Triton kernel :func:`flashsim.kernels.flash_forward` (GPU runs);
    otherwise (CPU processes) with the one reference, :func:`flashsim.model.attention.reference.reference_attention`.
    """
    import torch                          # lazy: torch is an optional extra
    if use_triton:
        o, lse = kernels.flash_forward(q, k, v, causal=causal_diag, sm_scale=sm_scale)
        return o.float(), lse
    o, lse = reference_attention(*(x.double().cpu().numpy() for x in (q, k, v)), causal=causal_diag,
                                 sm_scale=sm_scale, return_lse=True)
    return (torch.from_numpy(o).to(device=q.device, dtype=torch.float32),
            torch.from_numpy(lse).to(device=q.device, dtype=torch.float32))


def merge_on_device(o_a, lse_a, o_b, lse_b):
    """Merge two partial results by their logsumexps, in torch on the tensors' device (chapter 04's merge).

    The ring's devices merge where their partials live (a GPU's, in NCCL runs), so this is the device-side
    form of :func:`flashsim.model.attention.online_softmax.merge_partials`, the one definition, which works in
    float64 numpy; tests/distributed checks that the two agree.
    """
    import torch                          # lazy: torch is an optional extra
    lse = torch.logaddexp(lse_a, lse_b)
    wa = torch.exp(lse_a - lse).nan_to_num(0.0).unsqueeze(-1)
    wb = torch.exp(lse_b - lse).nan_to_num(0.0).unsqueeze(-1)
    return wa * o_a + wb * o_b, lse


def make_inputs(batch, heads, n, d, dtype="fp16", seed=0, device="cpu"):
    """Q, K, V (B, H, N, d), the same in every process (CPU generator with a seed, then moved)."""
    import torch                          # lazy: torch is an optional extra
    g = torch.Generator().manual_seed(int(seed))
    dt = _torch_dtype(dtype)
    return tuple(torch.randn(batch, heads, n, d, generator=g).to(dt).to(device) for _ in range(3))


# --- the ring, inside one process ----------------------------------------------------------------------------

def _wchar() -> int | None:
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _nvlink_tx_bytes(device_index: int, links: int = 18) -> int | None:
    """NVLink data bytes this GPU has transmitted so far, summed over its links, or None where NVML cannot say.

    NVML field NVLINK_THROUGHPUT_DATA_TX (KiB) is per link (scope id = link number): the H200's 18 links are read
    one by one, since one scope alone is one link's bytes (benchmarks/results/NOTES.md).
    """
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        fid = getattr(pynvml, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", 138)
        vals = pynvml.nvmlDeviceGetFieldValues(h, [(fid, link) for link in range(links)])
        total, seen = 0, 0
        for val in vals:
            if val.nvmlReturn != 0:
                continue
            total += int(getattr(val.value, "ullVal", 0) or getattr(val.value, "ulVal", 0) or 0) * 1024
            seen += 1
        return total if seen else None
    except Exception:
        return None


@dataclass
class RingCounters:
    """What one process counted: messages and bytes it sent and received, and the steps it computed."""
    sent_messages: int = 0
    sent_bytes: int = 0
    recv_messages: int = 0
    recv_bytes: int = 0
    computed_blocks: list = field(default_factory=list)   # source block index j of each block computed


def ring_attention(q, k, v, causal: bool = False, sm_scale=None, group=None, use_triton: bool = False,
                   counters: RingCounters | None = None, compute: bool = True):
    """Ring attention forward for this process's shard (call in every process of an initialised group).

    q, k, v: this rank's (B, H, n, d) shards, rank r holding global rows [r·n, (r+1)·n). Returns (o in q's
    dtype, lse fp32 (B, H, n)). ``counters`` (a :class:`RingCounters`) records what was sent and received.
    compute=False moves the blocks without computing (to time the links alone) and returns (None, None).
    """
    import torch                          # lazy: torch is an optional extra
    import torch.distributed as dist
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    scale = sm_scale if sm_scale is not None else q.shape[-1] ** -0.5
    c = counters if counters is not None else RingCounters()
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    if group is not None:
        nxt, prv = dist.get_global_rank(group, nxt), dist.get_global_rank(group, prv)
    kv = torch.stack([k, v]).contiguous()                    # one message: K_j and V_j, (2, B, H, n, d)
    o = lse = None
    for t in range(world):
        j = (rank - t) % world                               # the block this rank holds at step t
        # post the transfer of this step first (send the block on, receive the next), then compute
        send = t < world - 1 and (not causal or (t <= rank and rank < world - 1))
        recv = t < world - 1 and (not causal or t <= rank - 1)
        ops, nxt_kv = [], None
        if send:
            ops.append(dist.P2POp(dist.isend, kv, nxt, group))
        if recv:
            nxt_kv = torch.empty_like(kv)
            ops.append(dist.P2POp(dist.irecv, nxt_kv, prv, group))
        reqs = dist.batch_isend_irecv(ops) if ops else []
        if compute and (not causal or j <= rank):            # causal: blocks j > rank are fully masked, skipped
            ob, lb = block_attention(q, kv[0], kv[1], scale, causal_diag=causal and j == rank,
                                     use_triton=use_triton)
            o, lse = (ob, lb) if o is None else merge_on_device(o, lse, ob, lb)
            c.computed_blocks.append(j)
        for r in reqs:
            r.wait()
        if send:
            c.sent_messages += 1
            c.sent_bytes += kv.numel() * kv.element_size()
        if recv:
            c.recv_messages += 1
            c.recv_bytes += nxt_kv.numel() * nxt_kv.element_size()
            kv = nxt_kv
    if o is None:
        return None, None
    return o.to(q.dtype), lse


# --- the launcher ----------------------------------------------------------------------------------------------

def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pick_backend() -> str:
    """"nccl" when there are CUDA GPUs and NCCL, else "gloo"; MissingExtra without torch."""
    _require_torch()
    import torch                          # lazy: torch is an optional extra
    import torch.distributed as dist
    if torch.cuda.is_available() and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def _worker(rank: int, world: int, backend: str, port: int, configs: list, outdir: str) -> None:
    import torch                          # lazy: torch is an optional extra
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dev = torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(rank)
        dev = torch.device("cuda", rank)
    torch.set_num_threads(1 if backend == "gloo" else torch.get_num_threads())
    kwargs = {"device_id": dev} if backend == "nccl" else {}
    dist.init_process_group(backend, rank=rank, world_size=world, **kwargs)
    try:
        results = []
        for cfg in configs:
            q, k, v = make_inputs(cfg["batch"], cfg["heads"], cfg["n"], cfg["d"], cfg["dtype"], cfg["seed"], dev)
            n_loc = cfg["n"] // world
            sl = slice(rank * n_loc, (rank + 1) * n_loc)
            qs, ks, vs = (x[:, :, sl].contiguous() for x in (q, k, v))
            del q, k, v
            use_triton = bool(cfg.get("use_triton")) and backend == "nccl"
            for _ in range(int(cfg.get("warmup", 0))):
                ring_attention(qs, ks, vs, causal=cfg["causal"], use_triton=use_triton,
                               compute=not cfg.get("comm_only"))
            if backend == "nccl":
                torch.cuda.synchronize()
            dist.barrier()
            counters = RingCounters()
            w0, nv0 = _wchar(), (_nvlink_tx_bytes(rank) if backend == "nccl" else None)
            t0 = time.perf_counter()
            o, lse = ring_attention(qs, ks, vs, causal=cfg["causal"], use_triton=use_triton, counters=counters,
                                    compute=not cfg.get("comm_only"))
            if backend == "nccl":
                torch.cuda.synchronize()
            elapsed = time.perf_counter() - t0
            w1, nv1 = _wchar(), (_nvlink_tx_bytes(rank) if backend == "nccl" else None)
            dist.barrier()
            rec = asdict(counters)
            rec.update(rank=rank, seconds=elapsed,
                       os_bytes=(w1 - w0) if (backend == "gloo" and w0 is not None and w1 is not None) else None,
                       nvlink_bytes=(nv1 - nv0) if (nv0 is not None and nv1 is not None) else None)
            results.append(rec)
            if cfg.get("return_output", True) and o is not None:
                torch.save(o.cpu(), os.path.join(outdir, f"o_{cfg['name']}_{rank}.pt"))
        with open(os.path.join(outdir, f"counters_{rank}.json"), "w") as f:
            json.dump(results, f)
    finally:
        dist.destroy_process_group()


@dataclass
class RingRun:
    """One ring pass measured on real processes, next to the simulator's closed form."""
    backend: str
    world: int
    batch: int
    heads: int
    n: int
    d: int
    dtype: str
    causal: bool
    sent_bytes: list            # per rank, handed to torch.distributed
    recv_bytes: list
    os_bytes: list              # per rank, gloo's socket writes (/proc/self/io wchar), or None
    nvlink_bytes: list          # per rank, NVLink TX counter, or None
    simulated_bytes: list       # per rank, flashsim.model.multi.closed_forms.ring_link_bytes
    seconds: list
    computed_blocks: list
    max_abs_err: float | None
    tolerance: float | None
    comm_only: bool = False

    @property
    def exact(self) -> bool:
        """Every rank sent exactly the simulator's link bytes."""
        return self.sent_bytes == self.simulated_bytes

    @property
    def ok(self) -> bool:
        return self.exact and (self.max_abs_err is None or self.max_abs_err <= self.tolerance)

    def rows(self) -> list:
        out = []
        for r in range(self.world):
            os_b = self.os_bytes[r] if self.os_bytes else None
            nv_b = self.nvlink_bytes[r] if self.nvlink_bytes else None
            out.append([r, self.sent_bytes[r], self.simulated_bytes[r], os_b, nv_b,
                        round(self.seconds[r] * 1e3, 2)])
        return out

    def table(self):
        cap = (f"ring attention, {self.backend}, {self.world} processes, N={self.n}, d={self.d}, H={self.heads}, "
               f"{self.dtype}, {'causal' if self.causal else 'non-causal'}; max |error| {self.max_abs_err:.2e}"
               if self.max_abs_err is not None else f"ring attention, {self.backend}")
        return Table(["rank", "sent (torch.distributed)", "simulated link bytes", "socket bytes (OS)",
                      "NVLink TX bytes", "ms"], self.rows(), cap)

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(exact=self.exact, ok=self.ok)
        return d


def tolerance(dtype: str) -> float:
    """Max |error| allowed against float64 one-device attention (unit-scale random inputs)."""
    return {"fp32": 1e-4, "fp16": 4e-3, "bf16": 3e-2}[dtype]


def run_ring(world: int = 2, batch: int = 1, heads: int = 2, n: int = 256, d: int = 32, dtype="fp32",
             causal=(False, True), backend: str | None = None, seed: int = 0, check: bool = True,
             use_triton: bool = False, warmup: int = 0, comm_only: bool = False,
             timeout_s: float = 300.0) -> list[RingRun]:
    """Spawn `world` local processes, run the ring once per (dtype, causal) setting, return one :class:`RingRun` each.

    dtype, causal: one value or a sequence of values (all combinations run in the same processes, dtype-major).
    backend: "gloo" (CPU processes), "nccl" (one GPU per process) or None for :func:`pick_backend`.
    check: compare the gathered output with one-device float64 attention (done here, in the parent).
    comm_only: True moves the blocks without computing (times the links alone; no output, no check); a pair
    (False, True) runs both. Without torch: :class:`~flashsim.errors.MissingExtra` naming the install.
    """
    _require_torch()
    import torch                          # lazy: torch is an optional extra
    import torch.multiprocessing as mp
    backend = backend or pick_backend()
    if backend == "nccl" and torch.cuda.device_count() < world:
        raise FlashsimError(f"NCCL needs one GPU per process: {world} processes, "
                            f"{torch.cuda.device_count()} GPUs. Use backend='gloo' (CPU) or fewer processes")
    if n % world:
        raise FlashsimError(f"N={n} must be a multiple of world={world}")
    for key, val in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                     ("NVSHMEM_DISABLE_NVLS", "1")):
        os.environ.setdefault(key, val)
    causals = [causal] if isinstance(causal, bool) else list(causal)
    dtypes = [dtype] if isinstance(dtype, str) else list(dtype)
    for dt in dtypes:
        if dt not in DTYPES:
            raise FlashsimError(f"dtype={dt!r}: use one of {sorted(DTYPES)}")
    comms = [comm_only] if isinstance(comm_only, bool) else list(comm_only)
    configs = [dict(name=f"{dt}_c{int(c)}_m{int(m)}", batch=batch, heads=heads, n=n, d=d, dtype=dt, seed=seed,
                    causal=c, use_triton=use_triton, warmup=warmup, return_output=check and not m, comm_only=m)
               for m in comms for dt in dtypes for c in causals]
    with tempfile.TemporaryDirectory(prefix="flashsim_ring_") as outdir:
        port = free_port()
        ctx = mp.start_processes(_worker, args=(world, backend, port, configs, outdir), nprocs=world, join=False,
                                 start_method="spawn")
        deadline = time.time() + timeout_s
        while not ctx.join(timeout=1.0):
            if time.time() > deadline:
                for p in ctx.processes:
                    p.kill()
                raise FlashsimError(f"the ring did not finish within {timeout_s:.0f} s")
        per_rank = []
        for r in range(world):
            with open(os.path.join(outdir, f"counters_{r}.json")) as f:
                per_rank.append(json.load(f))
        runs = []
        for ci, cfg in enumerate(configs):
            recs = [per_rank[r][ci] for r in range(world)]
            err = None
            if cfg["return_output"]:
                o = torch.cat([torch.load(os.path.join(outdir, f"o_{cfg['name']}_{r}.pt")) for r in range(world)],
                              dim=2)
                q, k, v = make_inputs(batch, heads, n, d, cfg["dtype"], seed)
                ref = reference_attention(*(x.double().numpy() for x in (q, k, v)), causal=cfg["causal"])
                err = float((o.double() - torch.from_numpy(ref)).abs().max())
            runs.append(RingRun(
                backend=backend, world=world, batch=batch, heads=heads, n=n, d=d, dtype=cfg["dtype"],
                causal=cfg["causal"], sent_bytes=[x["sent_bytes"] for x in recs],
                recv_bytes=[x["recv_bytes"] for x in recs], os_bytes=[x["os_bytes"] for x in recs],
                nvlink_bytes=[x["nvlink_bytes"] for x in recs],
                simulated_bytes=ring_link_bytes(n, d, world, heads, batch, cfg["dtype"], cfg["causal"]),
                seconds=[x["seconds"] for x in recs], computed_blocks=[x["computed_blocks"] for x in recs],
                max_abs_err=err, tolerance=tolerance(cfg["dtype"]) if err is not None else None,
                comm_only=cfg["comm_only"]))
    return runs


if __name__ == "__main__":  # pragma: no cover
    for run in run_ring():
        print(run.table())
