"""`heads` means the same everywhere: H, the attention heads of each of `batch` sequences (B).

flashsim.traffic / simulate, the kernel view (kernel_io), ``flashsim measure`` and ``flashsim traffic --batch B
--heads H`` all take B and H separately and count B × H independent heads; only the product enters the numbers.
"""
import importlib.util
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flashsim
from flashsim import cli
from flashsim.errors import FlashsimError
from flashsim.model.kernel_io import kernel_io

SPLIT = ("batch", "heads")


def _same_numbers(a, b):
    """Two Traffic objects equal in every field but batch and heads."""
    da, db = a.as_dict(), b.as_dict()
    return {k: v for k, v in da.items() if k not in SPLIT} == {k: v for k, v in db.items() if k not in SPLIT}


@settings(max_examples=40, deadline=None)
@given(algo=st.sampled_from(["naive", "eager", "flash1", "flash2"]), n=st.integers(1, 600),
       d=st.sampled_from([8, 16, 64]), batch=st.integers(1, 16), heads=st.integers(1, 16),
       causal=st.booleans(), backward=st.booleans())
def test_traffic_batch_and_heads_equal_the_product_byte_for_byte(algo, n, d, batch, heads, causal, backward):
    split = flashsim.traffic(algo, n, d, batch=batch, heads=heads, causal=causal, backward=backward)
    product = flashsim.traffic(algo, n, d, heads=batch * heads, causal=causal, backward=backward)
    assert (split.batch, split.heads) == (batch, heads) and (product.batch, product.heads) == (1, batch * heads)
    assert split.hbm_read_bytes == product.hbm_read_bytes and split.hbm_write_bytes == product.hbm_write_bytes
    assert _same_numbers(split, product)
    one = flashsim.traffic(algo, n, d, causal=causal, backward=backward)
    assert split.hbm_bytes == batch * heads * one.hbm_bytes and split.flops == batch * heads * one.flops


@pytest.mark.parametrize("algo", ["naive", "flash2"])
def test_traffic_with_l2_and_the_repr_keep_batch_and_heads(algo):
    split = flashsim.traffic(algo, 512, 64, batch=4, heads=8, l2=True)
    assert _same_numbers(split, flashsim.traffic(algo, 512, 64, heads=32, l2=True))
    assert "batch=4, heads=8" in repr(split) and "batch=4, heads=8" in split.table().caption
    assert "batch" not in repr(flashsim.traffic(algo, 512, 64, heads=8))     # batch 1 is not shown


@pytest.mark.parametrize("algo", ["naive", "flash1"])
def test_simulate_takes_batch_heads_arrays_and_gives_them_back(algo):
    b, h, n, d = 2, 3, 40, 8
    rng = np.random.default_rng(0)
    q, k, v, do = (rng.standard_normal((b, h, n, d)).astype(np.float32) for _ in range(4))
    sim = flashsim.simulate(algo, n, d, batch=b, heads=h, dtype="fp32", backward=True, inputs=(q, k, v, do),
                            record_events=False)
    flat = flashsim.simulate(algo, n, d, heads=b * h, dtype="fp32", backward=True,
                             inputs=tuple(x.reshape(b * h, n, d) for x in (q, k, v, do)), record_events=False)
    assert sim.ok and sim.counters.as_dict() == flat.counters.as_dict()
    assert sim.out.shape == (b, h, n, d) and all(g.shape == (b, h, n, d) for g in sim.grads)
    assert np.array_equal(sim.out.reshape(b * h, n, d), flat.out)
    assert (sim.traffic.batch, sim.traffic.heads) == (b, h)
    with pytest.raises(FlashsimError, match=r"expected \(batch, heads, N, d\) = \(2, 3, 40, 8\)"):
        flashsim.simulate(algo, n, d, batch=b, heads=h, inputs=(q.reshape(b * h, n, d), k, v))


@pytest.mark.parametrize("bad", [0, -2, 2.5, "2", None, True, [2]])
@pytest.mark.parametrize("fn", [flashsim.traffic, flashsim.simulate])
def test_bad_batch_is_a_clear_error(fn, bad):
    with pytest.raises(FlashsimError, match=r"batch=.* must be a positive integer, e\.g\. batch=1"):
        fn("flash2", 64, 16, batch=bad, heads=2)


def test_cli_measure_and_traffic_agree_on_batch_and_heads(capsys):
    """The same (B, H) in `flashsim traffic`, flashsim.traffic, the kernel view and `flashsim measure` gives the
    same forward bytes: flash2's forward at Br × Bc = 32 × 32 reads and writes what the flash_fwd kernel does."""
    b, h, n, d, blk = 2, 3, 64, 16, 32
    code = cli.main(["traffic", "--algo", "flash2", "--n", str(n), "--d", str(d), "--block-r", str(blk),
                     "--block-c", str(blk), "--batch", str(b), "--heads", str(h), "--json"])
    obj = json.loads(capsys.readouterr().out)
    t = flashsim.traffic("flash2", n, d, blk, blk, batch=b, heads=h)
    assert code == 0 and obj == t.as_dict() and (obj["batch"], obj["heads"]) == (b, h)
    view = kernel_io("flash_fwd", n, d, blk, blk, batch=b, heads=h)
    assert (view.load_bytes, view.store_bytes) == (t.hbm_read_bytes, t.hbm_write_bytes)
    assert view.load_bytes == b * h * kernel_io("flash_fwd", n, d, blk, blk).load_bytes
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None:
        pytest.skip("flashsim measure needs torch and triton (the [kernels] extra)")
    import flashsim.kernels as K
    if not K.INTERPRETER:
        pytest.skip("measure's byte count is compared in the interpreter (a CUDA GPU is present)")
    from flashsim.measure import measure_cli_result
    res = measure_cli_result("flash_fwd", n, d, blk, blk, batch=b, heads=h)
    assert (res["batch"], res["heads"]) == (b, h) and res["match"]
    assert (res["measured_load_bytes"], res["measured_store_bytes"]) == (t.hbm_read_bytes, t.hbm_write_bytes)
