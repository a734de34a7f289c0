"""The one small interface every engine adapter implements.

Owns: the adapter contract and the shared reading of a workload entry (see
:mod:`benchmarks.workloads`). Callers: ``benchmarks.run`` (in a child process per engine) and the
tests. An adapter builds an index of a corpus from batches of records, then answers workload
entries with an :class:`Answer`; a class the engine cannot do raises :class:`Unsupported` — it is
reported, never faked.

Shared semantics every adapter implements the same way, so that totals can be compared:
- a record matches when every query word is in at least one text field (AND across words, OR
  across fields); no fallback when nothing matches;
- a word with typos allowed matches terms within OSA distance :func:`typo_distance`;
- a prefix entry matches terms that start with its (only) word;
- ranges are ``[low, high)``, ``None`` is open; ``eq``/``in`` on an array field match any element;
- facet counts count records, per value and per range; groups count records per value, records
  without a value are in no group.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.datasets import Corpus


class Unsupported(Exception):
    """The engine has no such feature (or it cannot be built at this size)."""


@dataclass
class Answer:
    """What an engine returned: exact total, ids of the page, and for facet and group entries the
    counts (``facets``: field → value or range label → records; ``groups``: value → records)."""

    total: int
    ids: list[Any]
    facets: dict[str, dict[str, int]] = field(default_factory=dict)
    groups: dict[str, int] = field(default_factory=dict)


def typo_distance(word: str, typos: int) -> int:
    """Edits allowed for ``word``: none under 4 letters, a second one from 8 (CONTRACT §3)."""
    if typos <= 0 or len(word) < 4:
        return 0
    return 1 if len(word) < 8 or typos == 1 else 2


def range_label(low: float | None, high: float | None) -> str:
    """``[low,high)`` as roarsearch's interval string (open ends empty)."""
    def number(value: float | None) -> str:
        return "" if value is None else (str(int(value)) if float(value).is_integer() else str(value))
    return f"[{number(low)},{number(high)})"


class Adapter:
    """Base class: ``build`` once, then ``search`` many times; ``size_bytes`` of what it wrote."""

    name = "engine"
    #: True when equal sort keys are ordered by id ascending (then page ids are comparable).
    ties_by_id = False
    #: Largest collection this engine is built for (None: no cap); larger ones are "not built".
    max_records: int | None = None

    def build(self, corpus: Corpus, batches: Iterable[list[dict[str, Any]]], directory: str) -> int:
        """Index every record of ``batches`` into ``directory``; returns the number of records."""
        raise NotImplementedError

    def attach(self, corpus: Corpus, directory: str) -> None:
        """Point at what ``build`` wrote into ``directory`` in another process, so that ``open``
        can be timed in a fresh process (``benchmarks.ingest``)."""
        raise NotImplementedError

    def open(self) -> None:
        """Open what ``build`` wrote for searching (timed apart from the build)."""

    def load(self, corpus: Corpus, batches: Iterable[list[dict[str, Any]]], directory: str) -> int:
        """Index every record of ``batches`` durably and leave the index open for searching at once,
        with whatever background work the engine still owes running (a bulk load a service answers
        searches right after); returns the number of records. :meth:`close` ends it."""
        count = self.build(corpus, batches, directory)
        self.open()
        return count

    def add_live(self, batch: list[dict[str, Any]]) -> None:
        """Add ``batch`` (new records) to the open index, durably, visible to the searches that
        follow, while other threads search: the writer of the fresh pass with a writer. The first
        call may come from a new thread; every later one comes from that thread."""
        raise Unsupported("no live writer in this adapter")

    def search(self, kind: str, entry: dict[str, Any]) -> Answer:
        raise NotImplementedError

    def size_bytes(self) -> int:
        return 0

    def close(self) -> None:
        """Release files and threads (called before the directory is removed)."""
