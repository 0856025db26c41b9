"""flashsim.kernels.gluon: the Hopper-only Gluon forward and backward.

On any machine: the guarded import reports unavailability cleanly, with a reason, and path selection falls back to
the Triton kernels. On a Hopper GPU (skipped elsewhere, with the reason): the forward and the backward against
float64, within 2x PyTorch's own error, on ragged N, both dtypes, both head dims, causal or not.
"""
import tempfile

import pytest
import torch
import torch.nn.functional as F

import flashsim.kernels.gluon as G
from kernel_inputs import reference, reference_grads

AVAILABLE, REASON = G.available()


def test_available_reports_a_reason_and_never_raises():
    ok, why = G.available()
    assert isinstance(ok, bool) and isinstance(why, str) and why
    if not torch.cuda.is_available():
        assert not ok
        assert "GPU" in why or "TRITON_INTERPRET" in why


@pytest.mark.skipif(AVAILABLE, reason="the Gluon path is available here; this checks the fallback")
def test_path_selection_picks_triton_without_hopper():
    q = torch.randn(1, 2, 64, 64, dtype=torch.float16)
    path, why = G.forward_path(q, q, q, causal=True)
    assert path == "triton" and why
    with pytest.raises(RuntimeError, match="gluon_forward"):
        G.gluon_forward(q, q, q)
    path, why = G.backward_path(q, q, q, causal=True)
    assert path == "triton" and why
    lse = torch.zeros(1, 2, 64)
    with pytest.raises(RuntimeError, match="gluon_backward"):
        G.gluon_backward(q, q, q, q, lse, q)


def test_forward_configs_keyed_by_n_override_the_base_in_their_range_only():
    for (d, causal), ranges in G.FWD_CONFIGS_BY_N.items():
        base = G.FWD_CONFIGS[(d, causal)]
        for lo, hi, overrides in ranges:
            for n in (lo, hi if hi is not None else lo * 4):
                assert G.forward_config(d, causal, n) == dict(base, **overrides)
    assert G.forward_config(128, True, 8192) == G.FWD_CONFIGS[(128, True)]
    assert G.forward_config(64, False, 2048) == G.FWD_CONFIGS[(64, False)]


def test_configs_cover_every_head_dim_and_mask():
    for d in G.HEAD_DIMS:
        for causal in (False, True):
            cfg = G.FWD_CONFIGS[(d, causal)]
            assert cfg["NC"] in (2, 3) and cfg["BLOCK_N"] & (cfg["BLOCK_N"] - 1) == 0
            # shared memory: 2 Q buffers per consumer + the K and V rings, under the 227 KB of an H100/H200
            v_stages = cfg.get("V_STAGES", cfg["STAGES"])
            smem = 2 * (2 * cfg["NC"] * 64 * d + (cfg["STAGES"] + v_stages) * cfg["BLOCK_N"] * d)
            assert G.fwd_smem_bytes(d, 2, **cfg) == smem <= 227 * 1024
            assert cfg["BALANCED"] is False or cfg["BALANCED"] in G.BALANCE_METHODS
    # a K ring of 3 and a V ring of 2 fit at d=128 beside the four Q buffers (224 KiB); 3 and 3 do not
    assert G.fwd_smem_bytes(128, 2, NC=2, BLOCK_N=128, STAGES=3, V_STAGES=2) == 224 * 1024
    assert G.fwd_smem_bytes(128, 2, NC=2, BLOCK_N=128, STAGES=3) > 227 * 1024
    assert G.fwd_constexprs(dict(G.FWD_CONFIGS[(128, False)], STAGES=3, V_STAGES=2), False, 128)["V_STAGES"] == 2
    assert G.fwd_constexprs(G.FWD_CONFIGS[(64, False)], False, 64)["V_STAGES"] == G.FWD_CONFIGS[(64, False)]["STAGES"]


