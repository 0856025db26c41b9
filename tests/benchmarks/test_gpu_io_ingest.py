"""benchmarks/gpu_io_ingest.py: what the device calls write comes in dated, named after its GPU, judged here; a
name already taken is never overwritten (synthetic files, no GPU)."""
import json

from benchmarks import fidelity_h200 as F
from benchmarks import gpu_io_ingest as I
from benchmarks.gluon_io import measure as M
from flashsim.measure import gluon_io as GI

H100 = {"gpu": "NVIDIA H100 80GB HBM3", "sms": 132, "l2_bytes": 52428800, "date_utc": "2026-12-06 10:00:00"}


def _device_folder(tmp_path):
    out = tmp_path / "out"
    F.run(str(out), kernels=("online_softmax",), dry_run=True, workers=1, sets={"new5"}, hardware="h100")
    res = json.loads((out / "fidelity_h100.json").read_text())
    res["info"].update(H100)
    (out / "fidelity_h100.json").write_text(json.dumps(res))
    c = dict(id="f", kernel="fwd", dtype="fp16", d=64, causal=False, B=1, H=1, N=256)
    (p,) = [L.as_dict() for L in GI.launch_io("fwd", 1, 1, 256, 64, "fp16", False, hardware="h100")]
    rec = {"kernel": "attn_fwd_sm90", "global_load_bytes": p["lsu_load_bytes"],
           "global_store_bytes": p["lsu_store_bytes"], "dram_read_bytes": p["dram_read_bytes"],
           "dram_write_bytes": p["dram_write_bytes"], "duration_ns": 1e3}
    rows = M.match([c], [rec], [{"id": "f", "ran": True, "finite": True}])
    (out / "gluon_io.json").write_text(json.dumps({"info": H100, "rows": rows}))
    (out / "pytest_gpu_suite.txt").write_text("# pytest of the whole suite on a CUDA machine, 2026-12-06T09:00:00Z\n"
                                              "# GPU: NVIDIA H100 80GB HBM3, 580.1, 81559 MiB\n...\n1 passed in 1s\n")
    (out / "gpu_io_log.txt").write_text("== 09:00:00 start\nNVIDIA H100 80GB HBM3, 580.1, 1980 MHz\n")
    return out


def test_every_file_comes_in_named_after_its_gpu_and_date(tmp_path, capsys):
    out, results = _device_folder(tmp_path), tmp_path / "results"
    results.mkdir()
    written = {p.split("/")[-1] for p in I.ingest([str(out)], str(results), "2026-12-06")}
    assert {"fidelity_h100_2026-12-06.json", "fidelity_h100_2026-12-06.md", "gluon_io_h100_2026-12-06.json",
            "gluon_io_h100_2026-12-06.md", "pytest_gpu_h100_2026-12-06.txt",
            "gpu_io_h100_2026-12-06_log.txt"} == written
    text = capsys.readouterr().out
    assert "hold-out" in text and "Within the criterion" in text and "requested equal 1/1" in text
    assert "**hold-out**" in (results / "fidelity_h100_2026-12-06.md").read_text()
    again = {p.split("/")[-1] for p in I.ingest([str(out)], str(results), "2026-12-06")}
    assert "fidelity_h100_2026-12-06_2.json" in again and "gluon_io_h100_2026-12-06_2.md" in again
