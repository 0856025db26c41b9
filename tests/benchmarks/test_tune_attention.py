"""benchmarks/tune_attention.py: its configurations are valid and every kernel launcher computes the right thing
(in the interpreter, at tiny sizes; the timing itself only runs on a GPU). It tunes the product's kernels only."""
import pytest

import flashsim.kernels as K
from benchmarks import tune_attention as T

SHAPES = [(64, False), (64, True), (128, False), (128, True)]
#: the launchers run where the backend compiles the kernels: CPU tensors in the interpreter, CUDA ones on a GPU
DEV = "cpu" if K.INTERPRETER else "cuda"


def test_configs_are_valid_tiles():
    for kw in ({}, {"wide": True}):
        cs = T.configs(SHAPES, **kw)
        assert cs and len({repr(sorted(c.items())) for c in cs}) == len(cs)          # no duplicates
        for c in cs:
            assert c["kernel"] in ("fwd", "dkdv", "dq")
            assert all(x >= 16 and x & (x - 1) == 0 for x in (c["bm"], c["bn"])) and c["w"] in (4, 8)
            if c["kernel"] == "dq":
                assert c["bn"] <= c["bm"]                       # K/V tiles no taller than the resident Q block
    assert {c["tma"] for c in T.configs(SHAPES)} == {False, True}
    spec = T.configs([(64, True)], spec="fwd:256x64:8:2:tma,dq:128x32:4:3")
    assert spec == [dict(kernel="fwd", bm=256, bn=64, w=8, s=2, tma=True, d=64, causal=True),
                    dict(kernel="dq", bm=128, bn=32, w=4, s=3, tma=False, d=64, causal=True)]
    with pytest.raises(ValueError, match="unknown flag"):
        T.parse_spec("fwd:64x64:4:2:fast")


def test_no_experiment_inside_the_tuning_script():
    import inspect
    source = inspect.getsource(T)
    assert "triton.jit" not in source and "fwd_variants" not in source and "atomic" not in source.split('"""')[2]


@pytest.mark.parametrize("causal", [False, True])
def test_every_launcher_matches_the_package_defaults(causal):
    x = T.inputs(32, causal, 80, device=DEV, batch=1, heads=2)              # ragged: 80 rows, 32-row blocks
    for c in (dict(kernel="fwd", bm=32, bn=16, tma=True), dict(kernel="fwd", bm=16, bn=32, tma=False),
              dict(kernel="dkdv", bm=16, bn=32, tma=True), dict(kernel="dq", bm=32, bn=16, tma=False)):
        run, check = T.launcher(dict(c, d=32, causal=causal, w=4, s=2), x)
        run()
        assert check() < 1e-3, c
