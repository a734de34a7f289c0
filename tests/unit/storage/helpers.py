"""Shared pieces of the storage tests: a tiny "collection" whose state is the list of batch numbers
it has applied, so that old state, new state and any mix of the two are easy to tell apart."""

from __future__ import annotations

from typing import Any

from roarsearch.storage.fs import FileSystem
from roarsearch.storage.store import CollectionStore


def recover(directory: str) -> list[int]:
    """Open ``directory`` with a plain filesystem and return the batch numbers its state holds."""
    store = CollectionStore(FileSystem(), directory)
    state, batches = store.open()
    applied = list(state["applied"]) if state is not None else []
    applied.extend(payload["n"] for _seq, payload in batches)
    return applied


def payload(n: int, size: int = 3) -> dict[str, Any]:
    return {"op": "add", "n": n, "records": [{"id": n * 100 + i, "text": f"batch {n}"} for i in range(size)]}
