"""Count, in a SASS listing, the exponentials (MUFU.EX2) each wgmma wait lets run under an in-flight matmul.

Why: the Gluon forward issues S_j = Q K_jᵀ and O += P_{j-1} V_{j-1} as two asynchronous wgmma groups, waits for S_j
(``WARPGROUP.DEPBAR.LE gsb0, 0x1``) and computes softmax(S_j) before it waits for the PV group
(``WARPGROUP.DEPBAR.LE gsb0, 0x0``): the exponentials between the two waits are the ones that overlap the PV
product. ptxas may schedule the second wait at the top of the block that holds the softmax, which leaves none of
them there; this script shows which happened, from the SASS of an offline compile
(``gluon_compile_sm90.py --sass DIR``) or of a cubin on the GPU (``nvdisasm -c kernel.cubin``).

    python benchmarks/experiments/sass_wgmma_overlap.py kernel.sass [...]

Prints, per file, one line per ``wait(1)`` stretch: exponentials before the ``wait(0)`` that ends it, and after it
up to the next wgmma.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sass_loops import parse  # noqa: E402  (the one reading of a cuobjdump listing)


def stretches(sass: str):
    """[(exponentials between a wait(1) and the next wait(0), exponentials after that wait(0) up to the next
    HGMMA or wait), ...] in listing order."""
    ops = [instr for _, instr in parse(sass)]
    out, i = [], 0
    while i < len(ops):
        if "DEPBAR.LE gsb0, 0x1" in ops[i]:
            j = i + 1
            while j < len(ops) and "DEPBAR.LE gsb0, 0x0" not in ops[j] and "HGMMA" not in ops[j]:
                j += 1
            before = sum("MUFU.EX2" in op for op in ops[i + 1:j])
            k = j + 1
            while k < len(ops) and "HGMMA" not in ops[k] and "DEPBAR" not in ops[k]:
                k += 1
            out.append((before, sum("MUFU.EX2" in op for op in ops[j + 1:k])))
            i = j
        i += 1
    return out


def describe(found) -> str:
    """One line for :func:`stretches`' result."""
    return "; ".join(f"{b} exp2 under the PV wgmma, {a} after its wait" for b, a in found)


def main(argv=None) -> int:
    for path in (argv if argv is not None else sys.argv[1:]):
        print(f"{path}: " + describe(stretches(open(path).read())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