def test_backward_configs_fit_in_shared_memory():
    for d in G.HEAD_DIMS:
        for causal in (False, True):
            cfg = G.BWD_CONFIGS[(d, causal)]
            assert cfg["BLOCK_M"] in (64, 128) and cfg["STAGES"] >= 2
            # K, V (128 x d each) + the Q/dO ring + dS (128 x BLOCK_M), 2 bytes each, + the fp32 dQ tile that
            # the TMA reduce-add reads (BLOCK_M x d) + the fp32 L and delta slots: under an H200's 227 KB
            assert G.bwd_smem_bytes(d, 2, **cfg) == (2 * (2 * 128 * d + 2 * cfg["STAGES"] * cfg["BLOCK_M"] * d
                                                          + 128 * cfg["BLOCK_M"]) + 4 * cfg["BLOCK_M"] * d * cfg["DQ_TMA"]
                                                     + 8 * cfg["STAGES"] * cfg["BLOCK_M"] * cfg["LSE_SMEM"])
            assert G.bwd_smem_bytes(d, 2, **cfg) <= 227 * 1024


hopper = pytest.mark.skipif(not AVAILABLE, reason=f"Gluon kernels unavailable: {REASON}")


@hopper
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [1, 100, 1000, 2085])
def test_gluon_forward_within_2x_torch_error(dtype, d, causal, n):
    torch.manual_seed(n + d)
    q, k, v = (torch.randn(2, 3, n, d, device="cuda", dtype=dtype) for _ in range(3))
    assert G.forward_path(q, k, v, causal)[0] == "gluon"
    o, lse = G.gluon_forward(q, k, v, causal=causal)
    ref, ref_lse = (x.to(q.device) for x in reference(q, k, v, causal, return_lse=True))  # the one float64 reference
    err = lambda x: ((x.double() - ref).norm() / ref.norm()).item()  # noqa: E731
    assert torch.isfinite(o).all() and err(o) <= 2 * err(F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    assert lse.shape == (2, 3, n) and lse.dtype == torch.float32
    assert (lse.double() - ref_lse).abs().max().item() < 1e-3 * max(1.0, ref_lse.abs().max().item())


@hopper
@pytest.mark.gpu
def test_gluon_forward_without_pingpong_is_the_same_function():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 700, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    a, la = G.gluon_forward(q, k, v, causal=True)
    b, lb = G.gluon_forward(q, k, v, causal=True, pingpong=False)
    # the same wgmma and exponentials in another issue order: the same numbers up to fp16 rounding
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(la, lb)


@hopper
@pytest.mark.gpu
@pytest.mark.parametrize("balanced", [False, "list", "lpt", "section_lpt"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("shape", [(2, 3, 1000), (1, 1, 64), (3, 5, 2085)])
def test_gluon_forward_tile_lists_give_the_same_output(balanced, d, shape):
    """However the host deals the tiles out (BALANCED), each output tile is computed once, the same way: the same
    numbers as the fixed stride, bit for bit, with fewer CTAs than SMs too (max_ctas)."""
    torch.manual_seed(d)
    q, k, v = (torch.randn(*shape, d, device="cuda", dtype=torch.float16) for _ in range(3))
    for max_ctas in (None, 7):
        a, la = G.gluon_forward(q, k, v, causal=True, max_ctas=max_ctas, config=dict(BALANCED=False))
        b, lb = G.gluon_forward(q, k, v, causal=True, max_ctas=max_ctas, config=dict(BALANCED=balanced))
        assert torch.equal(a, b) and torch.equal(la, lb)


@hopper
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [1, 100, 1000, 2085])
def test_gluon_backward_within_2x_torch_error(dtype, d, causal, n):
    """Each gradient of the Gluon backward (fed the Gluon forward's o and lse) within 2x SDPA's, vs float64."""
    from flashsim.kernels import flash_backward
    torch.manual_seed(n + d + 7)
    q, k, v, do = (torch.randn(2, 3, n, d, device="cuda", dtype=dtype) for _ in range(4))
    assert G.backward_path(q, k, v, causal)[0] == "gluon"
    o, lse = G.gluon_forward(q, k, v, causal=causal)
    grads = flash_backward(q, k, v, o, lse, do, causal=causal, gluon=True)
    refs = [r.to(q.device) for r in reference_grads(q, k, v, do, causal)]
    qt, kt, vt = (t.clone().requires_grad_() for t in (q, k, v))
    torch_grads = torch.autograd.grad(F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal), (qt, kt, vt), do)
    for name, x, t, ref in zip(("dq", "dk", "dv"), grads, torch_grads, refs):
        err = lambda y: ((y.double() - ref).norm() / ref.norm()).item()  # noqa: E731
        assert x.shape == ref.shape and x.dtype == dtype and torch.isfinite(x).all(), name
        assert err(x) <= 2 * err(t) + 1e-6, (name, err(x), err(t))


def test_backward_default_path_rule_names_measured_rows_only():
    """flash_backward(gluon=None) takes the Gluon backward only where it was timed faster than the Triton one:
    (dtype, d, causal) keys of covered inputs, N from the smallest timed row."""
    for (dtype, d, causal), from_n in G.BWD_DEFAULT_FROM_N.items():
        assert dtype in ("float16", "bfloat16") and d in G.HEAD_DIMS and causal in (False, True) and from_n >= 1
    for cfg in G.BWD_CONFIGS.values():
        assert set(cfg) <= G.BWD_CONFIG_KEYS and set(G.BWD_CONFIG_DEFAULTS) <= G.BWD_CONFIG_KEYS


def test_gluon_backward_rejects_unknown_config_keys():
    q = torch.randn(1, 1, 8, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="SPLIT"):
        G.gluon_backward(q, q, q, q, torch.zeros(1, 1, 8), q, config=dict(SPLIT=True))


@hopper
@pytest.mark.gpu
@pytest.mark.parametrize("option", [dict(LSE_SMEM=True, WG_LOCAL=True, DQ_WAIT_LATE=True),
                                    dict(LSE_SMEM=True, WG_LOCAL=True, DQ_WAIT_LATE=False),
                                    dict(LSE_SMEM=True, WG_LOCAL=False, DQ_WAIT_LATE=False), dict(LSE_SMEM=False),
                                    dict(LSE_SMEM=True, DV_LATE=True, MASK_SPLIT=True),
                                    dict(LSE_SMEM=True, DV_LATE=True, MASK_FIRST=True, LSE_LOG2=True),
                                    dict(LSE_SMEM=False, DV_LATE=True, LSE_LOG2=True),
                                    dict(LSE_SMEM=True, MASK_SPLIT=True, MASK_FIRST=True)])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [1, 384, 1001])
