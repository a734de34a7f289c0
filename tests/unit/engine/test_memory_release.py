"""This module tests the following properties:

- on glibc, free heap pages are handed back through ``malloc_trim``; elsewhere the call does nothing;
- a big add (at least ``RELEASE_MEMORY_RECORDS`` records) and a snapshot release free memory
  afterwards, a small add (a live service's batch) does not.
"""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from roarsearch import Engine
from roarsearch.engine import collection as collection_module
from roarsearch.memory import _MALLOC_TRIM, release_free_memory


def test_trim_is_found_on_glibc_and_harmless() -> None:
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert _MALLOC_TRIM is not None
    release_free_memory()


def test_big_adds_and_snapshots_release_memory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[str] = []
    monkeypatch.setattr(collection_module, "release_free_memory", lambda: calls.append("released"))
    monkeypatch.setattr(collection_module, "RELEASE_MEMORY_RECORDS", 50)
    with Engine() as engine:
        engine.add_records("c", [{"id": i, "t": "small"} for i in range(49)])
        assert calls == []
        engine.add_records("c", [{"id": i, "t": "big"} for i in range(50)])
        assert calls == ["released"]
    with Engine(tmp_path) as engine:
        engine.add_records("c", [{"id": 1, "t": "small"}])
        calls.clear()
    assert calls == ["released"]  # the snapshot at close
