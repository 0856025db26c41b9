"""Chapter 02: Algorithm 0 stepper, traffic vs N, eager op bytes, exercises 02.1-02.2."""
import pytest
from matplotlib.figure import Figure

import flashsim
import flashsim.plots as plots
import flashsim.widgets as widgets
from flashsim.errors import FlashsimError


def test_algorithm0_stepper_counts_add_up():
    s = widgets.Algorithm0Stepper(n=8, d=4, block=4, dtype="fp16")
    assert s.n_steps > 10
    s.update(step=0)
    assert s.state["event"].kind == "load" and s.state["phase"].startswith("1.")
    last = s.update(step=s.n_steps - 1)
    t = flashsim.traffic("naive", 8, 4, block_r=4, block_c=4, dtype="fp16")
    assert sum(last["read_by_tensor"].values()) == t.hbm_read_bytes
    assert sum(last["write_by_tensor"].values()) == t.hbm_write_bytes
    assert last["phase"].startswith("3.")
    assert ("S", (1, 1)) in last["written"] and ("P", (0, 1)) in last["written"]
    with pytest.raises(FlashsimError):
        s.update(step=s.n_steps)
    assert "step" in s.readout()
    assert isinstance(s.figure(), Figure)
    with pytest.raises(FlashsimError):
        widgets.Algorithm0Stepper(n=128)


def test_traffic_vs_n_dashboard():
    t = widgets.TrafficVsN(n=8192, d=64)
    assert t.current["naive"].write_bytes_by_tensor["S"] == 8192 ** 2 * 2
    assert t.current["eager(pytorch)"].hbm_bytes > t.current["naive"].hbm_bytes > t.current["flash2"].hbm_bytes
    t.update(d=128, n=1024)
    assert t.current["naive"].d == 128 and t.current["naive"].n == 1024
    sweep = t.sweep()
    assert len(sweep["naive"]) == len(t.NS)
    with pytest.raises(FlashsimError):
        t.update(n=1000)
    assert isinstance(t.figure(), Figure)


def test_eager_op_bytes_add_up_and_dashboard():
    rows = widgets.eager_op_bytes(1024, 64, "fp16", "eager", "pytorch", causal=True, dropout_p=0.1)
    assert [r[0] for r in rows][0] == "S = QKᵀ" and rows[-1][0] == "O = PV" and len(rows) == 8
    naive = widgets.eager_op_bytes(1024, 64, "fp16", "naive", None)
    assert len(naive) == 3
    e = widgets.EagerOpsDashboard()
    big = e.total_bytes
    e.update(choice="Algorithm 0 (3 kernels)")
    assert e.total_bytes < big and len(e.rows) == 3
    with pytest.raises(FlashsimError):
        e.update(choice="jax")
    assert isinstance(e.figure(), Figure)
    assert isinstance(plots.plot_eager_ops(rows), Figure)


def test_show_builds_widgets():
    pytest.importorskip("ipywidgets")
    for w in (widgets.Algorithm0Stepper(), widgets.TrafficVsN(), widgets.EagerOpsDashboard()):
        assert type(w.show()).__name__ == "VBox"


