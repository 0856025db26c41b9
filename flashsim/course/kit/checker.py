"""The course's one checker idiom: an :class:`Exercise` (a spec and graded hints), one check, one :class:`Verdict`.

How an exercise works (chapter 00 explains it to the learner):

1. the notebook states the exercise's *spec* (what the function must return, never how) and gives a stub;
2. ``exercises.hint("05.2")`` opens the next hint: first a question, then a pointer, then the step (never the
   whole answer, and never a sentence the chapter already says);
3. ``exercises.check_<name>(your_function)`` runs the function and prints a :class:`Verdict`: its first line is
   ✔ or ✘, the exercise and a *diagnosis* derived from evidence (which outputs differ, by how much, in what
   pattern, which tensors' bytes differ), then a table (bytes read and written where bytes matter);
4. ``exercises.reveal("05.2")`` is the one door to a worked solution (:mod:`flashsim.course.kit.reveal`).

Every chapter's ``checks.py`` declares its exercises with :func:`exercise` and builds its verdicts with
:func:`verdict` (or :func:`check_cases` for a table of cases, which calls it); a pass is recorded by
:mod:`flashsim.course.kit.progress`. Checkers never raise on a wrong or unfinished answer: a stub's
``NotImplementedError`` is "not attempted yet" (no diagnosis), any other exception from the learner's code is
shown at the learner's own line (:func:`learner_error`). No verdict passes on a NaN or an infinity: a non-finite
answer where the float64 reference is finite, or a non-finite error, is a fail with that diagnosis.
"""
from __future__ import annotations

import linecache
import math
import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from flashsim.course.kit import progress
from flashsim.errors import FlashsimError
from flashsim.model.attention.online_softmax import LN2, LOG2E, online_softmax_update
from flashsim.model.attention.reference import reference_attention, softmax_scale
from flashsim.model.attention.visibility import causal_mask, tile_visible
from flashsim.model.memory import Memory
from flashsim.model.table import Table

__all__ = ["Exercise", "Verdict", "Suspect", "LearnerError", "exercise", "get_exercise", "exercises", "hint",
           "verdict", "check_cases", "call_learner", "learner_error", "io_rows", "io_table", "io_differs",
           "OUT_OF_BOUNDS", "close", "Hint", "sram_overflow_verdict", "loop_table", "first_line", "error_verdict",
           "diagnose_attention", "attention_where",
           "random_qkv", "fa2_on_memory", "reference_tile_kind", "reference_tile_mask"]

#: the tensor name :func:`flashsim.measure.count_io` gives to bytes that fall outside every tensor argument
OUT_OF_BOUNDS = "?"
_OOB_LABEL = "out of bounds (no tensor)"
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # .../flashsim
_HINT_KINDS = ("a question", "a pointer", "the step")


# --- exercises and hints ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Exercise:
    """One exercise: id ("05.2"), title, the spec (*what* to compute, never how) and graded hints (question,
    pointer, formula), and the name of its checker in :mod:`flashsim.exercises`."""

    id: str
    title: str
    spec: str
    hints: tuple[str, ...]
    checker: str

    @property
    def chapter(self) -> str:
        return self.id.split(".")[0]


_EXERCISES: dict[str, Exercise] = {}
_HINTS_OPENED: dict[str, int] = {}


def exercise(id: str, title: str, spec: str, hints: Sequence[str], checker: str) -> Exercise:
    """Declare (register) an exercise; every chapter's ``checks.py`` does this once per exercise."""
    if len(hints) != 3:
        raise FlashsimError(f"exercise {id}: give three graded hints (a question, a pointer, the step)")
    ex = Exercise(id, title, " ".join(spec.split()), tuple(" ".join(h.split()) for h in hints), checker)
    _EXERCISES[id] = ex
    progress.register(id, ex.title)
    return ex


def get_exercise(id: str) -> Exercise:
    """The exercise with this id ("05.2"; "5.2" works too). Unknown id: FlashsimError listing the ids."""
    key = str(id).strip()
    if "." in key:
        a, b = key.split(".", 1)
        key = f"{a.zfill(2)}.{b}"
    if key not in _EXERCISES:
        raise FlashsimError(f"no exercise {id!r}: the course's exercises are {', '.join(sorted(_EXERCISES))}")
    return _EXERCISES[key]


def exercises() -> list[Exercise]:
    """Every declared exercise, in course order."""
    return [_EXERCISES[k] for k in sorted(_EXERCISES, key=lambda s: tuple(int(p) for p in s.split(".")))]