def test_gluon_backward_options_compute_the_same_gradients(option, d, causal, n):
    """Every launch option of the backward (L/delta through shared memory or by pointer, which --tune chooses
    between; WG_LOCAL's warpgroup-local waits, after which only the kernel's own barriers order its stores, with the
    dQ tile's wait before the dS store or at the barrier after it, DQ_WAIT_LATE; dV issued beside dK, DV_LATE; the
    masked blocks in loops of their own, MASK_SPLIT; the mask on the exponent, MASK_FIRST; L scaled by log2(e) in the
    prologue, LSE_LOG2) gives
    gradients within 2x SDPA's error, at N = 1, at N = 384 (a multiple of every block: no ragged block, which
    MASK_SPLIT's loops treat apart) and at a ragged N that is not a multiple of 4 (rows of L and delta whose TMA
    copies would start unaligned without the padding of :func:`flashsim.kernels.gluon.bwd_host.bwd_prologue`)."""
    torch.manual_seed(d + causal + n)
    q, k, v, do = (torch.randn(2, 3, n, d, device="cuda", dtype=torch.float16) for _ in range(4))
    o, lse = G.gluon_forward(q, k, v, causal=causal)
    grads = G.gluon_backward(q, k, v, o, lse, do, causal=causal, config=option)
    refs = [r.to(q.device) for r in reference_grads(q, k, v, do, causal)]
    qt, kt, vt = (t.clone().requires_grad_() for t in (q, k, v))
    torch_grads = torch.autograd.grad(F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal), (qt, kt, vt), do)
    for name, x, t, ref in zip(("dq", "dk", "dv"), grads, torch_grads, refs):
        err = lambda y: ((y.double() - ref).norm() / ref.norm()).item()  # noqa: E731
        assert torch.isfinite(x).all() and err(x) <= 2 * err(t) + 1e-6, (name, option, err(x), err(t))


