"""Chapter 09 exercises: the byte count behind Θ(N²d²/M), and the DRAM bytes behind L2.

* :func:`check_flash2_bytes` (09.1): FA2's causal forward HBM bytes in closed form (square blocks, ragged N),
  against ``flashsim.traffic``;
* :func:`check_compulsory_dram_bytes` (09.2): the DRAM bytes when the re-reads hit in L2, exactly (each tensor
  once, from the kernel view): the limit the L2 model approaches.
"""
from __future__ import annotations

from flashsim.course.kit.checker import Suspect, Verdict, check_cases, exercise
from flashsim.model.attention.visibility import n_blocks
from flashsim.model.kernel_io import kernel_io
from flashsim.model.simulator import traffic

__all__ = ["check_flash2_bytes", "check_compulsory_dram_bytes"]

FLASH2_BYTES = exercise(
    "09.1", "FA2's causal HBM bytes in closed form",
    "fn(n, d, block_r, elem_bytes, stats_bytes) -> int: the HBM bytes (reads + writes) of FA2's *causal* forward "
    "for one head with square blocks (Bc = Br), including the logsumexp it saves for the backward; N need not be a "
    "multiple of the block.",
    ("Under the causal mask, which K and V rows does row block i still load?",
     "Count per tensor how many times the causal loop reads or writes it for one head, and in which element size; "
     "only K and V depend on the mask.",
     "Row block i visits the key tiles up to the end of its own rows, min((i+1)·Br, N) key rows of K and as many "
     "of V; Q and O move once; the logsumexp is one value per row in stats_bytes."),
    "check_flash2_bytes")

COMPULSORY_DRAM = exercise(
    "09.2", "the DRAM bytes behind L2",
    "fn(batch, heads, n, d, elem_bytes) -> int: the flash forward kernel's DRAM bytes when every K/V re-read hits "
    "in L2.",
    ("If every re-read hits in L2, how many times does each byte of each tensor cross DRAM?",
     "Count Q, K, V read and O written, each once, plus the logsumexp (fp32), for every (batch, head).",
     "per (batch, head): four N×d tensors once each, in b bytes, and one fp32 number per query row"),
    "check_compulsory_dram_bytes")


def _flash2_ref(n, d, br, es, ss):
    dtypes = {2: "fp16", 4: "fp32"}
    return traffic("flash2", n, d, block_r=br, block_c=br, dtype=dtypes[es], stats_dtype=dtypes[ss], causal=True,
                   sram_bytes=4 << 20).hbm_bytes


