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
A loop is a backward branch (``BRA`` to a lower address); the main loop is the shortest of the innermost ones that
holds the most wgmmas (``HGMMA``): the retry paths of mbarrier waits also branch backwards, over longer spans.
``--all`` lists every loop that holds a wgmma.

The second 64-bit word of each instruction carries the control code ptxas wrote for it (:class:`Control`): the cycles
the warp waits before its next issue (the stall count), and the scoreboards it sets and waits on. The sum of the stall
counts over a trip is the fewest cycles one warp needs to issue that trip when no result keeps it waiting (a wgmma,
a load, a barrier) and no other warp takes the issue slot: its **static cycles**. They are counted on the trip's
**straight path** (:meth:`Loop.straight_path`), where each forward branch inside the trip is taken, so a block the
kernel runs only sometimes (the course's causal and ragged-N mask) is left out, and no retry path is. The stall
counts of ``MUFU`` instructions show whether the exponentials issue back to back, one per eight cycles (the SM's 16
lanes of special functions take 8 cycles per warp instruction), or with other work between them.
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
_WORD = re.compile(r"^\s*/\* 0x([0-9a-f]{16}) \*/\s*$")


@dataclass(frozen=True)
class Control:
    """The control code of one sm_70+ instruction: bits 105-125 of its 128 (bits 41-61 of the second word), in the
    layout Jia et al. read from Volta's (arXiv:1804.06826, section 2.2) and later architectures keep.

    ``stall``: cycles before the warp's next issue; ``yield_``: the scheduler may switch warps; ``write_sb``,
    ``read_sb``: the scoreboard (0-5; 7: none) the instruction sets for its result or its operands; ``wait_mask``:
    the scoreboards it waits on before it issues (bit k: scoreboard k); ``reuse``: operand reuse cache flags."""
    stall: int
    yield_: int
    write_sb: int
    read_sb: int
    wait_mask: int
    reuse: int

    @classmethod
    def from_word(cls, word: int) -> "Control":
        c = word >> 41
        return cls(stall=c & 0xF, yield_=(c >> 4) & 1, write_sb=(c >> 5) & 7, read_sb=(c >> 8) & 7,
                   wait_mask=(c >> 11) & 0x3F, reuse=(c >> 17) & 0xF)


def parse(sass: str) -> list[tuple[int, str]]:
    """(address, instruction without its predicate) for every instruction of a ``cuobjdump -sass`` listing."""
    return [(a, i) for a, i, _, _ in parse_full(sass)]


def parse_full(sass: str) -> list[tuple[int, str, bool, Control | None]]:
    """(address, instruction without its predicate, predicated?, control code) for every instruction of a
    ``cuobjdump -sass`` listing; the control code is None where the listing has no second word (``-sass`` prints
    it on the line below the instruction)."""
    out = []
    lines = sass.splitlines()
    for k, line in enumerate(lines):
        m = _LINE.search(line)
        if not m:
            continue
        text = m.group(2).strip()
        w = _WORD.match(lines[k + 1]) if k + 1 < len(lines) else None
        out.append((int(m.group(1), 16), _PRED.sub("", text), bool(_PRED.match(text)),
                    Control.from_word(int(w.group(1), 16)) if w else None))
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
    addresses: list[int] = field(default_factory=list, repr=False)
    controls: list = field(default_factory=list, repr=False)   # Control or None, one per instruction
    predicated: list[bool] = field(default_factory=list, repr=False)

    def straight_path(self) -> list[int]:
        """Indices of the instructions one trip issues when every predicated forward branch inside the trip is taken
        (a block the kernel runs only sometimes, such as the mask, is jumped over) and every predicated branch out of
        it is not (an mbarrier wait's retry): followed from the loop's head along unconditional branches, to the
        first branch back to the head or an ``EXIT``. The span of a loop whose back edge sits in an out-of-line retry
        block then still gives the trip itself, not the retry code after the kernel's end."""
        index = {a: k for k, a in enumerate(self.addresses)}
        path, k, seen = [], 0, set()
        while 0 <= k < len(self.instrs) and k not in seen:
            seen.add(k)
            path.append(k)
            instr = self.instrs[k]
            if opcode(instr) == "EXIT":
                break
            m = re.search(r"0x([0-9a-f]+)", instr) if opcode(instr) == "BRA" else None
            if m:
                target = int(m.group(1), 16)
                if target == self.start:
                    break                                   # the back edge: the trip is over
                inside = target in index
                if self.predicated[k] and inside and target > self.addresses[k]:
                    k = index[target]                       # a block run only sometimes, jumped over
                    continue
                if not self.predicated[k]:
                    if not inside:
                        break                               # leaves the loop
                    k = index[target]
                    continue
            k += 1
        return path

    def static_cycles(self) -> dict | None:
        """On the straight path: its instructions, the sum of their stall counts (``static_cycles``), that sum per
        opcode (the five largest), and the MUFU instructions' share (``mufu_stall_cycles``, and how many of them
        stall 8 cycles or more: issued back to back). None where the listing has no control codes."""
        if len(self.controls) != len(self.instrs) or len(self.addresses) != len(self.instrs):
            return None
        path = self.straight_path()
        if not path or any(self.controls[k] is None for k in path):
            return None
        by_op = Counter()
        for k in path:
            by_op[opcode(self.instrs[k])] += self.controls[k].stall
        mufu = [self.controls[k].stall for k in path if opcode(self.instrs[k]) == "MUFU"]
        return dict(straight_instructions=len(path), static_cycles=sum(by_op.values()),
                    stall_by_opcode=dict(by_op.most_common(5)), mufu_stall_cycles=sum(mufu),
                    mufu_back_to_back=sum(1 for st in mufu if st >= 8))

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
        static = self.static_cycles()
        if static:
            out.update(static)
        if rows:
            out["rows"] = rows
            out["instructions_per_row"] = round(len(self.instrs) / rows, 2)
            out["wgmma_shared_bytes_per_row"] = round(out["wgmma_shared_bytes"] / rows)
        return out


def loops(sass: str) -> list[Loop]:
    """Every backward branch's span that holds at least one wgmma, shortest first."""
    ins = parse_full(sass)
    index = {a: k for k, (a, *_) in enumerate(ins)}
    found = []
    for k, (a, instr, _, _) in enumerate(ins):
        if opcode(instr) != "BRA":
            continue
        m = re.search(r"0x([0-9a-f]+)", instr)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target < a and target in index:
            body = ins[index[target]:k + 1]
            if any(opcode(i) == "HGMMA" for _, i, _, _ in body):
                found.append(Loop(target, a, [i for _, i, _, _ in body], [b for b, *_ in body],
                                  [c for *_, c in body], [p for _, _, p, _ in body]))
    return sorted(found, key=lambda lp: len(lp.instrs))


def main_loop(sass: str) -> Loop:
    """The shortest of the innermost loops (those whose span holds no other loop's) with the most wgmmas among them,
    among the loops whose back edge is a conditional branch where there are any (an mbarrier wait's out-of-line
    retry block branches back unconditionally, over a span that can hold more wgmmas than the trip). A kernel whose
    trip is split into several loops (a masked and an unmasked one) then gets its shortest trip, not a retry path's
    long span that holds several of them."""
    found = loops(sass)
    if not found:
        raise ValueError("no loop with a wgmma (HGMMA) in this listing: is it the SASS of an sm_90 kernel "
                         "(cuobjdump -sass of its cubin)?")
    # a trip ends on a conditional branch back; an out-of-line retry block jumps back unconditionally
    found = [lp for lp in found if lp.predicated and lp.predicated[-1]] or found
    inner = [lp for lp in found if not any(o is not lp and lp.start <= o.start and o.end <= lp.end
                                           and (o.start, o.end) != (lp.start, lp.end) for o in found)]
    most = max(lp.counts["HGMMA"] for lp in inner)
    return next(lp for lp in inner if lp.counts["HGMMA"] == most)


def describe(name: str, s: dict) -> str:
    per_row = f", {s['instructions_per_row']} per row of {s['rows']}" if "rows" in s else ""
    smem_row = f", {s['wgmma_shared_bytes_per_row']} per row" if "rows" in s else ""
    shapes = ", ".join(f"{n} x {k}" for k, n in s["shapes"].items())
    return (f"{name}: loop {s['span']}: {s['instructions']} instructions{per_row}; wgmma {s['hgmma']} ({shapes}); "
            f"wgmma shared reads {s['wgmma_shared_bytes']} B per warpgroup{smem_row}; MUFU {s['mufu']}; "
            f"barriers {len(s['barriers'])} [{', '.join(s['barriers'])}]; mbarrier ops "
            f"{s['syncs']}; wgmma waits {s['wgmma_waits']}; shared stores {s['shared_stores']}, loads "
            f"{s['shared_loads']}; fences {s['fences']}; UMOV {s['umov']}, FSEL {s['fsel']}, ISETP {s['isetp']}"
            + (f"; straight path {s['straight_instructions']} instructions, {s['static_cycles']} static cycles "
               f"(MUFU {s['mufu_stall_cycles']}, {s['mufu_back_to_back']} back to back; by opcode "
               f"{', '.join(f'{k} {v}' for k, v in s['stall_by_opcode'].items())})" if "static_cycles" in s else ""))


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
