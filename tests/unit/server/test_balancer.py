"""``server.workers.Balancer``: a worker over its share of the connections closes one per interval;
one at or under its share never does."""

from __future__ import annotations

from pathlib import Path

import pytest

from roarsearch.server import workers
from roarsearch.server.workers import Balancer


def test_only_a_worker_over_its_share_sheds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(workers.time, "monotonic", lambda: now[0])
    path = str(tmp_path / "balance")
    busy, idle = Balancer(path, 0, 2, create=True), Balancer(path, 1, 2)
    busy.connections, idle.connections = set(range(5)), {0}
    assert not idle.shed()  # 1 of 6: under its share (3)
    assert busy.shed()  # 5 of 6: over it
    assert not busy.shed()  # at most one per interval ...
    now[0] += 2 * workers.SHED_INTERVAL_S
    assert busy.shed()  # ... and again after it
    idle.connections = {0, 1}
    assert not idle.shed()
    busy.connections = set(range(3))
    now[0] += 2 * workers.SHED_INTERVAL_S
    assert not busy.shed()  # 3 of 5: the share rounds up to 3, so it keeps them
    idle.connections = set(range(4))
    busy.connections = set(range(4))
    assert not idle.shed() and not busy.shed()  # even
    busy.close()
    idle.close()
