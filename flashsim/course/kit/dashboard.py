"""One dashboard base for every chapter: controls → state → readout and figure, wired once.

A chapter's dashboard is a plain class whose state lives in attributes. It says

- which controls it has: :meth:`Dashboard.controls`, {name: :class:`Control`}, where ``name`` is both the
  keyword of ``update(...)`` and the attribute holding that part of the state;
- how a change moves the state: :meth:`Dashboard.apply` (validates, raises :class:`~flashsim.errors.FlashsimError`
  naming the fix, returns what ``update`` returns);
- what the readout says (:meth:`Dashboard.readout`, HTML) and what the figure shows (the class attribute
  ``plot``, a :class:`~flashsim.course.kit.plotting.LivePlot`, drawn from :meth:`Dashboard.plot_args`).

The base does the rest, the same way for every chapter:

- ``update(**changes)`` with no widgets on the page changes the state (tests and plain Python use this);
- ``show()`` builds the widgets (a Play button next to any control with ``play_ms``), the readout and the figure;
  every control's observer calls the one path ``_on_controls`` → ``apply`` → move every control to the state →
  readout → figure refreshed in place;
- ``update(**changes)`` while widgets are shown *sets the widgets' values* and then runs that same path once, so
  the controls and the state cannot disagree (a later cell's ``update`` never moves the state behind the
  sliders). After every change the controls are set from the state, so a change that resets another part of
  the state (a new row resets the step) moves that control too; a control whose range depends on the state
  (the number of steps) gets its new range;
- without ipywidgets (a GPU machine running the notebooks as plain Python) ``show()`` prints the readout and
  returns the static figure.

Why the figure updates in place: re-building a matplotlib figure and rendering it to PNG on every move is slow
(benchmarks/results/NOTES.md has the measurements). So the base keeps matplotlib, changes the existing artists
(blitting where the axes stay), and shows the figure in an ipympl canvas (``draw_idle``: frames are drawn when the
browser asks, so fast key presses coalesce, and only changed pixels are sent); without ipympl, in an
ipywidgets.Image re-encoded from the existing canvas. Widget-native plots (bqplot, plotly) would rewrite every
chapter's figures and still leave ``make figures`` and the static fallback needing matplotlib.

On the website there is no kernel: when the site build asks for it (:mod:`flashsim.course.kit.static_page`),
``show()`` renders the dashboard's main controls (:meth:`Dashboard.main_controls`: a stepper's Play control or
the first slider, or the class attribute ``static_controls``) at each of their values
(:meth:`Dashboard.sampled_states`), by the same ``apply`` → ``readout`` → figure path, and returns a page fragment
whose native sliders switch between those frames. A chapter writes nothing for it.

Example::

    class Tour(Dashboard):
        plot = MatrixBytesPlot
        def controls(self):
            return {"n": slider("N", NS, play_ms=700), "dtype": choice("dtype", DTYPES)}
        def apply(self, n=None, dtype=None): ...; return self.readout()
        def readout(self): return f"N = {self.n:,}"
        def plot_args(self): return {"n": self.n, "dtype": self.dtype}
"""
from __future__ import annotations

import contextlib
import itertools
import math
import threading
import time
from dataclasses import dataclass

from flashsim.errors import FlashsimError
from flashsim.course.kit import static_page
from flashsim.course.kit.plotting import LivePlot
from flashsim.course.kit.render import LIVE_DPI, FigureView, has_ipywidgets, static_view

__all__ = ["Control", "Dashboard", "Memo", "neighbours", "choice", "slider", "int_range", "float_range", "log_range",
           "toggle"]


