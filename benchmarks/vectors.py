"""Vector search: roarsearch (approximate and exact) against its ANN library alone (usearch), numpy
brute force (the exact answer), LanceDB and Typesense's vector search, in one run.

Real text, real vectors, no network: each corpus's text is embedded here with scikit-learn
(TF-IDF, then a truncated SVD to ``--dims`` dimensions, rows normalised), fitted on a sample of
the records, and cached in ``benchmarks/.cache/``. The queries are real text too: the summary of a
package, or a film's title with its genres, of records drawn at random, embedded by the same model.
Filters select a share of the records through a field ``bucket`` (0..99, drawn at random per
record): ``bucket < 50``, ``< 10``, ``< 1`` select 50 %, 10 % and 1 %.

For each engine and filter: recall@10 against the exact answer (numpy over the filtered rows),
and the p50 / p95 latency of a k = 10 search (in-process calls for the libraries; Typesense over
HTTP on localhost, with its own ``search_time_ms`` beside). Then: vector add rate (records holding
only an id, the bucket and a vector, in batches of 10,000) against usearch's own build of the same
vectors, memory of the vector index against the raw float32 bytes plus the graph, open time of a
saved collection, and the hybrid figure: words + vector + a filter + two text facets against the
keyword search and the vector search alone. The add rate's ratio to usearch is measured in pairs
run in turn (``--add-rounds``, default 3: roarsearch's durable add with the records built before
the clock starts, then usearch's build, ...), the median of the pairwise ratios.

    python -m benchmarks.vectors [--records 100000] [--dims 192] [--corpora packages,movies]
                                 [--engines roarsearch,usearch,numpy,lancedb,typesense] [--queries 200] [--tag T]
                                 [--add-rounds 3] [--hybrid-only]

Results go to ``benchmarks/results/vectors-<corpus>-<records>.json`` and are printed as a table.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.datasets import CACHE, records

RESULTS = Path(__file__).resolve().parent / "results"
FILTERS = {"none": None, "50%": 50, "10%": 10, "1%": 1}
K = 10
SVD_SAMPLE = 50_000
BATCH = 10_000


# ---------------------------------------------------------------- corpus and embeddings

def texts_of(corpus: str, record: dict[str, Any]) -> tuple[str, str]:
    """(the record's text, its query text)."""
    if corpus == "packages":
        return (f"{record['name']} {record['summary']} {record['description']}", record["summary"])
    people = " ".join(record.get("director", []) + record.get("writers", []) + record.get("cast", [])[:4])
    tags = " ".join(record.get("genres", []) + record.get("languages", []) + record.get("countries", []))
    return (f"{record['title']} {people} {tags}", f"{record['title']} {' '.join(record.get('genres', []))}")


def embedded(corpus: str, n: int, dims: int, queries: int) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray]:
    """The corpus's first ``n`` records, their vectors and the query vectors (cached)."""
    rows = records(corpus, n)
    cache = CACHE / f"vectors-{corpus}-{n}-{dims}-{queries}.npz"
    if cache.exists():
        saved = np.load(cache)
        return rows, saved["vectors"], saved["queries"]
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import normalize

    started = time.perf_counter()
    texts = [texts_of(corpus, record) for record in rows]
    rng = random.Random(7)
    sample = rng.sample(range(n), min(n, SVD_SAMPLE))
    tfidf = TfidfVectorizer(sublinear_tf=True, min_df=2, max_features=200_000, dtype=np.float32)
    fitted = tfidf.fit_transform([texts[i][0] for i in sample])
    svd = TruncatedSVD(n_components=dims, random_state=7, algorithm="randomized", n_iter=4).fit(fitted)
    vectors = np.vstack([svd.transform(tfidf.transform([text for text, _ in texts[start:start + BATCH]]))
                         for start in range(0, n, BATCH)])
    vectors = normalize(vectors).astype(np.float32)
    picked = rng.sample(range(n), queries)
    query_vectors = normalize(svd.transform(tfidf.transform([texts[i][1] for i in picked]))).astype(np.float32)
    # A query whose words the model never saw embeds to zero: replace it by its record's vector.
    empty = ~query_vectors.any(axis=1)
    query_vectors[empty] = vectors[np.asarray(picked)[empty]]
    CACHE.mkdir(parents=True, exist_ok=True)
    np.savez(cache, vectors=vectors, queries=query_vectors)
    print(f"embedded {corpus} {n} x {dims} in {time.perf_counter() - started:.0f} s")
    return rows, vectors, query_vectors


