"""The lexicon: every distinct term of a collection, its id, and fast typo and prefix lookups.

Owns: term ↔ term id (dense, in order of first appearance, never reused or removed — a term
whose records are all gone just has empty postings), and the three structures that keep query
expansion from scanning the vocabulary:

- **Prefixes**: terms sorted, with their ids alongside; a prefix is two binary searches.
- **One typo**: a deletion neighbourhood (SymSpell's idea). Every term is indexed under the CRC32
  of itself and of each string made by deleting one of its characters. Two strings within one
  edit (insertion, deletion, substitution, or a swap of adjacent letters — optimal string
  alignment) always share such a key, so looking up the query's own keys finds every candidate;
  rapidfuzz's OSA distance then confirms each one. Exact: no candidate is capped or missed.
- **Two typos** (query words of 8+ letters): a trigram index over terms of 6+ characters. Strings
  within OSA distance *k* share at least ``max(len) + 2 - 4k`` padded trigrams, so terms below
  that count (or more than two characters longer or shorter) cannot match and are never
  compared; the rest are confirmed with rapidfuzz in one batched call. Also exact.

Incremental: terms added since the last lookup are indexed in one vectorised pass at the next
typo lookup and merged into the sorted key arrays. Hash keys are stable across processes, so the
arrays are saved in snapshots as they are (``KEY_SCHEME`` marks their hashing).
"""

from __future__ import annotations

import array
import bisect
import threading
from collections.abc import Sequence
from itertools import compress, repeat
from typing import Any, overload

import numpy as np
import numpy.ma  # np.unique imports it on first call (0.1-0.2 s): pay that at import, not in a first search
from rapidfuzz import process
from rapidfuzz.distance import OSA

from roarsearch.index.bitmaps import sorted_unique

#: Terms shorter than this are left out of the trigram index (two typos need 8+ letter words,
#: which can only match terms of 6+ letters).
TRIGRAM_MIN_LENGTH = 6
_PAD = "\x01"


#: Polynomial hashing over code points (mod 2**64), folded to 32 bits. The same arithmetic runs
#: vectorised over whole batches of terms (numpy, wrapping uint64) and in Python for one query
#: word; it is stable across processes, so saved indexes stay valid.
_BASE = 1_000_003
_MASK = (1 << 64) - 1
_PAD_CODE = 1
KEY_SCHEME = 2


_MIX = 0x9E3779B97F4A7C15  # Fibonacci hashing: spreads short strings' small values over all 64 bits


def _fold(value: int) -> int:
    return ((value * _MIX) & _MASK) >> 32


def _prefix_hashes(codes: list[int]) -> list[int]:
    hashes = [0]
    for code in codes:
        hashes.append((hashes[-1] * _BASE + code + 1) & _MASK)
    return hashes


def _deletion_keys(term: str) -> set[int]:
    """Keys of ``term`` and of every string made by deleting one of its characters."""
    codes = [ord(ch) for ch in term]
    prefix = _prefix_hashes(codes)
    length = len(codes)
    keys = {_fold(prefix[length])}
    for i in range(length):
        power = pow(_BASE, length - 1 - i, 1 << 64)
        keys.add(_fold((prefix[i] * power + prefix[length] - prefix[i + 1] * power) & _MASK))
    return keys


def _trigrams(term: str) -> set[int]:
    codes = [_PAD_CODE, _PAD_CODE] + [ord(ch) for ch in term] + [_PAD_CODE, _PAD_CODE]
    return {_fold((((codes[i] + 1) * _BASE + codes[i + 1] + 1) * _BASE + codes[i + 2] + 1) & _MASK)
            for i in range(len(codes) - 2)}


