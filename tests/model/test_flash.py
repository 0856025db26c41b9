"""FlashAttention (chapters 05, 07, 08): step == count == closed form, exactly; numbers right; errors clear."""
import dataclasses
import itertools

import numpy as np
import pytest

from flashsim.model.attention.flash import (
    count_flash, resolve_blocks, run_flash, sram_peak_bytes, sram_tile_bytes)
from flashsim.model.attention.flash.forward import round_up
from flashsim.model.attention.reference import plain_attention, reference_attention, reference_attention_grads
from flashsim.model.dtypes import round_to
from flashsim.errors import FlashsimError, MemoryBudgetError, SramCapacityError
from flashsim.model.attention.closed_forms.flash import fa1_paper_hbm_elements, flash_bytes
from flashsim.model.attention.visibility import tile_sums
from flashsim.model.memory import Memory
from flashsim.model.problem import make_problem

BIG_SRAM = 1 << 26  # the grid checks counting, not capacity


def _inputs(heads, n, d, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((heads, n, d)) * scale).astype(np.float32) for _ in range(4)]


def _closed(p, br, bc):
    return flash_bytes(p.algo, p.n, p.d, br, bc, p.elem_bytes, p.stats_bytes, p.causal, p.backward, p.heads)


def _as_closed(counters, init):
    out = counters.as_dict()
    out.pop("reuse_bytes")
    out["init_write_bytes"] = init
    return out


def _check_three_ways(p):
    """Step == count == closed form, for the totals, each phase, init writes and peak SRAM."""
    q, k, v, do = _inputs(p.heads, p.n, p.d)
    run = run_flash(p, q, k, v, do if p.backward else None)
    cnt = count_flash(p)
    assert (run.block_r, run.block_c) == (cnt.block_r, cnt.block_c)
    assert run.counters == cnt.counters
    assert run.forward == cnt.forward
    assert run.backward == cnt.backward
    assert run.init_write_bytes == cnt.init_write_bytes
    assert _as_closed(cnt.counters, cnt.init_write_bytes) == _closed(p, cnt.block_r, cnt.block_c)
    # peak SRAM: the tile set, at the sizes actually loaded (min(block, N) rows)
    r, c = min(cnt.block_r, p.n), min(cnt.block_c, p.n)
    assert cnt.sram_peak_bytes == sram_peak_bytes(r, c, p.d, p.dtype, p.stats_dtype, p.algo, p.backward)
    assert run.memory.sram_in_use_bytes == 0  # everything loaded was freed
    return run, cnt


GRID_NS = [1, 7, 64, 97, 128]
GRID_BLOCKS = [(16, 16), (16, 32), (32, 8), (16, 5), (7, 3), (200, 256)]  # Br ≠ Bc, odd blocks, blocks > N


