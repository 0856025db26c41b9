"""Chapter 05 exercises: the FlashAttention forward loop, checked on the simulated memory hierarchy.

Each ``check_...(fn)`` runs the learner's function, prints a verdict and a read/write table (bytes by tensor,
got vs expected), and returns chapter 00's :class:`~flashsim.course.ch00.checks.Verdict` (truthy when the answer is
right). The reference answers live in :mod:`flashsim.solutions.ch05`; the notebook only shows stubs.

:func:`rw_table` and :func:`finish` are introduced here (chapter 05) and reused by chapters 06–08.
"""
from __future__ import annotations

import math

import numpy as np

from flashsim.model.attention.flash import reference_attention  # float64 softmax(QKᵀ/√d)V, the exact answer
from flashsim.course import Table
from flashsim.model.memory import Counters, Memory
from flashsim.course.ch00.checks import Verdict

__all__ = ["check_online_block_update", "check_flash2_forward_loop", "check_fa1_hbm_bytes"]


# --- read/write tables (chapter 05; reused by 06-08). Verdicts are chapter 00's. ---------------------------------
def rw_table(got: Counters | dict, want: Counters | dict | None = None) -> list:
    """Rows (tensor, got read, got write, want read, want write) from two Counters (or their ``as_dict()``)."""
    def split(c):
        if c is None:
            return {}, {}
        d = c.as_dict() if hasattr(c, "as_dict") else c
        return dict(d.get("read_bytes_by_tensor", {})), dict(d.get("write_bytes_by_tensor", {}))

    gr, gw = split(got)
    wr, ww = split(want)
    names = sorted(set(gr) | set(gw) | set(wr) | set(ww))
    rows = [(n, gr.get(n, 0), gw.get(n, 0), wr.get(n, 0) if want is not None else None,
             ww.get(n, 0) if want is not None else None) for n in names]
    rows.append(("total", sum(gr.values()), sum(gw.values()), sum(wr.values()) if want is not None else None,
                 sum(ww.values()) if want is not None else None))
    return rows


def rw_table_view(rows: list) -> Table:
    """A :class:`flashsim.course.Table` of :func:`rw_table` rows: bytes read and written by tensor, yours against
    the algorithm's; ✘ marks a tensor whose bytes differ."""
    out = []
    for name, r, w, wr, ww in rows:
        mark = "" if wr is None else ("✔" if (r, w) == (wr, ww) else "✘")
        out.append([name, r, w, wr, ww, mark])
    return Table(["tensor", "read B", "written B", "expected read B", "expected written B", "ok"], out)


def raised(exc: Exception) -> str:
    """How a checker reports an exception from the learner's code (a stub's NotImplementedError included)."""
    if isinstance(exc, NotImplementedError):
        return "not implemented yet: fill in the stub (the hint says how)"
    return f"raised {type(exc).__name__}: {exc}"


def finish(name: str, passed: bool, message: str, table=None, quiet: bool = False, **details) -> Verdict:
    """Build chapter 00's Verdict (``table``: :func:`rw_table` rows, or a ready Table), print it unless ``quiet``,
    return it."""
    if isinstance(table, list):
        table = rw_table_view(table) if table else None
    verdict = Verdict(name, bool(passed), message, table, details)
    return verdict if quiet else verdict.show()


def _qkv(n: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, d)).astype(np.float32) for _ in range(3)]


