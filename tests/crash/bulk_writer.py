"""A writer process for crash tests of the bulk path (``Engine.add_batches``).

Usage: python -m tests.crash.bulk_writer DATA BATCHES BATCH_SIZE
Feeds batches from a generator; batch n adds records n*1000 .. n*1000+size-1 with {"batch": n},
and every fourth batch also upserts two records of the batch before it. Before handing over
batch n it prints "WRITTEN <n-2>" (flushed): the bulk path reads one batch ahead, so by the time
it asks for batch n, every batch up to n-2 has been written (its add returned).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import roarsearch.engine.collection as collection_module
from roarsearch import Engine


def batches(count: int, size: int) -> Iterator[list[dict]]:
    for n in range(count):
        if n >= 2:
            print(f"WRITTEN {n - 2}", flush=True)
        batch = [{"id": n * 1000 + i, "batch": n, "text": f"word{n} common {'long ' * (i % 5)}"} for i in range(size)]
        if n % 4 == 3:
            batch += [{"id": (n - 1) * 1000 + i, "batch": n - 1, "upsert": n, "text": "common"} for i in range(2)]
        yield batch


def main() -> None:
    data, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    collection_module.WORKER_MIN_VALUES = 1  # small batches through the analysis worker too
    with Engine(data) as engine:
        engine.add_batches("c", batches(count, size))
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