def test_flash_forward_takes_the_triton_path_off_hopper_and_gluon_true_says_why():
    """flash_forward(gluon=None) falls back to the Triton kernel off Hopper; gluon=True names why it cannot run."""
    import torch

    from flashsim import kernels
    from flashsim.errors import FlashsimError

    if not kernels.INTERPRETER:
        pytest.skip("interpreter-only check (a GPU may run the Gluon path)")
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 40, 16, generator=g) for _ in range(3))
    o, lse = kernels.flash_forward(q, k, v, block_m=16, block_n=16)
    o2, lse2 = kernels.flash_forward(q, k, v, block_m=16, block_n=16, gluon=False)
    assert torch.equal(o, o2) and torch.equal(lse, lse2)
    with pytest.raises(FlashsimError, match="gluon=True"):
        kernels.flash_forward(q, k, v, gluon=True)


def test_flash_backward_takes_the_triton_path_off_hopper_and_gluon_true_says_why():
    """flash_backward(gluon=None) runs the Triton kernels off Hopper; gluon=True names why the Gluon one cannot."""
    from flashsim import kernels
    from flashsim.errors import FlashsimError

    if not kernels.INTERPRETER:
        pytest.skip("interpreter-only check (a GPU may run the Gluon path)")
    g = torch.Generator().manual_seed(1)
    q, k, v, do = (torch.randn(1, 1, 40, 16, generator=g) for _ in range(4))
    o, lse = kernels.flash_forward(q, k, v, block_m=16, block_n=16)
    a = kernels.flash_backward(q, k, v, o, lse, do, block_m=16, block_n=16)
    b = kernels.flash_backward(q, k, v, o, lse, do, block_m=16, block_n=16, gluon=False)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    with pytest.raises(FlashsimError, match="gluon=True"):
        kernels.flash_backward(q, k, v, o, lse, do, gluon=True)


def test_forward_config_keys_are_checked_and_every_kernel_constexpr_is_passed():
    q = torch.randn(1, 2, 64, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="unknown configuration keys"):
        G.gluon_forward(q, q, q, config={"PV_WAIT": True})      # a typo must not time the committed kernel
    try:
        from flashsim.kernels.gluon import fwd_sm90
    except Exception as exc:  # pragma: no cover - a triton without Gluon
        pytest.skip(f"the Gluon forward does not import here: {exc}")
    kernel_constexprs = {p.name for p in fwd_sm90.attn_fwd_sm90.params if p.is_constexpr}
    for (d, causal) in G.FWD_CONFIGS:
        assert set(G.fwd_constexprs(G.forward_config(d, causal, 4096), causal, d)) == kernel_constexprs


def test_compat_names_resolve_under_the_installed_triton():
    """The kernels take the TMA copy, the TMA reduce and the partition barrier from one place; under every triton the
    course supports each resolves to a callable that is not a removed name's stub (triton 3.9 keeps
    ``async_copy_global_to_shared`` only to raise)."""
    pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    from triton.experimental.gluon.language.nvidia.hopper import tma

    from flashsim.kernels.gluon import _compat
    for fn in (_compat.sync, _compat.tma_load, _compat.tma_add):
        assert callable(fn)
    if hasattr(tma, "async_load"):
        assert _compat.tma_load is tma.async_load
    else:
        assert _compat.tma_load is tma.async_copy_global_to_shared