class Hint(str):
    """A hint's text: a ``str`` that Jupyter shows once. :func:`hint` prints it; left as a cell's last value it
    is not shown again as ``Out[]`` (a quiet hint, never printed, shows there once)."""

    _shown: bool = False

    def _ipython_display_(self) -> None:
        if not self._shown:
            print(str(self))
            self._shown = True


def hint(id: str, level: int | None = None, quiet: bool = False) -> Hint:
    """Open the next hint of exercise `id` (first a question, then a pointer, then the step, never the whole
    answer) and print it once.

    level: 1, 2 or 3 to open that hint directly. Opening a hint never changes what the checker accepts. The
    returned :class:`Hint` is the printed text; Jupyter does not show it a second time.
    """
    ex = get_exercise(id)
    n = min(len(ex.hints), level if level is not None else _HINTS_OPENED.get(ex.id, 0) + 1)
    n = max(n, 1)
    _HINTS_OPENED[ex.id] = max(n, _HINTS_OPENED.get(ex.id, 0))
    more = (f" (hint({ex.id!r}) again for {_HINT_KINDS[n]})" if n < len(ex.hints) else
            f" (the last hint; exercises.reveal({ex.id!r}) shows a worked solution)")
    text = Hint(f"hint {n}/{len(ex.hints)} for {ex.id} {ex.title}, {_HINT_KINDS[n - 1]}: {ex.hints[n - 1]}{more}")
    if not quiet:
        print(text)
        text._shown = True
    return text


# --- verdicts ----------------------------------------------------------------------------------------------------
@dataclass
class Verdict:
    """The result of every checker: truthy when passed; ``str()`` is the ✔/✘ line and the table.

    ``diagnosis`` names what the evidence showed ("passed", "not_implemented", "learner_error", "non_finite",
    "missing_rescale", ...); ``message`` says it in words; ``details`` holds the numbers behind it.
    """

    exercise: str
    title: str
    passed: bool
    message: str
    diagnosis: str = "passed"
    table: Table | None = None
    details: dict = field(default_factory=dict)
    _shown: bool = field(default=False, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.title

    def __bool__(self) -> bool:
        return self.passed

    def headline(self) -> str:
        mark, word = ("✔", "PASSED") if self.passed else ("✘", "NOT YET")
        return f"{mark} {self.exercise} {self.title}: {word} — {self.message}"

    def __str__(self) -> str:
        return self.headline() + (f"\n{self.table}" if self.table is not None else "")

    def __repr__(self) -> str:
        return f"Verdict({self.exercise!r}, passed={self.passed}, diagnosis={self.diagnosis!r})"

    def show(self) -> "Verdict":
        print(self)
        self._shown = True
        return self

    def _ipython_display_(self) -> None:
        """A verdict left as a cell's last value prints once (not again as a repr under the printed one)."""
        if not self._shown:
            self.show()


def verdict(ex: Exercise, passed: bool, message: str, *, diagnosis: str | None = None, table=None,
            quiet: bool = False, **details) -> Verdict:
    """The one way a checker finishes: build the Verdict, record a pass, print it unless `quiet`.

    table: a :class:`~flashsim.model.table.Table`, or :func:`io_rows` rows (shown with :func:`io_table`).
    A passing verdict whose details hold a non-finite error is turned into a fail (no ok about a NaN).
    """
    if isinstance(table, list):
        table = io_table(table) if table else None
    errors = [v for k, v in details.items() if "error" in k and isinstance(v, (int, float))]
    if passed and any(not math.isfinite(float(e)) for e in errors):
        passed, diagnosis = False, "non_finite"
        message = f"an error is not finite ({', '.join(f'{e}' for e in errors)}): {message}"
    v = Verdict(ex.id, ex.title, bool(passed), message, diagnosis or ("passed" if passed else "wrong"), table,
                details)
    if v.passed:
        progress.record(ex.id)
    return v if quiet else v.show()


# --- the learner's exceptions ------------------------------------------------------------------------------------
class LearnerError(Exception):
    """An exception raised inside the learner's code, with the learner's own line (file:line and the source)."""

    def __init__(self, exc: BaseException):
        self.original = exc
        self.not_implemented = isinstance(_root(exc), NotImplementedError)
        self.where, self.line = _learner_frame(exc)
        root = _root(exc)
        self.plain = f"{type(root).__name__}: {_plain_text(root)}"
        super().__init__(self.describe())

    def describe(self) -> str:
        if self.not_implemented:
            return ("not attempted yet: replace the stub's raise NotImplementedError with your code "
                    "(exercises.hint(...) opens a hint)")
        at = f" at {self.where}: `{self.line}`" if self.where else ""
        return f"your code raised {self.plain}{at}"


def _root(exc: BaseException) -> BaseException:
    """The innermost cause: Triton's InterpreterError wraps the learner's NameError (sometimes twice)."""
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = exc.__cause__ or (exc.__context__ if not exc.__suppress_context__ else None)
        if inner is None and type(exc).__name__ == "InterpreterError" and exc.args:
            break
        if inner is None:
            break
        exc = inner
    return exc


def _plain_text(exc: BaseException) -> str:
    """The message without the wrappers' reprs (no 'InterpreterError(\\'NameError(...)\\')')."""
    text = str(exc).strip()
    for _ in range(4):   # unwrap Name('...') / Name("...") reprs
        for prefix in ("InterpreterError(", "NameError(", "RuntimeError(", "ValueError(", "TypeError("):
            if text.startswith(prefix) and text.endswith(")"):
                text = text[len(prefix):-1].strip("'\"")
        text = text.replace("\\'", "'").replace('\\"', '"')
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__


def _library_dirs() -> tuple[str, ...]:
    """The folders of the imported top-level packages that lie outside the working folder: libraries wherever they
    were installed. Installed ones sit under site-packages, but a triton built from source, or one put on
    PYTHONPATH, does not, and its compiler's frames must not pass for the learner's. A package under the working
    folder (the learner's own helpers, the course's tests), or a namespace folder that holds it, stays the
    learner's."""
    try:
        cwd = os.path.abspath(os.getcwd()) + os.sep
    except OSError:   # the working folder was removed: every imported package counts as a library
        cwd = "\0"
    dirs = set()
    for name, module in list(sys.modules.items()):
        if "." in name or name == "__main__":
            continue
        for d in getattr(module, "__path__", None) or ():   # packages only (a namespace package has several)
            d = os.path.normpath(os.path.join(cwd, d)) + os.sep   # absolute already, but for a relative entry
            if not d.startswith(cwd) and not cwd.startswith(d):   # neither inside the working folder nor above it
                dirs.add(d)
    return tuple(dirs)


def _is_learner_file(filename: str, library_dirs: tuple[str, ...] = ()) -> bool:
    """Whether a traceback frame's file is the learner's: not flashsim, not an installed library (site-packages,
    the standard library) and not under one of ``library_dirs`` (:func:`_library_dirs`)."""
    try:
        f = os.path.abspath(filename)
    except OSError:   # a relative name ("<string>") and no working folder
        f = filename
    if f.startswith(_PACKAGE_DIR + os.sep) or f.startswith(library_dirs):
        return False
    markers = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep, os.sep + "lib" + os.sep
               + "python")
    return not any(m in f for m in markers) and not f.startswith("<frozen")


