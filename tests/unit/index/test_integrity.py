"""This module tests the following properties:

- ``Engine.check()`` finds nothing wrong with an index built by writes (adds, upserts, deletes);
- damaging any one structure a query reads — a term's postings, a token position, numeric pairs,
  the per-doc minimum or maximum, the multi-valued flag, exact-value pairs, a column's doc bitmap,
  ``exists``, the lexicon's typo keys and sorted prefix views — makes ``check()`` report a problem that names it;
- a snapshot round trip keeps multi-valued numeric fields whole (the flag is derived on load).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from pyroaring import BitMap, FrozenBitMap

from roarsearch import Engine
from roarsearch.index import lexicon as lexicon_module
from roarsearch.index.index import Index


def build() -> Engine:
    engine = Engine()
    engine.add_records("c", [
        {"id": i, "title": f"star {'wars' if i % 2 else 'trek'} episode {i}", "tag": ["a", "b"][i % 2],
         "scores": [i % 10, i % 5 + 20], "price": i * 1.5, "flag": i % 3 == 0}
        for i in range(200)])
    engine.add_records("c", [{"id": 5, "title": "replaced star", "tag": "c", "scores": 7}])
    engine.delete_records("c", ids=[6, 7])
    engine.search({"collection": "c", "textFacets": ["tag", "flag"]})  # indexes exact values of tag and flag
    return engine


def index_of(engine: Engine) -> Index:
    return engine._collection("c").index


def problems(engine: Engine) -> list[str]:
    report = engine.check()
    return list(report["collections"]["c"]["problems"])


def test_a_written_index_checks_clean() -> None:
    assert problems(build()) == []


def _drop_posting(index: Index) -> None:
    postings = index.postings["title"]
    term = index.lexicon.id_of("star")
    assert term is not None
    bitmap = postings.all_terms()[term]
    bitmap.discard(int(next(iter(bitmap & index.alive))))


def _shift_position(index: Index) -> None:
    _terms, _counts, docs, positions = index.postings["title"].csr_arrays()  # the arrays themselves
    positions[np.flatnonzero(np.isin(docs, np.asarray(list(index.alive), dtype=np.uint32)))[0]] += 3


def _change_number(index: Index) -> None:
    numeric = index.columns["price"].numeric
    assert numeric is not None
    _docs, values = numeric.pairs()
    values[-1] += 1.0


def _change_maximum(index: Index) -> None:
    numeric = index.columns["scores"].numeric
    assert numeric is not None
    numeric.maximum.data[int(next(iter(index.alive)))] = 99.0


def _forget_multi_valued(index: Index) -> None:
    numeric = index.columns["scores"].numeric
    assert numeric is not None
    numeric.multi_valued = False


def _change_value(index: Index) -> None:
    values = index.columns["tag"].values
    assert values is not None
    docs, value_ids = values.pairs()
    value_ids[np.flatnonzero(np.isin(docs, np.asarray(list(index.alive), dtype=np.uint32)))[0]] ^= 1


def _drop_column_doc(index: Index) -> None:
    numeric = index.columns["price"].numeric
    assert numeric is not None
    numeric.docs = BitMap(numeric.docs)
    numeric.docs.discard(int(next(iter(index.alive))))


def _drop_exists(index: Index) -> None:
    columns = index.columns["tag"]
    columns.exists = FrozenBitMap(columns.exists - BitMap([int(next(iter(index.alive)))]))


def _garble_typo_keys(index: Index) -> None:
    lexicon = index.lexicon
    lexicon.typo_candidates("starr", 1)  # brings the typo indexes up to date
    keys, ids = lexicon._deletions.whole()
    ids = ids.copy()
    ids[: ids.size // 2] = 0
    lexicon._deletions.load(keys, ids)


def _swap_numeric_order(index: Index) -> None:
    numeric = index.columns["price"].numeric
    assert numeric is not None
    order = numeric.sort_order().copy()
    order[[0, -1]] = order[[-1, 0]]
    numeric._order = order


def _swap_sorted_view(index: Index) -> None:
    lexicon = index.lexicon
    sorted_ids, _tails = lexicon.sorted_order()
    swapped = sorted_ids.copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    lexicon._by_term = (lexicon_module._TermRun(lexicon._by_term[0].terms, swapped), lexicon._by_term[1])


def _swap_tail_view(index: Index) -> None:
    lexicon = index.lexicon
    _sorted, tail_ids = lexicon.sorted_order()
    swapped = tail_ids.copy()
    swapped[[0, -1]] = swapped[[-1, 0]]
    lexicon._by_tail = (lexicon_module._TermRun(lexicon._by_tail[0].terms, swapped), lexicon._by_tail[1])


DAMAGE: list[tuple[str, Callable[[Index], None], str]] = [
    ("postings", _drop_posting, "postings 'title' term 'star'"),
    ("positions", _shift_position, "positions 'title'"),
    ("numeric pairs", _change_number, "column 'price' numeric: (record, value) pairs"),
    ("maximum", _change_maximum, "column 'scores' numeric: per-record maximum"),
    ("multi-valued flag", _forget_multi_valued, "column 'scores' numeric: marked single-valued"),
    ("exact values", _change_value, "column 'tag' values: (record, value) pairs"),
    ("column doc bitmap", _drop_column_doc, "column 'price' numeric: its doc bitmap"),
    ("exists", _drop_exists, "column 'tag' exists"),
    ("lexicon", _garble_typo_keys, "lexicon: the deletion typo index"),
    ("numeric order", _swap_numeric_order, "column 'price' numeric: its value order"),
    ("sorted prefix view", _swap_sorted_view, "lexicon: the sorted prefix view"),
    ("tail prefix view", _swap_tail_view, "lexicon: the tail prefix view"),
]


@pytest.mark.parametrize(("name", "damage", "named"), DAMAGE, ids=[name for name, _, _ in DAMAGE])
def test_check_names_each_damaged_structure(name: str, damage: Callable[[Index], None], named: str) -> None:
    engine = build()
    damage(index_of(engine))
    found = problems(engine)
    assert any(problem.startswith(named) for problem in found), (name, found)


def test_multi_valued_numbers_survive_a_reopen(tmp_path: Path) -> None:
    with Engine(tmp_path) as engine:
        engine.add_records("c", [{"id": i, "scores": [i % 10, i % 5 + 20]} for i in range(100)])
        assert engine.search({"collection": "c", "filter": "scores >= 20"})["totalHits"] == 100
    with Engine(tmp_path) as engine:
        assert engine.search({"collection": "c", "filter": "scores >= 20"})["totalHits"] == 100
        assert engine.search({"collection": "c", "filter": "scores < 5"})["totalHits"] == 50
        assert engine.check()["ok"]
