"""FlashAttention-4's wheels for a GPU machine with no network, in two parts that each fit one carry.

FA4 (``flash-attn-4``, CuTe DSL) is an optional reference column of the attention benchmarks; the course never needs
it. A machine with no package index gets it as wheels carried beside the repository, at most ~60 MiB per call with
the working tree included. The CuTe DSL's compiler library (``nvidia-cutlass-dsl-libs-cu13``, ~88 MiB deflated) does
not fit one call, so this script (run where pip reaches PyPI):

1. downloads the wheels FA4 needs beyond the GPU image's packages (torch, einops, typing-extensions, cuda-bindings,
   protobuf are there) for CPython 3.12 on x86-64 Linux (``WHEELS``; one version each, pinned);
2. rewrites the big wheel's members with LZMA instead of deflate (``zipfile.ZIP_LZMA``: still a zip that
   ``python -m zipfile -e`` extracts with the standard library alone; 87.7 MiB -> 62.5 MiB);
3. splits that file in two byte ranges and writes

       .whl/fa4/a/<big>.whl.part0                       (call 1 carries this and stashes it in /tmp)
       .whl/fa4/b/<big>.whl.part1  + every other wheel  (call 2 carries this, joins, unpacks, runs)
       .whl/fa4/b/SHA256SUMS                            (of the joined wheel and of every wheel: a lost part shows)

``benchmarks/fa4_carry.sh`` is the GPU machine's side (stash, join, unpack, PYTHONPATH). Usage, here:

    .venv/bin/python benchmarks/fa4_wheels.py [--whl /work/main/.whl] [--part-a-mib 38] [--no-download]
    .venv/bin/python benchmarks/fa4_wheels.py --check     # before the calls: each call's MiB, working tree included

The CUDA-13 flavour only: the GPU image's torch is built for CUDA 13 and its driver reports CUDA 13, and the DSL
picks the newest flavour the driver supports among those present (``cutlass/_mlir/_mlir_libs/__init__.py``).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: (name, version) of every wheel FA4 needs that the GPU image lacks; flash-attn-4's and quack-kernels' own
#: Requires-Dist, minus what the image holds (KINDS.md's package list)
WHEELS = (
    ("flash-attn-4", "4.0.0b40"),               # flash_attn.cute: the sm90/sm100 kernels and interface.py
    ("quack-kernels", "0.6.5"),                  # FA4 imports quack's CuTe helpers
    ("nvidia-cutlass-dsl", "4.8.1"),             # metadata and a .pth only: we put dsl_packages on PYTHONPATH
    ("nvidia-cutlass-dsl-libs-base", "4.8.1"),   # the DSL's Python (cutlass, cute)
    ("nvidia-cutlass-dsl-libs-core", "4.8.1"),   # more of it (cutlass.utils, ...)
    ("nvidia-cutlass-dsl-libs-cu13", "4.8.1"),   # the MLIR compiler (_cutlass_ir) and runtime .so, CUDA 13
    ("apache-tvm-ffi", "0.1.15.post2"),          # how compiled CuTe kernels are called with torch tensors
    ("torch-c-dlpack-ext", "0.1.5"),             # DLPack exchange for torch (tvm-ffi's fast path)
)
#: the one wheel too big for a call; it is recompressed and split
BIG = "nvidia-cutlass-dsl-libs-cu13"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")
MIB = 1 << 20


def wheel_file(folder: str, name: str, version: str) -> str:
    """The downloaded wheel of (name, version) in folder (wheel names use '_' for '-')."""
    stem = f"{name.replace('-', '_')}-{version}-"
    found = [f for f in sorted(os.listdir(folder)) if f.startswith(stem) and f.endswith(".whl")]
    if len(found) != 1:
        raise SystemExit(f"expected one {stem}*.whl in {folder}, found {found}: run without --no-download")
    return os.path.join(folder, found[0])


def download(folder: str) -> None:
    """pip download --no-deps of WHEELS for CPython 3.12 manylinux x86-64 (the GPU machine's Python)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
           "--implementation", "cp", "--pre", "-d", folder]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    cmd += [f"{n}=={v}" for n, v in WHEELS]
    subprocess.run(cmd, check=True)


