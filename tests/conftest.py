"""Fixtures shared by the course tests."""
import builtins

import pytest


@pytest.fixture
def hide_ipywidgets(monkeypatch):
    """Make `import ipywidgets` fail, as on the bare GPU machine (widgets must fall back to static figures)."""
    real_import = builtins.__import__

    def no_ipywidgets(name, *args, **kwargs):
        if name.startswith("ipywidgets"):
            raise ImportError("no ipywidgets here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ipywidgets)


@pytest.fixture
def assert_verdicts(capsys):
    """assert_verdicts(check, good, bad): the checker accepts `good` (prints ✔) and rejects each of `bad` (✘)."""
    def check_all(check, good, bad):
        assert check(good)
        assert capsys.readouterr().out.startswith("✔")
        for wrong in bad:
            assert not check(wrong)
            assert capsys.readouterr().out.startswith("✘")
    return check_all
