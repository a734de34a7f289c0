"""Every cache derived from one collection's index, owned by that index and tied to its writes.

Owns: memoised structures that queries build from the index and reuse across requests (unions of
many postings, typo expansions, per-value bitmaps of a facet field, facet value search structures).
Each entry is stored with a *stamp*: the state of the index it was derived from. By default the
stamp is the index's write generation, which every add, upsert, delete and clear advances, so no
entry outlives the write that made it stale. Entries that depend on less than the whole index say
so with a narrower stamp (typo expansions depend only on the vocabulary, which only grows: their
stamp is its size), so that a delete does not throw away work it cannot have changed.

Entries derived from an append-only source (a value column's pairs, which writes only extend) are
*extended* rather than rebuilt (:meth:`IndexCache.get_or_extend`): stamped with the source's
identity and size, a stale one is brought up to date from what was appended since. A writer
adding a batch a second then costs each cached range, equality or facet structure the batch's
share, not a rebuild over the whole column.

Why one object and not module-level dicts: caches keyed by object identity in module globals
were shared by every index of the process, kept stale answers after in-place changes, and were
raced by concurrent readers. Here the cache lives and dies with its index, and a lock makes
each lookup and insertion atomic (building a value happens outside the lock: two readers may
build the same entry once each, never a torn one).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple, TypeVar

Value = TypeVar("Value")

#: Entries kept per namespace; the least recently used goes first.
DEFAULT_CAPACITY = 4096


class _Derived(NamedTuple):
    """The stamp of an entry derived from an append-only source (:meth:`IndexCache.extended`)."""

    source: weakref.ref[object] | None
    size: Hashable

    def made_from(self) -> object | None:
        """The source the entry was made from (None: the index's own, or one gone since)."""
        return None if self.source is None else self.source()


class IndexCache:
    """Namespaced, bounded, stamp-checked memo of values derived from one index."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._entries: dict[str, OrderedDict[Hashable, tuple[Hashable, object]]] = {}

    def get_or_build(self, namespace: str, key: Hashable, stamp: Hashable, build: Callable[[], Value],
                     capacity: int | None = None) -> Value:
        """The cached value for ``(namespace, key)`` made at ``stamp``, or ``build()`` stored under it."""
        with self._lock:
            entries = self._entries.get(namespace)
            if entries is not None:
                found = entries.get(key)
                if found is not None and found[0] == stamp:
                    entries.move_to_end(key)
                    return found[1]  # type: ignore[return-value]
        value = build()
        self.put(namespace, key, stamp, value, capacity)
        return value

    def get_or_extend(self, namespace: str, key: Hashable, source: object, size: Hashable,
                      build: Callable[[], Value], extend: Callable[[Value, Any], Value],
                      capacity: int | None = None) -> Value:
        """The cached value for ``(namespace, key)`` derived from ``source`` (an append-only
        structure) at ``size``, brought up to date by :meth:`extended`, or ``build()`` stored."""
        found = self.extended(namespace, key, source, size, extend, capacity)
        if found is not None:
            return found
        value = build()
        self.put_derived(namespace, key, source, size, value, capacity)
        return value

    def extended(self, namespace: str, key: Hashable, source: object, size: Hashable,
                 extend: Callable[[Value, Any], Value], capacity: int | None = None) -> Value | None:
        """The value cached for ``(namespace, key)`` from ``source`` (held by a weak reference: a
        source replaced is never mistaken for its successor) at ``size``; one made from the same
        source at another, earlier, size becomes ``extend(value, that size)`` (stored); None when
        there is neither."""
        with self._lock:
            entries = self._entries.get(namespace)
            found = None if entries is None else entries.get(key)
            if found is None:
                return None
            stamp, cached = found
            if not isinstance(stamp, _Derived) or stamp.made_from() is not source:
                return None
            if stamp.size == size:
                entries.move_to_end(key)  # type: ignore[union-attr]
                return cached  # type: ignore[return-value]
        value = extend(cached, stamp.size)  # type: ignore[arg-type]
        self.put_derived(namespace, key, source, size, value, capacity)
        return value

    def put_derived(self, namespace: str, key: Hashable, source: object, size: Hashable, value: object,
                    capacity: int | None = None) -> None:
        """Store ``value`` as derived from ``source`` at ``size`` (see :meth:`extended`); a source
        of None: the index's own (its lexicon), told apart by ``size`` alone."""
        self.put(namespace, key, _Derived(None if source is None else weakref.ref(source), size), value, capacity)

    def get(self, namespace: str, key: Hashable, stamp: Hashable) -> object | None:
        with self._lock:
            entries = self._entries.get(namespace)
            found = None if entries is None else entries.get(key)
            if found is None or found[0] != stamp:
                return None
            return found[1]

    def put(self, namespace: str, key: Hashable, stamp: Hashable, value: object, capacity: int | None = None) -> None:
        limit = self._capacity if capacity is None else capacity
        with self._lock:
            entries = self._entries.setdefault(namespace, OrderedDict())
            entries[key] = (stamp, value)
            entries.move_to_end(key)
            while len(entries) > limit:
                entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def sizes(self) -> dict[str, int]:
        """Entries per namespace (for tests and diagnostics)."""
        with self._lock:
            return {namespace: len(entries) for namespace, entries in self._entries.items()}
