"""The website's dashboards (flashsim.course.kit.static_page): what ``show()`` returns when the site build asks.

- a control's values and the sampled few (the ends and the starting value always among them, at most about
  ``static_samples``);
- ``sampled_states`` renders every sampled state by the dashboard's own path and leaves the starting state as it
  was, for every dashboard of the course (tests/course/test_dashboards.py's CASES, a few samples each);
- a value the dashboard refuses gives its error as the readout and keeps the figure;
- the HTML: a native slider per main control over the sampled values, Play where the control has it, the other
  controls named as fixed, the starting frame's image in the page, and no other host named anywhere.
The browser side (the slider switches frames, Play steps them) is tested on the built site:
tests/packaging/test_site.py.
"""
from __future__ import annotations

import json
import re

import pytest
from test_dashboards import CASES

from flashsim.course.kit import static_page
from flashsim.course.kit.dashboard import Dashboard, float_range, int_range, log_range, slider, toggle, choice
from flashsim.course.kit.plotting import LivePlot
from flashsim.errors import FlashsimError

PNG = b"\x89PNG\r\n\x1a\n"


class _Bars(LivePlot):
    figsize = (2.0, 1.5)

    def draw(self, fig, height=1):
        self.bar = fig.add_subplot().bar([0], [height])[0]


class _Toy(Dashboard):
    """k in 0..9 with Play (refused at k = 7), a fixed dtype."""
    plot = _Bars
    readout_class = "toy-readout"
    figure_class = "toy-figure"

    def __init__(self):
        self.k, self.dtype = 3, "fp16"
        self.update()

    def controls(self):
        return {"k": int_range("k", 0, 9, play_ms=250), "dtype": choice("dtype", ("fp16", "fp32"))}

    def apply(self, k=None, dtype=None):
        if k == 7:
            raise FlashsimError("k=7 does not fit: pick k < 7")
        self.k = self.k if k is None else k
        self.dtype = dtype or self.dtype
        return self.k

    def readout(self):
        return f"k = {self.k}, {self.dtype}"

    def plot_args(self):
        return {"height": self.k + 1}


def test_values_of_each_kind():
    assert int_range("n", 8, 16, 4).all_values() == (8, 12, 16)
    assert float_range("x", 2.0, 3.0, 0.25).all_values() == (2.0, 2.25, 2.5, 2.75, 3.0)
    assert log_range("I", 0.1, 1000.0, 1.0).all_values() == (0.1, 1.0, 10.0, 100.0, 1000.0)
    assert slider("N", [("1,024", 1024), ("2,048", 2048)]).all_values() == (1024, 2048)
    assert toggle("causal").all_values() == (False, True)
    assert slider("N", [("1,024", 1024)]).label_of(1024) == "1,024" and toggle("c").label_of(True) == "on"


@pytest.mark.parametrize("start", [0, 1, 50, 98, 99])
def test_samples_keep_the_ends_and_the_start(start):
    control = int_range("step", 0, 99)
    values = control.samples(start, 12)
    assert values[0] == 0 and values[-1] == 99 and start in values
    assert list(values) == sorted(set(values)) and len(values) <= 13
    assert control.samples(start, 1000) == tuple(range(100))


def test_a_start_off_the_grid_is_sampled_in_order():
    values = log_range("I", 0.1, 1e4, 0.05).samples(37.5, 8)
    assert 37.5 in values and list(values) == sorted(values) and len(values) == 9


def test_main_controls_default_and_declared():
    assert _Toy().main_controls() == ("k",)
    toy = _Toy()
    toy.static_controls = ("k", "dtype")
    assert toy.main_controls() == ("k", "dtype")
    toy.static_controls = ("nope",)
    with pytest.raises(FlashsimError, match="static_controls"):
        toy.main_controls()


def test_sampled_states_render_every_value_and_restore_the_start():
    toy = _Toy()
    states = toy.sampled_states()
    (name, _, values), = states["controls"]
    assert name == "k" and values == tuple(range(10)) and states["start"] == (3,)
    frames = {index: (readout, png) for index, readout, png in states["frames"]}
    assert len(frames) == 10 and frames[(5,)][0] == "k = 5, fp16" and frames[(5,)][1].startswith(PNG)
    assert frames[(7,)] == ("<b>FlashsimError</b>: k=7 does not fit: pick k < 7", None)
    assert (toy.k, toy.dtype, toy.readout()) == (3, "fp16", "k = 3, fp16")


def test_two_main_controls_render_their_product():
    toy = _Toy()
    toy.static_controls = ("k", "dtype")
    toy.static_samples = 3
    states = toy.sampled_states()
    assert [len(v) for _, _, v in states["controls"]] == [4, 2]      # 0, 3 (the start), 4 or 5, 9 × two dtypes
    assert len(states["frames"]) == 8 and toy.dtype == "fp16"


def test_show_in_the_site_build_returns_the_static_fragment(monkeypatch):
    monkeypatch.setenv(static_page.ENV_VAR, "1")
    shown = _Toy().show()
    assert isinstance(shown, static_page.StaticDashboard)
    page = shown._repr_html_()
    assert page.count('type="range"') == 1 and 'max="9"' in page and 'value="3"' in page
    assert 'data-ms="250"' in page and "play" in page
    assert "Fixed on this page: dtype = fp16" in page
    assert 'class="flashsim-static-readout toy-readout">k = 3, fp16<' in page
    assert re.search(r'<img class="flashsim-static-figure toy-figure"[^>]* src="data:image/png;base64,', page)
    data = json.loads(re.search(r'class="flashsim-static-data">(.*?)</script>', page).group(1))
    assert len(data["frames"]) == 10 and data["frames"]["7"][0] is None
    assert data["labels"] == [[str(k) for k in range(10)]]
    assert not re.search(r"(src|href)=\"(https?:)?//", page), "the fragment loads nothing from another host"


def test_show_in_jupyterlab_is_the_live_widget(monkeypatch):
    pytest.importorskip("ipywidgets")
    monkeypatch.delenv(static_page.ENV_VAR, raising=False)
    assert not isinstance(_Toy().show(), static_page.StaticDashboard)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_dashboard_renders_for_the_site(case):
    dash = case.factory()
    before = (dash.control_state(), dash.readout())
    dash.static_samples = 3
    fragment = static_page.StaticDashboard(dash)
    assert (dash.control_state(), dash.readout()) == before, "the starting state is back after sampling"
    frames = fragment.frames["frames"]
    assert frames and any(png is not None for _, _, png in frames)
    assert fragment._repr_html_().count('type="range"') == len(dash.main_controls())