def buckets_of(n: int) -> np.ndarray:
    return np.random.default_rng(11).integers(0, 100, n).astype(np.int64)


def exact_answers(vectors: np.ndarray, queries: np.ndarray, mask: np.ndarray | None) -> tuple[list[list[int]], list[float]]:
    """The exact top 10 of each query (doc positions) and numpy's own latency per query."""
    answers, times = [], []
    for query in queries:
        started = time.perf_counter()
        if mask is None:
            scores = vectors @ query
            positions = np.arange(vectors.shape[0])
        else:
            positions = np.flatnonzero(mask)
            scores = vectors[positions] @ query
        top = np.argpartition(-scores, K)[:K] if scores.size > K else np.arange(scores.size)
        top = top[np.lexsort((positions[top], -scores[top]))]
        times.append(time.perf_counter() - started)
        answers.append(positions[top].tolist())
    return answers, times


def recall(found: list[list[int]], exact: list[list[int]]) -> float:
    return sum(len(set(a) & set(b)) for a, b in zip(found, exact)) / max(1, sum(len(b) for b in exact))


def timed(run: Callable[[np.ndarray], list[int]], queries: np.ndarray) -> tuple[list[list[int]], list[float]]:
    for query in queries[:5]:  # warm up
        run(query)
    found, times = [], []
    for query in queries:
        started = time.perf_counter()
        found.append(run(query))
        times.append(time.perf_counter() - started)
    return found, times


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000


# ---------------------------------------------------------------- engines

