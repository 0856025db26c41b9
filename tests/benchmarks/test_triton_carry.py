"""benchmarks/triton_carry.sh's GPU side: the carried triton tarball unpacks into a site folder, executables kept
executable; a missing tarball or a wrong verb fails with a message that names the fix (no GPU, no network)."""
import io
import os
import subprocess
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "triton_carry.sh")


def _add(tar, name, data, mode=0o644):
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def test_unpack_puts_triton_and_its_version_in_the_site(tmp_path):
    tarball = tmp_path / "triton39.tar.xz"
    with tarfile.open(tarball, "w:xz") as tar:
        _add(tar, "./triton/__init__.py", b"__version__ = '3.9.0'\n")
        _add(tar, "./triton/backends/nvidia/bin/ptxas-blackwell", b"#!/bin/sh\necho ptxas\n", mode=0o644)
        _add(tar, "./triton-3.9.0.dist-info/METADATA", b"Name: triton\nVersion: 3.9.0\n")
    site = tmp_path / "site"
    env = dict(os.environ, TRITON_TARBALL=str(tarball))
    got = subprocess.run(["bash", SCRIPT, "unpack", str(site)], env=env, capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    assert "3.9.0 in " + str(site) in got.stderr
    assert (site / "triton" / "__init__.py").exists()
    assert os.access(site / "triton" / "backends" / "nvidia" / "bin" / "ptxas-blackwell", os.X_OK)


def test_missing_tarball_and_wrong_verb_say_what_to_do(tmp_path):
    env = dict(os.environ, TRITON_TARBALL=str(tmp_path / "none.tar.xz"))
    got = subprocess.run(["bash", SCRIPT, "unpack", str(tmp_path / "site")], env=env, capture_output=True, text=True)
    assert got.returncode == 1 and "carry" in got.stderr and "triton_carry.sh" in got.stderr
    got = subprocess.run(["bash", SCRIPT, "stash"], capture_output=True, text=True)
    assert got.returncode == 2 and "usage" in got.stderr