@pytest.mark.parametrize("algo", ["flash1", "flash2"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("backward", [False, True])
def test_step_count_closed_agree_on_grid(algo, causal, backward):
    for (n, (br, bc)), (dtype, stats) in itertools.product(
            itertools.product(GRID_NS, GRID_BLOCKS), [("fp16", "fp32"), ("fp32", "fp32"), ("bf16", "fp16")]):
        d = 8 if n != 1 else 3
        p = make_problem(algo, n, d, block_r=br, block_c=bc, heads=2, dtype=dtype, stats_dtype=stats,
                         causal=causal, backward=backward, sram_bytes=BIG_SRAM)
        _check_three_ways(p)


@pytest.mark.parametrize("algo", ["flash1", "flash2"])
@pytest.mark.parametrize("causal", [False, True])
def test_ragged_large_n_small_d(algo, causal):
    p = make_problem(algo, 1025, 4, block_r=64, block_c=128, dtype="fp16", causal=causal, backward=True,
                     sram_bytes=BIG_SRAM)
    _check_three_ways(p)


def _computed_tiles_brute_force(n, br, bc, causal):
    """(i, j) tiles with at least one unmasked entry, by checking every (row, col) pair."""
    tiles = set()
    for row in range(n):
        for col in range(n):
            if not causal or col <= row:
                tiles.add((row // br, col // bc))
    return tiles


@pytest.mark.parametrize("algo", ["flash1", "flash2"])
@pytest.mark.parametrize("n,br,bc", [(37, 8, 4), (37, 4, 8), (40, 8, 8), (5, 16, 2), (37, 16, 5), (29, 3, 7)])
def test_causal_skips_exactly_the_fully_masked_tiles(algo, n, br, bc):
    for backward in (False, True):
        p = make_problem(algo, n, 4, block_r=br, block_c=bc, dtype="fp32", causal=True, backward=backward)
        q, k, v, do = _inputs(1, n, 4)
        run = run_flash(p, q, k, v, do if backward else None)
        expect = _computed_tiles_brute_force(n, br, bc, causal=True)
        fwd = [e.tile for e in run.memory.events if e.kind == "compute" and e.tensor == "S"]
        assert sorted(fwd) == sorted(expect)  # each computed once, skipped ones never
        if backward:
            bwd = [e.tile for e in run.memory.events if e.kind == "compute" and e.tensor == "dS"]
            assert sorted(bwd) == sorted(expect)
        # FLOPs: 4·r·c·d per computed tile (+10·r·c·d in the backward), counted by brute force
        rc = sum(min(br, n - i * br) * min(bc, n - j * bc) for i, j in expect)
        assert run.counters.flops == (4 + 10 * backward) * rc * 4
        assert tile_sums(n, br, bc, True)[2] == rc


def test_event_log_loop_orders():
    n, br, bc = 32, 8, 16
    q, k, v, _ = _inputs(1, n, 4)
    f1 = run_flash(make_problem("flash1", n, 4, block_r=br, block_c=bc, dtype="fp32"), q, k, v)
    f2 = run_flash(make_problem("flash2", n, 4, block_r=br, block_c=bc, dtype="fp32"), q, k, v)
    order1 = [e.tile for e in f1.memory.events if e.kind == "compute"]
    order2 = [e.tile for e in f2.memory.events if e.kind == "compute"]
    assert order1 == [(i, j) for j in range(2) for i in range(4)]  # outer loop over K/V blocks
    assert order2 == [(i, j) for i in range(4) for j in range(2)]  # outer loop over Q blocks
    # flash1 writes each O row once per column block, flash2 once
    o1 = [e for e in f1.memory.events if e.kind == "store" and e.tensor == "O"]
    o2 = [e for e in f2.memory.events if e.kind == "store" and e.tensor == "O"]
    assert (len(o1), len(o2)) == (8, 4)
    # events carry tile indices, bytes and the running m, l (and O rows) of the row block
    ev = [e for e in f2.memory.events if e.kind == "compute"][-1]
    assert ev.tile == (3, 1) and ev.stats["m"].shape == (8,) and ev.stats["O"].shape == (8, 4)
    np.testing.assert_allclose(ev.stats["m"] + np.log(ev.stats["l"]), f2.lse[0, 24:], rtol=1e-6)
    np.testing.assert_allclose(ev.stats["O"], f2.out[0, 24:], rtol=1e-6)
    loads = [e for e in f2.memory.events if e.kind == "load" and e.tensor == "K"]
    assert all(e.nbytes == 16 * 4 * 4 for e in loads)
    # SRAM names: a free names the load it ends, "<tensor><tile>"
    names = {e.tensor for e in f2.memory.events if e.kind == "free"}
    assert {"Q(0,)", "K(1,)", "V(0,)", "S(3, 1)", "O_acc(2,)"} <= names


def test_peak_sram_is_the_tile_set_and_is_reached():
    p = make_problem("flash2", 256, 32, block_r=64, block_c=128, dtype="fp16", backward=True)
    q, k, v, do = _inputs(1, 256, 32)
    run = run_flash(p, q, k, v, do)
    fwd = sram_tile_bytes(64, 128, 32, "fp16", "fp32", "flash2")
    bwd = sram_tile_bytes(64, 128, 32, "fp16", "fp32", "flash2", backward=True)
    assert fwd == {"Q_i": 4096, "K_j": 8192, "V_j": 8192, "m_i": 256, "l_i": 256, "S_ij": 32768, "O_acc": 8192}
    assert run.forward.sram_peak_bytes == sum(fwd.values())
    assert run.backward.sram_peak_bytes == sum(bwd.values())
    assert run.sram_peak_bytes == max(sum(fwd.values()), sum(bwd.values()))
    assert max(e.sram_in_use_bytes for e in run.memory.events) == run.sram_peak_bytes


def test_heads_multiply_bytes_not_peak():
    one = count_flash(make_problem("flash2", 100, 8, block_r=16, block_c=32, causal=True, backward=True))
    many = count_flash(make_problem("flash2", 100, 8, block_r=16, block_c=32, causal=True, backward=True, heads=5))
    assert many.hbm_read_bytes == 5 * one.hbm_read_bytes and many.flops == 5 * one.flops
    assert many.sram_peak_bytes == one.sram_peak_bytes
    assert many.init_write_bytes == 5 * one.init_write_bytes


def test_noncausal_textbook_numbers():
    n, d = 1024, 64
    f2 = count_flash(make_problem("flash2", n, d, block_r=128, block_c=64, dtype="fp16"))
    tr = n // 128
    assert f2.hbm_read_bytes == (n * d + tr * 2 * n * d) * 2  # Nd + Tr·2Nd elements
    assert f2.hbm_write_bytes == n * d * 2 + n * 4  # O once, fp32 logsumexp once
    assert f2.flops == 4 * n * n * d
    b = count_flash(make_problem("flash2", n, d, block_r=128, block_c=64, dtype="fp16", backward=True))
    assert b.backward.flops == 10 * n * n * d and b.counters.flops == 14 * n * n * d
    assert b.backward.write_bytes_by_tensor["D"] == n * 4


@pytest.mark.parametrize("bc,paper_gb", [(64, 6.85), (128, 3.56), (256, 1.91), (512, 1.09)])
def test_fa1_fig2_middle(bc, paper_gb):
    p = make_problem("flash1", 1024, 64, block_c=bc, batch=64, heads=16, dtype="fp16", stats_dtype="fp16",
                     sram_bytes=1048576)
    c = count_flash(p)
    total = c.hbm_read_bytes + c.hbm_write_bytes
    assert total == fa1_paper_hbm_elements(1024, 64, bc) * 2 * 1024  # 2Nd + Tc(3Nd + 4N), fp16, 64 × 16 heads
    assert abs(total / 1e9 - paper_gb) / paper_gb < 0.01
    assert c.init_write_bytes == (1024 * 64 + 2 * 1024) * 2 * 1024  # the memset, reported apart


# --- numbers ------------------------------------------------------------------------------------------------------
def _rel(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b))


@pytest.mark.parametrize("algo", ["flash1", "flash2"])
@pytest.mark.parametrize("causal", [False, True])
def test_fp32_within_1e6_of_float64(algo, causal):
    for n, br, bc in [(97, 16, 32), (256, 64, 64), (50, 128, 7)]:
        q, k, v, do = _inputs(2, n, 32, seed=n)
        run = run_flash(make_problem(algo, n, 32, block_r=br, block_c=bc, heads=2, dtype="fp32", causal=causal,
                                     backward=True), q, k, v, do)
        ref = reference_attention(q, k, v, causal)
        assert _rel(run.out, ref) <= 1e-6
        s = np.einsum("hnd,hmd->hnm", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(32)
        if causal:
            s = np.where(np.tri(n, dtype=bool), s, -np.inf)
        lse = s.max(-1) + np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1))
        np.testing.assert_allclose(run.lse, lse, rtol=1e-6, atol=1e-6)
        for got, want in zip(run.grads, reference_attention_grads(q, k, v, do, causal)):
            assert _rel(got, want) <= 1e-5


@pytest.mark.parametrize("algo", ["flash1", "flash2"])
@pytest.mark.parametrize("dtype,grad_tol", [("fp16", 3e-3), ("bf16", 3e-2)])
@pytest.mark.parametrize("causal", [False, True])
def test_low_precision_error_at_most_twice_plain(algo, dtype, grad_tol, causal):
    n, d = 200, 32
    q, k, v, do = _inputs(2, n, d, seed=1, scale=1.5)
    run = run_flash(make_problem(algo, n, d, block_r=32, block_c=16, heads=2, dtype=dtype, causal=causal,
                                 backward=True), q, k, v, do)
    exact = reference_attention(q, k, v, causal)
    plain = plain_attention(*(round_to(np.asarray(x, np.float32), dtype) for x in (q, k, v)), causal=causal,
                            dtype=dtype)[0]
    assert _rel(run.out, exact) <= 2 * _rel(plain, exact)
    for got, want in zip(run.grads, reference_attention_grads(q, k, v, do, causal)):
        assert _rel(got, want) <= grad_tol


def test_fp16_extreme_scores_stay_finite():
    n, d = 48, 8
    rng = np.random.default_rng(3)
    q = (rng.choice([-1, 1], (1, n, d)) * 100).astype(np.float32)  # scores ±1e4·(random sign sums)/√8·…
    k = (rng.choice([-1, 1], (1, n, d)) * 100).astype(np.float32)
    v, do = (rng.standard_normal((1, n, d)).astype(np.float32) for _ in range(2))
    for algo, causal in itertools.product(["flash1", "flash2"], [False, True]):
        run = run_flash(make_problem(algo, n, d, block_r=16, block_c=8, dtype="fp16", causal=causal, backward=True),
                        q, k, v, do)
        ref = reference_attention(q, k, v, causal)
        assert np.isfinite(ref).all() and np.isfinite(run.out).all()
        assert all(np.isfinite(g).all() for g in run.grads)
        assert _rel(run.out, ref) < 2e-3


# --- blocks and errors --------------------------------------------------------------------------------------------
def test_default_blocks_follow_fa1_rule():
    # M = 1 MiB / 2 bytes = 524288 elements, d = 64: Bc = ⌈M/4d⌉ = 2048, Br = min(2048, 64) = 64; Bc halved to 1024
    # because K_j, V_j (512 KiB) + the fp32 S tile (512 KiB) + Q, O, m, l overflow 1 MiB
    assert resolve_blocks(make_problem("flash1", 4096, 64, sram_bytes=1 << 20)) == (64, 1024)
    # H200, fp16, d = 128: ⌈116736/512⌉ = 228 → 128, Br = 128; Bc halved to 64 (O_i in HBM, 241 KiB at 128)
    assert resolve_blocks(make_problem("flash1", 4096, 128)) == (128, 64)
    assert resolve_blocks(make_problem("flash1", 50, 64)) == (64, 64)  # clipped to the padded size (64): one
    # ragged block of 50 rows (issue 13 item 9: clipping to N itself made traffic drop as N grew)
    for algo, d, bw in itertools.product(["flash1", "flash2"], [16, 64, 128, 256], [False, True]):
        if algo == "flash2" and not bw:
            continue  # FA2's forward rule: test_default_blocks_follow_fa2_rule
        p = make_problem(algo, 8192, d, backward=bw)
        br, bc = resolve_blocks(p)
        assert br <= d and br & (br - 1) == 0 and bc & (bc - 1) == 0
        count_flash(p)  # fits


def test_default_blocks_follow_fa2_rule():
    # H200 (228 KiB), fp16, d = 64: Q_i 2·Br·d + K_j, V_j 2·2·Bc·d + m, l 2·4·Br + S 4·Br·Bc + O_acc 4·Br·d bytes.
    # Br = 512 does not fit even at Bc = 16 (232 KiB); Br = 256, and Bc = 64 = d still fits: 178 KiB
    p = make_problem("flash2", 4096, 64, device="h200")
    assert resolve_blocks(p) == (256, 64)
    assert sram_peak_bytes(256, 64, 64, "fp16", algo="flash2") == 182272
    # d = 128: Br = 256 fits only with Bc = 16 (218 KiB): the outer block wins, FA2's traffic depends on Br alone
    assert resolve_blocks(make_problem("flash2", 4096, 128)) == (256, 16)
    assert resolve_blocks(make_problem("flash2", 50, 64)) == (64, 64)  # clipped to the padded size
    assert resolve_blocks(make_problem("flash2", 4096, 64, block_c=128)) == (128, 128)  # Br sized around Bc
    assert resolve_blocks(make_problem("flash2", 4096, 64, block_r=32)) == (32, 64)
    # d ≥ 32 (at d = 16 on the A100, FA1's Bc = N holds all of K and V on chip: both read once, and FA1 wins)
    for dev, d in itertools.product(["h200", "a100-40gb", "t4", "rtx4090"], [32, 64, 128, 256]):
        f1, f2 = (make_problem(algo, 4096, d, device=dev) for algo in ("flash1", "flash2"))
        br, bc = resolve_blocks(f2)
        assert br & (br - 1) == 0 and bc & (bc - 1) == 0 and bc >= 16 and br >= resolve_blocks(f1)[0]
        assert not _fits_with(f2, 2 * br, 16)  # Br as large as SRAM allows
        assert _bytes(f2) < _bytes(f1)  # the default FA2 moves less than FA1
    # issue 25's table, H200, N = 4096, d = 64, fp16: naive 136 MB, flash1 27 MB, flash2 18 MB (was 68 MB at 64×256)
    assert _bytes(make_problem("flash2", 4096, 64)) == 17842176


def _bytes(problem):
    c = count_flash(problem).counters
    return c.hbm_read_bytes + c.hbm_write_bytes


def _fits_with(problem, br, bc):
    try:
        resolve_blocks(dataclasses.replace(problem, block_r=br, block_c=bc))
        return True
    except SramCapacityError:
        return False


def test_block_too_big_for_sram_names_bytes_and_fix():
    p = make_problem("flash2", 4096, 64, block_r=256, block_c=256, device="h200")
    with pytest.raises(SramCapacityError) as e:
        resolve_blocks(p)
    msg = str(e.value)
    assert "256×256" in msg and "228 KiB" in msg and "418 KiB" in msg and "H200" in msg
    assert "block_c ≤ 64" in msg and "block_r = block_c ≤ 128" in msg
    # and the suggested block does fit
    count_flash(make_problem("flash2", 4096, 64, block_r=128, block_c=128, device="h200"))
    with pytest.raises(SramCapacityError, match="backward"):
        count_flash(make_problem("flash2", 4096, 64, block_r=128, block_c=128, device="h200", backward=True))
    with pytest.raises(SramCapacityError):
        run_flash(p, *_inputs(1, 4096, 64)[:3])
    with pytest.raises(SramCapacityError, match="too large"):
        count_flash(make_problem("flash2", 64, 4096, block_r=1, block_c=1, sram_bytes=1024))


@pytest.mark.parametrize("bad", [0, -4, 2.5, True])
def test_bad_block_values(bad):
    p = dataclasses.replace(make_problem("flash2", 64, 8), block_c=bad)
    with pytest.raises(FlashsimError, match="block_c"):
        count_flash(p)


def test_bad_inputs_are_clear_errors():
    p = make_problem("flash2", 16, 4, backward=True)
    q, k, v, do = _inputs(1, 16, 4)
    with pytest.raises(FlashsimError, match="do is required"):
        run_flash(p, q, k, v)
    with pytest.raises(FlashsimError, match=r"expected \(batch × heads, N, d\) = \(1, 16, 4\)"):
        run_flash(p, q[:, :8], k, v, do)
    with pytest.raises(FlashsimError, match="unknown flash algo"):
        count_flash(make_problem("naive", 16, 4))
    with pytest.raises(MemoryBudgetError, match="count mode"):
        run_flash(make_problem("flash2", 1 << 17, 64, block_r=128, block_c=128), q, k, v)


def test_two_d_inputs_and_own_memory_with_callback():
    p = make_problem("flash2", 20, 4, block_r=8, block_c=8, dtype="fp32")
    q, k, v, _ = _inputs(1, 20, 4)
    seen = []
    mem = Memory(p.sram_bytes, p.dtype, on_event=seen.append)
    run = run_flash(p, q[0], k[0], v[0], memory=mem)
    assert run.memory is mem and len(seen) == len(mem.events) > 0
    assert run.out.shape == (1, 20, 4)
    np.testing.assert_allclose(run.out[0], reference_attention(q[0], k[0], v[0]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_stored_max_is_rounded_up(dtype):
    """flash1 stores m rounded *up* to the stats dtype, so e^(S − m) ≤ 1 even with fp16/bf16 statistics."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(500) * 10 ** rng.uniform(-3, 4, 500), [0.0, -0.0, 1e-30, -1e-30]])
    x = x.astype(np.float32)
    up = round_up(x, dtype)
    assert (up >= x).all() and (round_to(up, dtype) == up).all()
    if dtype != "fp32":  # and it is the nearest such value: rounding to nearest never lands strictly between
        near = round_to(x, dtype)
        assert ((near == up) | (near < x)).all()


@pytest.mark.parametrize("stats", ["fp16", "bf16"])
def test_low_precision_stats_flash1_still_accurate(stats):
    q, k, v, do = _inputs(1, 96, 16, seed=5, scale=2.0)
    p = make_problem("flash1", 96, 16, block_r=16, block_c=16, dtype="fp32", stats_dtype=stats, backward=True)
    run = run_flash(p, q, k, v, do)
    # measured: fp16 9e-5 (out), 5e-4 (grads: l is stored in fp16); bf16 8e-4, 4e-3. Storing an m that differs
    # from the one O and l were scaled by (no round-up) costs e^(m·u): ~1e-3 in fp16, which these bounds catch.
    out_tol, grad_tol = {"fp16": (4e-4, 1.5e-3), "bf16": (3e-3, 1.2e-2)}[stats]
    assert _rel(run.out, reference_attention(q, k, v)) < out_tol
    for got, want in zip(run.grads, reference_attention_grads(q, k, v, do)):
        assert _rel(got, want) < grad_tol
