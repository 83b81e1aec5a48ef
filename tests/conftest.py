"""Shared test set-up: hypothesis profiles, the device fixture and the route fixture (the reference or compiled).

Profiles (choose with TINYATTN_PROFILE): ``fast`` (the default, keeps the suite within a
few minutes on 2 cores), ``ci`` (``fast``, derandomized, used when CI=true),
``thorough`` (many more examples, for a sceptic with time) and ``gpu`` (few examples, no shrinking: what
``benchmarks/gpu_check.py`` runs on CuPy).
"""

import os

import pytest
from hypothesis import HealthCheck, Phase, settings

_common = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
settings.register_profile("fast", max_examples=15, **_common)
settings.register_profile("ci", max_examples=15, derandomize=True, print_blob=True, **_common)
settings.register_profile("thorough", max_examples=300, **_common)
# the GPU check's profile: each CuPy kernel compiles on first use, so few examples, and a failure is reported as
# found rather than shrunk
settings.register_profile("gpu", max_examples=4, derandomize=True, phases=(Phase.explicit, Phase.generate),
                          **_common)
settings.load_profile(os.environ.get("TINYATTN_PROFILE", "ci" if os.environ.get("CI") == "true" else "fast"))


def _gpu_available():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


GPU = _gpu_available()
DEVICES = ["cpu", "strict", pytest.param("cuda", marks=pytest.mark.cuda)]


def pytest_collection_modifyitems(config, items):
    if GPU:
        return
    skip = pytest.mark.skip(reason="CuPy with a GPU is not available on this machine")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Report every test skipped for want of a GPU at one place, so that the summary (``-ra``)
    folds them into one line with their count instead of one line per test."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not GPU and "cuda" in item.keywords and isinstance(report.longrepr, tuple):
        report.longrepr = (__file__, None, report.longrepr[2])  # no line: pytest folds these by file and reason


@pytest.fixture(params=DEVICES)
def device(request):
    """Each test that takes ``device`` runs on NumPy, on the strict backend, and on CuPy."""
    return request.param


def _reference(model):
    """The model or function as written: what runs when nothing is compiled."""
    return model


@pytest.fixture(params=["compiled", "reference"])
def route(request):
    """A test that takes ``route`` runs twice: once with ``route = ta.compile`` (the fused forms swapped in), once
    with ``route`` the identity (the reference definitions); it passes its models and library functions through
    ``route`` (``route(model)``, ``route(F.layer_norm)``)."""
    import tinyattn as ta

    return ta.compile if request.param == "compiled" else _reference