def check_flash2_bytes(fn, quiet: bool = False) -> Verdict:
    """Exercise 09.1: against ``flashsim.traffic("flash2", ..., causal=True)`` with Bc = Br, on divisible and
    ragged N, fp16 and fp32."""
    cases = [(1024, 64, 64, 2, 4), (1000, 64, 64, 2, 4), (4096, 128, 128, 2, 4), (300, 32, 16, 4, 4),
             (8192, 64, 128, 2, 4), (100, 16, 32, 2, 2)]

    def fa2(n, d, br, b, s, *, kv_rows=None, lse=True, tr=None):
        t = n_blocks(n, br) if tr is None else tr
        rows = sum(min((i + 1) * br, n) for i in range(t)) if kv_rows is None else kv_rows
        return 2 * n * d * b + 2 * rows * d * b + (n * s if lse else 0)
    suspects = (Suspect("causal_ignored", lambda n, d, br, b, s: fa2(n, d, br, b, s, kv_rows=n_blocks(n, br) * n),
                        "your count reads all of K and V for every row block: under the causal mask row block i "
                        "stops at the end of its own rows"),
                Suspect("ragged_tile_full", lambda n, d, br, b, s: fa2(n, d, br, b, s, kv_rows=sum(
                    (i + 1) * br for i in range(n_blocks(n, br)))),
                        "your count loads whole tiles at the ragged end: the last key tile has only N − j·Bc rows"),
                Suspect("ratio_not_for_ragged", lambda n, d, br, b, s: 2 * n * d * b + n * s
                        + n * d * b * (n_blocks(n, br) + 1),
                        "you scaled the non-causal K/V bytes by (T + 1)/2T: that ratio holds only when the block "
                        "divides N"),
                Suspect("exact_half", lambda n, d, br, b, s: fa2(n, d, br, b, s, kv_rows=n_blocks(n, br) * n // 2),
                        "your K/V bytes are exactly half the non-causal ones: the tiles the diagonal crosses are "
                        "loaded in full"),
                Suspect("lse_missing", lambda n, d, br, b, s: fa2(n, d, br, b, s, lse=False),
                        "your count leaves out the logsumexp the forward writes for the backward"),
                Suspect("lse_in_elem_bytes", lambda n, d, br, b, s: fa2(n, d, br, b, b),
                        "your logsumexp is counted in elem_bytes: it is stored in stats_bytes"),
                Suspect("floor_not_ceil", lambda n, d, br, b, s: fa2(n, d, br, b, s, tr=n // br),
                        "your count uses N // Br row blocks: the ragged last block is a pass too"),
                Suspect("o_read_too", lambda n, d, br, b, s: fa2(n, d, br, b, s) + n * d * b,
                        "your count reads O as well as writing it: FA2 keeps O_i on chip and writes it once"))
    return check_cases(FLASH2_BYTES, fn, cases, _flash2_ref, header=("N, d, Br = Bc, b, stats b", "simulator's B",
                                                                     "your B"),
                       suspects=suspects, ragged=lambda n, d, br, b, s: n % br != 0, quiet=quiet)


def _dram_ref(b, h, n, d, es):
    """Compulsory bytes: every tensor of the kernel view crosses DRAM once (Q, K, V read, O and the fp32
    logsumexp written), from :func:`flashsim.model.kernel_io.kernel_io`'s per-tensor bytes with the re-reads
    removed. The L2 model (:func:`kernel_dram`) approaches this from above."""
    dtype = {2: "fp16", 4: "fp32"}[es]
    per = kernel_io("flash_fwd", n, d, 128, 64, batch=b, heads=h, dtype=dtype).per_tensor()
    loads, stores = {}, {}
    for launch in per.values():
        for t, x in launch["loads"].items():
            loads[t] = loads.get(t, 0) + x
        for t, x in launch["stores"].items():
            stores[t] = stores.get(t, 0) + x
    once = {"Q": b * h * n * d * es, "K": b * h * n * d * es, "V": b * h * n * d * es}
    return sum(min(loads.get(t, 0), once[t]) for t in once) + sum(stores.values())


def check_compulsory_dram_bytes(fn, quiet: bool = False) -> Verdict:
    """Exercise 09.2: exactly the compulsory bytes (each tensor once), the limit the L2 model approaches."""
    cases = [(1, 16, 1024, 64, 2), (1, 16, 4096, 64, 2), (2, 16, 4096, 128, 2), (4, 8, 1000, 80, 2),
             (1, 8, 2048, 64, 4)]

    def requested(b, h, n, d, es):
        r = kernel_io("flash_fwd", n, d, 128, 64, batch=b, heads=h, dtype={2: "fp16", 4: "fp32"}[es])
        return r.load_bytes + r.store_bytes
    suspects = (Suspect("requested_not_dram", requested, "your bytes are the requested bytes, every K/V re-read "
                        "counted: behind L2 the re-reads hit"),
                Suspect("lse_missing", lambda b, h, n, d, es: b * h * 4 * n * d * es,
                        "your bytes leave out the logsumexp the kernel writes, 4 bytes (fp32) per query row: a "
                        "difference of under 1 % that an exact count still shows"),
                Suspect("lse_in_elem_bytes", lambda b, h, n, d, es: b * h * (4 * n * d * es + n * es),
                        "your logsumexp is counted in elem_bytes: the kernel keeps it in fp32, 4 bytes a row"),
                Suspect("output_missing", lambda b, h, n, d, es: b * h * (3 * n * d * es + 4 * n),
                        "your bytes leave out the output O the kernel writes"),
                Suspect("one_head", lambda b, h, n, d, es: 4 * n * d * es + 4 * n,
                        "your bytes are one head's: every (batch, head) has its own tensors"),
                Suspect("kv_missing", lambda b, h, n, d, es: b * h * (2 * n * d * es + 4 * n),
                        "your bytes leave out K and V: they are read from DRAM once even when every re-read hits"))
    return check_cases(COMPULSORY_DRAM, fn, cases, _dram_ref,
                       header=("batch, heads, N, d, b", "compulsory DRAM B", "your B"), suspects=suspects,
                       quiet=quiet)
