"""Storage micro-benchmark (not a test): durable append latency, snapshot write/read time and memory.

Run: ``python -m tests.unit.storage.bench_storage [--dir DIR]`` (DIR: where to write, default a
temporary folder under /tmp; ~1.2 GB of free space and ~2.5 GB of memory for the 500 MiB case).
Prints the figures quoted in docs/durability.md.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import msgpack
import numpy as np

from roarsearch.storage.fs import FileSystem
from roarsearch.storage.snapshot import write_snapshot
from roarsearch.storage.wal import WriteAheadLog

READ_IN_FRESH_PROCESS = """
import sys, threading, time
from roarsearch.storage.fs import FileSystem
from roarsearch.storage.snapshot import read_snapshot
def anon():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssAnon")) / 1024
peak, done = [0.0], threading.Event()
def sample():
    while not done.is_set():
        peak[0] = max(peak[0], anon()); time.sleep(0.005)
sampler = threading.Thread(target=sample); base = anon(); sampler.start()
start = time.perf_counter(); state = read_snapshot(FileSystem(), sys.argv[1]); elapsed = time.perf_counter() - start
done.set(); sampler.join()
print(f"{elapsed:.2f} {max(peak[0], anon()) - base:.0f}")
"""


def rss_anon_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssAnon")) / 1024


def bench_appends(directory: str) -> None:
    wal = WriteAheadLog(FileSystem(), os.path.join(directory, "wal.rlog"))
    list(wal.open())
    single = []
    for i in range(300):
        start = time.perf_counter()
        wal.append({"op": "add", "records": [{"id": i, "title": "The Matrix", "year": 1999}]})
        single.append(time.perf_counter() - start)
    single.sort()
    print(f"1-record durable append: p50 {statistics.median(single) * 1e3:.3f} ms, p99 {single[296] * 1e3:.3f} ms (n=300)")
    fd = os.open(wal.path, os.O_RDONLY)
    fsyncs = []
    for _ in range(100):
        with open(os.path.join(directory, "scratch"), "ab") as scratch:
            scratch.write(b"x" * 80)
        start = time.perf_counter()
        os.fsync(fd)
        fsyncs.append(time.perf_counter() - start)
    os.close(fd)
    print(f"  fsync alone: p50 {statistics.median(fsyncs) * 1e3:.3f} ms")
    batch = [{"id": i, "title": f"movie title number {i}", "year": 1900 + i % 120, "genres": ["Drama", "Comedy"],
              "rating": i / 7} for i in range(10_000)]
    encodes, appends = [], []
    for _ in range(10):
        start = time.perf_counter()
        body = msgpack.packb({"op": "add", "records": batch}, use_bin_type=True)
        encodes.append(time.perf_counter() - start)
        start = time.perf_counter()
        wal.append({"op": "add", "records": batch})
        appends.append(time.perf_counter() - start)
    print(f"10,000-record durable append ({len(body) / 2**20:.2f} MiB): median {statistics.median(appends) * 1e3:.1f} ms, "
          f"of which msgpack encoding {statistics.median(encodes) * 1e3:.1f} ms")


def bench_snapshot(directory: str, size_mib: int) -> None:
    """A state shaped like an index: 3/4 in 4 MiB binaries (bitmaps, numpy buffers), 1/4 small records."""
    small = size_mib * 2**20 // 4 // 110
    state = {"format": 1, "last_seq": 1, "index": {
        "bitmaps": [np.random.bytes(4 << 20) for _ in range(size_mib * 3 // 16)],
        "payloads": [np.random.bytes(100) for _ in range(small)],
        "record_ids": list(range(small)),
    }}
    path = os.path.join(directory, f"snapshot-{size_mib}.rsnap")
    gc.collect()
    base = rss_anon_mb()
    start = time.perf_counter()
    size = write_snapshot(FileSystem(), path, state)
    written = time.perf_counter() - start
    grown = rss_anon_mb() - base
    del state
    output = subprocess.run([sys.executable, "-c", READ_IN_FRESH_PROCESS, path], capture_output=True, text=True, check=True)
    read_seconds, read_memory = output.stdout.split()
    print(f"snapshot {size / 2**20:.0f} MiB: write {written:.2f} s (private memory +{grown:.0f} MiB beyond the state); "
          f"read in a fresh process {read_seconds} s, private memory peak +{read_memory} MiB")
    os.remove(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None)
    directory = tempfile.mkdtemp(dir=parser.parse_args().dir)
    try:
        bench_appends(directory)
        for size_mib in (200, 500):
            bench_snapshot(directory, size_mib)
    finally:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
