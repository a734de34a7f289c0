"""A driver process for the cluster crash test: writes numbered batches through a ShardedEngine.

Usage: python -m tests.cluster.writer DATA SHARDS BATCHES SIZE [settings]
Prints "READY" once open, then "ACK <k>" (flushed) after operation k returned. The operations
are those of :func:`operations`, or with ``settings`` of :func:`settings_operations` (shared with
the test, which replays them into a model).
"""

from __future__ import annotations

import sys
from typing import Any

from roarsearch.cluster import ShardedEngine


def operations(batches: int, size: int) -> list[tuple[str, Any]]:
    """Adds of fresh records (spanning every shard), upserts of the previous batch, deletes by ids."""
    ops: list[tuple[str, Any]] = []
    for n in range(batches):
        ops.append(("add", [{"id": n * 100 + i, "batch": n, "text": f"word{n} common"} for i in range(size)]))
        if n % 3 == 2:
            ops.append(("add", [{"id": (n - 1) * 100 + i, "batch": n - 1, "upsert": n, "text": "common"} for i in range(size)]))
        if n % 4 == 3:
            ops.append(("delete", [(n - 2) * 100 + i for i in range(0, size, 2)]))
    return ops


def settings_operations(batches: int) -> list[tuple[str, str, Any]]:
    """Settings updates of a lasting collection and of fresh ones (created on every shard), and
    drops of the fresh ones: ``(kind, collection, settings or None)``."""
    ops: list[tuple[str, str, Any]] = []
    for n in range(batches):
        ops.append(("settings", "c", {"stopWords": [f"w{n}"], "synonyms": {"a": [f"v{n}"]}}))
        ops.append(("settings", f"d{n}", {"customRanking": [f"-x{n}"]}))
        if n % 2 == 1:
            ops.append(("drop", f"d{n - 1}", None))
    return ops


def apply_settings(model: dict[str, dict[str, Any]], op: tuple[str, str, Any]) -> None:
    """``model``: every collection's whole settings (as ``get_settings`` gives them)."""
    from roarsearch.engine.settings import updated_settings
    from roarsearch.query.settings import settings_from_dict

    kind, collection, update = op
    if kind == "drop":
        model.pop(collection, None)
    else:
        model[collection] = updated_settings(settings_from_dict(model.get(collection)), update).to_dict()


def apply(model: dict[Any, dict[str, Any]], op: tuple[str, Any]) -> None:
    kind, argument = op
    if kind == "add":
        for record in argument:
            model[record["id"]] = record
    else:
        for record_id in argument:
            model.pop(record_id, None)


def main() -> None:
    data, shards, batches, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    engine = ShardedEngine(data, shards=shards)
    print("READY", flush=True)
    if sys.argv[5:] == ["settings"]:
        for number, (kind, collection, update) in enumerate(settings_operations(batches)):
            if kind == "drop":
                engine.drop_collection(collection)
            else:
                engine.update_settings(collection, update)
            print(f"ACK {number}", flush=True)
        engine.close()
        print("DONE", flush=True)
        return
    for number, (kind, argument) in enumerate(operations(batches, size)):
        if kind == "add":
            engine.add_records("c", argument)
        else:
            engine.delete_records("c", ids=argument)
        print(f"ACK {number}", flush=True)
    engine.close()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