def run_roarsearch(corpus: str, rows: list[dict[str, Any]], vectors: np.ndarray, buckets: np.ndarray,
                   queries: np.ndarray, exact: dict[str, list[list[int]]], out: dict[str, Any]) -> None:
    import psutil

    from roarsearch import Engine
    from roarsearch.index import vectors as vector_index

    n, dims = vectors.shape
    folder = tempfile.mkdtemp(prefix="bench-vectors-")
    try:
        # Add rate: records holding only an id, the bucket and a vector.
        process = psutil.Process()
        gc.collect()
        rss_before = process.memory_info().rss
        with Engine(os.path.join(folder, "v")) as engine:
            engine.update_settings("v", {"vectors": {"text": {"dimensions": dims, "metric": "cosine"}}})
            started = time.perf_counter()
            engine.add_batches("v", ([{"id": position, "bucket": int(buckets[position]),
                                       "_vectors": {"text": vectors[position].tolist()}}
                                      for position in range(start, min(n, start + BATCH))]
                                     for start in range(0, n, BATCH)))
            add_s = time.perf_counter() - started
            space = engine._collection("v").index.vectors.spaces["text"]
            graph_bytes = int(space.graph.memory_usage) if space.graph is not None else 0
            out["add"] = {"records_per_s": round(n / add_s), "seconds": round(add_s, 2),
                          "graph": space.graph is not None}
            out["memory"] = {"raw_float32_mb": round(n * dims * 4 / 2**20, 1),
                             "matrix_mb": round((space.matrix.nbytes + space.norms.nbytes) / 2**20, 1),
                             "graph_mb": round(graph_bytes / 2**20, 1),
                             "rss_delta_mb": round((process.memory_info().rss - rss_before) / 2**20, 1)}
            out["memory"]["ratio_to_raw_plus_graph"] = round(
                (space.matrix.nbytes + space.norms.nbytes + graph_bytes) / (n * dims * 4 + graph_bytes), 2)
        started = time.perf_counter()
        engine = Engine(os.path.join(folder, "v"))
        engine.search({"collection": "v", "vector": {"name": "text", "values": queries[0].tolist(), "k": K}})
        out["open_s"] = round(time.perf_counter() - started, 3)
        space = engine._collection("v").index.vectors.spaces["text"]
        out["opened_graph_as_view"] = space.graph_buffer is not None
        for mode in ("approx", "exact"):
            for name, share in FILTERS.items():
                def search(query: np.ndarray, share: int | None = share, mode: str = mode) -> list[int]:
                    body: dict[str, Any] = {"collection": "v", "fields": ["id"], "count": K,
                                            "vector": {"name": "text", "values": query.tolist(), "k": K,
                                                       "exact": mode == "exact"}}
                    if share is not None:
                        body["filter"] = f"bucket < {share}"
                    return [shown["id"] for shown in engine.search(body)["results"]]

                found, times = timed(search, queries)
                out.setdefault(f"roarsearch-{mode}", {})[name] = {
                    "recall": round(recall(found, exact[name]), 4), "p50_ms": round(percentile(times, 0.5), 3),
                    "p95_ms": round(percentile(times, 0.95), 3)}
        engine.close()
        hybrid(corpus, rows, vectors, buckets, queries, folder, out)
        out["thresholds"] = {"ANN_MIN_VECTORS": vector_index.ANN_MIN_VECTORS,
                             "EXACT_MAX_CANDIDATES": vector_index.EXACT_MAX_CANDIDATES,
                             "ANN_OVERSAMPLE": vector_index.ANN_OVERSAMPLE,
                             "ANN_EXPANSION_SEARCH": vector_index.ANN_EXPANSION_SEARCH}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def hybrid(corpus: str, rows: list[dict[str, Any]], vectors: np.ndarray, buckets: np.ndarray, queries: np.ndarray,
           folder: str, out: dict[str, Any]) -> None:
    """Words + vector + a filter + two text facets, against the keyword and the vector search alone."""
    from roarsearch import Engine

    n, dims = vectors.shape
    facets = ["section", "priority"] if corpus == "packages" else ["genres", "mpaaRating"]
    with Engine(os.path.join(folder, "h")) as engine:
        engine.update_settings("h", {"vectors": {"text": {"dimensions": dims}}})
        engine.add_batches("h", ([{**rows[position], "bucket": int(buckets[position]),
                                   "_vectors": {"text": vectors[position].tolist()}}
                                  for position in range(start, min(n, start + BATCH))]
                                 for start in range(0, n, BATCH)))
        rng = random.Random(5)
        words = [texts_of(corpus, rows[rng.randrange(n)])[1].split()[:2] for _ in range(len(queries))]
        base = {"collection": "h", "fields": ["id"], "count": K, "filter": "bucket < 50", "textFacets": facets}
        timings: dict[str, list[float]] = {"keyword": [], "vector": [], "hybrid": []}
        for round_number in range(2):  # the first round warms up
            for query, text in zip(queries, words):
                for kind in timings:
                    body = dict(base)
                    if kind != "vector":
                        body["query"] = " ".join(text)
                    if kind != "keyword":
                        body["vector"] = {"name": "text", "values": query.tolist(), "k": 100}
                    started = time.perf_counter()
                    engine.search(body)
                    if round_number:
                        timings[kind].append(time.perf_counter() - started)
        out["hybrid"] = {kind: round(percentile(values, 0.5), 3) for kind, values in timings.items()}
        out["hybrid"]["within_sum"] = out["hybrid"]["hybrid"] <= out["hybrid"]["keyword"] + out["hybrid"]["vector"]


def usearch_build(vectors: np.ndarray) -> tuple[Any, float]:
    """usearch's index of ``vectors`` alone, built in batches of :data:`BATCH` with roarsearch's
    parameters (2 threads), and the seconds the build took."""
    from usearch.index import Index

    from roarsearch.index import vectors as vector_index

    n, dims = vectors.shape
    index = Index(ndim=dims, metric="cos", dtype="i8", connectivity=vector_index.ANN_CONNECTIVITY,
                  expansion_add=vector_index.ANN_EXPANSION_ADD, expansion_search=vector_index.ANN_EXPANSION_SEARCH)
    started = time.perf_counter()
    for start in range(0, n, BATCH):
        index.add(np.arange(start, min(n, start + BATCH), dtype=np.uint64), vectors[start:start + BATCH], threads=0)
    return index, time.perf_counter() - started


