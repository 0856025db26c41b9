"""Compile the Gluon Hopper kernels for sm_90 without a GPU and report registers, spills and ptxas warnings.

Why: device time is scarce; register pressure and ptxas's wgmma serialisation (warning C7514 and its reason) can be
read from an offline compile (``triton.compile`` of a ``GluonASTSource`` at an explicit ``GPUTarget``), so the
variants of a kernel can be screened on a CPU-only machine before any of them is timed.

    python benchmarks/experiments/gluon_compile_sm90.py [--bwd] [--fwd] [--cfg '{"PIPE": true}'] [--sass DIR]

Prints one line per (kernel, dtype, d, causal, config): registers, spill stores/loads (bytes), shared memory, the
barriers over a partition's warps in the PTX (``bar.sync``: the explicit ones and those Triton's shared-memory
barrier pass adds), and every ptxas warning. Works with the triton of this checkout (3.9 locally, 3.6 on the device).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("TRITON_ALWAYS_COMPILE", "1")

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: E402
from triton.runtime.jit import mangle_type  # noqa: E402
from gluon_validate import load_gluon_files  # noqa: E402



def _load_gluon_package():
    """flashsim/kernels/gluon loaded from its files (:func:`gluon_validate.load_gluon_files`): importing
    flashsim.kernels would pick a Triton backend (the interpreter on a CPU machine), which must not happen before an
    offline sm_90 compile."""
    import importlib
    mod = load_gluon_files()
    return mod, importlib.import_module("flashsim_gluon.bwd_sm90"), importlib.import_module("flashsim_gluon.fwd_sm90")


G, bwd_sm90, fwd_sm90 = _load_gluon_package()

TARGET = GPUTarget("cuda", 90, 32)


def _desc(dt, shape, block):
    t = torch.empty(shape, dtype=dt)
    gdt = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16, torch.float32: gl.float32}[dt]
    return TensorDescriptor.from_tensor(t, block, gl.NVMMASharedLayout.get_default_for(block, gdt))


def _vdesc(n, block):
    t = torch.empty((n,), dtype=torch.float32)
    return TensorDescriptor.from_tensor(t, [block], gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32,
                                                                        rank=1))


def _compile(fn, args: dict, constexprs: dict, options: dict):
    sig = {}
    for name in fn.arg_names:
        if name in constexprs:
            sig[name] = "constexpr"
        else:
            a = args[name]
            # a descriptor's signature string: __mangle__ in newer triton, the JIT's specialiser in 3.6
            sig[name] = (a.__mangle__() if hasattr(a, "__mangle__") else mangle_type(a)) \
                if isinstance(a, TensorDescriptor) else a
    # pointer arguments 16-byte aligned, as a launch on torch tensors specialises them (without it the stores of
    # the offline compile are 2-byte scalar ones where the real kernel's are vectorised)
    attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(fn.arg_names)
             if isinstance(sig.get(name), str) and sig[name].startswith("*")}
    src = GluonASTSource(fn, sig, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()}, attrs=attrs)
    return triton.compile(src, target=TARGET, options=options)


def _ptxas_report(kernel, sass_dir=None, tag=""):
    """Run ptxas -v on the kernel's PTX (triton hides its stderr) and return (regs, spill_st, spill_ld, warnings)."""
    import subprocess
    import tempfile
    from triton.backends.nvidia.compiler import get_ptxas
    ptx = kernel.asm["ptx"]
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "k.ptx"
        p.write_text(ptx)
        try:
            ptxas = get_ptxas(90).path
        except TypeError:                            # triton 3.6: no arch argument
            ptxas = get_ptxas().path
        r = subprocess.run([ptxas, "-v", "--gpu-name", "sm_90a", str(p), "-o", str(Path(tmp) / "k.cubin")],
                           capture_output=True, text=True)
        log = r.stdout + r.stderr
        if sass_dir:
            Path(sass_dir).mkdir(parents=True, exist_ok=True)
            (Path(sass_dir) / f"{tag}.ptx").write_text(ptx)
            (Path(sass_dir) / f"{tag}.ptxas.txt").write_text(log)
            sass = subprocess.run([str(Path(ptxas).parent / "cuobjdump"), "-sass", str(Path(tmp) / "k.cubin")],
                                  capture_output=True, text=True).stdout
            (Path(sass_dir) / f"{tag}.sass").write_text(sass)
    regs = re.findall(r"Used (\d+) registers", log)
    sp = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    warns = sorted({w.strip() for w in re.findall(r".*(?:warning|C75\d\d).*", log)})
    return (int(regs[-1]) if regs else None, *(map(int, sp[-1]) if sp else (None, None)), warns)