# --- exercise 1: the online-softmax update of one tile --------------------------------------------------------
def _fa2_loop(update, q, k, v, block_r: int, block_c: int, dtype="fp32", *, causal: bool = False,
              tile_kind=None, tile_mask=None):
    """FA2-order forward on a simulated Memory with a tile update plugged in; returns (O, counters).

    Chapter 05 plugs in the learner's update; chapter 08 (causal=True) plugs in the learner's ``tile_kind(i, j,
    Br, Bc, N)`` ("skip", "partial", "full") and ``tile_mask(i, j, Br, Bc, N)`` (bool, True = key visible).
    """
    from flashsim.solutions import ch05 as _sol
    update = update or _sol.online_block_update
    n, d = q.shape
    if causal:
        from flashsim.solutions import ch08 as _sol8
        tile_kind = tile_kind or _sol8.causal_tile_kind
        tile_mask = tile_mask or _sol8.causal_tile_mask
    mem = Memory(sram_capacity_bytes=1 << 30, dtype=dtype, record_events=False)
    for name, x in (("Q", q), ("K", k), ("V", v)):
        mem.put(name, x)
    mem.empty("O", (n, d))
    scale = 1.0 / math.sqrt(d)
    for i, i0 in enumerate(range(0, n, block_r)):
        rows = slice(i0, min(i0 + block_r, n))
        qi = mem.load("Q", rows, tile=(i,))
        r = qi.shape[0]
        m = np.full(r, -np.inf, np.float32)
        l = np.zeros(r, np.float32)
        acc = np.zeros((r, d), np.float32)
        for j, j0 in enumerate(range(0, n, block_c)):
            kind = tile_kind(i, j, block_r, block_c, n) if causal else "full"
            if kind == "skip":
                continue
            cols = slice(j0, min(j0 + block_c, n))
            kj = mem.load("K", cols, tile=(j,))
            vj = mem.load("V", cols, tile=(j,))
            s = (qi @ kj.T) * scale
            if kind == "partial":
                s = np.where(np.asarray(tile_mask(i, j, block_r, block_c, n), bool), s, -np.inf)
            mem.compute(4 * r * kj.shape[0] * d, tile=(i, j))
            with np.errstate(invalid="ignore", over="ignore"):
                m, l, acc = (np.asarray(x, np.float32) for x in update(m, l, acc, s, vj))
            mem.free(f"K{(j,)}", f"V{(j,)}")
        with np.errstate(invalid="ignore", divide="ignore"):
            mem.store("O", acc / l[:, None], rows, tile=(i,))
        mem.free(f"Q{(i,)}")
    return mem.hbm("O").copy(), mem.counters


def check_online_block_update(fn, quiet: bool = False) -> Verdict:
    """Exercise 05.1: ``fn(m, l, acc, s, v) -> (m_new, l_new, acc_new)``, one K/V tile of the FA2 inner loop.

    m, l: (Br,) running max and sum; acc: (Br, d) unnormalised output; s: (Br, Bc) scaled scores; v: (Bc, d).
    The checker runs a whole forward pass with ``fn`` (several block shapes, a ragged last block, scores large
    enough that a missing max-subtraction overflows) and compares O with float64 attention.

    Introduced in chapter 05.
    """
    name = "online_block_update"
    worst = 0.0
    for n, d, br, bc, seed, amp in ((16, 8, 4, 4, 0, 1.0), (37, 16, 8, 16, 1, 1.0), (24, 8, 8, 4, 2, 30.0)):
        q, k, v = _qkv(n, d, seed)
        q = q * amp
        try:
            out, counters = _fa2_loop(fn, q, k, v, br, bc)
        except Exception as exc:  # noqa: BLE001 - a learner's bug is reported, not raised
            return finish(name, False, f"{raised(exc)} (N={n}, d={d}, Br={br}, Bc={bc})", quiet=quiet)
        err = float(np.nanmax(np.abs(out - reference_attention(q, k, v)))) if np.isfinite(out).all() else math.inf
        worst = max(worst, err)
        if not err < 1e-4:
            hint = ("did you rescale acc and l by exp(m_old - m_new) when the max grows?" if np.isfinite(err)
                    else "non-finite output: subtract the running max before exp")
            return finish(name, False, f"max |O - exact| = {err:.3g} at N={n}, d={d}, Br={br}, Bc={bc}: {hint}",
                          rw_table(counters), max_error=err, quiet=quiet)
    return finish(name, True, f"O matches float64 attention (max error {worst:.2e}); "
                              "the read/write table is the FA2 loop this update ran in", rw_table(counters),
                  max_error=worst, quiet=quiet)


# --- exercise 2: the FA2 loop with its loads and stores -------------------------------------------------------
def expected_flash2_counters(n: int, d: int, block_r: int, elem_bytes: int = 4) -> Counters:
    """Per-tensor bytes of the FA2 forward (without the logsumexp): Q once, K and V once per row block, O once."""
    tr = math.ceil(n / block_r)
    c = Counters()
    c.add_read("Q", n * d * elem_bytes)
    c.add_read("K", tr * n * d * elem_bytes)
    c.add_read("V", tr * n * d * elem_bytes)
    c.add_write("O", n * d * elem_bytes)
    return c


