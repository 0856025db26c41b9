"""A dashboard on a page with no kernel: the website's view of every chapter's dashboards (course kit).

The website (``make site``) executes each notebook once and keeps its outputs; no Python runs when a reader opens a
page. So when the build sets ``FLASHSIM_STATIC_DASHBOARDS=1`` (tools/build_site.py does), a dashboard's ``show()``
returns a :class:`StaticDashboard` instead of its widgets: the dashboard rendered, by the same code the notebook
runs, at each sampled value of its main controls (:meth:`flashsim.course.kit.dashboard.Dashboard.sampled_states`),
and shown as one ``text/html`` output: the figure and readout of the starting state, a native slider
(``<input type=range>``) per main control, a Play button where the control has one in JupyterLab, and a few lines
of inline script that switch between the frames in the page. The other controls are listed as fixed. JupyterLab
never sets the variable, so it shows the live widgets as before, and nothing twice.

Size: each frame is a PNG reduced to a 256-colour palette (a figure's flat colours survive it; anti-aliased
edges lose little), and a frame that repeats an earlier one is stored once. ``static_samples`` (24 by default)
bounds the values of each control, so a dashboard holds at most about 24 frames of some 10-30 kB, and the
whole website stays well under its 80 MB budget (tests/packaging/test_site.py measures both).
"""
from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import os

__all__ = ["ENV_VAR", "wanted", "StaticDashboard", "FrameRenderer", "palette_png", "SCRIPT"]

#: set to 1 by the website's build: ``show()`` returns the pre-rendered page fragment
ENV_VAR = "FLASHSIM_STATIC_DASHBOARDS"

#: the page's side: switch frames as a slider moves; Play steps a slider at the JupyterLab Play's interval
SCRIPT = """(function (root) {
  var data = JSON.parse(root.querySelector('script.flashsim-static-data').textContent);
  var img = root.querySelector('img.flashsim-static-figure');
  var first = img ? img.getAttribute('src') : '';
  var readout = root.querySelector('.flashsim-static-readout');
  var inputs = Array.prototype.slice.call(root.querySelectorAll('input.flashsim-static-slider'));
  function show() {
    inputs.forEach(function (inp, k) { inp.nextElementSibling.textContent = data.labels[k][+inp.value]; });
    var frame = data.frames[inputs.map(function (inp) { return inp.value; }).join(',')];
    if (!frame) return;
    if (img && frame[0] !== null) {
      img.src = data.images[frame[0]] ? 'data:image/png;base64,' + data.images[frame[0]] : first;
    }
    readout.innerHTML = data.readouts[frame[1]];
    if (window.MathJax && MathJax.typesetPromise) MathJax.typesetPromise([readout]);
  }
  inputs.forEach(function (inp) { inp.addEventListener('input', show); });
  Array.prototype.forEach.call(root.querySelectorAll('button.flashsim-static-play'), function (button) {
    var inp = inputs[+button.dataset.control], timer = null;
    function stop() { clearInterval(timer); timer = null; button.textContent = '\\u25B6 play'; }
    button.addEventListener('click', function () {
      if (timer) return stop();
      if (+inp.value >= +inp.max) { inp.value = inp.min; show(); }
      button.textContent = '\\u23F8 pause';
      timer = setInterval(function () {
        if (+inp.value >= +inp.max) return stop();
        inp.value = +inp.value + 1; show();
      }, +button.dataset.ms);
    });
  });
})(document.currentScript.parentElement);"""


def wanted() -> bool:
    """True in the website's build (``FLASHSIM_STATIC_DASHBOARDS=1``)."""
    return os.environ.get(ENV_VAR, "") == "1"


def palette_png(pixels) -> bytes:
    """PNG bytes of an (H, W, 4) RGBA array, reduced to a 256-colour palette (about a third of the bytes of a
    full-colour PNG of a matplotlib figure)."""
    import numpy as np
    from PIL import Image
    out = io.BytesIO()
    image = Image.fromarray(np.ascontiguousarray(pixels, np.uint8), "RGBA").convert("RGB")
    image.quantize(colors=256, dither=Image.Dither.NONE).save(out, format="PNG", optimize=True)
    return out.getvalue()


