"""benchmarks/experiments/tune_experiments.py: the experiments (ping-pong, forward variants, atomic dQ) still run
in the interpreter and compute what the package's kernels compute."""
import pytest

import flashsim.kernels as K
from benchmarks import tune_attention as T
from benchmarks.experiments import tune_experiments as X  # noqa: F401  (registers the experiments)

SHAPES = [(64, False), (64, True), (128, False), (128, True)]
#: the launchers run where the backend compiles the kernels: CPU tensors in the interpreter, CUDA ones on a GPU
DEV = "cpu" if K.INTERPRETER else "cuda"


def test_experiment_grid_and_flags():
    cs = T.configs(SHAPES, experiment="pingpong")
    assert {c["kernel"] for c in cs} == {"fwd", "fwd_pp"} and all(c["tma"] for c in cs)
    assert T.parse_spec("fwdx:128x64:4:2:ws:oneloop:persist2") == [
        dict(kernel="fwdx", bm=128, bn=64, w=4, s=2, tma=True, ws=True, oneloop=True, persist=2)]


@pytest.mark.parametrize("causal", [False, True])
def test_every_experiment_matches_the_package(causal):
    x = T.inputs(32, causal, 80, device=DEV, batch=1, heads=2)              # ragged: 80 rows, 32-row blocks
    for c in (dict(kernel="fwd_pp", bm=64, bn=32, tma=True), dict(kernel="atomic", bm=16, bn=32),
              dict(kernel="fwdx", bm=32, bn=16), dict(kernel="fwdx", bm=32, bn=16, oneloop=True, ws=True),
              dict(kernel="fwdx", bm=16, bn=32, persist=1), dict(kernel="fwdx", bm=32, bn=32, oneloop=True, persist=2),
              dict(kernel="fwdx", bm=32, bn=16, preqk=True), dict(kernel="fwdx", bm=16, bn=32, preqk=True, oneloop=True),
              dict(kernel="fwdx", bm=32, bn=16, oneloop=True, persist=1, flatten=True)):
        run, check = T.launcher(dict(c, d=32, causal=causal, w=4, s=2), x)
        run()
        assert check() < 1e-3, c