def _learner_frame(exc: BaseException) -> tuple[str, str]:
    """('file:line', 'source line') of the innermost traceback frame in the learner's code, over the chain."""
    found = ("", "")
    library_dirs = _library_dirs()
    chain, e, seen = [], exc, set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        chain.append(e)
        e = e.__cause__ or e.__context__
    for e in chain:
        for frame, lineno in traceback.walk_tb(e.__traceback__):
            fn = frame.f_code.co_filename
            if _is_learner_file(fn, library_dirs):
                line = linecache.getline(fn, lineno).strip()
                found = (f"{os.path.basename(fn) if not fn.startswith('<') else fn}:{lineno}", line)
    return found


def learner_error(exc: BaseException) -> LearnerError:
    """Wrap an exception from the learner's code (see :class:`LearnerError`)."""
    return exc if isinstance(exc, LearnerError) else LearnerError(exc)


def call_learner(fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)`` with numpy warnings silenced; any exception becomes a :class:`LearnerError`."""
    try:
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the learner's bug is reported, not raised
        raise LearnerError(exc) from exc


def error_verdict(ex: Exercise, err: LearnerError, where: str = "", quiet: bool = False) -> Verdict:
    """The verdict for an exception in the learner's code."""
    suffix = f" ({where})" if where and not err.not_implemented else ""
    return verdict(ex, False, err.describe() + suffix, quiet=quiet,
                   diagnosis="not_implemented" if err.not_implemented else "learner_error",
                   learner_line=err.line, learner_where=err.where)


# --- comparing numbers -------------------------------------------------------------------------------------------
def close(a, b, rel: float = 0.0, abs_: float = 0.0) -> bool:
    """Equal numbers or sequences of numbers to rel/abs tolerance (exact when both are 0); NaN is never close."""
    if isinstance(a, (tuple, list, np.ndarray)) or isinstance(b, (tuple, list, np.ndarray)):
        try:
            return len(a) == len(b) and all(close(x, y, rel, abs_) for x, y in zip(a, b))
        except TypeError:
            return False
    if isinstance(a, str) or isinstance(b, str) or isinstance(a, bool) or isinstance(b, bool):
        return a == b
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return False
    if math.isnan(a) or math.isnan(b):
        return False
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