def roarsearch_add_s(vectors: np.ndarray, buckets: np.ndarray) -> float:
    """Seconds a durable Engine takes to add records holding an id, a bucket and a vector, built
    before the clock starts (as every engine's records are decoded beforehand), closed inside it."""
    from roarsearch import Engine

    n, dims = vectors.shape
    batches = [[{"id": position, "bucket": int(buckets[position]), "_vectors": {"text": vectors[position].tolist()}}
                for position in range(start, min(n, start + BATCH))] for start in range(0, n, BATCH)]
    folder = tempfile.mkdtemp(prefix="bench-vectors-add-")
    try:
        engine = Engine(os.path.join(folder, "v"))
        engine.update_settings("v", {"vectors": {"text": {"dimensions": dims, "metric": "cosine"}}})
        started = time.perf_counter()
        engine.add_batches("v", iter(batches))
        engine.close()
        return time.perf_counter() - started
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def paired_add_rates(vectors: np.ndarray, buckets: np.ndarray, rounds: int, out: dict[str, Any]) -> None:
    """The add rate against usearch's own build, as pairs run in turn (roarsearch, usearch, ...):
    the machine's speed drifts between moments, and a ratio of two runs minutes apart measured
    the drift (0.34-0.64x for the same code). Medians of each and of the pairwise ratios."""
    n = len(vectors)
    ours, theirs = [], []
    for _ in range(rounds):
        gc.collect()
        ours.append(roarsearch_add_s(vectors, buckets))
        gc.collect()
        theirs.append(usearch_build(vectors)[1])
    ratios = sorted(their / our for our, their in zip(ours, theirs))
    out["add_pairs"] = {"rounds": rounds, "roarsearch_records_per_s": round(n / statistics.median(ours)),
                        "usearch_records_per_s": round(n / statistics.median(theirs)),
                        "ratio_median": round(statistics.median(ratios), 2),
                        "ratio_min": round(ratios[0], 2), "ratio_max": round(ratios[-1], 2)}


def run_usearch(vectors: np.ndarray, buckets: np.ndarray, queries: np.ndarray, exact: dict[str, list[list[int]]],
                out: dict[str, Any]) -> None:
    """usearch alone, with roarsearch's parameters; a filter by post-filtering an oversampled answer."""
    from roarsearch.index import vectors as vector_index

    n = len(vectors)
    index, build_s = usearch_build(vectors)
    out["usearch-build"] = {"records_per_s": round(n / build_s), "seconds": round(build_s, 2),
                            "memory_mb": round(index.memory_usage / 2**20, 1)}
    results: dict[str, Any] = {}
    for name, share in FILTERS.items():
        wanted = K if share is None else int(math.ceil(K * vector_index.ANN_OVERSAMPLE * 100 / share))

        def search(query: np.ndarray, share: int | None = share, wanted: int = wanted) -> list[int]:
            keys = index.search(query, wanted).keys
            if share is not None:
                keys = keys[buckets[keys.astype(np.int64)] < share]
            return keys[:K].astype(np.int64).tolist()

        found, times = timed(search, queries)
        results[name] = {"recall": round(recall(found, exact[name]), 4), "p50_ms": round(percentile(times, 0.5), 3),
                         "p95_ms": round(percentile(times, 0.95), 3)}
    out["usearch"] = results