@dataclass(frozen=True)
class Control:
    """One control: ``kind`` is "choice" (dropdown), "slider" (a slider over ``options``), "int", "float", "log"
    (a slider over a range; "log" moves the exponent) or "toggle" (a checkbox). ``options`` are values or
    (label, value) pairs; ``play_ms`` adds a Play button that walks the slider at that interval."""

    kind: str
    label: str
    options: tuple = ()
    min: float = 0.0
    max: float = 1.0
    step: float = 1.0
    base: float = 10.0
    play_ms: int | None = None
    width: str | None = None
    css_class: str | None = None
    clamp: bool = False     # a range control: update() clamps a value outside it instead of raising

    @property
    def values(self) -> tuple:
        return tuple(o[1] if isinstance(o, tuple) else o for o in self.options)

    @property
    def ranged(self) -> bool:
        """A slider (over options or a range), not a dropdown or a checkbox."""
        return self.kind not in ("choice", "toggle")

    def all_values(self) -> tuple:
        """Every value the control offers, in order (a range on its step grid; "log": on its exponent grid)."""
        if self.kind in ("choice", "slider"):
            return self.values
        if self.kind == "toggle":
            return (False, True)
        if self.kind == "int":
            return tuple(range(int(self.min), int(self.max) + 1, max(int(self.step), 1)))
        if self.kind == "float":
            count = int(math.floor((self.max - self.min) / self.step + 1e-9)) + 1
            return tuple(round(self.min + k * self.step, 10) for k in range(count))
        if self.kind == "log":
            lo, hi = (math.log(x, self.base) for x in (self.min, self.max))
            count = int(math.floor((hi - lo) / self.step + 1e-9)) + 1
            return tuple(float(f"{self.base ** (lo + k * self.step):.4g}") for k in range(count))
        raise FlashsimError(f"control kind {self.kind!r}: use choice, slider, int, float, log or toggle")

    def samples(self, start, most: int) -> tuple:
        """At most `most` of :meth:`all_values` (about; the ends and `start` always among them), evenly spread
        over the control's positions, in order: what the website pre-renders."""
        values = self.all_values()
        if len(values) > most:
            picks = {round(k * (len(values) - 1) / (most - 1)) for k in range(most)}
            values = tuple(values[i] for i in sorted(picks))
        if start not in values:
            values = tuple(sorted({*values, start})) if self.kind not in ("choice", "slider") else (
                tuple(v for v in self.values if v in {*values, start}))
        return values

    def label_of(self, value) -> str:
        """How the control names `value` (an option's label, else the number)."""
        for o in self.options:
            if isinstance(o, tuple) and o[1] == value:
                return str(o[0])
        if self.kind == "toggle":
            return "on" if value else "off"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return str(value)
        return f"{value:,}" if isinstance(value, int) else f"{value:,.4g}"

    def check(self, name: str, value):
        """`value` if this control offers it (clamped into the range when ``clamp``), else FlashsimError."""
        if self.kind in ("choice", "slider"):
            if value not in self.values:
                raise FlashsimError(f"{name}={value!r}: the {self.label!r} control offers {list(self.values)}")
        elif self.kind == "toggle":
            if not isinstance(value, (bool, int)):
                raise FlashsimError(f"{name}={value!r}: the {self.label!r} checkbox takes True or False")
        else:
            try:
                ok = self.min <= float(value) <= self.max
            except (TypeError, ValueError):
                raise FlashsimError(f"{name}={value!r}: the {self.label!r} slider takes a number") from None
            if not ok and self.clamp:
                return type(value)(min(max(value, self.min), self.max))
            if not ok:
                raise FlashsimError(f"{name}={value!r}: the {self.label!r} slider offers {self.min:g} … {self.max:g}")
        return value

    def widget(self, value):
        """The ipywidget for this control, showing `value`."""
        import ipywidgets as W
        style = {"description_width": "initial"}
        layout = W.Layout(width=self.width) if self.width else W.Layout()
        common = dict(description=self.label, style=style, layout=layout)
        if self.kind == "choice":
            w = W.Dropdown(options=list(self.options), value=value, **common)
        elif self.kind == "slider":
            w = W.SelectionSlider(options=list(self.options), value=value, continuous_update=True, **common)
        elif self.kind == "int":
            w = W.IntSlider(value=int(value), min=int(self.min), max=int(self.max), step=int(self.step),
                            continuous_update=True, **common)
        elif self.kind == "float":
            w = W.FloatSlider(value=value, min=self.min, max=self.max, step=self.step, continuous_update=True,
                              **common)
        elif self.kind == "log":
            lg = math.log(self.base)
            w = W.FloatLogSlider(value=value, base=self.base, min=math.log(self.min) / lg,
                                 max=math.log(self.max) / lg, step=self.step, continuous_update=True, **common)
        elif self.kind == "toggle":
            w = W.Checkbox(value=bool(value), indent=False, **common)
        else:
            raise FlashsimError(f"control kind {self.kind!r}: use choice, slider, int, float, log or toggle")
        if self.css_class:
            w.add_class(self.css_class)
        return w

    def play(self, value):
        """A Play button for a slider control (None without ``play_ms``), its value the slider's position."""
        if self.play_ms is None:
            return None
        import ipywidgets as W
        if self.kind == "slider":
            return W.Play(value=self.values.index(value), min=0, max=max(len(self.options) - 1, 0), step=1,
                          interval=self.play_ms, description="play")
        return W.Play(value=int(value), min=int(self.min), max=int(self.max), step=1, interval=self.play_ms,
                      description="play")


