"""The base package is numpy + matplotlib: flashsim.cpu, flashsim.measure and flashsim.kernels import without
torch, triton or numba, and a call that needs them raises a FlashsimError naming the install."""
import subprocess
import sys

BLOCK = '''
import builtins, importlib.util
real, find = builtins.__import__, importlib.util.find_spec
GONE = ("torch", "triton", "numba", "llvmlite")
def no_optional(name, *a, **k):
    if name.split(".")[0] in GONE:
        raise ImportError(f"No module named {name!r}")
    return real(name, *a, **k)
builtins.__import__ = no_optional
importlib.util.find_spec = lambda n, *a: None if n.split(".")[0] in GONE else find(n, *a)
'''

CHECK = '''
import numpy as np
import flashsim.cpu as C, flashsim.measure, flashsim.kernels as K
from flashsim.errors import FlashsimError
assert C.default_blocks(64)[0] == 64 and C.flash_extra_bytes(256, 64) > 0
q = np.ones((8, 4), np.float32)
assert C.naive_attention_numpy(q, q, q).shape == (8, 4)
for get, fix in ((lambda: C.flash_attention_cpu, "flashsim[cpu]"), (lambda: K.flash_forward, "flashsim[kernels]"),
                 (lambda: flashsim.measure.make_inputs("naive", 8, 8), "flashsim[kernels]")):
    try:
        get()
    except FlashsimError as exc:
        assert fix in str(exc), exc
    else:
        raise AssertionError("no error")
assert not K.BACKEND.available and "flashsim[kernels]" in K.BACKEND.line()
print("ok")
'''


def test_imports_without_torch_triton_numba():
    p = subprocess.run([sys.executable, "-c", BLOCK + CHECK], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-2000:]
