"""Shared test settings: hypothesis profiles (``ci`` is the default; ``dev`` is quicker), and CI's
rule that nothing is skipped.

Tests that need an optional extra (``bench``: tantivy, Whoosh) or a system browser are skipped on a
machine without them, with a reason that names the command installing them, so that the README's
``pip install -e '.[test]' && python -m pytest`` passes with only Python and pip. CI (``.ci/run``)
installs everything and sets ``ROARSEARCH_CI=1``: there, a skip — of a test, or of a whole module
while it is collected — is reported as a failure, so a missing install step can never pass unnoticed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.register_profile(
    "dev", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

IN_CI = os.environ.get("ROARSEARCH_CI") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI (ROARSEARCH_CI=1), where every test must run: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """The same rule for a module skipped whole while it is collected (``pytest.importorskip`` or
    ``pytest.skip(allow_module_level=True)`` at its top), which no test report sees."""
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI (ROARSEARCH_CI=1), where every test must run: {reason}"