def compile_bwd(dt, d, causal, cfg_over, sass_dir=None):
    N, BH = 4096, 16
    cfg = {**G.BWD_CONFIG_DEFAULTS, **G.BWD_CONFIGS[(d, causal)], **cfg_over}
    gdt = gl.float16 if dt == torch.float16 else gl.bfloat16
    constexprs = G.bwd_constexprs(cfg, causal, d, gdt)
    bm, bn = constexprs["BLOCK_M"], constexprs["BLOCK_N"]
    args = dict(q_desc=_desc(dt, (BH * N, d), [bm, d]), do_desc=_desc(dt, (BH * N, d), [bm, d]),
                k_desc=_desc(dt, (BH * N, d), [bn, d]), v_desc=_desc(dt, (BH * N, d), [bn, d]),
                dq_desc=_desc(torch.float32, (BH * N, d), [bm, d]),
                lse_desc=_vdesc(BH * N, bm), delta_desc=_vdesc(BH * N, bm),
                dq_ptr="*fp32", dk_ptr="*" + ("fp16" if dt == torch.float16 else "bf16"),
                dv_ptr="*" + ("fp16" if dt == torch.float16 else "bf16"), lse_ptr="*fp32", delta_ptr="*fp32",
                qk_scale="fp32", sm_scale="fp32", N="i32", N_LSE="i32", n_kblk="i32")
    opts = dict(num_warps=8, maxnreg=cfg["MAXNREG"])
    k = _compile(bwd_sm90.attn_bwd_sm90, args, constexprs, opts)
    tag = f"bwd_{str(dt)[6:]}_d{d}_c{int(causal)}_" + re.sub(r"[^A-Za-z0-9]+", "_", json.dumps(cfg_over)).strip("_")
    return k, _ptxas_report(k, sass_dir, tag)


def compile_fwd(dt, d, causal, N, sass_dir=None, cfg_over=None):
    BH = 16
    cfg = dict(G.forward_config(d, causal, N), **(cfg_over or {}))
    nc, bm, bn = cfg["NC"], 64, cfg["BLOCK_N"]
    args = dict(q_desc=_desc(dt, (BH * N, d), [bm, d]), k_desc=_desc(dt, (BH * N, d), [bn, d]),
                v_desc=_desc(dt, (BH * N, d), [bn, d]), o_ptr="*" + ("fp16" if dt == torch.float16 else "bf16"),
                lse_ptr="*fp32", qk_scale="fp32", N="i32", BH="i32", n_mblk="i32", n_tiles="i32", sec="i32",
                order_ptr="*i32", start_ptr="*i32")
    constexprs = G.fwd_constexprs(cfg, causal, d)
    names = fwd_sm90.attn_fwd_sm90.arg_names
    args = {n: v for n, v in args.items() if n in names}
    k = _compile(fwd_sm90.attn_fwd_sm90, args, constexprs, dict(num_warps=4, maxnreg=G._max_regs(nc)))
    return k, _ptxas_report(k, sass_dir, f"fwd_{str(dt)[6:]}_d{d}_c{int(causal)}_N{N}")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--bwd", action="store_true")
    ap.add_argument("--fwd", action="store_true")
    ap.add_argument("--cfg", default="{}", help="JSON overrides of BWD_CONFIGS")
    ap.add_argument("--fwd-cfg", default="{}", help="JSON overrides of the forward's configuration")
    ap.add_argument("--d", default="64,128")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument("--sass", default=None)
    args = ap.parse_args(argv)
    dt = dict(fp16=torch.float16, bf16=torch.bfloat16)[args.dtype]
    out = []
    for d in map(int, args.d.split(",")):
        for causal in (bool(int(c)) for c in args.causal.split(",")):
            for what in (["bwd"] if args.bwd or not args.fwd else []) + (["fwd"] if args.fwd else []):
                try:
                    if what == "bwd":
                        k, rep = compile_bwd(dt, d, causal, json.loads(args.cfg), args.sass)
                    else:
                        k, rep = compile_fwd(dt, d, causal, 4096, args.sass, json.loads(args.fwd_cfg))
                    regs, st, ld, warns = rep
                    rec = dict(kernel=what, dtype=args.dtype, d=d, causal=causal, cfg=args.cfg, regs=regs,
                               spill_store_bytes=st, spill_load_bytes=ld, smem=k.metadata.shared,
                               warps=k.metadata.num_warps, bar_syncs=k.asm["ptx"].count("bar.sync"),
                               warnings=warns)
                except Exception as exc:
                    import traceback
                    traceback.print_exc()
                    rec = dict(kernel=what, d=d, causal=causal, cfg=args.cfg,
                               error=f"{type(exc).__name__}: {exc}"[:2000])
                print(json.dumps(rec))
                out.append(rec)
    return out


if __name__ == "__main__":
    main()