def _offline_bwd_compile(*args):
    """The first record benchmarks/experiments/gluon_compile_sm90.py --bwd ARGS prints (an offline sm_90 compile in
    a subprocess, so that no Triton backend of this process is picked first), or None, with the run's output tail
    for an assertion message."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, str(root / "benchmarks/experiments/gluon_compile_sm90.py"), "--bwd", *args],
                         capture_output=True, text=True, timeout=600, cwd=root)
    recs = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    return (recs[0] if recs else None), (run.stdout[-2000:], run.stderr[-2000:])


def test_backward_waits_for_its_own_warpgroup_only_and_drops_the_barriers_behind_its_waits():
    """WG_LOCAL marks the backward's wgmma waits as waits for the calling warpgroup only, so that Triton's
    shared-memory barrier pass does not put a barrier over both compute warpgroups behind each of them (triton 3.9
    does, 3.6 did not); the kernel's own barriers order its shared-memory stores. An offline sm_90 compile (no GPU)
    must show no more barriers with it than without, fewer under a triton that puts barriers behind the waits (3.9,
    the course's lock; under 3.6 there are none to drop), and fewer with both options than with neither under
    either triton; moving the dQ tile's wait to the barrier after the dS store (DQ_WAIT_LATE) must add none."""
    pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    import triton

    counts = {}
    none, local, both = ('{"WG_LOCAL": false, "DQ_WAIT_LATE": false}', '{"WG_LOCAL": true, "DQ_WAIT_LATE": false}',
                         '{"WG_LOCAL": true, "DQ_WAIT_LATE": true}')
    for cfg in (none, local, both):
        rec, log = _offline_bwd_compile("--d", "128", "--causal", "0", "--cfg", cfg)
        assert rec and "bar_syncs" in rec, log
        counts[cfg] = rec["bar_syncs"]
    assert counts[both] <= counts[local] <= counts[none] and counts[both] < counts[none], counts
    if tuple(int(x) for x in triton.__version__.split(".")[:2]) >= (3, 9):
        assert counts[local] < counts[none], counts


def test_backward_reorderings_issue_the_d64_trip_in_fewer_static_cycles():
    """DV_LATE with MASK_SPLIT puts the exponentials and dS in one stretch of the trip's code with no branch, so that
    ptxas interleaves the exponentials (one issue per 8 cycles a warp) with dS's arithmetic instead of issuing them
    back to back. The offline sm_90 compile (no GPU) must show it: the d=64 trip's static cycles (the sum of the stall
    counts ptxas wrote, benchmarks/experiments/sass_loops.py) at least 10 % under the committed entry's, with fewer
    exponentials issued back to back and no spill load in the trip (the screen the options were queued on;
    benchmarks/results/NOTES.md, "The exponentials and dS in one stretch")."""
    pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    import triton
    if tuple(int(x) for x in triton.__version__.split(".")[:2]) < (3, 9):
        pytest.skip(f"the screen was made with the lock's triton 3.9 and its ptxas (CUDA 13.4); this is "
                    f"{triton.__version__}")
    from pathlib import Path

    from benchmarks.experiments import sass_loops

    static = {}
    for cfg in ("{}", '{"DV_LATE": true, "MASK_SPLIT": true}'):
        with tempfile.TemporaryDirectory() as tmp:
            rec, log = _offline_bwd_compile("--d", "64", "--causal", "0", "--cfg", cfg, "--sass", tmp)
            assert rec and not rec.get("warnings") and "error" not in rec, log
            (listing,) = Path(tmp).glob("*.sass")
            lp = sass_loops.main_loop(listing.read_text())
        ops = [sass_loops.opcode(lp.instrs[k]) for k in lp.straight_path()]
        static[cfg] = dict(lp.static_cycles(), ldl=ops.count("LDL"))
    base, new = static["{}"], static['{"DV_LATE": true, "MASK_SPLIT": true}']
    assert new["static_cycles"] <= 0.9 * base["static_cycles"], static
    assert new["mufu_back_to_back"] < base["mufu_back_to_back"] and new["ldl"] == 0, static
