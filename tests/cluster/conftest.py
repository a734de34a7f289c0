"""One small local Ray for the cluster tests (2 CPUs, no dashboard), shut down after them.
Without Ray installed every cluster test is skipped (``pip install -e '.[cluster]'``)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

try:
    import ray
except ImportError:  # the cluster extra is not installed
    ray = None


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    if ray is None:
        pytest.skip("pip install -e '.[cluster]'")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 object_store_memory=256 * 1024 * 1024)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def engines(ray_session: Any) -> Iterator[tuple[Any, Any]]:
    """A sharded engine (3 shards) and one engine, to give the same calls and compare."""
    from roarsearch import Engine
    from roarsearch.cluster import ShardedEngine

    with tempfile.TemporaryDirectory() as directory, \
            ShardedEngine(directory + "/sharded", shards=3) as sharded, Engine() as single:
        yield sharded, single