def choice(label: str, options, **kw) -> Control:
    """A dropdown over `options` (values or (label, value) pairs)."""
    return Control("choice", label, tuple(options), **kw)


def slider(label: str, options, play_ms: int | None = None, **kw) -> Control:
    """A slider over `options` (values or (label, value) pairs), with a Play button when `play_ms` is given."""
    return Control("slider", label, tuple(options), play_ms=play_ms, **kw)


def int_range(label: str, lo: int, hi: int, step: int = 1, play_ms: int | None = None, **kw) -> Control:
    """An integer slider lo..hi (a Play button when `play_ms` is given; ``clamp=True``: update() clamps)."""
    return Control("int", label, min=lo, max=hi, step=step, play_ms=play_ms, **kw)


def float_range(label: str, lo: float, hi: float, step: float, **kw) -> Control:
    """A float slider lo..hi."""
    return Control("float", label, min=lo, max=hi, step=step, **kw)


def log_range(label: str, lo: float, hi: float, step: float = 0.05, base: float = 10.0, **kw) -> Control:
    """A logarithmic slider lo..hi (values, not exponents); `step` is in exponent units."""
    return Control("log", label, min=lo, max=hi, step=step, base=base, **kw)


def toggle(label: str, **kw) -> Control:
    """A checkbox."""
    return Control("toggle", label, **kw)


_FIXED_KINDS = ("choice", "slider", "toggle")

#: when a dashboard's controls last moved (time.monotonic()): Memo's background work waits while they move
_LAST_MOVE = [0.0]
#: how long after a move background work waits (s): the move's frame goes first
QUIET_S = 0.5
_IN_BACKGROUND = threading.local()


