"""flashsim.widgets, .plots and .exercises are explicit imports written by tools/gen_namespaces.py from each
chapter module's __all__; this fails when a chapter's __all__ changed and the tool was not run."""
import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import gen_namespaces  # noqa: E402


def test_the_flat_namespaces_are_current():
    assert gen_namespaces.main(["--check"]) == 0, "run: python tools/gen_namespaces.py"


def test_every_name_is_its_chapters_object():
    for namespace, (kind, _) in gen_namespaces.NAMESPACES.items():
        module = importlib.import_module(f"flashsim.{namespace}")
        for ch, names in gen_namespaces.exports(kind):
            chapter = importlib.import_module(f"flashsim.course.{ch}.{kind}")
            assert all(getattr(module, name) is getattr(chapter, name) for name in names), (namespace, ch)
