"""A writer process for the vector crash tests: writes numbered batches with vectors and
acknowledges each one.

Usage: python -m tests.crash.vector_writer DATA BATCHES BATCH_SIZE
Prints "ACK add <n>" after batch n (records n*1000 .. n*1000+size-1, vector ``vector_of(id, 0)``);
every third batch re-writes the previous batch with new vectors ("ACK upsert <n-1> <n>",
``vector_of(id, n)``), every fifth deletes record (n-2)*1000 ("ACK delete <id>"). The graph is
built from 40 vectors, so snapshots save and reopens view it.
"""

from __future__ import annotations

import sys

from roarsearch import Engine
from roarsearch.index import vectors

DIMENSIONS = 4


def vector_of(record_id: int, version: int) -> list[float]:
    return [float(record_id % 97), float(record_id // 1000), float(version), float((record_id * 7) % 13)]


def main() -> None:
    vectors.ANN_MIN_VECTORS = 40
    vectors.EXACT_MAX_CANDIDATES = 10
    data, batches, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    engine = Engine(data)
    engine.update_settings("c", {"vectors": {"v": {"dimensions": DIMENSIONS, "metric": "l2"}}})
    print("ACK settings 0", flush=True)
    for n in range(batches):
        engine.add_records("c", [{"id": n * 1000 + i, "batch": n, "_vectors": {"v": vector_of(n * 1000 + i, 0)}}
                                 for i in range(size)])
        print(f"ACK add {n}", flush=True)
        if n % 3 == 2:
            engine.add_records("c", [{"id": (n - 1) * 1000 + i, "batch": n - 1, "upsert": n,
                                      "_vectors": {"v": vector_of((n - 1) * 1000 + i, n)}} for i in range(size)])
            print(f"ACK upsert {n - 1} {n}", flush=True)
        if n % 5 == 4:
            engine.delete_records("c", ids=[(n - 2) * 1000])
            print(f"ACK delete {(n - 2) * 1000}", flush=True)
    engine.close()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
