"""The CI rule of ``tests/conftest.py``: with ``ROARSEARCH_CI=1`` a skip fails the run, whether a
test skips itself or a whole module skips while it is collected (``pytest.importorskip``, a
module-level ``pytest.skip``); without it, both are plain skips.

Each case runs pytest in a child process over a directory holding a copy of the project's
conftest and one test module, so the hooks are exercised exactly as a run uses them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

MODULES = {
    "test_skip": "import pytest\n\n\ndef test_needs_something() -> None:\n    pytest.skip('not installed')\n",
    "module_skip": "import pytest\n\npytest.skip('not installed', allow_module_level=True)\n\n\ndef test_never() -> None:\n    pass\n",
    "importorskip": "import pytest\n\npytest.importorskip('a_module_that_is_not_there')\n\n\ndef test_never() -> None:\n    pass\n",
}


def _run(tmp_path: Path, module: str, in_ci: bool) -> subprocess.CompletedProcess[str]:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")  # not the project's options
    (tmp_path / f"test_{module}.py").write_text(MODULES[module], encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if key != "ROARSEARCH_CI"}
    if in_ci:
        env["ROARSEARCH_CI"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_skip_fails_in_ci(tmp_path: Path, module: str) -> None:
    result = _run(tmp_path, module, in_ci=True)
    assert result.returncode != 0, result.stdout
    assert "skipped in CI (ROARSEARCH_CI=1)" in result.stdout
    assert "not installed" in result.stdout or "a_module_that_is_not_there" in result.stdout


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_skip_is_a_skip_outside_ci(tmp_path: Path, module: str) -> None:
    result = _run(tmp_path, module, in_ci=False)
    # A module skipped whole leaves no test to run: pytest's "no tests collected", not a failure.
    assert result.returncode in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED), result.stdout
    assert "skipped" in result.stdout and "failed" not in result.stdout and "error" not in result.stdout
