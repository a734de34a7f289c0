"""Vector spaces of one collection: each record's embedding per declared space (contract §11).

Owns: per space, a float32 matrix whose row ``doc`` is that doc's vector and the bitmap of docs
holding one; validation of a batch's ``_vectors`` against the declared spaces; the exact nearest
neighbours of a query vector among candidate docs; the state a snapshot saves.

Docs are never reused (an upsert or a delete retires the old doc), so a retired doc's row simply
stays unread: every search intersects the space's docs with the alive candidates.

Exact search is a blocked float32 pass (one matrix product per block of rows, the best of each
block kept by ``argpartition``), then the shortlist — every doc within a rounding margin of the
``k``-th best — is scored again in float64 and ordered by score, ties by record id. So the answer
is the true ``k`` nearest, independent of float32 rounding.

Approximate search (a request without ``exact``) uses an HNSW graph from ``usearch`` (the
``vectors`` extra) once a space holds :data:`ANN_MIN_VECTORS` vectors; without the library every
search is exact. The graph keeps its own compact copy of the vectors (int8 unit vectors
for cosine, and for the dot product lifted to one norm by an extra coordinate; float16 for l2), is extended by every add, and is saved in the snapshot
and opened from it as a view of the mapped file (no rebuild). Retired docs stay in the graph and
are filtered out like any doc outside the candidates. A filtered search is exact about the filter:
the graph is asked for enough neighbours to leave ``k`` candidates after the filter (the wanted
count divided by the share of docs passing it, times :data:`ANN_OVERSAMPLE`), its answers outside
the candidates are dropped and the rest scored exactly from the float32 rows; when the candidates
are few (:data:`EXACT_MAX_CANDIDATES`) or the graph would be asked for more than
:data:`ANN_MAX_COUNT` neighbours, the exact search over the candidates is cheaper and is used.
"""

from __future__ import annotations

import math
from itertools import chain
from typing import Any

import numpy as np
from pyroaring import AbstractBitMap, BitMap

from roarsearch.errors import BadRequestError
from roarsearch.schema import describe_value, type_name


def _graph_index() -> Any:
    """usearch's ``Index`` class (the ``vectors`` extra), or None: then every search is exact."""
    try:
        from usearch.index import Index
    except ImportError:  # pragma: no cover - exact search only
        return None
    return Index


_UNRESOLVED: Any = object()
#: usearch's ``Index`` class, imported on first need (None without the ``vectors`` extra): not on
#: import, as once usearch's C++ runtime is loaded a later ``ray.init`` aborts (a ``std::regex_error``
#: inside Ray), and the sharded engine and ``serve --shards`` start Ray after importing roarsearch.
GraphIndex: Any = _UNRESOLVED


def graph_index() -> Any:
    """:data:`GraphIndex`, imported the first time it is asked for."""
    global GraphIndex
    if GraphIndex is _UNRESOLVED:
        GraphIndex = _graph_index()
    return GraphIndex

#: The field of a record that holds its vectors.
VECTORS_FIELD = "_vectors"
METRICS = ("cosine", "dot", "l2")
MAX_DIMENSIONS = 4096
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: Rows scored per matrix product in exact search (a block of 768-dimension rows is 48 MiB gathered).
EXACT_BLOCK_ROWS = 16_384
#: Relative float32 rounding margin of the first pass: docs within it of the k-th score are
#: scored again in float64.
ROUNDING_MARGIN = 1e-4

#: A space builds its HNSW graph from this many vectors (below, exact search costs under ~2 ms).
ANN_MIN_VECTORS = 20_000
#: Candidate sets up to this size are searched exactly even when a graph exists.
EXACT_MAX_CANDIDATES = 20_000
#: Neighbours asked of the graph per wanted result, before dividing by the filter's share.
ANN_OVERSAMPLE = 4
#: Asking the graph for more neighbours than this costs more than exact search over the candidates.
ANN_MAX_COUNT = 20_000
#: HNSW parameters: edges per node, and the breadth of the build's and the search's walks. On
#: 1M package descriptions (TF-IDF + SVD, 192 dimensions, the int8 graph, candidates re-scored
#: exactly), the search's breadth gave recall@10 0.929 at 128, 0.951 at 256, 0.955-0.96 at 384
#: and 0.964 at 512, for 0.32, 0.55, ~0.8 and 1.0 ms; 32 edges or float16 vectors did no better
#: for the time. A saved graph does not keep the search's breadth: it is set again on opening.
ANN_CONNECTIVITY = 16
ANN_EXPANSION_ADD = 128
ANN_EXPANSION_SEARCH = 384

