"""Ring attention on a real distributed engine: torch.distributed with gloo, 2 CPU processes on this machine.

One launch runs fp32 and fp16, causal and not (spawning processes costs ~10 s on a 2-core CI machine): the
output agrees with one-device attention, and the bytes each process sent equal the simulator's link bytes.
"""
import numpy as np
import pytest
import torch

from flashsim.model.multi import cluster as md
from flashsim.model.attention.online_softmax import merge_partials
from flashsim.model.attention.reference import reference_attention
from flashsim.distributed.ring import block_attention, merge_on_device, run_ring
from flashsim.errors import FlashsimError


@pytest.fixture(scope="module")
def runs():
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available in this torch build")
    return run_ring(world=2, batch=1, heads=2, n=128, d=32, dtype=("fp32", "fp16"), causal=(False, True),
                    backend="gloo", timeout_s=240)


def test_ring_agrees_with_single_device_attention(runs):
    assert [(r.dtype, r.causal) for r in runs] == [("fp32", False), ("fp32", True), ("fp16", False), ("fp16", True)]
    for r in runs:
        assert r.max_abs_err is not None and r.max_abs_err <= r.tolerance, (r.dtype, r.causal, r.max_abs_err)
    assert runs[0].max_abs_err < 1e-5


def test_bytes_sent_per_device_equal_the_simulator(runs):
    for r in runs:
        sim = md.ring_attention(r.n, r.d, r.world, heads=r.heads, batch=r.batch, dtype=r.dtype, causal=r.causal)
        assert r.sent_bytes == sim.link_bytes, (r.dtype, r.causal)
        assert r.recv_bytes == [r.sent_bytes[-1]] + r.sent_bytes[:-1]        # rank r receives what r-1 sent
        assert r.exact and r.ok
        # the OS saw gloo write those bytes to its sockets (plus small message headers), where the kernel counts
        # socket writes in /proc/self/io (a sandboxed kernel may not: then the counter stays near 0)
        for sent, os_bytes in zip(r.sent_bytes, r.os_bytes):
            if os_bytes is not None and (sent == 0 or os_bytes >= sent // 2):
                assert sent <= os_bytes <= sent + 4096
    causal = [r for r in runs if r.causal]
    assert all(r.sent_bytes[1] == 0 and r.computed_blocks == [[0], [1, 0]] for r in causal)


def test_table_and_dict(runs):
    text = str(runs[0].table())
    assert "simulated link bytes" in text and "gloo" in text
    d = runs[1].as_dict()
    assert d["exact"] and d["backend"] == "gloo"


def test_merge_of_block_results_is_exact():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 16, 8, generator=g) for _ in range(3))
    k2, v2 = (torch.randn(1, 2, 16, 8, generator=g) for _ in range(2))
    oa, la = block_attention(q, k, v, 8 ** -0.5)
    ob, lb = block_attention(q, k2, v2, 8 ** -0.5)
    o, lse = merge_on_device(oa, la, ob, lb)
    ref, ref_lse = reference_attention(q.double().numpy(), torch.cat([k, k2], 2).double().numpy(),
                                       torch.cat([v, v2], 2).double().numpy(), return_lse=True)
    assert np.abs(o.double().numpy() - ref).max() < 1e-5 and np.abs(lse.double().numpy() - ref_lse).max() < 1e-5
    one_o, one_lse = merge_partials(oa.numpy(), la.numpy(), ob.numpy(), lb.numpy())   # the one definition
    assert np.abs(o.double().numpy() - one_o).max() < 1e-6 and np.abs(lse.double().numpy() - one_lse).max() < 1e-6


def test_launcher_errors():
    with pytest.raises(FlashsimError, match="multiple"):
        run_ring(world=2, n=101, backend="gloo")
    if not torch.cuda.is_available():
        with pytest.raises(FlashsimError, match="one GPU per process"):
            run_ring(world=2, backend="nccl")


def test_without_torch_the_module_imports_and_the_launcher_names_the_install():
    import subprocess
    import sys
    code = ("import sys; sys.modules['torch'] = None\n"
            "from flashsim.distributed import ring as D\n"
            "from flashsim.errors import MissingExtra\n"
            "for call in (D.run_ring, D.pick_backend):\n"
            "    try:\n"
            "        call()\n"
            "    except MissingExtra as e:\n"
            "        print(e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 2 and all('pip install "flashsim[kernels]"' in line and "torch" in line for line in lines)