class Memo:
    """A pure function of hashable arguments, memoised, that can compute arguments ahead in a background thread.

    For a dashboard whose state takes long to compute (an L2-aware traffic sweep), a slider move would wait for
    it. ``prefetch(keys)`` computes the keys one step away while the learner looks at the plot; the thread waits
    while any dashboard's controls move (for :data:`QUIET_S` after each move), so it never slows a frame down,
    and a memo called inside it (a sweep made of memoised rows) waits the same way. The function must be pure:
    the thread and the controls then agree whichever computes a key first.

    The keys still to compute are one pending list that the newest ``prefetch`` replaces: after two quick moves the
    thread works on the neighbours of where the controls are, not of where they were. A call for the key the thread
    is computing waits for that result instead of computing it a second time beside it (two copies of the same
    work, on a 2-core machine, take about twice as long as one).
    """

    def __init__(self, fn):
        self.fn = fn
        self.cache: dict = {}
        self._thread = None
        self._pending: list = []          # keys the background thread computes next, in order
        self._busy: set = set()           # keys some thread is computing now
        self._running = False             # the background thread is working through _pending
        self._done = threading.Condition()

    def __call__(self, *key):
        if key in self.cache:
            return self.cache[key]
        if getattr(_IN_BACKGROUND, "on", False):
            while time.monotonic() - _LAST_MOVE[0] < QUIET_S:
                time.sleep(0.05)
        with self._done:
            while key in self._busy and key not in self.cache:       # being computed: wait for that result
                self._done.wait(0.05)
            if key in self.cache:
                return self.cache[key]
            self._busy.add(key)
        try:
            value = self.fn(*key)
            with self._done:
                self.cache.setdefault(key, value)
        finally:
            with self._done:
                self._busy.discard(key)
                self._done.notify_all()
        return self.cache[key]

    def prefetch(self, keys) -> None:
        """Compute the missing `keys` (tuples of arguments) in a daemon thread (one thread per memo), in this order;
        keys an earlier call asked for and the thread has not started are dropped."""
        keys = [tuple(k) for k in keys if tuple(k) not in self.cache]
        with self._done:
            self._pending = keys
            if not keys or self._running:
                return
            self._running = True

        def work():
            _IN_BACKGROUND.on = True
            while True:
                with self._done:
                    if not self._pending:
                        self._running = False
                        return
                    key = self._pending.pop(0)
                try:
                    self(*key)
                except Exception:                                  # the controls' own call raises it again
                    continue

        self._thread = threading.Thread(target=work, daemon=True, name=f"flashsim-memo-{self.fn.__name__}")
        self._thread.start()

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the background thread (tests)."""
        if self._thread is not None:
            self._thread.join(timeout)


def neighbours(options, value) -> list:
    """The options one step either side of `value` (none if `value` is not among them)."""
    options = list(options)
    if value not in options:
        return []
    i = options.index(value)
    return [options[j] for j in (i - 1, i + 1) if 0 <= j < len(options)]


class _View:
    """The widgets of one ``show()``: controls by name, their Play buttons, the readout, the figure."""

    def __init__(self, dash: "Dashboard"):
        import ipywidgets as W
        specs = dash.controls()
        state = dash.control_state()
        self.specs = dict(specs)
        self.controls, self.plays, self.boxes = {}, {}, {}
        for name, spec in specs.items():
            w = spec.widget(state[name])
            self.controls[name] = w
            play = spec.play(state[name])
            if play is not None:
                W.jslink((play, "value"), (w, "index" if spec.kind == "slider" else "value"))
                self.plays[name] = play
                self.boxes[name] = W.HBox([play, w])
            else:
                self.boxes[name] = w
            w.observe(lambda change, name=name: dash._on_controls({name: change["new"]}, view=self), names="value")
        self.readout = W.HTML(dash.readout())
        if dash.readout_class:
            self.readout.add_class(dash.readout_class)
        self.plot = dash.plot(**dash.plot_args())
        self.plot.set_dpi(LIVE_DPI)
        self.figure = FigureView(self.plot, dash.figure_class)
        rows = [tuple(r) for r in (dash.layout or (tuple(specs),))]
        placed = {n for r in rows for n in r}
        rows += [(n,) for n in specs if n not in placed]
        self.box = W.VBox([W.HBox([self.boxes[n] for n in r], layout=W.Layout(flex_flow="row wrap"))
                           for r in rows if r] + [self.readout, self.figure.widget])

    def widgets(self) -> dict:
        return {**self.controls, **{f"play_{n}": p for n, p in self.plays.items()}, "readout": self.readout,
                "figure": self.figure.widget}

    def sync(self, dash: "Dashboard") -> None:
        """Give every control the state's value (and its range, where the state changed it)."""
        specs, state = dash.controls(), dash.control_state()
        for name, w in self.controls.items():
            spec = specs[name]
            if spec != self.specs[name]:
                if spec.kind in ("choice", "slider") and tuple(w.options) != tuple(spec.options):
                    w.options = list(spec.options)
                elif spec.kind in ("int", "float"):
                    w.min, w.max = min(spec.min, w.min), max(spec.max, w.max)
                    w.min, w.max = spec.min, spec.max
                play = self.plays.get(name)
                if play is not None:
                    play.max = max(len(spec.options) - 1, 0) if spec.kind == "slider" else int(spec.max)
                    play.min = 0 if spec.kind == "slider" else int(spec.min)
                self.specs[name] = spec
            if w.value != state[name]:
                w.value = state[name]


