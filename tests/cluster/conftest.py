"""One small local Ray for the cluster tests (2 CPUs, no dashboard), shut down after them.
Without Ray installed every cluster test is skipped (``pip install -e '.[cluster]'``)."""

from __future__ import annotations

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
