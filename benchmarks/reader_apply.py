"""What an add batch costs a reader of ``serve --workers``, with and without the writer's analysis.

A durable collection of package records is built (or copied from ``--built``), then batches of
new records are written to it by a writer ``Engine`` that files each batch's analysis
(``storage/shared_analysis.py``), as the service's writer does. Two followers
(``FollowerEngine``) apply every batch: one takes the writer's analysis, the other analyses the
texts itself, as a reader does without the writer's analysis. Printed: the median CPU time of the writer's add
and of each follower's catch-up, per batch (``time.thread_time``: only the thread's own CPU).

    python -m benchmarks.reader_apply [--records 100000] [--batches 15] [--batch-size 1000] [--built DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from typing import Any

from benchmarks.datasets import iter_batches, jsonl_path
from roarsearch import Engine
from roarsearch.engine.follower import FollowerEngine
from roarsearch.server.workers import committed_positions
from roarsearch.storage.follow import CommitBoard
from roarsearch.storage.shared_analysis import SharedAnalyses

COLLECTION = "packages"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000, help="package records in the collection")
    parser.add_argument("--batches", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--built", help="a data directory holding the collection already (copied)")
    args = parser.parse_args()
    records: list[dict[str, Any]] = [record for batch in iter_batches(jsonl_path(COLLECTION, args.records)) for record in batch]
    with tempfile.TemporaryDirectory(prefix="reader-apply-") as folder:
        data = os.path.join(folder, "data")
        if args.built:
            shutil.copytree(args.built, data)
        else:
            with Engine(data) as engine:
                engine.add_batches(COLLECTION, (records[start:start + 10_000] for start in range(0, len(records), 10_000)))
        analyses = os.path.join(folder, "analyses")
        os.mkdir(analyses)
        writer = Engine(data)
        writer._collections[COLLECTION].shared_analyses = SharedAnalyses(analyses)
        board = CommitBoard(os.path.join(folder, "board"), create=True)
        board.publish(committed_positions(writer), 0)
        taking = FollowerEngine(data, CommitBoard(os.path.join(folder, "board")), shared_analyses=SharedAnalyses(analyses))
        analysing = FollowerEngine(data, CommitBoard(os.path.join(folder, "board")))
        costs: dict[str, list[float]] = {"writer add": [], "reader taking the analysis": [], "reader analysing": []}
        first_id = 10**9
        for number in range(args.batches):
            chosen = records[(number * args.batch_size) % len(records):][:args.batch_size]
            batch = [{**record, "id": first_id + number * args.batch_size + i} for i, record in enumerate(chosen)]
            started = time.thread_time()
            writer.add_records(COLLECTION, batch)
            costs["writer add"].append(time.thread_time() - started)
            board.publish(committed_positions(writer), 0)
            for name, follower in (("reader taking the analysis", taking), ("reader analysing", analysing)):
                started = time.thread_time()
                follower.catch_up()
                costs[name].append(time.thread_time() - started)
        assert taking.shared_analyses is not None
        print(f"{args.batches} batches of {args.batch_size:,} package records added to {args.records:,}; "
              f"the taking reader found {taking.shared_analyses.taken} analyses, analysed {taking.shared_analyses.missed}")
        for name, seconds in costs.items():
            print(f"{name}: {statistics.median(seconds) * 1000:.1f} ms CPU per batch (median)")
        for engine in (writer, taking, analysing):
            engine.close()


if __name__ == "__main__":
    main()