class Dashboard:
    """The base of every chapter's dashboard (see the module docstring). A subclass implements ``controls``,
    ``apply``, ``readout`` and ``plot_args`` and sets ``plot``; it calls ``self.update()`` at the end of its
    ``__init__`` to compute the first state."""

    #: the figure: a LivePlot subclass drawn from plot_args()
    plot: type[LivePlot] | None = None
    #: rows of control names (None: all in one row)
    layout: tuple | None = None
    #: CSS classes of the readout and the figure widget (the browser tests find them by these)
    readout_class: str | None = None
    figure_class: str | None = None
    #: the controls the website pre-renders (None: the first with Play, else the first slider, else the first
    #: control); two where the chapter's point needs both (their values' product is rendered)
    static_controls: tuple | None = None
    #: at most about this many values of each pre-rendered control (evenly spread, the starting value among them)
    static_samples: int = 24

    _views: tuple = ()
    _holding: bool = False

    # --- what a chapter implements ----------------------------------------------------------------------------
    def controls(self) -> dict:
        """{name: Control}; the range of a control may depend on the state (it is re-read after each change)."""
        return {}

    def apply(self, **changes):
        """Change the state; raise FlashsimError on bad values; return what ``update`` returns."""
        raise NotImplementedError

    def readout(self) -> str:
        return ""

    def plot_args(self) -> dict:
        return {}

    def control_state(self) -> dict:
        """{control name: the state's value}: by default the attribute of the same name."""
        return {name: getattr(self, name) for name in self.controls()}

    # --- what the base provides -------------------------------------------------------------------------------
    def update(self, *args, **changes):
        """Change the state (positional arguments fill the controls in their order). With widgets shown, the
        widgets are set and the controls' own path changes the state, once for all the changes."""
        specs = self.controls()
        if args:
            names = list(specs)
            if len(args) > len(names):
                raise FlashsimError(f"update takes at most {len(names)} positional values ({', '.join(names)})")
            changes = {**dict(zip(names, args)), **changes}
        changes = {k: v for k, v in changes.items() if v is not None}
        alone = sum(k in specs for k in changes) == 1
        # a range may depend on another control changed in the same call (a new row has another number of
        # steps): then apply() validates the range control against the new state
        changes = {k: (specs[k].check(k, v) if k in specs and (alone or specs[k].kind in _FIXED_KINDS) else v)
                   for k, v in changes.items()}
        if not self._views:
            return self.apply(**changes)
        view = self._views[-1]
        with self._hold():
            for name, value in changes.items():
                if name in view.controls:
                    view.controls[name].value = value
        return self._on_controls(changes, view=view, raise_errors=True)

    def _on_controls(self, changes: dict, view=None, raise_errors: bool = False):
        """The one path from controls to state: apply, move every control to the state, readout, figure."""
        if self._holding:
            return None
        _LAST_MOVE[0] = time.monotonic()
        error = None
        try:
            result = self.apply(**changes)
        except FlashsimError as exc:
            result, error = None, exc
        for v in self._views:
            with self._hold():
                v.sync(self)
            if error is None:
                v.readout.value = self.readout()
                v.figure.refresh(v.plot.set(**self.plot_args()))
            else:
                v.readout.value = f"<b>{type(error).__name__}</b>: {error}"
        if error is not None and raise_errors:
            raise error
        return result

    @contextlib.contextmanager
    def _hold(self):
        """Observers do nothing while the base itself sets widgets."""
        was, self._holding = self._holding, True
        try:
            yield
        finally:
            self._holding = was

    def figure(self):
        """A fresh static Figure of the current state."""
        return self.plot(**self.plot_args()).fig

    def show(self):
        """The controls, the readout and the figure (a VBox); without ipywidgets, the static figure; in the
        website's build (:func:`static_page.wanted`), the pre-rendered page fragment."""
        if static_page.wanted():
            return static_page.StaticDashboard(self)
        if not has_ipywidgets():
            return static_view(self.readout(), self.figure())
        view = _View(self)
        self._views = tuple(self._views) + (view,)
        return view.box

    @property
    def widgets(self) -> dict:
        """The widgets of the last ``show()`` ({} before): controls by name, ``play_<name>``, ``readout``,
        ``figure``."""
        return self._views[-1].widgets() if self._views else {}

    @property
    def view(self):
        """The last ``show()``'s view (None before): ``.plot`` (the LivePlot), ``.figure`` (the FigureView)."""
        return self._views[-1] if self._views else None

    def control_values(self) -> dict:
        """{name: the value each control of the last ``show()`` shows} ({} before): tests compare it with
        :meth:`control_state`."""
        return {name: w.value for name, w in self._views[-1].controls.items()} if self._views else {}

    def main_controls(self) -> tuple:
        """The controls the website pre-renders: ``static_controls``, else the first control with a Play button
        (a stepper's steps), else the first slider, else the first control."""
        specs = self.controls()
        if self.static_controls is not None:
            unknown = [n for n in self.static_controls if n not in specs]
            if unknown:
                raise FlashsimError(f"static_controls names {unknown}: {type(self).__name__} has {list(specs)}")
            return tuple(self.static_controls)
        played = [n for n, c in specs.items() if c.play_ms is not None]
        ranged = [n for n, c in specs.items() if c.ranged]
        return tuple((played or ranged or list(specs))[:1])

    def sampled_states(self, dpi: int = LIVE_DPI) -> dict:
        """The dashboard at each sampled value of its main controls, drawn by the path the controls take
        (``apply`` → ``readout`` → figure changed in place); the state is the starting one again afterwards.

        Returns {"controls": [(name, Control, values)], "start": index tuple of the starting state,
        "frames": [(index tuple, readout HTML, PNG bytes (256 colours) or None where ``apply`` refused the
        value)]}, the frames in the order of the values (the first control slowest)."""
        specs, state = self.controls(), self.control_state()
        axes = [(n, specs[n], specs[n].samples(state[n], self.static_samples)) for n in self.main_controls()]
        start = tuple(values.index(state[n]) for n, _, values in axes)
        saved = dict(self.__dict__)
        plot = renderer = None
        if self.plot is not None:
            plot = self.plot(**self.plot_args())
            plot.set_dpi(dpi)
            renderer = static_page.FrameRenderer(plot)
        frames = []
        try:
            for index in itertools.product(*(range(len(values)) for _, _, values in axes)):
                try:
                    self.apply(**{n: values[i] for (n, _, values), i in zip(axes, index)})
                except FlashsimError as exc:
                    frames.append((index, f"<b>{type(exc).__name__}</b>: {exc}", None))
                    continue
                png = renderer.frame(plot.set(**self.plot_args())) if plot is not None else None
                frames.append((index, self.readout(), png))
        finally:
            self.apply(**{n: state[n] for n, _, _ in axes})
            self.__dict__.clear()
            self.__dict__.update(saved)
        return {"controls": axes, "start": start, "frames": frames}
