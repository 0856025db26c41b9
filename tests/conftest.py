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


# --- hypothesis profiles (issue 13) ----------------------------------------------------------------------------
# Tests that give no max_examples of their own take it from the profile:
# - "dev" (default at a desk): quick;
# - "ci": at least 2,000 generated cases per run over the suite (CI=true, or under `make test`, which sets
#   MAKELEVEL), derandomized so that a CI failure reproduces;
# - "deep": the 20,000+ case run recorded in benchmarks/results/ (`pytest --hypothesis-profile=deep`).
# `--hypothesis-profile NAME` or HYPOTHESIS_PROFILE=NAME picks one explicitly.
import os as _os

from hypothesis import HealthCheck as _HealthCheck, settings as _settings

_common = dict(deadline=None, suppress_health_check=[_HealthCheck.too_slow, _HealthCheck.data_too_large,
                                                     _HealthCheck.filter_too_much])
_settings.register_profile("dev", max_examples=40, **_common)
_settings.register_profile("ci", max_examples=200, derandomize=True, print_blob=True, **_common)
# FLASHSIM_DEEP_EXAMPLES sizes the deep profile (a short run first measures the rate of cases per second)
_settings.register_profile("deep", max_examples=int(_os.environ.get("FLASHSIM_DEEP_EXAMPLES", "2500")),
                           print_blob=True, **_common)
_settings.load_profile(_os.environ.get("HYPOTHESIS_PROFILE")
                       or ("ci" if _os.environ.get("CI") == "true" or "MAKELEVEL" in _os.environ else "dev"))


def pytest_configure(config):
    """Checker passes are recorded as the learner's progress (flashsim.course.kit.progress): every test run, the
    notebooks' kernels included (they inherit the environment), records into a temporary directory, never ~."""
    import os
    import tempfile
    os.environ.setdefault("FLASHSIM_DATA_DIR", tempfile.mkdtemp(prefix="flashsim-tests-"))
