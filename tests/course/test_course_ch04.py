"""Chapter 04: online softmax stepper (with the rescale bug), overflow demo, merge table, exercises 04.1-04.3."""
import math

import numpy as np
import pytest
from matplotlib.figure import Figure

import flashsim.exercises as ex
import flashsim.plots as plots
import flashsim.widgets as widgets
from flashsim.errors import FlashsimError
from flashsim.solutions import ch04 as sol


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


def test_check_online_update():
    assert ex.check_online_update(sol.online_update, quiet=True)

    def missing_rescale(m, l, block):
        m_new = max(m, max(block))
        return m_new, l + sum(math.exp(x - m_new) for x in block)
    assert not ex.check_online_update(missing_rescale, quiet=True)


def test_check_softmax_merge():
    assert ex.check_softmax_merge(sol.softmax_merge, quiet=True)
    assert not ex.check_softmax_merge(lambda a, b: (max(a[0], b[0]), a[1] + b[1]), quiet=True)


def test_check_safe_softmax():
    assert ex.check_safe_softmax(sol.safe_softmax, quiet=True)
    assert not ex.check_safe_softmax(lambda x: np.exp(x) / np.exp(x).sum(), quiet=True)          # overflows
    assert not ex.check_safe_softmax(lambda x: np.exp(x.astype(np.float64)) / np.exp(x.astype(np.float64)).sum(),
                                     quiet=True)                                                # upcast
