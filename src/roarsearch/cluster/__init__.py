"""Sharded collections on a Ray cluster (contract §10): ``ShardedEngine`` has the ``Engine`` API.

Needs the ``cluster`` extra (``pip install -e '.[cluster]'``). Layering: this package sits at the
top beside ``server`` and ``cli``; it imports ``engine`` and below, and nothing imports it back.
"""

from __future__ import annotations

from roarsearch.cluster.engine import ShardedEngine, shard_of

__all__ = ["ShardedEngine", "shard_of"]