def run_lancedb(vectors: np.ndarray, buckets: np.ndarray, queries: np.ndarray, exact: dict[str, list[list[int]]],
                out: dict[str, Any]) -> None:
    """LanceDB with an IVF-PQ index (refined with exact distances), filters applied before the search."""
    import lancedb
    import pyarrow as pa

    n, dims = vectors.shape
    folder = tempfile.mkdtemp(prefix="bench-lancedb-")
    try:
        db = lancedb.connect(folder)
        table_data = pa.table({"id": np.arange(n, dtype=np.int64), "bucket": buckets,
                               "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), dims)})
        started = time.perf_counter()
        table = db.create_table("v", table_data)
        table.create_index(metric="cosine", num_partitions=max(16, int(math.sqrt(n))), num_sub_vectors=dims // 8)
        table.create_scalar_index("bucket")
        build_s = time.perf_counter() - started
        results: dict[str, Any] = {"build_s": round(build_s, 2)}
        for name, share in FILTERS.items():
            def search(query: np.ndarray, share: int | None = share) -> list[int]:
                request = table.search(query).metric("cosine").limit(K).nprobes(20).refine_factor(10)
                if share is not None:
                    request = request.where(f"bucket < {share}", prefilter=True)
                return request.to_arrow()["id"].to_pylist()

            found, times = timed(search, queries)
            results[name] = {"recall": round(recall(found, exact[name]), 4), "p50_ms": round(percentile(times, 0.5), 3),
                             "p95_ms": round(percentile(times, 0.95), 3)}
        out["lancedb"] = results
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_typesense(vectors: np.ndarray, buckets: np.ndarray, queries: np.ndarray, exact: dict[str, list[list[int]]],
                  out: dict[str, Any]) -> None:
    """Typesense's vector search (HNSW), the server binary the other benchmarks start."""
    import httpx

    from benchmarks.geo import typesense_server

    n, dims = vectors.shape
    with typesense_server() as (port, key):
        url = f"http://127.0.0.1:{port}"
        headers = {"X-TYPESENSE-API-KEY": key}
        session = httpx.Client(timeout=600)
        version = session.get(f"{url}/debug", headers=headers).json().get("version")
        schema = {"name": "v", "fields": [{"name": "bucket", "type": "int32"},
                                          {"name": "vector", "type": "float[]", "num_dim": dims}]}
        answer = session.post(f"{url}/collections", headers=headers, json=schema)
        answer.raise_for_status()
        started = time.perf_counter()
        for start in range(0, n, BATCH):
            lines = "\n".join(json.dumps({"id": str(position), "bucket": int(buckets[position]),
                                          "vector": vectors[position].tolist()})
                              for position in range(start, min(n, start + BATCH)))
            answer = session.post(f"{url}/collections/v/documents/import?action=create", headers=headers, content=lines)
            failed = [line for line in answer.text.splitlines() if '"success":true' not in line]
            if failed:
                raise RuntimeError(f"typesense import failed: {failed[:2]}")
        build_s = time.perf_counter() - started
        results: dict[str, Any] = {"version": version, "build_s": round(build_s, 2)}
        for name, share in FILTERS.items():
            server_ms: list[float] = []

            def search(query: np.ndarray, share: int | None = share, server_ms: list[float] = server_ms) -> list[int]:
                search_body: dict[str, Any] = {"collection": "v", "q": "*", "per_page": K,
                                               "vector_query": f"vector:([{','.join(map(str, query.tolist()))}], k:{K})",
                                               "include_fields": "id"}
                if share is not None:
                    search_body["filter_by"] = f"bucket:<{share}"
                reply = session.post(f"{url}/multi_search", headers=headers, json={"searches": [search_body]}).json()
                result = reply["results"][0]
                server_ms.append(float(result.get("search_time_ms", 0)))
                return [int(hit["document"]["id"]) for hit in result.get("hits", [])]

            found, times = timed(search, queries)
            results[name] = {"recall": round(recall(found, exact[name]), 4), "p50_ms": round(percentile(times, 0.5), 3),
                             "p95_ms": round(percentile(times, 0.95), 3),
                             "server_p50_ms": statistics.median(server_ms[5:]) if len(server_ms) > 5 else None}
        out["typesense"] = results


# ---------------------------------------------------------------- main

def run_corpus(corpus: str, args: argparse.Namespace) -> dict[str, Any]:
    rows, vectors, queries = embedded(corpus, args.records, args.dims, args.queries)
    n = len(rows)
    buckets = buckets_of(n)
    out: dict[str, Any] = {"corpus": corpus, "records": n, "dims": args.dims, "queries": len(queries), "k": K,
                           "machine": f"{platform.machine()} {os.cpu_count()} cpus", "python": platform.python_version()}
    if args.hybrid_only:
        folder = tempfile.mkdtemp(prefix="bench-vectors-")
        try:
            hybrid(corpus, rows, vectors, buckets, queries, folder, out)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return out
    exact: dict[str, list[list[int]]] = {}
    numpy_results: dict[str, Any] = {}
    for name, share in FILTERS.items():
        mask = None if share is None else buckets < share
        exact[name], times = exact_answers(vectors, queries, mask)
        numpy_results[name] = {"recall": 1.0, "p50_ms": round(percentile(times, 0.5), 3),
                               "p95_ms": round(percentile(times, 0.95), 3)}
    out["numpy"] = numpy_results
    engines = args.engines.split(",")
    runners: dict[str, Callable[[], None]] = {
        "roarsearch": lambda: run_roarsearch(corpus, rows, vectors, buckets, queries, exact, out),
        "usearch": lambda: run_usearch(vectors, buckets, queries, exact, out),
        "lancedb": lambda: run_lancedb(vectors, buckets, queries, exact, out),
        "typesense": lambda: run_typesense(vectors, buckets, queries, exact, out),
    }
    for engine in engines:
        if engine == "numpy":
            continue
        started = time.perf_counter()
        try:
            runners[engine]()
        except Exception as error:  # one engine failing still reports the others
            out[f"{engine}-error"] = f"{type(error).__name__}: {error}"
        print(f"  {engine}: {time.perf_counter() - started:.0f} s", flush=True)
        gc.collect()
    if "add" in out and "usearch-build" in out:
        out["add"]["ratio_to_usearch_build"] = round(out["add"]["records_per_s"] / out["usearch-build"]["records_per_s"], 2)
    if args.add_rounds and "roarsearch" in engines and "usearch" in engines:
        paired_add_rates(vectors, buckets, args.add_rounds, out)
        print(f"  paired add rates: {out['add_pairs']}", flush=True)
    return out


def report(out: dict[str, Any]) -> str:
    engines = [engine for engine in ("roarsearch-approx", "roarsearch-exact", "usearch", "numpy", "lancedb", "typesense")
               if engine in out]
    lines = [f"## {out['corpus']}: {out['records']} records, {out['dims']} dimensions, {out['queries']} queries, k = {K}",
             "", "| engine | " + " | ".join(f"recall@10 {name}" for name in FILTERS) + " | "
             + " | ".join(f"p50 ms {name}" for name in FILTERS) + " |",
             "|---|" + "---|" * (2 * len(FILTERS))]
    if not engines:  # --hybrid-only
        del lines[2:]
    for engine in engines:
        row = out[engine]
        lines.append(f"| {engine} | " + " | ".join(f"{row[name]['recall']:.3f}" for name in FILTERS) + " | "
                     + " | ".join(f"{row[name]['p50_ms']:.2f}" for name in FILTERS) + " |")
    if "roarsearch-approx" in out and "typesense" in out:
        ratios = {name: round(out["roarsearch-approx"][name]["p50_ms"] / max(1e-9, out["typesense"][name]["p50_ms"]), 2)
                  for name in FILTERS}
        lines.append(f"\np50 roarsearch approx / Typesense: {ratios}")
    for key in ("add", "usearch-build", "add_pairs", "memory", "open_s", "hybrid"):
        if key in out:
            lines.append(f"{key}: {out[key]}")
    lines.extend(f"{key}: {value}" for key, value in out.items() if key.endswith("-error"))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=192)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--corpora", default="packages,movies")
    parser.add_argument("--engines", default="roarsearch,usearch,numpy,lancedb,typesense")
    parser.add_argument("--tag", default="", help="appended to the results file's name")
    parser.add_argument("--add-rounds", type=int, default=3,
                        help="pairs of (roarsearch add, usearch build) run in turn for the add rate (0: none)")
    parser.add_argument("--hybrid-only", action="store_true",
                        help="only the hybrid figure (words + vector + a filter + two facets against each alone)")
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    for corpus in args.corpora.split(","):
        print(f"{corpus}: {args.records} records", flush=True)
        out = run_corpus(corpus, args)
        out["command"] = (f"python -m benchmarks.vectors --records {args.records} --dims {args.dims} "
                          f"--corpora {corpus} --engines {args.engines} --queries {args.queries}"
                          f"{' --tag ' + args.tag if args.tag else ''} --add-rounds {args.add_rounds}"
                          f"{' --hybrid-only' if args.hybrid_only else ''}")
        path = RESULTS / f"vectors-{corpus}-{out['records']}{'-' + args.tag if args.tag else ''}.json"
        path.write_text(json.dumps(out, indent=1) + "\n")
        print(report(out), flush=True)
        print(f"written {path.relative_to(RESULTS.parent.parent)}", flush=True)


if __name__ == "__main__":
    main()