def check_flash2_forward_loop(fn, quiet: bool = False) -> Verdict:
    """Exercise 05.2: ``fn(mem, n, d, block_r, block_c)`` runs the FA2 forward on ``mem`` (a Memory holding Q, K,
    V and an empty O, fp32) with ``mem.load`` / ``mem.store``, so that O is right *and* every byte is where FA2
    puts it: Q read once, K and V once per row block, O written once. N is not a multiple of the blocks.

    Introduced in chapter 05.
    """
    name = "flash2_forward_loop"
    for n, d, br, bc, seed in ((16, 8, 4, 8, 3), (30, 8, 8, 4, 4)):
        q, k, v = _qkv(n, d, seed)
        mem = Memory(sram_capacity_bytes=1 << 30, dtype="fp32", record_events=False)
        for nm, x in (("Q", q), ("K", k), ("V", v)):
            mem.put(nm, x)
        mem.empty("O", (n, d))
        try:
            fn(mem, n, d, br, bc)
        except Exception as exc:  # noqa: BLE001
            return finish(name, False, f"{raised(exc)} (N={n}, Br={br}, Bc={bc})", quiet=quiet)
        want = expected_flash2_counters(n, d, br, 4)
        table = rw_table(mem.counters, want)
        out = mem.hbm("O")
        if not np.isfinite(out).all():
            rows = int((~np.isfinite(out)).any(axis=1).sum())
            return finish(name, False, f"{rows} rows of O never written (N={n}, Br={br}): "
                                       "the last, partial block needs range(0, n, block) and min(...)", table,
                          quiet=quiet)
        err = float(np.abs(out - reference_attention(q, k, v)).max())
        if err > 1e-4:
            return finish(name, False, f"max |O - exact| = {err:.3g} (N={n}, Br={br}, Bc={bc})", table,
                          max_error=err, quiet=quiet)
        for tensor, r, w, wr, ww in table:
            if r != wr or w != ww:
                return finish(name, False, f"O is right but the bytes are not FA2's: {tensor} moved {r:,} read / "
                                           f"{w:,} written, FA2 moves {wr:,} / {ww:,}", table, quiet=quiet)
    return finish(name, True, "O is exact and every tensor moved exactly FA2's bytes", table, quiet=quiet)


# --- exercise 3: Algorithm 1's HBM traffic in closed form -----------------------------------------------------
def fa1_reference_bytes(n: int, d: int, block_c: int, elem_bytes: int = 2) -> int:
    """FA1 (Algorithm 1) forward HBM bytes with every element (stats too) stored in `elem_bytes`:
    (2Nd + Tc·(3Nd + 4N))·b, Tc = ⌈N/Bc⌉ (FA1 §3.1; Fig. 2 middle counts this in fp16)."""
    tc = math.ceil(n / block_c)
    return (2 * n * d + tc * (3 * n * d + 4 * n)) * elem_bytes


def _simulated_fa1(n, d, block_c, elem_bytes):
    """flashsim.traffic's count for flash1 (stats in the storage dtype), or None if the simulator is missing."""
    try:
        from flashsim.model.simulator import traffic
    except ImportError:
        return None
    dtype = {2: "fp16", 4: "fp32"}[elem_bytes]
    return traffic("flash1", n, d, block_r=min(16, block_c), block_c=block_c, dtype=dtype, stats_dtype=dtype,
                   device="a100", sram_bytes=1 << 30)


def check_fa1_hbm_bytes(fn, quiet: bool = False) -> Verdict:
    """Exercise 05.3: ``fn(n, d, block_c, elem_bytes) -> int``, Algorithm 1's forward HBM bytes (reads + writes,
    without the initial memset of O, l, m). Checked on the paper's Fig. 2 sizes and on ragged N.

    Introduced in chapter 05.
    """
    name = "fa1_hbm_bytes"
    table = []
    for n, d, bc, b in ((1024, 64, 64, 2), (1024, 64, 256, 2), (1000, 64, 128, 2), (77, 16, 32, 4)):
        want = fa1_reference_bytes(n, d, bc, b)
        sim = _simulated_fa1(n, d, bc, b)
        if sim is not None:
            table = rw_table(sim.as_dict())
        try:
            got = int(fn(n, d, bc, b))
        except Exception as exc:  # noqa: BLE001
            return finish(name, False, f"{raised(exc)}", quiet=quiet)
        if got != want:
            why = ("check Tc = ceil(N / Bc) for a ragged N" if n % bc else
                   "per K/V block j the inner loop reads Q, O, l, m for all N rows and writes O, l, m")
            return finish(name, False, f"N={n}, d={d}, Bc={bc}, b={b}: got {got:,} bytes, Algorithm 1 moves "
                                       f"{want:,}: {why}", table, got=got, want=want, quiet=quiet)
    return finish(name, True, "matches Algorithm 1's count (the simulator's per-tensor bytes for the last case "
                              "below)", table, quiet=quiet)