def repack_lzma(src: str, dst: str) -> None:
    """Copy the zip src to dst with every member LZMA-compressed (same names, same bytes once extracted)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst + ".tmp", "w", compression=zipfile.ZIP_LZMA) as zout:
        for info in zin.infolist():
            out = zipfile.ZipInfo(info.filename, info.date_time)
            out.external_attr = info.external_attr
            out.compress_type = zipfile.ZIP_STORED if info.is_dir() else zipfile.ZIP_LZMA
            with zin.open(info) as fin, zout.open(out, "w", force_zip64=True) as fout:
                while chunk := fin.read(16 * MIB):
                    fout.write(chunk)
    os.replace(dst + ".tmp", dst)


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(16 * MIB):
            h.update(chunk)
    return h.hexdigest()


def split(path: str, part_a_bytes: int, dir_a: str, dir_b: str) -> tuple[str, str]:
    """Bytes [0, part_a_bytes) of path to dir_a/<name>.part0, the rest to dir_b/<name>.part1."""
    name = os.path.basename(path)
    parts = (os.path.join(dir_a, name + ".part0"), os.path.join(dir_b, name + ".part1"))
    with open(path, "rb") as f:
        for part, size in zip(parts, (part_a_bytes, None)):
            with open(part, "wb") as out:
                out.write(f.read(size) if size is not None else f.read())
    return parts


def folder_mib(folder: str) -> float:
    return sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)) / MIB


def prepare(whl: str, part_a_mib: float, fetch: bool = True) -> dict:
    """Download (unless fetch is False), repack and split into whl/fa4/{a,b}; returns the two folders' MiB."""
    os.makedirs(whl, exist_ok=True)
    if fetch:
        download(whl)
    root = os.path.join(whl, "fa4")
    dir_a, dir_b, work = (os.path.join(root, x) for x in ("a", "b", "work"))
    for d in (dir_a, dir_b, work):
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
    sums = []
    for name, version in WHEELS:
        src = wheel_file(whl, name, version)
        if name == BIG:
            packed = os.path.join(work, os.path.basename(src))
            repack_lzma(src, packed)
            sums.append((sha256(packed), os.path.basename(packed)))
            split(packed, int(part_a_mib * MIB), dir_a, dir_b)
            os.remove(packed)
        else:
            dst = os.path.join(dir_b, os.path.basename(src))
            with open(src, "rb") as fin, open(dst, "wb") as fout:
                fout.write(fin.read())
            sums.append((sha256(dst), os.path.basename(dst)))
    with open(os.path.join(dir_b, "SHA256SUMS"), "w") as f:
        f.writelines(f"{h}  {n}\n" for h, n in sums)
    os.rmdir(work)
    return {"a_mib": folder_mib(dir_a), "b_mib": folder_mib(dir_b)}


def tree_mib(repo: str) -> float:
    """MiB of the files that travel with every call: git's tracked and untracked-not-ignored files."""
    names = subprocess.run(["git", "-C", repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           check=True, capture_output=True).stdout.split(b"\0")
    paths = (os.path.join(repo, n.decode()) for n in names if n)
    return sum(os.path.getsize(p) for p in paths if os.path.isfile(p)) / MIB


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--whl", default=os.path.join(HERE, ".whl"), help="the git-ignored wheel folder (default: ./.whl)")
    ap.add_argument("--part-a-mib", type=float, default=38.0, help="size of part A (call 1's carry), MiB")
    ap.add_argument("--no-download", action="store_true", help="use the wheels already in --whl")
    ap.add_argument("--repo", default=HERE, help="the checkout whose working tree travels (for the size check)")
    ap.add_argument("--check", action="store_true",
                    help="only print what each call carries, from the parts already in --whl (before the calls)")
    args = ap.parse_args(argv)
    if args.check:
        sizes = {f"{x}_mib": folder_mib(os.path.join(args.whl, "fa4", x)) for x in ("a", "b")}
    else:
        sizes = prepare(args.whl, args.part_a_mib, fetch=not args.no_download)
    sizes["tree_mib"] = tree_mib(args.repo)
    for call, key in (("call 1", "a_mib"), ("call 2", "b_mib")):
        total = sizes[key] + sizes["tree_mib"]
        print(f"{call}: .whl/fa4/{key[0]} {sizes[key]:.1f} MiB + working tree {sizes['tree_mib']:.1f} MiB "
              f"= {total:.1f} MiB" + ("" if total <= 60 else "  OVER 60 MiB: move --part-a-mib"))
    return sizes


if __name__ == "__main__":
    main()
