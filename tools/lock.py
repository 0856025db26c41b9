"""Write the exact lock (requirements/lock.txt) and Binder's environment.yml from pyproject.toml.

    make lock            # or: python tools/lock.py   (needs pip-tools: pip install pip-tools)

1. ``pip-compile`` resolves pyproject.toml with every extra ([all], [test], [site]) under the constraints of
   requirements/pins.txt (the versions the course was developed with: torch 2.13.0, numpy 2.4.6, ...).
2. The result is made installable everywhere the Makefile installs it:
   - the project itself (``flashsim @ file://...``, which ``[all]`` brings in) is dropped: ``make`` installs it
     editable, with ``--no-deps``, after the lock;
   - torch's local label (``2.13.0+cpu``, the CPU wheel the resolver saw) is dropped, so ``torch==2.13.0`` holds
     for the CPU build and for the CUDA build alike; the Makefile has installed the right one before;
   - Linux-only packages (triton) get their ``sys_platform == 'linux'`` marker back.
3. environment.yml (Binder, conda) gets the same pins in its pip section, torch as the CPU build from PyTorch's
   CPU index (Binder has no GPU).

tests/packaging/test_pins.py checks that the three files agree with each other and with pyproject.toml.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "lock.txt"
PINS = ROOT / "requirements" / "pins.txt"
ENVIRONMENT = ROOT / "environment.yml"
EXTRAS = ("all", "test", "site")
LINUX_ONLY = {"triton"}
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def compile_lock(out: Path) -> None:
    cmd = [sys.executable, "-m", "piptools", "compile", "--quiet", "--strip-extras", "--no-emit-index-url",
           "--no-emit-find-links", "--no-emit-trusted-host", "--annotation-style=line", "--constraint",
           str(PINS.relative_to(ROOT)), "--output-file", str(out.relative_to(ROOT))]
    for extra in EXTRAS:
        cmd += ["--extra", extra]
    env = dict(os.environ, CUSTOM_COMPILE_COMMAND="make lock")
    subprocess.run(cmd + ["pyproject.toml"], check=True, cwd=ROOT, env=env)


def fix_lock(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if re.match(r"flashsim\s*@", line):
            continue
        m = re.match(r"([A-Za-z0-9_.\-]+)==([^\s;#]+)(.*)", line)
        if m:
            name, version, rest = m.groups()
            version = version.split("+")[0]
            marker = "; sys_platform == 'linux'" if name.lower() in LINUX_ONLY else ""
            line = f"{name}=={version}{marker}{rest}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def lock_pins(text: str) -> list[str]:
    """The ``name==version[; marker]`` lines of a lock, without comments."""
    return [line.split("#")[0].strip() for line in text.splitlines() if re.match(r"[A-Za-z0-9]", line)]


def environment_yml(pins: list[str]) -> str:
    body = "\n".join(f"      - {p.split(';')[0].strip() + '+cpu' if p.startswith('torch==') else p}"
                     .replace("; sys_platform == 'linux'", "") for p in pins)
    return f"""# Binder and conda: Python 3.11 and the exact pins of requirements/lock.txt (written by `make lock`, which
# writes this file too; tests/packaging/test_pins.py checks the two agree). Binder has no GPU: torch is the CPU
# build, from PyTorch's CPU wheel index.
name: flashsim
channels:
  - conda-forge
dependencies:
  - python=3.11
  - pip
  - pip:
      - --extra-index-url {TORCH_CPU_INDEX}
{body}
      - -e .
"""


def main() -> None:
    tmp = LOCK.with_suffix(".tmp")
    LOCK.parent.mkdir(exist_ok=True)
    compile_lock(tmp)
    text = fix_lock(tmp.read_text())
    tmp.unlink()
    LOCK.write_text(text)
    ENVIRONMENT.write_text(environment_yml(lock_pins(text)))
    print(f"wrote {LOCK.relative_to(ROOT)} ({len(lock_pins(text))} pins) and {ENVIRONMENT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
