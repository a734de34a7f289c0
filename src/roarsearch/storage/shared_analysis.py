"""A batch's text analysis done once by the service's writer and read by its readers.

Owns: :class:`SharedAnalyses`, a folder in the multi-worker service's run folder (docs/service.md,
"Workers") where the writer leaves each add batch's analysis (its text fields' tokens grouped by
term: most of the CPU time an add costs) before it announces the batch, so that a reader applying
the batch reads the tokens instead of analysing the same texts again. Every worker applies every
batch to its own copy of the index: without this, each paid the analysis, and its searches shared
the GIL with it meanwhile.

Invariants:
- content-addressed: an analysis is filed under a digest of the texts it analysed
  (:func:`texts_digest`: field names, each value's length and characters), and
  :func:`~roarsearch.analysis.analyzer.analyze_fields` depends on those texts alone, so a reader
  uses a file only for texts it collected itself, whichever batch wrote it;
- only ever an accelerator: a file missing (not written, removed, the folder gone), unreadable or
  malformed means "analyse here", never an error; a writer that cannot write one logs it once and
  goes on;
- a file appears whole (written beside it, then renamed); the writer keeps the newest
  :data:`SHARED_ANALYSES_KEPT` and removes older ones (a reader further behind analyses itself);
- only batches of :data:`SHARED_ANALYSIS_MIN_RECORDS` records or more are filed (and looked for).
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import threading
from collections import deque
from typing import Any

import msgpack
import numpy as np

from roarsearch.analysis.analyzer import Analysed

log = logging.getLogger("roarsearch")

#: Analyses the writer keeps in the folder: readers apply a batch within moments of its announcement.
SHARED_ANALYSES_KEPT = 32
#: Add batches of fewer records are analysed by each reader: a file would cost more than their
#: analysis (a one-record add: about 0.1 ms of file work against a few hundred microseconds of add).
SHARED_ANALYSIS_MIN_RECORDS = 64
_SUFFIX = ".analysis"
_HEADER = struct.Struct("<QQ")


def texts_digest(texts_by_field: dict[str, list[str]]) -> str:
    """A digest that tells apart any two different ``{field: values}`` (order included). SHA-256: most
    x86 and ARM CPUs hash it in hardware (here, a 1,000-record package batch's 456 KB of text: 0.27 ms; BLAKE2b 0.66)."""
    digest = hashlib.sha256()
    for path, texts in texts_by_field.items():
        name = path.encode("utf-8", "surrogatepass")
        digest.update(_HEADER.pack(len(name), len(texts)))
        digest.update(name)
        digest.update(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)).tobytes())
        digest.update("".join(texts).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _packed_array(values: np.ndarray) -> list[Any]:
    return [values.dtype.str, values.tobytes()]


def _array(packed: Any) -> np.ndarray:
    dtype, data = packed
    return np.frombuffer(data, dtype=np.dtype(dtype)).copy()


def encode_analysis(analysed: dict[str, Analysed]) -> bytes:
    return msgpack.packb({path: [terms, *map(_packed_array, arrays)] for path, (terms, *arrays) in analysed.items()},
                         use_bin_type=True)


def decode_analysis(data: bytes, texts_by_field: dict[str, list[str]]) -> dict[str, Analysed] | None:
    """The analysis in ``data``, or None when it is not one of ``texts_by_field`` (a field that is
    not among them, terms that are not strings, arrays that are not integers, counts that do not
    add up)."""
    body = msgpack.unpackb(data, raw=False)
    if not isinstance(body, dict):
        return None
    analysed: dict[str, Analysed] = {}
    for path, (terms, *packed) in body.items():
        arrays = list(map(_array, packed))
        counts, value_index, position, valued = arrays
        if (path not in texts_by_field or not isinstance(terms, list) or counts.size != len(terms)
                or not all(np.issubdtype(array.dtype, np.integer) for array in arrays)
                or value_index.size != position.size or int(counts.sum()) != value_index.size
                or (valued.size and int(valued[-1]) >= len(texts_by_field[path]))
                or not all(type(term) is str for term in terms)):
            return None
        analysed[path] = (terms, counts, value_index, position, valued)
    return analysed


class SharedAnalyses:
    """``SharedAnalyses(folder)``: the writer :meth:`put`\\ s each add batch's analysis, readers
    :meth:`take` it."""

    def __init__(self, folder: str, *, create: bool = False) -> None:
        self.folder = folder
        if create:  # the writer's side
            os.makedirs(folder, exist_ok=True)
        self._written: deque[str] = deque()
        self._lock = threading.Lock()
        self._failed = False
        #: Batches a reader found analysed here, and those it analysed itself (docs/service.md).
        self.taken = self.missed = 0

    def _path(self, digest: str) -> str:
        return os.path.join(self.folder, digest + _SUFFIX)

    def put(self, texts_by_field: dict[str, list[str]], analysed: dict[str, Analysed]) -> None:
        """File ``analysed``, the analysis of ``texts_by_field``, for the readers."""
        path = self._path(texts_digest(texts_by_field))
        staged = f"{path}.{os.getpid()}.{threading.get_ident()}.part"
        try:
            with open(staged, "wb") as out:
                out.write(encode_analysis(analysed))
            os.replace(staged, path)
        except OSError as error:
            with self._lock:
                failed, self._failed = self._failed, True
            if not failed:
                log.warning("readers analyse batches themselves: cannot write to %s (%s)", self.folder, error)
            try:
                os.unlink(staged)
            except OSError:
                pass
            return
        with self._lock:
            self._written.append(path)
            dropped = [self._written.popleft() for _ in range(len(self._written) - SHARED_ANALYSES_KEPT)]
            dropped = [old for old in dropped if old not in self._written]  # the same texts filed again
        for old in dropped:
            try:
                os.unlink(old)
            except OSError:
                pass

    def take(self, texts_by_field: dict[str, list[str]]) -> dict[str, Analysed] | None:
        """The analysis of ``texts_by_field`` if the writer filed it, else None."""
        try:
            with open(self._path(texts_digest(texts_by_field)), "rb") as handle:
                data = handle.read()
            analysed = decode_analysis(data, texts_by_field)
        except Exception:  # missing, removed meanwhile, or not what it should be: analyse here
            analysed = None
        if analysed is None:
            self.missed += 1
        else:
            self.taken += 1
        return analysed
