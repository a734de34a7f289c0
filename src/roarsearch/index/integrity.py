"""The integrity check behind ``Engine.check()``: an index against one rebuilt from its records.

Owns: :func:`rebuild_index` (a fresh index from the live stored records alone) and
:func:`compare_indexes`, which compares every structure a query reads, by record id (doc ids
differ between the two): the live record ids, each term's postings, every token position, each
column kind (``exists``, numeric pairs, per-doc minimum and maximum, the single/multi-valued flag,
exact-value pairs and each column's doc bitmap), and the lexicon (every term known, ids
consistent, typo keys and the sorted prefix views equal to those recomputed from the terms). A difference in any of them
means the index does not answer as its records say it should, and is named in the report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from pyroaring import AbstractBitMap, BitMap

from roarsearch.index.bitmaps import array_from_bitmap, sorted_unique
from roarsearch.index.geo import extract_points
from roarsearch.index.index import Index
from roarsearch.index.lexicon import Lexicon
from roarsearch.index.state import valid_point
from roarsearch.schema import record_location

#: Differences listed per collection before the report says there are more.
MAX_PROBLEMS = 100


def rebuild_index(index: Index, progress: Callable[[int], None] | None = None) -> Index:
    """A fresh index from the live stored records of ``index``, in doc order; ``progress(records)``
    after each batch of records rebuilt."""
    rebuilt = Index()
    rebuilt.value_fields = set(index.value_fields)  # index the same exact values as the original
    rebuilt.auto_values = False  # ... and no others (none dropped either: auto_value_fields stays empty)
    rebuilt.vectors.configure(index.vectors.specs(), rebuilt.alive, rebuilt.docs.record)  # the same vector spaces
    live = [index.docs.record(doc) for doc in index.alive]
    for start in range(0, len(live), 10_000):
        rebuilt.add_records(live[start:start + 10_000])
        if progress is not None:
            progress(min(start + 10_000, len(live)))
    return rebuilt


class _Problems(list[str]):
    def full(self) -> bool:
        return len(self) > MAX_PROBLEMS


def compare_indexes(loaded: Index, rebuilt: Index) -> list[str]:
    """Differences between two indexes of the same records (see the module docstring)."""
    problems = _Problems()
    loaded_ids = _record_ids(loaded, loaded.alive)
    if loaded_ids != _record_ids(rebuilt, rebuilt.alive):
        problems.append("records: the live record ids differ between the index and the stored records")
    for check in (_compare_postings, _compare_positions, _compare_columns, _compare_lexicon, _compare_geo,
                  _compare_vectors):
        check(loaded, rebuilt, problems)
        if problems.full():
            return problems[:MAX_PROBLEMS] + ["... (more differences not listed)"]
    return list(problems)


def _record_ids(index: Index, docs: AbstractBitMap) -> set[Any]:
    return set(index.docs.record_ids.ids_of(array_from_bitmap(docs & index.alive)))


def _id_keys(index: Index) -> np.ndarray:
    """Per doc id, a key equal across indexes for the same record (-1 for retired docs)."""
    keys = np.full(len(index.docs.record_ids), -1, dtype=np.int64)
    alive = array_from_bitmap(index.alive)
    for doc, record_id in zip(alive.tolist(), index.docs.record_ids.ids_of(alive)):
        keys[doc] = hash((type(record_id).__name__, record_id)) & 0x7FFF_FFFF_FFFF_FFFF
    return keys


def _compare_postings(loaded: Index, rebuilt: Index, problems: _Problems) -> None:
    for path in sorted(set(loaded.postings) | set(rebuilt.postings)):
        left, right = loaded.postings.get(path), rebuilt.postings.get(path)
        left_terms = {} if left is None else {loaded.lexicon.term_of(t): b for t, b in left.all_terms().items()}
        right_terms = {} if right is None else {rebuilt.lexicon.term_of(t): b for t, b in right.all_terms().items()}
        for term in sorted(set(left_terms) | set(right_terms)):
            a = _record_ids(loaded, left_terms.get(term, BitMap()))
            b = _record_ids(rebuilt, right_terms.get(term, BitMap()))
            if a != b:
                problems.append(f"postings {path!r} term {term!r}: index has {len(a)} live records, stored records give {len(b)}")
                if problems.full():
                    return


def _token_rows(index: Index, path: str, terms_to: dict[int, int] | None) -> np.ndarray:
    """Sorted (record key, term, position) rows of the live tokens of ``path``."""
    postings = index.postings.get(path)
    if postings is None:
        return np.empty((0, 3), dtype=np.int64)
    terms, docs, positions = postings.token_arrays()
    keys = _id_keys(index)
    live = keys[docs] >= 0 if docs.size else np.zeros(0, dtype=bool)
    term_column = terms[live].astype(np.int64)
    if terms_to is not None:  # loaded term ids → the rebuilt lexicon's ids (-1: unknown there)
        term_column = np.fromiter((terms_to.get(term, -1) for term in term_column.tolist()), dtype=np.int64,
                                  count=term_column.size)
    rows = np.stack((keys[docs[live]], term_column, positions[live].astype(np.int64)), axis=1)
    return rows[np.lexsort(rows.T[::-1])] if rows.size else rows


def _compare_positions(loaded: Index, rebuilt: Index, problems: _Problems) -> None:
    term_map = {term_id: rebuilt.lexicon.id_of(loaded.lexicon.term_of(term_id))
                for term_id in range(len(loaded.lexicon))}
    to_rebuilt = {term_id: mapped for term_id, mapped in term_map.items() if mapped is not None}
    for path in sorted(set(loaded.postings) | set(rebuilt.postings)):
        left = _token_rows(loaded, path, to_rebuilt)
        right = _token_rows(rebuilt, path, None)
        if left.shape != right.shape or not np.array_equal(left, right):
            problems.append(f"positions {path!r}: the index holds {len(left)} live tokens, stored records give {len(right)}"
                            + ("" if len(left) != len(right) else " at other terms or positions"))


def _compare_columns(loaded: Index, rebuilt: Index, problems: _Problems) -> None:
    loaded_keys, rebuilt_keys = _id_keys(loaded), _id_keys(rebuilt)
    for path in sorted(set(loaded.columns) | set(rebuilt.columns)):
        left_columns, right_columns = loaded.columns.get(path), rebuilt.columns.get(path)
        a = _record_ids(loaded, loaded.exists(path))
        b = _record_ids(rebuilt, rebuilt.exists(path))
        if a != b:
            problems.append(f"column {path!r} exists: {len(a ^ b)} records differ")
        for kind in ("numeric", "values"):
            left = getattr(left_columns, kind, None)
            right = getattr(right_columns, kind, None)
            if _column_pairs(loaded, left, kind) != _column_pairs(rebuilt, right, kind):
                problems.append(f"column {path!r} {kind}: (record, value) pairs differ from the stored records")
            if left is not None and _record_ids(loaded, left.docs) != _record_ids(loaded, _pair_docs(left)):
                problems.append(f"column {path!r} {kind}: its doc bitmap disagrees with its pairs")
        left_numeric = getattr(left_columns, "numeric", None)
        right_numeric = getattr(right_columns, "numeric", None)
        if left_numeric is not None:  # its value order (saved in snapshots) must sort its own pairs
            _docs, values = left_numeric.pairs()
            if not np.array_equal(left_numeric.sort_order(), np.argsort(values, kind="stable")):
                problems.append(f"column {path!r} numeric: its value order does not sort its values")
        if left_numeric is not None and right_numeric is not None:
            if right_numeric.multi_valued and not left_numeric.multi_valued:
                problems.append(f"column {path!r} numeric: marked single-valued, but records hold several values")
            for name in ("minimum", "maximum"):
                if _per_record(loaded_keys, getattr(left_numeric, name).data) != _per_record(
                        rebuilt_keys, getattr(right_numeric, name).data):
                    problems.append(f"column {path!r} numeric: per-record {name} differs from the stored records")


def _per_record(keys: np.ndarray, dense: np.ndarray) -> dict[int, float]:
    """Record key → the dense per-doc value (NaN and retired docs left out)."""
    size = min(keys.size, dense.size)
    keep = (keys[:size] >= 0) & ~np.isnan(dense[:size])
    return dict(zip(keys[:size][keep].tolist(), dense[:size][keep].tolist()))


def _pair_docs(column: Any) -> AbstractBitMap:
    docs, _ = column.pairs()
    return BitMap(sorted_unique(docs).tolist())


def _column_pairs(index: Index, column: Any, kind: str) -> set[tuple[Any, Any]]:
    if column is None:
        return set()
    docs, values = column.pairs()
    alive = np.zeros(len(index.docs.record_ids), dtype=bool)
    alive[array_from_bitmap(index.alive)] = True
    keep = alive[docs] if docs.size else np.zeros(0, dtype=bool)
    ids = index.docs.record_ids.ids_of(docs[keep])
    if kind == "numeric":
        return set(zip(ids, values[keep].tolist()))
    return {(record_id, column.values[value_id]) for record_id, value_id in zip(ids, values[keep].tolist())}


def _compare_lexicon(loaded: Index, rebuilt: Index, problems: _Problems) -> None:
    lexicon = loaded.lexicon
    missing = [term for term in (rebuilt.lexicon.term_of(t) for t in range(len(rebuilt.lexicon)))
               if lexicon.id_of(term) is None]
    if missing:
        problems.append(f"lexicon: {len(missing)} terms of the stored records are unknown, e.g. {missing[0]!r}")
    wrong = [term_id for term_id in range(len(lexicon)) if lexicon.id_of(lexicon.term_of(term_id)) != term_id]
    if wrong:
        problems.append(f"lexicon: {len(wrong)} term ids do not map back to their terms")
    # The typo keys must be those the terms give: recompute them from the term list alone.
    fresh_lexicon = Lexicon.from_terms(lexicon.terms())
    saved, fresh = lexicon.to_state(), fresh_lexicon.to_state()
    for name in ("deletion", "trigram"):
        if not np.array_equal(_key_pairs(saved, name), _key_pairs(fresh, name)):
            problems.append(f"lexicon: the {name} typo index differs from the one its terms give")
    # The prefix views (saved in snapshots) must be the terms' own order, and read back as such.
    for name, left, right in zip(("sorted", "tail"), lexicon.sorted_order(), fresh_lexicon.sorted_order()):
        if not np.array_equal(left, right):
            problems.append(f"lexicon: the {name} prefix view differs from the order of its terms")
    views = ((lexicon._by_term[0].terms, fresh_lexicon._by_term[0].terms), (lexicon._by_tail[0].terms, fresh_lexicon._by_tail[0].terms))
    for name, (left_view, right_view) in zip(("sorted", "tail"), views):
        if len(left_view) != len(right_view) or list(left_view[:]) != list(right_view[:]):
            problems.append(f"lexicon: the {name} prefix view does not read back the terms in order")


def _key_pairs(state: dict[str, Any], name: str) -> np.ndarray:
    """(key, term id) rows of a saved typo index in one canonical order (merges may interleave ids)."""
    keys = np.frombuffer(state[f"{name}_keys"], dtype=np.uint32).astype(np.int64)
    ids = np.frombuffer(state[f"{name}_ids"], dtype=np.uint32).astype(np.int64)
    order = np.lexsort((ids, keys))
    return np.stack((keys[order], ids[order]))


def _compare_geo(loaded: Index, rebuilt: Index, problems: _Problems) -> None:
    """The ``_geo`` points of the live docs against those their stored records hold."""
    alive = array_from_bitmap(loaded.alive)
    records = [loaded.docs.record(doc) for doc in alive.tolist()]
    positions, lat, lng = extract_points([record if valid_point(record_location(record)) else {} for record in records])
    problems.extend(
        loaded.geo.differences(alive[positions], lat, lng, only=loaded.alive))


def _compare_vectors(loaded: Index, rebuilt: Index, problems: _Problems) -> None:
    """Each vector space's docs and rows against the vectors their stored records hold."""
    for name, space in loaded.vectors.spaces.items():
        other = rebuilt.vectors.spaces[name]
        left_docs = array_from_bitmap(space.docs & loaded.alive)
        right_docs = array_from_bitmap(other.docs & rebuilt.alive)
        left = dict(zip(loaded.docs.record_ids.ids_of(left_docs), left_docs.tolist()))
        right = dict(zip(rebuilt.docs.record_ids.ids_of(right_docs), right_docs.tolist()))
        if set(left) != set(right):
            missing = sorted(map(str, set(right) - set(left)))[:5]
            extra = sorted(map(str, set(left) - set(right)))[:5]
            problems.append(f"vectors.{name}: the records holding a vector differ from the stored records "
                            f"(missing: {missing}, not stored: {extra})")
            continue
        for record_id, doc in left.items():
            if not np.array_equal(space.row(doc), other.row(right[record_id])):
                problems.append(f"vectors.{name}: record {record_id!r}'s vector differs from its stored one")
                if problems.full():
                    return
