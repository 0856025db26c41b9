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


LIB = os.path.join(ROOT, "benchmarks", "device_lib.sh")


def _use_site(site):
    """Source device_lib.sh, call use_triton_site SITE, print its status and the environment it leaves."""
    script = f'source "{LIB}"; use_triton_site "{site}"; echo "rc=$? $PYTHONPATH ${{TRITON_BACKENDS_IN_TREE:-}}"'
    env = {k: v for k, v in os.environ.items() if k != "TRITON_BACKENDS_IN_TREE"}
    env["PYTHONPATH"] = "/checkout"
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)


def test_the_device_scripts_run_under_an_unpacked_site_first_on_the_path(tmp_path):
    site = tmp_path / "site"
    (site / "triton").mkdir(parents=True)
    (site / "triton" / "__init__.py").write_text("")
    got = _use_site(site)
    assert got.stdout.split() == ["rc=0", f"{site}:/checkout", "1"], got.stderr


def test_a_site_without_triton_names_the_unpack_step(tmp_path):
    got = _use_site(tmp_path / "empty")
    assert got.stdout.split() == ["rc=1", "/checkout"]
    assert "triton_carry.sh unpack" in got.stderr and ".whl/t39" in got.stderr


def test_every_device_script_takes_its_carried_triton_from_device_lib():
    """One way to run under a carried triton: no device script sets TRITON_BACKENDS_IN_TREE itself."""
    bench = os.path.join(ROOT, "benchmarks")
    for name in ("fa4_device_run.sh", "gluon_bwd_override_run.sh", "gluon_bwd_ncu_run.sh", "gpu_suite.sh"):
        text = open(os.path.join(bench, name)).read()
        assert "device_lib.sh" in text and "use_triton_site" in text, name
        assert "TRITON_BACKENDS_IN_TREE=1" not in text, name
