"""A writer process for crash tests: writes numbered batches and acknowledges each one.

Usage: python -m tests.crash.writer DATA BATCHES BATCH_SIZE
Prints "ACK <n>" (flushed) only after the write of batch n returned. Batch n adds records
n*1000 .. n*1000+size-1 with {"batch": n}; every third batch also re-writes the previous batch's
records (upsert, {"batch": n, "upsert": True}) and every fifth deletes one record of batch n-2 by id.
"""

from __future__ import annotations

import sys

from roarsearch import Engine


def main() -> None:
    data, batches, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    engine = Engine(data)
    for n in range(batches):
        engine.add_records("c", [{"id": n * 1000 + i, "batch": n, "text": f"word{n} common"} for i in range(size)])
        print(f"ACK add {n}", flush=True)
        if n % 3 == 2:
            engine.add_records("c", [{"id": (n - 1) * 1000 + i, "batch": n - 1, "upsert": n, "text": "common"}
                                     for i in range(size)])
            print(f"ACK upsert {n - 1} {n}", flush=True)
        if n % 5 == 4:
            engine.delete_records("c", ids=[(n - 2) * 1000])
            print(f"ACK delete {(n - 2) * 1000}", flush=True)
    engine.close()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