def _same(a, b, rel: float, abs_: float) -> bool:
    """close(), except that NaN matches NaN: a suspect's formula reproduces a learner's NaN exactly."""
    if isinstance(a, (tuple, list, np.ndarray)) or isinstance(b, (tuple, list, np.ndarray)):
        try:
            return len(a) == len(b) and all(_same(x, y, rel, abs_) for x, y in zip(a, b))
        except TypeError:
            return False
    try:
        if math.isnan(float(a)) and math.isnan(float(b)):
            return True
    except (TypeError, ValueError):
        pass
    return close(a, b, rel, abs_)


def _finite(v) -> bool:
    if isinstance(v, (tuple, list)):
        return all(_finite(x) for x in v)
    if isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool):
        return math.isfinite(float(v))
    return True


def _short(v) -> Any:
    if isinstance(v, (float, np.floating)):
        return float(f"{float(v):.6g}")
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(f"{x:,}" if isinstance(x, (int, np.integer)) and not isinstance(x, bool)
                               else str(_short(x)) for x in v) + ")"
    return v


def _ratio(got, want) -> float | None:
    try:
        g, w = float(got), float(want)
    except (TypeError, ValueError):
        return None
    return g / w if w and math.isfinite(g) else None


@dataclass(frozen=True)
class Suspect:
    """A known wrong answer the evidence can point to: when the learner's values equal ``fn(*case)`` on every
    case (right and wrong ones alike), the diagnosis is ``key`` and the message ``says``."""

    key: str
    fn: Callable
    says: str


def check_cases(ex: Exercise, fn: Callable, cases: Sequence[tuple], expected: Callable, *, rel: float = 0.0,
                abs_tol: float = 0.0, header: Sequence[str] = ("case", "expected", "yours"),
                describe: Callable | None = None, suspects: Sequence[Suspect] = (),
                ragged: Callable | None = None, quiet: bool = False) -> Verdict:
    """Run ``fn(*case)`` against ``expected(*case)`` on every case; one row per case; diagnose the pattern.

    Diagnoses, from the evidence: a :class:`Suspect` the answers equal on every failing case; "constant_factor"
    (every wrong answer is the same multiple of the right one); "ragged" (wrong exactly on the cases
    ``ragged(*case)`` flags, e.g. N not a multiple of the block); "non_finite"; "wrong_type"; else "mismatch".
    """
    rows, bad, answers = [], [], []
    for case in cases:
        want = expected(*case)
        label = describe(*case) if describe else ", ".join(map(str, case))
        try:
            got = call_learner(fn, *case)
        except LearnerError as err:
            return error_verdict(ex, err, label, quiet=quiet)
        ok = _finite(got) and close(got, want, rel, abs_tol)
        answers.append((case, got))
        rows.append([label, _short(want), _short(got), "✔" if ok else "✘"])
        if not ok:
            bad.append((case, label, want, got))
    table = Table(list(header) + ["ok"], rows)
    if not bad:
        return verdict(ex, True, f"all {len(rows)} cases match", table=table, quiet=quiet)
    case, label, want, got = bad[0]
    first = f"for {label} expected {_short(want)}, got {_short(got)}"
    key, why = _diagnose_cases(bad, answers, cases, rel, abs_tol, suspects, ragged)
    return verdict(ex, False, f"{first} (✘ rows below): {why}", diagnosis=key, table=table, quiet=quiet)


