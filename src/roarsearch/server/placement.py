"""Where the service runs a search: on the event loop, or in a worker thread.

Owns: that choice, request by request (:class:`SearchPlacement`). A search run on the event loop
skips two thread hand-offs (a queue, a wake-up and the GIL passed over, then back): on the HTTP load
benchmark's mix, 2 workers, 100k packages, about 7 % more searches/s read-only and 13 % more with a
writer (docs/benchmarks.md, HTTP load). But while it runs nothing else on its worker does,
whereas beside a search in a thread the loop keeps answering (the GIL changes hands every switch
interval). So a search runs on the loop only when this worker has already run searches of the
same *shape* (:func:`search_shape`: the request without its words) and they took less than one
switch interval of CPU on average (the longest a thread holds the GIL anyway); the first of a
shape (it may build something on demand: a field's values, a sort order) and shapes that have run
long go to a thread.

Invariants:
- the decision reads only the request and what this worker measured; it never changes an answer;
- CPU time (``time.thread_time``) is what is measured, in either place: a thread's wait for the GIL
  does not make a shape look slow;
- the table of shapes is bounded (least recently used dropped first);
- used from the event loop only (a search run in a thread is noted once it is back on the loop).

Callers: ``server.app.FastSearch``.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from typing import Any

import orjson

#: Shapes remembered per worker: past this, the least recently seen is forgotten (and its next
#: search runs in a thread again).
SHAPES_KEPT = 4096
#: Weight of the newest run in a shape's running mean of CPU time.
NEWEST_WEIGHT = 0.25
#: A query's word count enters its shape up to this many words.
WORDS_COUNTED = 8
#: The length of a last word that is a prefix enters the shape up to this many characters.
PREFIX_COUNTED = 5


def search_shape(body: Any) -> bytes | None:
    """What decides a search's cost besides its words: the body without its query (collection,
    fields, filter, facets, sort, page, typo tolerance...), plus how many words the query has and
    how long its last word is when that is a prefix; None when the body is not a JSON object
    orjson can encode (the search then answers with its 400, wherever it runs)."""
    if type(body) is not dict:
        return None
    query = body.get("query")
    if type(query) is str:
        words = query.split()
        # A last word still being typed is expanded to every term it begins: the shorter, the more.
        prefix = len(words[-1]) if words and not query[-1].isspace() else 0
        query_shape = [min(len(words), WORDS_COUNTED), min(prefix, PREFIX_COUNTED)]
    else:
        query_shape = [-1, 0]
    try:
        return orjson.dumps([query_shape, {key: value for key, value in body.items() if key != "query"}],
                            option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        return None


class SearchPlacement:
    """Per worker: for each search shape, the running mean of its searches' CPU time, and from it
    whether the next one runs on the event loop (:meth:`on_loop`)."""

    def __init__(self, limit_s: float | None = None, kept: int = SHAPES_KEPT) -> None:
        #: On the loop only below this mean CPU time; default: the interpreter's switch interval.
        self.limit_s = sys.getswitchinterval() if limit_s is None else limit_s
        self.kept = kept
        self._mean_s: OrderedDict[bytes, float] = OrderedDict()

    def on_loop(self, shape: bytes | None) -> bool:
        """Whether a search of ``shape`` runs on the event loop: seen before, and short."""
        if shape is None:
            return False
        mean = self._mean_s.get(shape)
        return mean is not None and mean < self.limit_s

    def note(self, shape: bytes | None, cpu_s: float) -> None:
        """Record that a search of ``shape`` took ``cpu_s`` seconds of CPU."""
        if shape is None:
            return
        mean = self._mean_s.get(shape)
        self._mean_s[shape] = cpu_s if mean is None else mean + NEWEST_WEIGHT * (cpu_s - mean)
        self._mean_s.move_to_end(shape)
        if len(self._mean_s) > self.kept:
            self._mean_s.popitem(last=False)
