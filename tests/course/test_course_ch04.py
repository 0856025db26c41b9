"""Chapter 04: online softmax stepper (with the rescale bug), overflow demo, merge table, exercises 04.1-04.3."""
import math

import pytest
from matplotlib.figure import Figure

import flashsim.plots as plots
import flashsim.widgets as widgets
from flashsim.errors import FlashsimError


def test_stepper_worked_example():
    s = widgets.OnlineSoftmaxStepper()
    assert round(s.state["l"], 3) == 1.135 and s.state["m"] == 3.0
    s.update(step=1)
    assert round(s.state["l"], 3) == 1.203 and math.isclose(s.state["l"], s.state["exact_l"])
    assert math.isclose(s.state["rescale_factor"], math.exp(-2))
    s.update(rescale=False)
    assert round(s.state["l"], 3) == 2.185 and "NOT rescaled" in s.readout()
    s.update(rescale=True, row="max in the first block", block=3)
    assert s.step == 0 and s.n_steps == 3
    with pytest.raises(FlashsimError):
        s.update(step=5)
    with pytest.raises(FlashsimError):
        s.update(row="nope")
    assert isinstance(s.figure(), Figure)


def test_overflow_demo():
    o = widgets.OverflowDemo(x_max=12.0)
    assert o.overflows and math.isfinite(o.safe_l) and o.safe_l <= o.n
    o.update(x_max=8.0)
    assert not o.overflows
    assert isinstance(o.figure(), Figure)
    assert isinstance(plots.plot_fp16_overflow([1.0, 15.0]), Figure)


def test_merge_table_orders_agree():
    t = widgets.merge_table([1.0, 3.0, 2.0, 5.0, 0.0, 4.0, 1.0, 6.0], 2)
    seq, tree, exact = t.rows[-3], t.rows[-2], t.rows[-1]
    assert seq[1] == tree[1] == exact[1]
    assert math.isclose(seq[2], exact[2]) and math.isclose(tree[2], exact[2])


def test_show_builds_widgets():
    pytest.importorskip("ipywidgets")
    assert type(widgets.OnlineSoftmaxStepper().show()).__name__ == "VBox"
    assert type(widgets.OverflowDemo().show()).__name__ == "VBox"


