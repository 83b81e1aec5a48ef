"""Shared test set-up: hypothesis profiles and the device fixture.

Profiles (choose with TINYATTN_PROFILE): ``fast`` (the default, keeps the suite within a
few minutes on 2 cores), ``ci`` (``fast``, derandomized, used when CI=true) and
``thorough`` (many more examples, for a sceptic with time).
"""

import os

import pytest
from hypothesis import HealthCheck, settings

_common = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
settings.register_profile("fast", max_examples=15, **_common)
settings.register_profile("ci", max_examples=15, derandomize=True, print_blob=True, **_common)
settings.register_profile("thorough", max_examples=300, **_common)
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
