"""Take in what benchmarks/gpu_io_run.sh and gpu_suite.sh wrote on a GPU (no GPU here): every recognised file of the
folder(s) given, dated and named after its GPU, into benchmarks/results/, with the comparisons made here and the
counts printed last.

    python benchmarks/gpu_io_ingest.py DIR [DIR ...] [--results benchmarks/results] [--date YYYY-MM-DD]

Recognised (the device scripts' names):
- ``pytest_gpu_suite.txt`` / ``.xml`` (benchmarks/gpu_suite.sh) -> ``pytest_gpu_<gpu>_<date>.txt`` / ``.xml``;
- ``fidelity_<gpu>.json`` (benchmarks/gpu_io_run.sh holdout: benchmarks/fidelity_h200.py) -> its launches judged
  again under the criterion as it is now, ``fidelity_<gpu>_<date>.json`` and ``.md``;
- ``kern/kernels_h200.json`` (part naive: benchmarks/gpu_validate.py --part ncu --no-sim) -> its simulated side
  computed here (``--resim``), ``kernels_<gpu>_<date>.json`` and ``.md``; then point
  flashsim/course/recorded/manifest.json's ``kernels_h200`` at it and run ``python -m flashsim.course.kit.results
  --sync`` (chapters 02 and 09 read that copy);
- ``gluon_io.json`` (part gluon: benchmarks/gluon_io/measure.py) -> benchmarks/gluon_io/report.py's comparison,
  ``gluon_io_<gpu>_<date>.json`` and ``.md``;
- ``gpu_io_log.txt`` -> ``gpu_io_<gpu>_<date>_log.txt``.
A name already taken gets ``_2``, ``_3``, ... Nothing is overwritten.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.fidelity_bench.compare import rejudge, summarize  # noqa: E402
from benchmarks.fidelity_bench.report import criterion_lines, write_markdown  # noqa: E402
from benchmarks.fidelity_bench.sweep import gpu_tag  # noqa: E402
from benchmarks.fidelity_bench.configs import run_hardware  # noqa: E402


def _free(path: str) -> str:
    """``path``, or with _2, _3, ... before its extension where it exists."""
    stem, ext = os.path.splitext(path)
    n, out = 1, path
    while os.path.exists(out):
        n += 1
        out = f"{stem}_{n}{ext}"
    return out


def _tag_date(info: dict, fallback_date: str) -> tuple[str, str]:
    tag = gpu_tag(run_hardware(info)) if info.get("gpu") else "gpu"
    return tag, str(info.get("date_utc") or fallback_date)[:10]


def ingest_suite(src: str, results: str, date: str) -> list:
    head = open(src).read(2000)
    gpu = re.search(r"^# GPU: ([^,\n]+)", head, re.M)
    tag = gpu_tag(run_hardware({"gpu": gpu.group(1)})) if gpu else "gpu"
    when = re.search(r"(\d{4}-\d{2}-\d{2})T", head)
    stem = _free(os.path.join(results, f"pytest_gpu_{tag}_{when.group(1) if when else date}.txt"))[:-4]
    out = [shutil.copyfile(src, stem + ".txt")]
    xml = os.path.splitext(src)[0] + ".xml"
    if os.path.exists(xml):
        out.append(shutil.copyfile(xml, stem + ".xml"))
    tail = open(src).read().strip().splitlines()[-3:]
    print(f"suite: {' | '.join(tail)}")
    return out


def ingest_fidelity(src: str, results: str, date: str) -> list:
    with open(src) as f:
        res = json.load(f)
    rejudge(res["rows"])
    res["summary"] = summarize(res)
    tag, day = _tag_date(res.get("info", {}), date)
    stem = _free(os.path.join(results, f"fidelity_{tag}_{day}.json"))[:-5]
    with open(stem + ".json", "w") as f:
        json.dump(res, f, indent=1, default=str)
    write_markdown(res, stem + ".md")
    print(f"fidelity on {res.get('info', {}).get('gpu')} ({'hold-out' if res.get('holdout') else 'fit GPU'}):")
    print("\n".join("  " + line for line in criterion_lines(res["summary"])))
    return [stem + ".json", stem + ".md"]


def ingest_kernels(src: str, results: str, date: str) -> list:
    with open(src) as f:
        info = json.load(f).get("versions", {})
    tag, day = _tag_date(info, date)
    dest = _free(os.path.join(results, f"kernels_{tag}_{day}.json"))
    shutil.copyfile(src, dest)
    gv = os.path.join(ROOT, "benchmarks", "gpu_validate.py")
    env = dict(os.environ, PYTHONPATH=ROOT)
    subprocess.run([sys.executable, gv, "--resim", dest], check=True, env=env)
    md = dest[:-5] + ".md"
    with tempfile.TemporaryDirectory() as tmp:      # the figure is not kept: the markdown is the record
        subprocess.run([sys.executable, gv, "--plot", dest, "--figure", os.path.join(tmp, "f.png"), "--markdown", md],
                       check=True, env=env)
    print(f"kernels sweep: {dest}; point flashsim/course/recorded/manifest.json's kernels_h200 at it and run "
          "python -m flashsim.course.kit.results --sync")
    return [dest, md]


def ingest_gluon(src: str, results: str, date: str) -> list:
    from benchmarks.gluon_io import report as R
    with open(src) as f:
        res = R.compare(json.load(f))
    tag, day = _tag_date(res.get("info", {}), date)
    stem = _free(os.path.join(results, f"gluon_io_{tag}_{day}.json"))[:-5]
    with open(stem + ".json", "w") as f:
        json.dump(res, f, indent=1, default=str)
    with open(stem + ".md", "w") as f:
        f.write(R.markdown(res))
    s = res["summary"]["all"]
    print(f"gluon on {res['info'].get('gpu')}: requested equal {s['requested_equal']}/{s['launches']}, DRAM within "
          f"the criterion {s['dram_ok']}/{s['launches']} (strict {s['dram_strict_ok']}), chosen before measured "
          f"{s['dram_ok_chosen_before']}/{s['launches_chosen_before']}")
    return [stem + ".json", stem + ".md"]


def ingest(folders, results: str, date: str) -> list:
    written = []
    for folder in folders:
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if name == "pytest_gpu_suite.txt":
                written += ingest_suite(path, results, date)
            elif re.fullmatch(r"fidelity_[a-z0-9]+\.json", name):
                written += ingest_fidelity(path, results, date)
            elif name == "gluon_io.json":
                written += ingest_gluon(path, results, date)
        kern = os.path.join(folder, "kern", "kernels_h200.json")
        if os.path.exists(kern):
            written += ingest_kernels(kern, results, date)
        log = os.path.join(folder, "gpu_io_log.txt")
        if os.path.exists(log):      # its first lines: the start, then nvidia-smi's GPU name
            gpu = next((ln.split(",")[0] for ln in open(log).read().splitlines()[:4] if "NVIDIA" in ln), "")
            log_tag = gpu_tag(run_hardware({"gpu": gpu})) if gpu else "gpu"
            written.append(shutil.copyfile(log, _free(os.path.join(results, f"gpu_io_{log_tag}_{date}_log.txt"))))
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--results", default=os.path.join(ROOT, "benchmarks", "results"))
    ap.add_argument("--date", default=time.strftime("%Y-%m-%d", time.gmtime()))
    a = ap.parse_args(argv)
    for path in ingest(a.folders, a.results, a.date):
        print("wrote", os.path.relpath(path, ROOT) if path.startswith(ROOT) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