class FrameRenderer:
    """A LivePlot's frames as PNG bytes, drawn the way the live figure is drawn (render.FigureView): a full
    render keeps the background, and a "blit" (:meth:`LivePlot.set`'s answer) draws only the animated artists over
    it, so a frame costs what a slider move costs in JupyterLab."""

    def __init__(self, plot):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        self.plot = plot
        self.canvas = FigureCanvasAgg(plot.fig)
        self._background = None

    def frame(self, how: str = "redraw") -> bytes:
        import numpy as np
        canvas, fig = self.canvas, self.plot.fig
        if how == "blit" and self._background is not None:
            canvas.restore_region(self._background)
        else:
            canvas.draw()                          # leaves the animated artists out
            self._background = canvas.copy_from_bbox(fig.bbox)
        for artist in self.plot.animated:
            fig.draw_artist(artist)
        return palette_png(np.asarray(canvas.buffer_rgba()))


class StaticDashboard:
    """What ``show()`` returns in the website's build: the dashboard's sampled states as one HTML fragment
    (``_repr_html_``). ``frames`` is :meth:`~flashsim.course.kit.dashboard.Dashboard.sampled_states`' answer;
    ``image_bytes`` the PNG bytes kept (repeated frames once)."""

    def __init__(self, dash):
        self.name = type(dash).__name__
        self.frames = dash.sampled_states()
        specs, state = dash.controls(), dash.control_state()
        main = [name for name, _, _ in self.frames["controls"]]
        self.fixed = [(specs[n].label, specs[n].label_of(state[n])) for n in specs if n not in main]
        self.readout_class = dash.readout_class or ""
        self.figure_class = dash.figure_class or ""
        self._html = self._render()

    def _render(self) -> str:
        axes, start, frames = self.frames["controls"], self.frames["start"], self.frames["frames"]
        images, image_ids, readouts, readout_ids, keyed = [], {}, [], {}, {}
        for index, readout, png in frames:
            image = None
            if png is not None:
                digest = hashlib.sha1(png).hexdigest()
                if digest not in image_ids:
                    image_ids[digest] = len(images)
                    images.append(png)
                image = image_ids[digest]
            if readout not in readout_ids:
                readout_ids[readout] = len(readouts)
                readouts.append(readout)
            keyed[",".join(map(str, index))] = [image, readout_ids[readout]]
        self.image_bytes = sum(len(p) for p in images)
        start_image, start_readout = keyed[",".join(map(str, start))]
        encoded = [base64.b64encode(p).decode() for p in images]
        src = encoded[start_image] if start_image is not None else None
        if start_image is not None:
            encoded[start_image] = ""           # the <img> holds it; the script reads it from there
        data = {"labels": [[c.label_of(v) for v in values] for _, c, values in axes], "frames": keyed,
                "images": encoded, "readouts": readouts}
        rows = []
        for k, (name, control, values) in enumerate(axes):
            play = (f'<button type="button" class="flashsim-static-play" data-control="{k}" '
                    f'data-ms="{control.play_ms}">&#9654; play</button>' if control.play_ms else "")
            rows.append(f'<div class="flashsim-static-control">{play}<label>{html.escape(control.label)} '
                        f'<input type="range" class="flashsim-static-slider" data-control="{html.escape(name)}" '
                        f'min="0" max="{len(values) - 1}" step="1" value="{start[k]}"> '
                        f'<output>{html.escape(control.label_of(values[start[k]]))}</output></label></div>')
        fixed = ""
        if self.fixed:
            fixed = ('<p class="flashsim-static-fixed">Fixed on this page: '
                     + ", ".join(f"{html.escape(label)} = {html.escape(value)}" for label, value in self.fixed)
                     + ". Run the notebook to move them.</p>")
        figure = (f'<img class="flashsim-static-figure {self.figure_class}" alt="{self.name}" '
                  f'style="max-width: 100%; height: auto" src="data:image/png;base64,{src}">' if src else "")
        payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
        return (f'<div class="flashsim-static" data-dashboard="{self.name}">' + "".join(rows)
                + f'<div class="flashsim-static-readout {self.readout_class}">{readouts[start_readout]}</div>'
                + figure + fixed
                + f'<script type="application/json" class="flashsim-static-data">{payload}</script>'
                + f"<script>{SCRIPT}</script></div>")

    def _repr_html_(self) -> str:
        return self._html

    def __repr__(self) -> str:
        return f"<{self.name}: pre-rendered for the website, {len(self.frames['frames'])} states>"