def _code_matrix(terms: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(codes, lengths): terms as a zero-padded uint64 matrix of code points (numpy's UTF-32)."""
    lengths = np.fromiter(map(len, terms), dtype=np.int64, count=len(terms))
    width = max(1, int(lengths.max()) if lengths.size else 1)
    codes = np.array(terms, dtype=f"<U{width}").view(np.uint32).reshape(len(terms), width).astype(np.uint64)
    return codes, lengths


def _batch_deletion_keys(terms: list[str], first_id: int) -> tuple[np.ndarray, np.ndarray]:
    """(keys, term ids) of :func:`_deletion_keys` for many terms at once, vectorised."""
    codes, lengths = _code_matrix(terms)
    count, width = codes.shape
    base = np.uint64(_BASE)
    with np.errstate(over="ignore"):
        prefix = np.zeros((count, width + 1), dtype=np.uint64)
        for column in range(width):
            prefix[:, column + 1] = prefix[:, column] * base + codes[:, column] + np.uint64(1)
        powers = np.ones(width + 1, dtype=np.uint64)
        for k in range(1, width + 1):
            powers[k] = powers[k - 1] * base
        rows = np.arange(count)
        whole = prefix[rows, lengths]
        keys = [whole]
        ids = [rows]
        for i in range(width):
            valid = lengths > i
            if not valid.any():
                break
            rows_i = rows[valid]
            power = powers[lengths[valid] - 1 - i]
            keys.append(prefix[rows_i, i] * power + whole[valid] - prefix[rows_i, i + 1] * power)
            ids.append(rows_i)
    return _fold_array(np.concatenate(keys)), (np.concatenate(ids) + first_id).astype(np.uint32)


def _fold_array(values: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return ((values * np.uint64(_MIX)) >> np.uint64(32)).astype(np.uint32)


def _batch_trigrams(terms: list[str], first_id: int) -> tuple[np.ndarray, np.ndarray]:
    """(keys, term ids) of :func:`_trigrams` for many terms at once, vectorised."""
    codes, lengths = _code_matrix(terms)
    count, width = codes.shape
    padded = np.zeros((count, width + 4), dtype=np.uint64)
    padded[:, :2] = _PAD_CODE
    padded[:, 2:2 + width] = codes
    rows = np.arange(count)
    padded[rows, lengths + 2] = _PAD_CODE
    padded[rows, lengths + 3] = _PAD_CODE
    base = np.uint64(_BASE)
    one = np.uint64(1)
    keys, ids = [], []
    with np.errstate(over="ignore"):
        for j in range(width + 2):
            valid = lengths + 2 > j
            rows_j = rows[valid]
            triple = padded[rows_j]
            keys.append(((triple[:, j] + one) * base + triple[:, j + 1] + one) * base + triple[:, j + 2] + one)
            ids.append(rows_j)
    return _fold_array(np.concatenate(keys)), (np.concatenate(ids) + first_id).astype(np.uint32)


#: A key index, and the sorted term views, keep their latest entries in a small sorted run beside
#: the big one until they number this share of it: adding a batch's terms then sorts the small run
#: again, not every entry (at 10M packages, millions of deletion keys sorted again after each
#: 1,000-record batch made the next typo search take most of a second, and every term sorted
#: again made the next prefix search take a tenth of one).
RECENT_RUN_SHARE = 1 / 32


class _KeyIndex:
    """A multimap uint32 key → term ids: a big sorted run and a small sorted run of the latest
    keys (swapped together, so a lookup reads a consistent pair of runs), plus keys added since
    the last :meth:`merge`."""

    __slots__ = ("_runs", "_delta_keys", "_delta_ids")

    def __init__(self) -> None:
        empty = np.empty(0, dtype=np.uint32)
        #: (big run's keys, its ids, small run's keys, its ids), each run sorted by key.
        self._runs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] = (empty, empty, empty, empty)
        self._delta_keys: list[np.ndarray] = []
        self._delta_ids: list[np.ndarray] = []

    def add_arrays(self, keys: np.ndarray, ids: np.ndarray) -> None:
        self._delta_keys.append(keys)
        self._delta_ids.append(ids)

    def load(self, keys: np.ndarray, ids: np.ndarray) -> None:
        """Adopt saved sorted arrays (:meth:`whole`'s) as the big run."""
        empty = np.empty(0, dtype=np.uint32)
        self._runs = (keys, ids, empty, empty)

    def merge(self, whole: bool = False) -> None:
        """Sort the keys added since into the small run, and the small run into the big one once
        it holds :data:`RECENT_RUN_SHARE` of it (``whole``: now)."""
        big_keys, big_ids, small_keys, small_ids = self._runs
        if not self._delta_keys and not (whole and small_keys.size):
            return
        keys = np.concatenate([small_keys, *self._delta_keys])
        ids = np.concatenate([small_ids, *self._delta_ids])
        self._delta_keys, self._delta_ids = [], []
        empty = np.empty(0, dtype=np.uint32)
        if whole or keys.size > big_keys.size * RECENT_RUN_SHARE:
            keys = np.concatenate((big_keys, keys))
            ids = np.concatenate((big_ids, ids))
            order = np.argsort(keys, kind="stable")
            self._runs = (keys[order], ids[order], empty, empty)
        else:
            order = np.argsort(keys, kind="stable")
            self._runs = (big_keys, big_ids, keys[order], ids[order])

    def whole(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys, ids) of every key, sorted: one run (merged first)."""
        self.merge(whole=True)
        return self._runs[0], self._runs[1]

    def lookup(self, wanted: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(term ids, index into ``wanted`` of the key that found them) for every hit of the merged keys."""
        big_keys, big_ids, small_keys, small_ids = self._runs
        queries = np.asarray(wanted, dtype=np.uint32)
        found = [_hits(keys, ids, queries) for keys, ids in ((big_keys, big_ids), (small_keys, small_ids)) if keys.size]
        if not found:
            return np.empty(0, np.uint32), np.empty(0, np.int64)
        if len(found) == 1:
            return found[0]
        return np.concatenate((found[0][0], found[1][0])), np.concatenate((found[0][1], found[1][1]))


def _hits(keys: np.ndarray, ids: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ids, query index) of every entry of one sorted run whose key is one of ``queries``."""
    lo = np.searchsorted(keys, queries, side="left")
    hi = np.searchsorted(keys, queries, side="right")
    lengths = hi - lo
    total = int(lengths.sum())
    if not total:
        return np.empty(0, np.uint32), np.empty(0, np.int64)
    index = np.arange(total, dtype=np.int64) + np.repeat(lo - (np.cumsum(lengths) - lengths), lengths)
    which = np.repeat(np.arange(queries.size, dtype=np.int64), lengths)
    return ids[index], which


class _PermutedTerms(Sequence[str]):
    """The terms in a saved order (``ids``), read through without building a list of them: a
    snapshot's sorted views are usable for binary search the moment it is loaded. ``skip`` drops
    that many leading characters (the tails view)."""

    __slots__ = ("_terms", "_ids", "_skip")

    def __init__(self, terms: list[str], ids: np.ndarray, skip: int = 0) -> None:
        self._terms = terms
        # An array.array indexes to plain ints at C speed (a numpy scalar per step costs more).
        self._ids = array.array("I", ids.astype(np.uint32).tobytes())
        self._skip = skip

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self._terms[term_id][self._skip:] for term_id in self._ids[index]]
        return self._terms[self._ids[index]][self._skip:]

    def materialise(self) -> list[str]:
        terms = self._terms
        if not self._skip:
            return list(map(terms.__getitem__, self._ids))
        return [terms[term_id][self._skip:] for term_id in self._ids]


class _TermRun:
    """Terms in sorted order and their ids: binary searches for the terms that begin with a
    string. ``terms`` is a list or, loaded from a snapshot, a :class:`_PermutedTerms` view, then
    with ``keys``: each term's first 8 UTF-8 bytes as one big-endian integer (:func:`prefix_keys`),
    in the same order. A search first narrows to the terms sharing the string's first 8 bytes
    with one numpy search over the contiguous keys: a binary search over the view reads a term
    scattered in memory at each of its ~20 steps (a fifth of a first-seen two-word search on
    short records)."""

    __slots__ = ("terms", "ids", "keys")

    def __init__(self, terms: Sequence[str], ids: np.ndarray, keys: np.ndarray | None = None) -> None:
        self.terms, self.ids, self.keys = terms, ids, keys

    @classmethod
    def of(cls, terms: list[str], ids: np.ndarray) -> _TermRun:
        """The run of ``terms`` (in any order) with their ``ids``; equal terms (tails) by id."""
        order = sorted(range(len(terms)), key=terms.__getitem__)
        return cls([terms[i] for i in order], ids[np.asarray(order, dtype=np.int64)] if order else ids)

    def _span(self, start: str, whole: bool = False) -> tuple[int, int]:
        """Where the terms beginning with ``start`` may be (``whole``: where ``start`` itself may
        be); every term without keys."""
        keys = self.keys
        if keys is None or not start:  # (a run without keys: no encoding per lookup)
            return 0, len(self.terms)
        head = start.encode("utf-8", "surrogatepass")[:_KEY_BYTES]
        low = int.from_bytes(head.ljust(_KEY_BYTES, b"\x00"), "big")
        # Below 2^64 - 1 (no UTF-8 lead byte is 0xff), so one more is still a uint64.
        high = low if whole else int.from_bytes(head.ljust(_KEY_BYTES, b"\xff"), "big")
        lo, hi = keys.searchsorted(np.array((low, high + 1), dtype=np.uint64)).tolist()
        return lo, hi

    def bounds(self, start: str) -> tuple[int, int]:
        terms = self.terms
        lo, hi = self._span(start)
        first = bisect.bisect_left(terms, start, lo, hi)
        return first, bisect.bisect_left(terms, start + "\U0010ffff", first, hi)

    def position_of(self, term: str) -> int:
        """Where ``term`` is in the run (-1 when absent)."""
        terms = self.terms
        lo, hi = self._span(term, whole=True)
        position = bisect.bisect_left(terms, term, lo, hi)
        return position if position < hi and terms[position] == term else -1

    def ids_from(self, start: str) -> np.ndarray:
        """Ids of the terms that begin with ``start`` (in term order)."""
        lo, hi = self.bounds(start)
        return self.ids[lo:hi]

    def next_letters(self, start: str) -> list[str]:
        """Distinct letters that follow ``start`` in these terms (one binary search per letter)."""
        terms = self.terms
        lo, hi = self.bounds(start)
        letters = []
        depth = len(start)
        while lo < hi:
            term = terms[lo]
            if len(term) == depth:
                lo += 1
                continue
            letter = term[depth]
            letters.append(letter)
            lo = bisect.bisect_left(terms, start + letter + "\U0010ffff", lo, hi)
        return letters


#: How many leading UTF-8 bytes of a term its prefix key holds (:func:`prefix_keys`).
_KEY_BYTES = 8


def prefix_keys(joined: bytes, skip_first_letter: bool = False) -> np.ndarray:
    """Each NUL-separated term of ``joined`` (UTF-8) as its first 8 bytes (NUL-padded) read as one
    big-endian uint64, in the terms' order; ``skip_first_letter``: of the terms without their
    first letter. Keys order as the terms do (UTF-8 byte order is code point order, and a term
    has no NUL), so a sorted run's keys are ascending."""
    size = len(joined)
    padded = np.frombuffer(joined + bytes(_KEY_BYTES), dtype=np.uint8)
    separators = np.flatnonzero(padded[:size] == 0)
    starts = np.concatenate((np.zeros(1, dtype=np.int64), separators + 1))
    ends = np.append(separators, size)
    if skip_first_letter:  # a UTF-8 lead byte says how many bytes its letter takes
        lead = padded[starts]
        letter_bytes = 1 + (lead >= 0xC0).astype(np.int64) + (lead >= 0xE0) + (lead >= 0xF0)
        starts = np.minimum(starts + letter_bytes, ends)
    lengths = ends - starts
    keys = np.zeros(starts.size, dtype=np.uint64)
    for offset in range(_KEY_BYTES):
        byte = padded[starts + offset].astype(np.uint64)
        byte[lengths <= offset] = 0
        keys <<= np.uint64(8)
        keys |= byte
    return keys


_EMPTY_RUN = _TermRun([], np.empty(0, dtype=np.uint32))


def _listed(terms: Sequence[str]) -> list[str]:
    return terms.materialise() if isinstance(terms, _PermutedTerms) else list(terms)


class Lexicon:
    """Every distinct term of one collection (all fields together), with typo and prefix search."""

    def __init__(self) -> None:
        #: term → id; None after a snapshot load until the first write needs it (lookups then
        #: binary-search the saved sorted view, so opening does not hash every term).
        self._ids: dict[str, int] | None = {}
        self._terms: list[str] = []
        # Prefix search: the terms up to ``_sorted_upto`` sorted, as a big run and a small run of
        # the latest (merged once it holds RECENT_RUN_SHARE of the big one), so that a batch of
        # new terms sorts the small run again, not every term. The big run's ids are saved in
        # snapshots; after a load its terms are a view over them.
        self._by_term: tuple[_TermRun, _TermRun] = (_EMPTY_RUN, _EMPTY_RUN)
        # The same for the terms without their first letter: typos in the first letter of a prefix.
        self._by_tail: tuple[_TermRun, _TermRun] = (_EMPTY_RUN, _EMPTY_RUN)
        self._sorted_upto = 0
        self._deletions = _KeyIndex()
        self._trigrams = _KeyIndex()
        self._indexed_upto = 0  # terms below this id are in the deletion and trigram indexes
        self._maintenance = threading.RLock()

    def __len__(self) -> int:
        return len(self._terms)

    # ------------------------------------------------------------------ ids

    def intern_many(self, terms: list[str]) -> np.ndarray:
        """Term ids for ``terms`` (uint32, one per input), assigning ids to unseen terms.

        Ingest's hot path: known terms resolve in one C-level ``map``; only new ones cost Python
        work, and their typo keys are computed lazily, at the first typo lookup.
        """
        ids, new_terms, first_new = self.plan_ids(terms)
        self.add_planned(new_terms, first_new)
        return ids

    def plan_ids(self, terms: list[str], known: np.ndarray | None = None) -> tuple[np.ndarray, list[str], int]:
        """The ids :meth:`intern_many` would give ``terms``, assigning none: ``(ids, new terms in id
        order, first new id)``. A write plans while searches run, then :meth:`add_planned` (no
        other intern in between).

        ``known``: ids of ``terms`` already looked up in a copy of this lexicon's first terms (the
        analysis worker's mirror; -1 where the copy did not hold the term), so that only the
        others are looked up here.
        """
        first_new = len(self._terms)
        usable = known is not None and known.size == len(terms) and (not known.size or int(known.max()) < first_new)
        # A copy of ``known`` (the misses are filled in below), or every term still to look up.
        found = known.astype(np.int64) if usable and known is not None else np.full(len(terms), -1, dtype=np.int64)
        unknown = np.flatnonzero(found < 0)
        if unknown.size:
            lookup = terms if unknown.size == len(terms) else list(map(terms.__getitem__, unknown.tolist()))
            found[unknown] = np.fromiter(map(self._id_map().get, lookup, repeat(-1)), dtype=np.int64, count=unknown.size)
        missing = np.flatnonzero(found < 0)
        if not missing.size:
            return found.astype(np.uint32), [], first_new
        missing_terms = list(map(terms.__getitem__, missing.tolist()))
        new_terms = list(dict.fromkeys(missing_terms))
        new_ids = dict(zip(new_terms, range(first_new, first_new + len(new_terms))))
        found[missing] = np.fromiter(map(new_ids.__getitem__, missing_terms), dtype=np.int64, count=missing.size)
        return found.astype(np.uint32), new_terms, first_new

    def add_planned(self, new_terms: list[str], first_new: int) -> None:
        """Assign the ids a :meth:`plan_ids` planned."""
        if len(self._terms) != first_new:
            raise RuntimeError("term ids were planned against a lexicon that has changed since")
        if new_terms:
            self._id_map().update(zip(new_terms, range(first_new, first_new + len(new_terms))))
            self._terms.extend(new_terms)

    def id_of(self, term: str) -> int | None:
        ids = self._ids
        if ids is not None:
            return ids.get(term)
        # Loaded and not written since: the saved sorted view holds every term.
        run = self._by_term[0]
        position = run.position_of(term)
        return int(run.ids[position]) if position >= 0 else None

    def _id_map(self) -> dict[str, int]:
        ids = self._ids
        if ids is None:
            with self._maintenance:
                if self._ids is None:
                    self._ids = dict(zip(self._terms, range(len(self._terms))))
                ids = self._ids
        return ids

    def term_of(self, term_id: int) -> str:
        return self._terms[term_id]

    def terms(self) -> list[str]:
        """Every term, by id (a copy)."""
        return list(self._terms)

    def terms_since(self, first: int, last: int) -> list[str]:
        """Terms of ids ``first`` to ``last`` (excluded), in id order: what the analysis worker's
        mirror of this lexicon lacks (ids never change, so a copy of the first ones stays right)."""
        return self._terms[first:last]

    @classmethod
    def from_terms(cls, terms: list[str]) -> Lexicon:
        """A lexicon of ``terms`` with ids in list order (the integrity check rebuilds with it)."""
        lexicon = cls()
        lexicon.intern_many(terms)
        return lexicon

    # ------------------------------------------------------------------ maintenance

    def _index_new_terms(self) -> None:
        """Put terms added since the last lookup into the deletion and trigram indexes (vectorised)."""
        if self._indexed_upto == len(self._terms):
            return
        with self._maintenance:  # concurrent readers: one brings the indexes up to date
            self._index_new_terms_locked()

    def _index_new_terms_locked(self) -> None:
        start = self._indexed_upto
        new_terms = self._terms[start:]
        if new_terms:
            self._deletions.add_arrays(*_batch_deletion_keys(new_terms, start))
            # Selected in C (no tuple per term: at 100k new terms a comprehension of pairs took
            # 0.1 s, most of it in the garbage collector walking a heap of records).
            is_long = np.fromiter(map(len, new_terms), dtype=np.int64, count=len(new_terms)) >= TRIGRAM_MIN_LENGTH
            if is_long.any():
                keys, positions = _batch_trigrams(list(compress(new_terms, is_long.tolist())), 0)
                term_ids = (np.flatnonzero(is_long) + start).astype(np.uint32)
                self._trigrams.add_arrays(keys, term_ids[positions])
        # Merged here, under the lock, so that lookups only ever read whole (keys, ids) pairs.
        self._deletions.merge()
        self._trigrams.merge()
        self._indexed_upto = len(self._terms)

    def _sorted_view(self, whole: bool = False) -> None:
        if self._sorted_view_current(whole):
            return
        with self._maintenance:  # concurrent readers: one brings the views up to date
            if not self._sorted_view_current(whole):
                self._sorted_view_locked(whole)

    def _sorted_view_current(self, whole: bool) -> bool:
        return self._sorted_upto == len(self._terms) and not (whole and len(self._by_term[1].ids))

    def _sorted_view_locked(self, whole: bool) -> None:
        """Sort the terms added since into the small runs, and the small runs into the big ones
        once they hold :data:`RECENT_RUN_SHARE` of them (``whole``: now)."""
        upto = len(self._terms)
        big, small = self._by_term
        big_tails = self._by_tail[0]
        new_terms = self._terms[self._sorted_upto:upto]
        new_ids = np.arange(self._sorted_upto, upto, dtype=np.uint32)
        recent_terms = list(small.terms) + new_terms
        if not whole and len(recent_terms) <= len(big.ids) * RECENT_RUN_SHARE:
            recent_ids = np.concatenate((small.ids, new_ids))
            self._by_term = (big, _TermRun.of(recent_terms, recent_ids))
            # The small run's tails in id order (its ids are the latest, ascending): ties by id.
            self._by_tail = (big_tails, _TermRun.of([term[1:] for term in self._terms[upto - len(recent_terms):upto]],
                                                    np.arange(upto - len(recent_terms), upto, dtype=np.uint32)))
        else:
            # Timsort merges the big run and the new terms in close to linear time; sorting plain
            # strings (not tuples) and mapping them back to ids keeps the work in C.
            first_new = upto - len(recent_terms)
            recent = self._terms[first_new:upto]
            # A loaded snapshot's views become lists at the first merge (the cost of one lookup).
            terms = sorted(_listed(big.terms) + recent)
            ids = np.fromiter(map(self._id_map().__getitem__, terms), dtype=np.uint32, count=len(terms))
            self._by_term = (_TermRun(terms, ids), _EMPTY_RUN)
            tails = _listed(big_tails.terms) + [term[1:] for term in recent]
            tail_ids = np.concatenate((big_tails.ids, np.arange(first_new, upto, dtype=np.uint32)))
            self._by_tail = (_TermRun.of(tails, tail_ids), _EMPTY_RUN)
        self._sorted_upto = upto

    # ------------------------------------------------------------------ lookups

    def prefix_ids(self, prefix: str) -> np.ndarray:
        """Sorted ids of every term starting with ``prefix`` (the term itself included)."""
        self._sorted_view()
        big, small = self._by_term
        found = big.ids_from(prefix)
        if len(small.ids):
            found = np.concatenate((found, small.ids_from(prefix)))
        return np.sort(found)

    def typo_candidates(self, word: str, max_typos: int) -> list[tuple[int, int]]:
        """(term id, OSA distance) of every term within ``max_typos`` of ``word`` (itself included)."""
        if max_typos <= 0:
            term_id = self.id_of(word)
            return [] if term_id is None else [(term_id, 0)]
        self._index_new_terms()
        if max_typos == 1:
            ids, _ = self._deletions.lookup(list(_deletion_keys(word)))
        else:
            keys = list(_trigrams(word))
            grams = len(word) + 2
            needed = max(len(word), 1) + 2 - 4 * max_typos - (grams - len(keys))
            if needed <= 0 or len(word) - max_typos < TRIGRAM_MIN_LENGTH:
                return self._scan(word, max_typos)  # not with the 4/8 rules: 8 - 2 >= 6
            hits, _ = self._trigrams.lookup(keys)
            if hits.size == 0:
                return []
            counts = np.bincount(hits)
            ids = np.flatnonzero(counts >= needed)
            # Terms shorter than the trigram minimum are missed here; words of 8+ letters with two
            # typos cannot match them (length differs by more than two).
        candidates = sorted_unique(ids).tolist()
        terms = self._terms
        lengths = len(word)
        result = []
        for term_id in candidates:
            term = terms[term_id]
            if abs(len(term) - lengths) > max_typos:
                continue
            distance = OSA.distance(word, term, score_cutoff=max_typos)
            if distance <= max_typos:
                result.append((term_id, distance))
        return result

    def _scan(self, word: str, max_typos: int) -> list[tuple[int, int]]:
        """Exhaustive fallback for words too short for the trigram bound (never reached with 4/8 rules)."""
        matches = process.extract(word, self._terms, scorer=OSA.distance, score_cutoff=max_typos, limit=None)
        return [(index, int(distance)) for _, distance, index in matches]

    def _next_letters(self, start: str) -> set[str]:
        """Distinct letters that follow ``start`` in the vocabulary."""
        return {letter for run in self._by_term for letter in run.next_letters(start)}

    def prefix_candidates(self, prefix: str, max_typos: int = 0) -> list[tuple[int, int]]:
        """Terms that begin with ``prefix`` (distance 0) or, with ``max_typos`` ≥ 1, with a string one
        edit away from it (distance 1), each term once with its smallest distance.

        One typo at most (a prefix is still being typed), and the edit may not drop the prefix's
        last letter — else "star" would match every "sta…" word. Candidate beginnings are built
        from the letters the vocabulary actually has after each position (substitutions,
        insertions), plus deletions and adjacent swaps, each looked up by binary search.
        """
        best: dict[int, int] = {term_id: 0 for term_id in self.prefix_ids(prefix).tolist()}
        if max_typos <= 0 or len(prefix) < 2:  # a typo on a one-letter prefix would match anything
            return sorted(best.items())
        self._sorted_view()
        beginnings: set[str] = set()
        tail_prefixes = {prefix[1:], prefix}  # first letter substituted; a first letter left out
        for i in range(len(prefix)):
            head, tail = prefix[:i], prefix[i + 1:]
            if i:
                for letter in self._next_letters(head):
                    beginnings.add(head + letter + tail)           # substitution at i
                    beginnings.add(head + letter + prefix[i:])     # a letter the user left out
            if i < len(prefix) - 1:
                beginnings.add(head + tail)                        # an extra letter typed (not the last)
                beginnings.add(head + prefix[i + 1] + prefix[i] + prefix[i + 2:])  # adjacent swap
        for letter in self._next_letters(prefix):
            beginnings.add(prefix + letter)
        beginnings.discard(prefix)
        searches = [(run, beginning) for beginning in beginnings for run in self._by_term]
        searches += [(run, tail_prefix) for tail_prefix in tail_prefixes for run in self._by_tail]
        for run, start in searches:
            for term_id in run.ids_from(start).tolist():
                if term_id not in best:
                    best[term_id] = 1
        return sorted(best.items())

    # ------------------------------------------------------------------ state

    def sorted_order(self) -> tuple[np.ndarray, np.ndarray]:
        """(term ids in term order, term ids in order of their terms without the first letter; ties
        by id) — the prefix views, brought up to date."""
        self._sorted_view(whole=True)
        return self._by_term[0].ids, self._by_tail[0].ids

    def to_state(self) -> dict[str, Any]:
        self._index_new_terms()
        with self._maintenance:  # the runs made one, as lookups may be reading them
            deletion_keys, deletion_ids = self._deletions.whole()
            trigram_keys, trigram_ids = self._trigrams.whole()
        sorted_ids, tail_ids = self.sorted_order()
        joined = "\x00".join(self._terms)
        encoded = joined.encode("utf-8", "surrogatepass")
        return {
            "sorted_ids": sorted_ids.tobytes(), "tail_ids": tail_ids.tobytes(),
            "sorted_keys": prefix_keys(encoded)[sorted_ids].tobytes() if self._terms else b"",
            "tail_keys": prefix_keys(encoded, skip_first_letter=True)[tail_ids].tobytes() if self._terms else b"",
            "key_scheme": KEY_SCHEME,
            "terms": joined,
            "count": len(self._terms),
            "deletion_keys": deletion_keys.tobytes(), "deletion_ids": deletion_ids.tobytes(),
            "trigram_keys": trigram_keys.tobytes(), "trigram_ids": trigram_ids.tobytes(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Lexicon:
        lexicon = cls()
        terms = state["terms"].split("\x00") if state["count"] else []
        lexicon._terms = terms
        lexicon._ids = None  # built by the first write; until then id_of searches the sorted view
        if state.get("key_scheme") == KEY_SCHEME:
            for index, prefix in ((lexicon._deletions, "deletion"), (lexicon._trigrams, "trigram")):
                index.load(np.frombuffer(state[f"{prefix}_keys"], dtype=np.uint32).copy(),
                           np.frombuffer(state[f"{prefix}_ids"], dtype=np.uint32).copy())
            lexicon._indexed_upto = len(terms)
        else:  # an older key scheme: the typo indexes are rebuilt from the terms on first use
            lexicon._indexed_upto = 0
        if "sorted_ids" in state:  # older snapshots lack the prefix views: sorted on first use
            sorted_ids = np.frombuffer(state["sorted_ids"], dtype=np.uint32).copy()
            tail_ids = np.frombuffer(state["tail_ids"], dtype=np.uint32).copy()
            if sorted_ids.size == tail_ids.size == len(terms):
                sorted_keys, tail_keys = (_saved_keys(state.get(name), len(terms)) for name in ("sorted_keys", "tail_keys"))
                lexicon._by_term = (_TermRun(_PermutedTerms(terms, sorted_ids), sorted_ids, sorted_keys), _EMPTY_RUN)
                lexicon._by_tail = (_TermRun(_PermutedTerms(terms, tail_ids, skip=1), tail_ids, tail_keys), _EMPTY_RUN)
                lexicon._sorted_upto = len(terms)
        if lexicon._sorted_upto != len(terms):
            lexicon._ids = dict(zip(terms, range(len(terms))))
        return lexicon


def _saved_keys(saved: Any, count: int) -> np.ndarray | None:
    """A saved run's prefix keys (a view of the snapshot); None when absent (older snapshots: the
    run is searched without them) or not one per term."""
    if saved is None:
        return None
    keys = np.frombuffer(saved, dtype=np.uint64)
    if keys.size != count:
        return None
    return keys if keys.flags.aligned else keys.copy()  # numpy copies an unaligned array at every search