#: A space's declaration: (name, dimensions, metric).
SpaceSpec = tuple[str, int, str]


class VectorSpace:
    """One named space: rows by doc id, the docs holding a vector, and (cosine) each row's norm."""

    __slots__ = ("name", "dimensions", "metric", "matrix", "norms", "docs", "graph", "graph_docs", "graph_buffer",
                 "graph_cap")

    def __init__(self, name: str, dimensions: int, metric: str) -> None:
        self.name = name
        self.dimensions = dimensions
        self.metric = metric
        self.matrix = np.zeros((0, dimensions), dtype=np.float32)
        #: Per doc, the Euclidean norm of its row (float64; cosine and l2 use it).
        self.norms = np.zeros(0, dtype=np.float64)
        self.docs = BitMap()
        #: The HNSW graph (None: not built, or usearch is not installed) and the docs it holds.
        self.graph: Any = None
        self.graph_docs = BitMap()
        #: The saved graph a loaded one is a view of (kept alive while viewed; None once copied).
        self.graph_buffer: Any = None
        #: Dot product only: the norm every vector is lifted to in the graph (see :meth:`_graph_rows`).
        self.graph_cap = 0.0

    @property
    def spec(self) -> SpaceSpec:
        return (self.name, self.dimensions, self.metric)

    def _reserve(self, end: int) -> None:
        if end <= self.matrix.shape[0]:
            return
        # Grown by half: the rows' memory stays under 1.5 times their bytes, for a copy per growth.
        capacity = max(end, self.matrix.shape[0] * 3 // 2, 1024)
        matrix = np.zeros((capacity, self.dimensions), dtype=np.float32)
        matrix[:self.matrix.shape[0]] = self.matrix
        norms = np.zeros(capacity, dtype=np.float64)
        norms[:self.norms.size] = self.norms
        self.matrix, self.norms = matrix, norms

    def add_rows(self, docs: np.ndarray, rows: np.ndarray, norms: np.ndarray | None = None) -> None:
        """Set the rows of ``docs`` (and their ``norms``, when known) without touching the graph."""
        if not docs.size:
            return
        self._reserve(int(docs.max()) + 1)
        self.matrix[docs] = rows
        if norms is None:
            wide = rows.astype(np.float64)
            norms = np.sqrt(np.einsum("ij,ij->i", wide, wide))
        self.norms[docs] = norms
        self.docs |= BitMap(docs.tolist())

    def add(self, docs: np.ndarray, rows: np.ndarray) -> None:
        """Set the vectors of ``docs`` (new docs: a write never changes an existing doc's row)."""
        if not docs.size:
            return
        self.add_rows(docs, rows)
        if self.graph is not None and self.metric == "dot" and float(self.norms[docs].max()) > self.graph_cap:
            self.graph = self.graph_buffer = None  # a vector beyond the lifted norm: built again
            self.graph_docs = BitMap()
        if self.graph is not None:
            self._graph_add(docs)
        elif len(self.docs) >= ANN_MIN_VECTORS and graph_index() is not None:
            held = np.fromiter(self.docs, dtype=np.int64, count=len(self.docs))
            self.graph_cap = 1.25 * float(self.norms[held].max()) + 1e-12
            self.graph = self._new_graph()
            self._graph_add(held)

    def _new_graph(self) -> Any:
        graph_class = graph_index()
        assert graph_class is not None
        lifted = self.metric == "dot"
        return graph_class(ndim=self.dimensions + (1 if lifted else 0), metric="l2sq" if self.metric == "l2" else "cos",
                          dtype="f16" if self.metric == "l2" else "i8", connectivity=ANN_CONNECTIVITY,
                          expansion_add=ANN_EXPANSION_ADD, expansion_search=ANN_EXPANSION_SEARCH)

    def _graph_rows(self, docs: np.ndarray) -> np.ndarray:
        """The rows the graph holds: unit vectors for cosine; for the dot product each row lifted by
        one more coordinate to the norm :attr:`graph_cap` (``sqrt(cap² - |x|²)``), so that the
        nearest by angle to the query (lifted by 0) are the largest dot products — a graph walks
        angles and distances far more surely than inner products."""
        rows: np.ndarray = self.matrix[docs]
        if self.metric == "cosine":
            rows = rows / self.norms[docs].astype(np.float32)[:, None]
        elif self.metric == "dot":
            lift = np.sqrt(np.maximum(self.graph_cap ** 2 - self.norms[docs] ** 2, 0.0)).astype(np.float32)
            rows = np.hstack([rows, lift[:, None]])
        return rows

    def _graph_query(self, query: np.ndarray) -> np.ndarray:
        point = query.astype(np.float32)
        if self.metric == "dot":
            return np.append(point, np.float32(0.0))
        return point

    def _graph_add(self, docs: np.ndarray) -> None:
        if self.graph_buffer is not None:  # a view of a snapshot: a private copy before it changes
            graph_class = graph_index()
            assert graph_class is not None
            self.graph = graph_class.restore(bytes(self.graph_buffer), view=False)
            self.graph.expansion_search = ANN_EXPANSION_SEARCH
            self.graph_buffer = None
        self.graph.add(docs.astype(np.uint64), self._graph_rows(docs), threads=0)
        self.graph_docs |= BitMap(docs.tolist())

    def graph_state(self) -> Any:
        """The graph's saved bytes (None without a graph)."""
        if self.graph is None:
            return None
        if self.graph_buffer is not None:
            return self.graph_buffer
        return self.graph.save()

    def load_graph(self, buffer: Any, docs: BitMap, cap: float) -> None:
        """Open a saved graph as a view of ``buffer`` (a snapshot's mapping): no rebuild."""
        graph_class = graph_index()
        if graph_class is None:
            return  # exact search only; a later snapshot saves no graph
        self.graph_cap = cap
        self.graph = graph_class.restore(buffer, view=True)
        self.graph.expansion_search = ANN_EXPANSION_SEARCH  # not saved with the graph
        self.graph_buffer = buffer
        self.graph_docs = docs

    def row(self, doc: int) -> np.ndarray:
        row: np.ndarray = self.matrix[doc]
        return row

    # ------------------------------------------------------------------ search

    def exact_scores(self, docs: np.ndarray, query: np.ndarray) -> np.ndarray:
        """The float64 score of each of ``docs``: similarity (cosine), dot product, or distance (l2)."""
        rows = _rows(self.matrix, docs).astype(np.float64)
        query64 = query.astype(np.float32).astype(np.float64)
        if self.metric == "l2":
            diff = rows - query64
            distances: np.ndarray = np.sqrt(np.einsum("ij,ij->i", diff, diff))
            return distances
        dots: np.ndarray = np.einsum("ij,j->i", rows, query64)
        if self.metric == "dot":
            return dots
        query_norm = math.sqrt(float(query64 @ query64))
        # Rounding can take a vector's similarity with itself a hair past 1.
        similarities: np.ndarray = np.clip(dots / (self.norms[docs] * query_norm), -1.0, 1.0)
        return similarities

    def nearest(self, candidates: AbstractBitMap, query: np.ndarray, k: int,
                id_rank: np.ndarray | None, exact: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest of ``candidates`` holding a vector, nearest first (ties by record id):
        (docs, scores). Exact, or (``exact=False``) from the graph where it has one and it pays."""
        held = candidates & self.docs
        shortlist = None if exact else self._graph_shortlist(held, query, k)
        if shortlist is None:
            docs = np.fromiter(held, dtype=np.int64, count=len(held))
            if not docs.size:
                return docs, np.zeros(0, dtype=np.float64)
            shortlist = self._shortlist(docs, query, k)
        scores = self.exact_scores(shortlist, query)
        # Nearest first: highest similarity, or smallest distance.
        primary = scores if self.metric == "l2" else -scores
        tie = shortlist if id_rank is None else id_rank[shortlist]
        order = np.lexsort((tie, primary))[:k]
        return shortlist[order], scores[order]

    def _graph_shortlist(self, held: AbstractBitMap, query: np.ndarray, k: int) -> np.ndarray | None:
        """Docs of ``held`` the graph finds nearest (at least ``k``), or None where exact search is
        the better (or the only) way: no graph, few candidates, a very selective filter, or the
        graph's answers leaving fewer than ``k`` candidates."""
        count = len(held)
        if self.graph is None or count <= EXACT_MAX_CANDIDATES or len(held & self.graph_docs) < count:
            return None
        share = count / len(self.graph_docs)
        wanted = int(math.ceil(k * ANN_OVERSAMPLE / share))
        if wanted > ANN_MAX_COUNT:
            return None
        found: np.ndarray = self.graph.search(self._graph_query(query), wanted).keys.astype(np.int64)
        keep = np.fromiter(map(held.__contains__, found.tolist()), dtype=bool, count=found.size)
        found = found[keep]
        if found.size < min(k, count):
            return None
        return found

    def _shortlist(self, docs: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
        """Docs that may be among the ``k`` nearest: the float32 pass's best, with every doc
        within a rounding margin (:data:`ROUNDING_MARGIN` of the scores' scale) of its ``k``-th score."""
        if docs.size <= k:
            return docs
        query32 = query.astype(np.float32)
        query_norm = float(np.sqrt(query32.astype(np.float64) @ query32.astype(np.float64)))
        kept_docs: list[np.ndarray] = []
        kept_scores: list[np.ndarray] = []
        margin = 0.0
        for start in range(0, docs.size, EXACT_BLOCK_ROWS):
            block = docs[start:start + EXACT_BLOCK_ROWS]
            approx = self._approximate(block, query32, query_norm)
            margin = max(margin, ROUNDING_MARGIN * self._scale(block, query_norm))
            if block.size > k:
                threshold = np.partition(approx, block.size - k)[block.size - k]
                keep = approx >= threshold - margin
                block, approx = block[keep], approx[keep]
            kept_docs.append(block)
            kept_scores.append(approx)
        all_docs = np.concatenate(kept_docs)
        all_scores = np.concatenate(kept_scores)
        if all_docs.size <= k:
            return all_docs
        threshold = np.partition(all_scores, all_scores.size - k)[all_scores.size - k]
        shortlist: np.ndarray = all_docs[all_scores >= threshold - margin]
        return shortlist

    def _scale(self, block: np.ndarray, query_norm: float) -> float:
        """How large the first pass's scores of ``block`` can be (cosine scores are at most 1)."""
        if self.metric == "cosine":
            return 1.0
        largest = float(self.norms[block].max())
        if self.metric == "dot":
            return largest * query_norm + 1e-30
        return (largest + query_norm) ** 2 + 1e-30

    def _approximate(self, block: np.ndarray, query32: np.ndarray, query_norm: float) -> np.ndarray:
        """float32 scores of ``block``, larger is nearer (l2: minus the squared distance)."""
        rows = _rows(self.matrix, block)
        # einsum rather than ``@``: a matrix-vector product through BLAS paid 5-10 ms of thread
        # start-up per block on a busy 2-core machine, einsum's own loop ~1 ms.
        dots = np.einsum("ij,j->i", rows, query32)
        norms = self.norms[block]
        approx: np.ndarray
        if self.metric == "dot":
            approx = dots.astype(np.float64)
        elif self.metric == "cosine":
            approx = dots / (norms * query_norm)
        else:
            approx = 2.0 * dots - norms * norms - query_norm * query_norm
        return approx


class VectorIndex:
    """Every declared space of one collection, and which docs' records hold ``_vectors`` at all."""

    def __init__(self) -> None:
        self.spaces: dict[str, VectorSpace] = {}
        #: Docs whose stored record has a ``_vectors`` object (a space declared later reads only these).
        self.held = BitMap()

    def specs(self) -> tuple[SpaceSpec, ...]:
        return tuple(space.spec for space in self.spaces.values())

    def holds_vectors(self, name: str, alive: AbstractBitMap) -> bool:
        space = self.spaces.get(name)
        return space is not None and space.docs.intersection_cardinality(alive) > 0

    def configure(self, specs: tuple[SpaceSpec, ...], alive: AbstractBitMap,
                  record: Any) -> None:
        """Make the spaces those of ``specs``: a removed space drops its vectors, a new (or changed)
        one indexes the vectors that the stored records of ``alive`` hold for it (``record(doc)``)."""
        wanted = {name: (dimensions, metric) for name, dimensions, metric in specs}
        for name in list(self.spaces):
            space = self.spaces[name]
            if wanted.get(name) != (space.dimensions, space.metric):
                del self.spaces[name]
        for name, (dimensions, metric) in wanted.items():
            if name in self.spaces:
                continue
            space = self.spaces[name] = VectorSpace(name, dimensions, metric)
            docs = [doc for doc in (self.held & alive)]
            found_docs, rows = _vectors_of(space, [record(doc) for doc in docs], docs)
            space.add(found_docs, rows)

    def add(self, records: list[dict[str, Any]], new_docs: np.ndarray) -> None:
        """Index the ``_vectors`` of an add batch whose records became ``new_docs`` (validated; a
        vector that does not fit its space, as in a log written under other settings, is skipped)."""
        positions = [position for position, record in enumerate(records) if isinstance(record.get(VECTORS_FIELD), dict)]
        if not positions:
            return
        docs = new_docs[positions]
        self.held |= BitMap(docs.tolist())
        held = [records[position] for position in positions]
        for space in self.spaces.values():
            found_docs, rows = _vectors_of(space, held, docs.tolist())
            space.add(found_docs, rows)

    def vectors_of(self, doc: int) -> dict[str, list[float]]:
        """The vectors ``doc`` holds, by space name (as float32 values)."""
        return {name: space.row(doc).tolist() for name, space in self.spaces.items() if doc in space.docs}

    # ------------------------------------------------------------------ state

    def to_state(self) -> dict[str, Any]:
        spaces = {}
        for name, space in self.spaces.items():
            docs = np.fromiter(space.docs, dtype=np.uint32, count=len(space.docs))
            spaces[name] = {"dimensions": space.dimensions, "metric": space.metric,
                            "docs": space.docs.serialize(),
                            "rows": (memoryview(np.ascontiguousarray(space.matrix[docs]).data).cast("B")
                                     if docs.size else b""),
                            # Saved rather than computed again on open (1.5 s of a 100k x 192 open).
                            "norms": (memoryview(np.ascontiguousarray(space.norms[docs]).data).cast("B")
                                      if docs.size else b"")}
            graph = space.graph_state()
            if graph is not None:
                spaces[name]["graph"] = graph
                spaces[name]["graph_docs"] = space.graph_docs.serialize()
                spaces[name]["graph_cap"] = space.graph_cap
        return {"held": self.held.serialize(), "spaces": spaces}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> VectorIndex:
        index = cls()
        index.held = BitMap.deserialize(state["held"])
        for name, saved in state["spaces"].items():
            space = index.spaces[name] = VectorSpace(name, int(saved["dimensions"]), str(saved["metric"]))
            doc_set = BitMap.deserialize(saved["docs"])
            docs = np.fromiter(doc_set, dtype=np.int64, count=len(doc_set))
            rows = np.frombuffer(saved["rows"], dtype=np.float32).reshape(-1, space.dimensions)
            if "graph" in saved:  # opened from the snapshot, not built again
                space.load_graph(saved["graph"], BitMap.deserialize(saved["graph_docs"]), float(saved.get("graph_cap", 0.0)))
            norms = np.frombuffer(saved["norms"], dtype=np.float64) if "norms" in saved else None
            space.add_rows(docs, rows, norms)
        return index


def _rows(matrix: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """The rows of ``docs`` (ascending): a view when they are one contiguous run, else a gather."""
    if docs.size and int(docs[-1]) - int(docs[0]) + 1 == docs.size:
        view: np.ndarray = matrix[int(docs[0]):int(docs[-1]) + 1]
        return view
    gathered: np.ndarray = np.take(matrix, docs, axis=0)
    return gathered


def _vectors_of(space: VectorSpace, records: list[dict[str, Any]], docs: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(docs, rows) of the records holding a vector that fits ``space``: one conversion for the
    batch; rows that do not fit (a log written under other settings) are left out."""
    found: list[int] = []
    rows: list[list[float]] = []
    dimensions = space.dimensions
    for doc, record in zip(docs, records):
        vectors = record.get(VECTORS_FIELD)
        if not isinstance(vectors, dict):
            continue
        values = vectors.get(space.name)
        if isinstance(values, list) and len(values) == dimensions:
            found.append(doc)
            rows.append(values)
    if not found:
        return np.zeros(0, dtype=np.int64), np.zeros((0, dimensions), dtype=np.float32)
    try:
        if any(set(map(type, values)) - _NUMBER_TYPES for values in rows):
            raise ValueError("not numbers")
        array = np.asarray(rows, dtype=np.float64)
    except (ValueError, TypeError, OverflowError):
        keep = [fits(values, dimensions, space.metric) for values in rows]
        found = [doc for doc, kept in zip(found, keep) if kept]
        array = np.asarray([values for values, kept in zip(rows, keep) if kept], dtype=np.float64).reshape(-1, dimensions)
    with np.errstate(over="ignore", invalid="ignore"):
        good = np.isfinite(array).all(axis=1) & (np.abs(array) <= FLOAT32_MAX).all(axis=1)
        if space.metric == "cosine":
            good &= array.any(axis=1)
    doc_array = np.asarray(found, dtype=np.int64)
    return doc_array[good], array[good].astype(np.float32)


_NUMBER_TYPES = frozenset((int, float))


def fits(values: Any, dimensions: int, metric: str) -> bool:
    """Whether ``values`` is a vector valid in a space of ``dimensions`` and ``metric``."""
    try:
        check_vector(values, dimensions, metric, "")
    except BadRequestError:
        return False
    return True


def check_vector(values: Any, dimensions: int, metric: str, where: str) -> np.ndarray:
    """``values`` as float32 if it is an array of ``dimensions`` finite numbers (not all zero for
    cosine), else a 400 naming ``where``."""
    if not isinstance(values, list):
        raise BadRequestError(f"{where}: must be an array of {dimensions} numbers, got {type_name(values)}", field=where)
    if len(values) != dimensions:
        raise BadRequestError(f"{where}: must hold exactly {dimensions} numbers, got {len(values)}", field=where)
    if set(map(type, values)) - _NUMBER_TYPES:  # one C-level pass; the loop only names the culprit
        for position, value in enumerate(values):
            if type(value) not in _NUMBER_TYPES:
                raise BadRequestError(f"{where}[{position}]: must be a number, got {describe_value(value)}", field=where)
    try:
        array = np.asarray(values, dtype=np.float64)
    except OverflowError:  # an integer beyond float range
        raise BadRequestError(f"{where}: numbers must be finite", field=where) from None
    if not np.isfinite(array).all():
        position = int(np.argmin(np.isfinite(array)))
        raise BadRequestError(f"{where}[{position}]: must be a finite number, got {describe_value(values[position])}",
                              field=where)
    if np.abs(array).max() > FLOAT32_MAX:
        raise BadRequestError(f"{where}: numbers must fit in 32-bit floats", field=where)
    rows = array.astype(np.float32)
    if not np.isfinite(rows).all():
        raise BadRequestError(f"{where}: numbers must fit in 32-bit floats", field=where)
    if metric == "cosine" and not rows.any():
        raise BadRequestError(f"{where}: a cosine vector must not be all zeros (its norm is 0)", field=where)
    return rows


def check_record_vectors(records: list[dict[str, Any]], specs: tuple[SpaceSpec, ...]) -> None:
    """A 400 naming ``records[i]._vectors.NAME`` for the first record whose ``_vectors`` does not
    fit the declared spaces; records without ``_vectors`` (or with ``null``) pass. A batch's vectors
    of one space are checked together (one conversion); a failure is then located one by one."""
    spaces = {name: (dimensions, metric) for name, dimensions, metric in specs}
    by_space: dict[str, list[list[Any]]] = {name: [] for name in spaces}
    for position, record in enumerate(records):
        vectors = record.get(VECTORS_FIELD)
        if vectors is None:
            continue
        where = f"records[{position}].{VECTORS_FIELD}"
        if not isinstance(vectors, dict):
            raise BadRequestError(f"{where}: must be an object mapping vector space names to arrays of numbers, "
                                  f"got {type_name(vectors)}", field=VECTORS_FIELD)
        for name, values in vectors.items():
            if name not in spaces:
                declared = ", ".join(sorted(spaces)) or "none"
                raise BadRequestError(f"{where}.{name}: no vector space '{name}' is declared in the collection's "
                                      f"settings (declared: {declared})", field=VECTORS_FIELD)
            if values is None:
                continue
            if not isinstance(values, list) or len(values) != spaces[name][0]:
                check_vector(values, spaces[name][0], spaces[name][1], f"{where}.{name}")
            by_space[name].append(values)
    for name, lists in by_space.items():
        if lists and not _all_fit(lists, *spaces[name]):
            for position, record in enumerate(records):  # the first that does not fit, named
                values = (record.get(VECTORS_FIELD) or {}).get(name)
                if values is not None:
                    check_vector(values, *spaces[name], f"records[{position}].{VECTORS_FIELD}.{name}")


def _all_fit(lists: list[list[Any]], dimensions: int, metric: str) -> bool:
    """Whether every one of ``lists`` (each ``dimensions`` long) is a valid vector of the space."""
    if set(map(type, chain.from_iterable(lists))) - _NUMBER_TYPES:
        return False
    try:
        array = np.asarray(lists, dtype=np.float64)
    except (OverflowError, ValueError):
        return False
    with np.errstate(invalid="ignore"):
        if not (np.isfinite(array).all() and np.abs(array).max() <= FLOAT32_MAX):
            return False
    return metric != "cosine" or bool(array.any(axis=1).all())


__all__ = ["METRICS", "VECTORS_FIELD", "VectorIndex", "VectorSpace", "check_record_vectors", "check_vector"]