def _diagnose_cases(bad, answers, cases, rel, abs_tol, suspects, ragged) -> tuple[str, str]:
    if any(got is None for _, _, _, got in bad):
        return "returned_none", "your function returned None: is a `return` missing?"
    for s in suspects:     # first: a known mistake explains even a NaN it produces (e.g. e^(+inf)·0)
        try:
            with np.errstate(all="ignore"):
                if all(_same(got, s.fn(*case), rel, abs_tol) for case, got in answers):
                    return s.key, s.says
        except Exception:  # noqa: BLE001 - a suspect that does not apply to a case simply does not match
            continue
    if any(not _finite(got) for _, _, _, got in bad):
        return "non_finite", "an answer is NaN or infinite where the exact one is finite"
    if any(isinstance(got, str) != isinstance(want, str) or
           (isinstance(want, (tuple, list)) and not isinstance(got, (tuple, list, np.ndarray)))
           for _, _, want, got in bad):
        return "wrong_type", "an answer has the wrong type: the spec says what each case must return"
    values = [repr(_short(got)) for _, got in answers]
    wants = {repr(_short(want)) for _, _, want, _ in bad}
    if len(answers) >= 2 and len(set(values)) == 1 and len(wants) > 1:
        return "constant_answer", (f"your function returns {values[0]} for every case: it does not depend on its "
                                   "arguments yet")
    ratios = [_ratio(got, want) for _, _, want, got in bad]
    if len(bad) >= 2 and all(r is not None and r != 0 for r in ratios) and \
            max(ratios) - min(ratios) <= 1e-9 * abs(max(ratios)):
        return "constant_factor", (f"every wrong answer is {ratios[0]:.6g}× the expected one: a constant factor "
                                   "is missing or extra")
    if ragged is not None:
        flagged = {tuple(map(str, c)) for c in cases if ragged(*c)}
        wrong = {tuple(map(str, c)) for c, _, _, _ in bad}
        if flagged and wrong == flagged:
            return "ragged", ("only the cases whose size is not a multiple of the block are wrong: what happens to "
                              "the last, partial block?")
    n = len(bad)
    return "mismatch", f"{n} of {len(cases)} cases differ"


# --- read/write tables -------------------------------------------------------------------------------------------
def _split(c) -> tuple[dict, dict]:
    if c is None:
        return {}, {}
    d = c.as_dict() if hasattr(c, "as_dict") else c
    if "loads" in d or "stores" in d:
        return dict(d.get("loads", {})), dict(d.get("stores", {}))
    return dict(d.get("read_bytes_by_tensor", {})), dict(d.get("write_bytes_by_tensor", {}))


def io_rows(got, want=None) -> list:
    """Rows (tensor, got read, got written, expected read, expected written) from two byte counts.

    Each count is a :class:`~flashsim.model.memory.Counters`, its ``as_dict()``, or ``{"loads": {...},
    "stores": {...}}`` (count_io's and kernel_io's per-launch view). The last row is the total.
    """
    gr, gw = _split(got)
    wr, ww = _split(want)
    names = sorted(set(gr) | set(gw) | set(wr) | set(ww), key=lambda n: (n == OUT_OF_BOUNDS, n))
    rows = [(n, gr.get(n, 0), gw.get(n, 0), wr.get(n, 0) if want is not None else None,
             ww.get(n, 0) if want is not None else None) for n in names if
            gr.get(n, 0) or gw.get(n, 0) or wr.get(n, 0) or ww.get(n, 0)]
    rows.append(("total", sum(gr.values()), sum(gw.values()), sum(wr.values()) if want is not None else None,
                 sum(ww.values()) if want is not None else None))
    return rows


def sram_overflow_verdict(ex: Exercise, err: "LearnerError", mem: Memory, where: str, table=None,
                          quiet: bool = False) -> Verdict:
    """The verdict for a loop that outgrew the checker's SRAM (just the tiles one step needs): the tiles still on
    chip are named, so a tile never freed shows as such (diagnosis "tile_not_freed")."""
    held = sorted(getattr(mem, "_sram", {}))
    return verdict(ex, False, f"SRAM overflow at {where}: the SRAM holds just the tiles one step needs, and "
                   f"{', '.join(held) or 'nothing'} were still on chip ({err.original}). A tile never freed: "
                   "mem.free(...) each tile once the loop is done with it", diagnosis="tile_not_freed",
                   table=table, quiet=quiet, still_on_chip=held)


def loop_table(counters, want=None, label: str = "the checker's loop", want_label: str = "expected") -> Table:
    """A read/write table of bytes the *checker's* loop moved (not the learner's), labelled for what it shows."""
    return io_table(io_rows(counters, want), got_label=label, want_label=want_label)


def io_differs(rows: list) -> list[str]:
    """The tensors (not the total) whose bytes differ from the expected ones; "?" is bytes outside every tensor."""
    return [r[0] for r in rows[:-1] if r[3] is not None and (r[1], r[2]) != (r[3], r[4])]


def io_table(rows: list, got_label: str = "yours", want_label: str = "expected") -> Table:
    """The read/write table of :func:`io_rows` rows; ✘ marks each tensor whose bytes differ (the messages say
    "✘ rows"), and bytes outside every tensor show as an out-of-bounds row. Label the columns "(yours)" only for
    bytes the learner's own code moved; without expected bytes the table has no expected columns (never "—")."""
    if rows and all(r[3] is None for r in rows):
        return Table(["tensor", f"read B ({got_label})", f"written B ({got_label})"],
                     [[_OOB_LABEL if r[0] == OUT_OF_BOUNDS else r[0], r[1], r[2]] for r in rows])
    out = []
    for name, r, w, wr, ww in rows:
        mark = "" if wr is None else ("✔" if (r, w) == (wr, ww) else "✘")
        out.append([_OOB_LABEL if name == OUT_OF_BOUNDS else name, r, w, wr, ww, mark])
    return Table(["tensor", f"read B ({got_label})", f"written B ({got_label})", f"read B ({want_label})",
                  f"written B ({want_label})", "ok"], out)


