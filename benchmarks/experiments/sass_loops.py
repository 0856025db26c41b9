"""The main loop of a kernel's SASS: what one trip costs in instructions, wgmmas, barriers and shared-memory traffic.

Why: a FlashAttention backward spends its time in one loop, one trip per query block. Two kernels that issue the
same matmuls can still differ in what each trip pays besides them: the barriers that hold warpgroups together, the
waits, the stores and fences. Counting those per trip, and per query row of the tile, compares the course's Gluon
kernels with FlashAttention-4's from their machine code alone, on a machine with no GPU: the SASS of an offline
compile (``gluon_compile_sm90.py --sass DIR``; ``fa4_compile_sm90.py`` for FA4's kernels) or ``cuobjdump -sass`` of
any cubin.

    python benchmarks/experiments/sass_loops.py KERNEL.sass[:ROWS] [...] [--all]

``ROWS``: the query rows one trip handles (the tile's BLOCK_M / tile_m), to print instructions per row; ``:auto``
takes them from the trip's first wgmma (:meth:`Loop.query_rows`: right for a backward that computes Sᵀ first).
A loop is a backward branch (``BRA`` to a lower address); the main loop is the shortest one that holds the most
wgmmas (``HGMMA``): the retry paths of mbarrier waits also branch backwards, over longer spans. ``--all`` lists
every loop that holds a wgmma.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property

_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_PRED = re.compile(r"^@!?U?P[T0-9]+\s+")


def parse(sass: str) -> list[tuple[int, str]]:
    """(address, instruction without its predicate) for every instruction of a ``cuobjdump -sass`` listing."""
    out = []
    for line in sass.splitlines():
        m = _LINE.search(line)
        if m:
            out.append((int(m.group(1), 16), _PRED.sub("", m.group(2).strip())))
    return out


def opcode(instr: str) -> str:
    """``HGMMA.64x80x16.F32 R192, ...`` -> ``HGMMA``."""
    return instr.split()[0].split(".")[0]


def wgmma_shape(instr: str) -> str:
    """``HGMMA.64x80x16.F32 R192, ...`` -> ``64x80x16`` (M x N x K)."""
    return instr.split()[0].split(".")[1]


@dataclass
class Loop:
    start: int                       # the branch target
    end: int                         # the backward branch's address
    instrs: list[str] = field(repr=False)

    @cached_property
    def counts(self) -> Counter:
        return Counter(opcode(i) for i in self.instrs)

    def barriers(self) -> list[str]:
        """Each ``BAR`` of the trip as ``SYNC id/threads`` or ``ARV id/threads`` (id ``R3``: a register)."""
        out = []
        for i in self.instrs:
            if opcode(i) == "BAR":
                kind = "ARV" if ".ARV" in i else "SYNC" if ".SYNC" in i else i.split()[0]
                args = [a.strip() for a in i.split(None, 1)[1].split(",")] if " " in i else []
                out.append(f"{kind} {args[0] if args else '?'}/{int(args[1], 16) if len(args) > 1 else 'all'}")
        return out

    def wgmma_shapes(self) -> Counter:
        return Counter(wgmma_shape(i) for i in self.instrs if opcode(i) == "HGMMA")

    def query_rows(self) -> int:
        """The query rows of one trip of a FlashAttention backward that computes Sᵀ = K Qᵀ (keys on wgmma's M side,
        FA3's and FA4's ``SdP_swapAB``, and the course's Gluon backward): the N of the trip's first wgmma."""
        first = next(i for i in self.instrs if opcode(i) == "HGMMA")
        return int(wgmma_shape(first).split("x")[1])

    def wgmma_shared_bytes(self) -> int:
        """Shared-memory bytes one warpgroup's wgmmas read per trip, for 16-bit operands: each m64nNk16 reads B
        (N x 16) and, when A comes from shared memory too (``gdesc`` right after the accumulator), A (64 x 16); an
        A from registers (``R...``) reads none. At 128 bytes per clock per SM, an m64n64k16 from shared memory
        reads as fast as the tensor cores multiply, so by this arithmetic N = 64 leaves no bandwidth for anything
        else; an upper bound, since Nsight Compute measures less (benchmarks/results/NOTES.md)."""
        total = 0
        for i in self.instrs:
            if opcode(i) != "HGMMA":
                continue
            m, n, k = (int(x) for x in wgmma_shape(i).split("x"))
            a_operand = i.split(None, 1)[1].split(",")[1].strip()
            total += 2 * n * k + (2 * m * k if a_operand.startswith("gdesc") else 0)
        return total

    def summary(self, rows: int | None = None) -> dict:
        c = self.counts
        bars = self.barriers()
        out = dict(span=f"{self.start:#x}-{self.end:#x}", instructions=len(self.instrs), hgmma=c["HGMMA"],
                   shapes=dict(self.wgmma_shapes()), wgmma_shared_bytes=self.wgmma_shared_bytes(), mufu=c["MUFU"],
                   barriers=bars,
                   syncs=sum(1 for i in self.instrs if opcode(i) == "SYNCS"),
                   wgmma_waits=sum(1 for i in self.instrs if i.startswith("WARPGROUP.DEPBAR")),
                   shared_stores=c["STS"] + c["STSM"], shared_loads=c["LDS"] + c["LDSM"],
                   fences=c["MEMBAR"] + c["FENCE"], umov=c["UMOV"], fsel=c["FSEL"], isetp=c["ISETP"])
        if rows:
            out["rows"] = rows
            out["instructions_per_row"] = round(len(self.instrs) / rows, 2)
            out["wgmma_shared_bytes_per_row"] = round(out["wgmma_shared_bytes"] / rows)
        return out


def loops(sass: str) -> list[Loop]:
    """Every backward branch's span that holds at least one wgmma, shortest first."""
    ins = parse(sass)
    index = {a: k for k, (a, _) in enumerate(ins)}
    found = []
    for k, (a, instr) in enumerate(ins):
        if opcode(instr) != "BRA":
            continue
        m = re.search(r"0x([0-9a-f]+)", instr)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target < a and target in index:
            body = [i for _, i in ins[index[target]:k + 1]]
            if any(opcode(i) == "HGMMA" for i in body):
                found.append(Loop(target, a, body))
    return sorted(found, key=lambda lp: len(lp.instrs))


def main_loop(sass: str) -> Loop:
    """The shortest loop that holds the most wgmmas of any loop."""
    found = loops(sass)
    if not found:
        raise ValueError("no loop with a wgmma (HGMMA) in this listing: is it the SASS of an sm_90 kernel "
                         "(cuobjdump -sass of its cubin)?")
    most = max(lp.counts["HGMMA"] for lp in found)
    return next(lp for lp in found if lp.counts["HGMMA"] == most)


def describe(name: str, s: dict) -> str:
    per_row = f", {s['instructions_per_row']} per row of {s['rows']}" if "rows" in s else ""
    smem_row = f", {s['wgmma_shared_bytes_per_row']} per row" if "rows" in s else ""
    shapes = ", ".join(f"{n} x {k}" for k, n in s["shapes"].items())
    return (f"{name}: loop {s['span']}: {s['instructions']} instructions{per_row}; wgmma {s['hgmma']} ({shapes}); "
            f"wgmma shared reads {s['wgmma_shared_bytes']} B per warpgroup{smem_row}; MUFU {s['mufu']}; "
            f"barriers {len(s['barriers'])} [{', '.join(s['barriers'])}]; mbarrier ops "
            f"{s['syncs']}; wgmma waits {s['wgmma_waits']}; shared stores {s['shared_stores']}, loads "
            f"{s['shared_loads']}; fences {s['fences']}; UMOV {s['umov']}, FSEL {s['fsel']}, ISETP {s['isetp']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="SASS listing, optionally :ROWS (query rows per trip)")
    ap.add_argument("--all", action="store_true", help="every loop that holds a wgmma, not only the main one")
    args = ap.parse_args(argv)
    for spec in args.files:
        path, _, rows = spec.rpartition(":") if re.search(r":(\d+|auto)$", spec) else (spec, "", "")
        sass = open(path).read()
        for lp in (loops(sass) if args.all else [main_loop(sass)]):
            n = lp.query_rows() if rows == "auto" else int(rows) if rows else None
            print(describe(path, lp.summary(n)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