def first_line(text: str) -> str:
    """The first line of a verdict's printed text (what the tests read: it starts with ✔ or ✘)."""
    return str(text).splitlines()[0] if text else ""


# --- what an attention output's error says ----------------------------------------------------------------------

def _heads(x) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return x.reshape((-1,) + x.shape[-2:])                      # (G, N, d)


def _matches(out: np.ndarray, cand: np.ndarray, tol: float) -> bool:
    return bool(np.isfinite(cand).all() and np.abs(out - cand).max() < tol)


def _attention_where(q, k, v, tau: float, visible: np.ndarray) -> np.ndarray:
    """float64 attention over the keys `visible` (N, N) marks: a *hypothesis* about what a wrong kernel computed
    (the correct output is always :func:`reference_attention`'s)."""
    s = np.where(visible, (q @ np.swapaxes(k, -1, -2)) * tau, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


#: the public name of :func:`_attention_where` (chapter 08's sliding-window check compares with it)
attention_where = _attention_where


def diagnose_attention(out, q, k, v, *, causal: bool, tol: float, sm_scale: float | None = None,
                       block_n: int | None = None, block_m: int | None = None) -> tuple[str, str, dict]:
    """(diagnosis, message, evidence) for an attention output O (…, N, d) against the float64 reference.

    The diagnosis comes from the evidence only: where O is not finite (everywhere, the first query row, the
    last rows, only under large scores), which candidate it equals instead (attention without / with the causal
    mask, with another score scale, with the keys past N scoring 0), whether each row is the right row times a
    factor (the normalisation), whether the wrong rows are exactly those whose running max grows after the first
    key tile (a missing rescale: the error grows along the key axis), or whether only the last partial row block
    is wrong. "passed" when O is within `tol` everywhere.
    """
    out, q, k, v = _heads(out), _heads(q), _heads(k), _heads(v)
    n, d = q.shape[-2:]
    tau = softmax_scale(d) if sm_scale is None else sm_scale
    ref = reference_attention(q, k, v, causal, sm_scale=tau)
    ev: dict = {}
    bad = ~np.isfinite(out)
    if bad.any():
        rows = bad.any(axis=-1)                                   # (G, N)
        ev["non_finite_elements"] = int(bad.sum())
        first_row = np.zeros(n, bool)
        first_row[0] = True
        s_max = float(np.abs(q @ np.swapaxes(k, -1, -2)).max() * tau)
        if bad.all():
            return "all_non_finite", ("every output element is NaN or infinite, though the exact O is finite: "
                                      "nothing was added to the running sum (0/0), or every exponential "
                                      "overflowed"), ev
        if causal and (rows == first_row[None]).all():
            return "diagonal_masked", ("only query row 0 is NaN: it sees exactly one key, itself, so the mask hides "
                                       "the diagonal (key = query must stay visible)"), ev
        lo = int(np.argmax(rows.any(axis=0)))
        if rows.any(axis=0)[lo:].all() and lo > 0 and (block_m is None or lo % block_m == 0):
            return "rows_not_written", (f"rows {lo}..{n - 1} of O are NaN: they were never written. Is the last, "
                                        "partial block of rows skipped?"), ev
        if s_max * LOG2E > 100:
            return "overflow", (f"O is NaN/inf where the scores are large (|s| up to {s_max:.0f}): e^s overflows "
                                "float32 there. What keeps every exponent ≤ 0?"), ev
        return "non_finite", f"{int(bad.sum())} output elements are NaN/inf where the exact O is finite", ev
    err = np.abs(out - ref)
    ev["max_error"] = float(err.max())
    if ev["max_error"] < tol:
        return "passed", f"O matches float64 attention (max error {ev['max_error']:.2e})", ev
    if causal and _matches(out, reference_attention(q, k, v, False, sm_scale=tau), tol):
        return "causal_mask_missing", ("O equals attention *without* the causal mask: the masked region (keys after "
                                       "the query) contributes"), ev
    if causal and block_m and block_n:
        rows_end = np.minimum((np.arange(n) // block_m + 1) * block_m, n)          # the loop's bound per row
        tile_end = np.minimum(-(-rows_end // block_n) * block_n, n)                 # ... rounded to whole tiles
        if _matches(out, _attention_where(q, k, v, tau, np.arange(n)[None, :] < tile_end[:, None]), tol):
            return "causal_mask_missing", ("O equals attention over every key of the tiles the loop visits: the "
                                           "tiles past the diagonal are skipped, but inside a diagonal tile the "
                                           "keys after the query (the masked region) contribute"), ev
    if not causal and _matches(out, reference_attention(q, k, v, True, sm_scale=tau), tol):
        return "causal_mask_applied", "O equals *causal* attention, but this case is not causal", ev
    s_all = (q @ np.swapaxes(k, -1, -2)) * tau                    # (G, N, N)
    if causal:
        s_all = np.where(np.arange(n)[None, :] > np.arange(n)[:, None], -np.inf, s_all)
    p_cols = np.exp(s_all - s_all.max(-2, keepdims=True))
    p_cols = p_cols / p_cols.sum(-2, keepdims=True)
    if _matches(out, p_cols @ v, tol):
        return "softmax_wrong_axis", ("O equals attention whose softmax runs down the columns (over the queries): "
                                      "each query's probabilities must sum to 1 over the keys, along the last axis"), ev
    if causal:
        s_raw = (q @ np.swapaxes(k, -1, -2)) * tau
        full = np.exp(s_raw - s_raw.max(-1, keepdims=True))
        full = full / full.sum(-1, keepdims=True)
        after = np.where(np.arange(n)[None, :] > np.arange(n)[:, None], 0.0, full)
        if _matches(out, after @ v, tol):
            return "masked_after_softmax", ("O equals attention whose future keys were zeroed *after* the softmax: "
                                            "the rows no longer sum to 1. Mask the scores (−inf) before the "
                                            "softmax"), ev
    for key, eff, what in (("wrong_sm_scale", 1.0, "1 (the 1/√d is missing)"),
                           ("wrong_sm_scale", 1.0 / d, "1/d (1/√d applied twice)"),
                           ("wrong_sm_scale", LN2, "ln 2 (the scores were never multiplied by qk_scale)"),
                           ("exp_not_exp2", tau * LOG2E, "τ·log2(e): scores in log2 units went through e^x"),
                           ("exp2_not_exp", tau * LN2, "τ·ln 2: scores in natural units went through 2^x")):
        if abs(eff - tau) > 1e-12 and _matches(out, reference_attention(q, k, v, causal, sm_scale=eff), tol):
            ev["effective_scale"] = eff
            return key, (f"O equals attention with the scores scaled by {what} instead of τ = 1/√d "
                         f"(every score off by the factor {eff / tau:.4g})"), ev
    if block_n is not None and not causal and n % block_n:
        pad = block_n - n % block_n
        zk = np.concatenate([k, np.zeros(k.shape[:-2] + (pad, d))], axis=-2)
        zv = np.concatenate([v, np.zeros(v.shape[:-2] + (pad, d))], axis=-2)
        if _matches(out, reference_attention(q, zk, zv, False, sm_scale=tau), tol):
            return "keys_past_n_unmasked", (f"O equals attention over N + {pad} keys, the last {pad} scoring 0: the "
                                            "key rows past N in the last tile were not masked out"), ev
    if block_m is not None and n % block_m:
        last = (n // block_m) * block_m
        wrong_rows = err.max(-1) > tol                              # (G, N)
        if wrong_rows[:, last:].any() and not wrong_rows[:, :last].any():
            return "ragged_rows", (f"only rows {last}..{n - 1}, the last partial row block, are wrong: is that "
                                   "block skipped or cut short?"), ev
    dot = (out * ref).sum(-1)
    rr = (ref * ref).sum(-1)
    with np.errstate(all="ignore"):
        c = np.where(rr > 0, dot / rr, 1.0)                       # (G, N): best factor per row
    resid = np.abs(out - c[..., None] * ref).max()
    if resid < tol and np.abs(c - 1).max() > tol:
        ev["row_factor_range"] = (float(c.min()), float(c.max()))
        return "missing_normalisation", (f"every row of O is the exact row times a factor (from {c.min():.3g} to "
                                         f"{c.max():.3g}): the division by the softmax sum is wrong or missing"), ev
    row_err = err.max(-1)                                          # (G, N)
    wrong = row_err > tol
    if block_n is not None and n > block_n:
        s = (q @ np.swapaxes(k, -1, -2)) * tau
        if causal:
            s = np.where(np.arange(n)[None, :] > np.arange(n)[:, None], -np.inf, s)
        grows = s.max(-1) > s[..., :block_n].max(-1) + 1e-12       # the running max grows after tile 0
        ev["wrong_rows"], ev["rows_whose_max_grows"] = int(wrong.sum()), int(grows.sum())
        if wrong.any() and not (wrong & ~grows).any():
            return "missing_rescale", (f"the {int(wrong.sum())} wrong rows are all rows whose running max grows after "
                                       "the first key tile, and every row whose max sits in the first tile is right "
                                       "(the error grows along the key axis): what was summed under the old max "
                                       "must follow the new one"), ev
    g, r = np.unravel_index(int(np.argmax(row_err)), row_err.shape)
    return "wrong_output", (f"max |O − exact| = {ev['max_error']:.3g}, largest at query row {int(r)}; "
                            f"{int(wrong.sum())} of {wrong.size} rows are wrong"), ev


# --- a FlashAttention-2 forward on the simulated memory, with the learner's piece plugged in (chapters 05, 08) --
def random_qkv(n: int, d: int, seed: int, amplitude: float = 1.0) -> list[np.ndarray]:
    """Three (n, d) float32 arrays of standard normals (Q scaled by `amplitude`), the checkers' inputs."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((n, d)).astype(np.float32) for _ in range(3))
    return [q * np.float32(amplitude), k, v]


def reference_tile_kind(i: int, j: int, block_r: int, block_c: int, n: int) -> str:
    """"skip", "partial" or "full" for causal tile (i, j), from the model's visibility rule."""
    if not tile_visible(i, j, block_r, block_c, n):
        return "skip"
    r0, c0 = i * block_r, j * block_c
    return "full" if causal_mask(r0, min(block_r, n - r0), c0, min(block_c, n - c0)) is None else "partial"


def reference_tile_mask(i: int, j: int, block_r: int, block_c: int, n: int) -> np.ndarray:
    """(rows, cols) bool of causal tile (i, j), True where the key is visible (the model's rule, inverted)."""
    r0, c0 = i * block_r, j * block_c
    return ~causal_mask(r0, min(block_r, n - r0), c0, min(block_c, n - c0), always=True)


def fa2_on_memory(q, k, v, block_r: int, block_c: int, *, update=None, causal: bool = False, tile_kind=None,
                  tile_mask=None):
    """FA2-order forward on a simulated Memory (fp32) with pluggable pieces; returns (O, counters).

    update(m, l, acc, s, v) -> (m, l, acc): one tile's online-softmax update (default: the model's);
    tile_kind / tile_mask(i, j, Br, Bc, N): the causal tile rule (default: the model's visibility). Chapter 05
    plugs in the learner's update, chapter 08 the learner's tile rule. Any exception comes from the plugged piece
    and is raised as a :class:`LearnerError`.
    """
    update = update or online_softmax_update
    tile_kind = tile_kind or reference_tile_kind
    tile_mask = tile_mask or reference_tile_mask
    n, d = q.shape
    # the SRAM holds exactly one step's tiles (Q_i, K_j, V_j in fp32), as the learner's own loops get in 03.1/05.2
    mem = Memory(sram_capacity_bytes=(block_r + 2 * block_c) * d * 4, dtype="fp32", record_events=False)
    for name, x in (("Q", q), ("K", k), ("V", v)):
        mem.put(name, x)
    mem.empty("O", (n, d))
    scale = np.float32(softmax_scale(d))
    for i, i0 in enumerate(range(0, n, block_r)):
        rows = slice(i0, min(i0 + block_r, n))
        qi = mem.load("Q", rows, tile=(i,))                                    # (Br, d)
        r = qi.shape[0]
        m, l, acc = np.full(r, -np.inf, np.float32), np.zeros(r, np.float32), np.zeros((r, d), np.float32)
        for j, j0 in enumerate(range(0, n, block_c)):
            kind = call_learner(tile_kind, i, j, block_r, block_c, n) if causal else "full"
            if kind == "skip":
                continue
            cols = slice(j0, min(j0 + block_c, n))
            kj, vj = mem.load("K", cols, tile=(j,)), mem.load("V", cols, tile=(j,))  # (Bc, d) each
            s = (qi @ kj.T) * scale                                            # (Br, Bc)
            if kind == "partial":
                keep = np.asarray(call_learner(tile_mask, i, j, block_r, block_c, n), bool)
                s = np.where(keep, s, -np.inf)
            mem.compute(4 * r * kj.shape[0] * d, tile=(i, j))
            m, l, acc = (np.asarray(x, np.float32) for x in call_learner(update, m, l, acc, s, vj))
            mem.free(f"K{(j,)}", f"V{(j,)}")
        with np.errstate(invalid="ignore", divide="ignore"):
            mem.store("O", acc / l[:, None], rows, tile=(i,))
        mem.free(f"Q{(i,)}")
    return mem.hbm("O").copy(), mem.counters
