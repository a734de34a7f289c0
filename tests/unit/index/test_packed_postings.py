"""This module tests the following properties:

- saved token columns round-trip exactly: docs as wrapping deltas (a term's first doc is below
  the previous term's last), positions as they are, uint16 and uint32, across block boundaries;
- a loaded chunk inflates a block of a column only when a read reaches it, and is saved again as
  it was loaded; damaged blocks are refused, never misread;
- column arrays (numbers, value ids, per-doc first values) are saved compressed too, and raw ones
  (older snapshots) still load to the same columns;
- the lexicon's typo index arrays and the per-doc record lengths are saved compressed, and raw
  ones still load to the same lexicon and records;
- an index state of version 2 (raw token columns) still loads and answers the same as the
  current layout, and the current layout's columns are much smaller than the raw ones.
"""

from __future__ import annotations

import concurrent.futures
import mmap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from roarsearch import scratch as scratch_module
from roarsearch.index import blocks as blocks_module
from roarsearch.index import merges as merges_module
from roarsearch.index.blocks import LazyColumn, pack_column, unpack_column
from roarsearch.index.index import Index
from roarsearch.index.positions import FewDocs
from roarsearch.index.postings import FieldPostings
from roarsearch.index.state import index_from_state, index_to_state
from roarsearch.memory import MAPPINGS


@pytest.mark.parametrize("block", [3, 1 << 16])
@pytest.mark.parametrize("dtype", [np.uint16, np.uint32])
def test_columns_round_trip(monkeypatch: pytest.MonkeyPatch, block: int, dtype: type) -> None:
    monkeypatch.setattr(blocks_module, "PACK_BLOCK_VALUES", block)
    monkeypatch.setattr(blocks_module, "WHOLE_COLUMN_VALUES", 16 * block)
    rng = np.random.default_rng(7)
    high = np.iinfo(dtype).max
    values = np.concatenate([np.sort(rng.integers(0, high, 50)), [high, 0, 5, high],
                             np.sort(rng.integers(0, 40, 31))]).astype(dtype)
    for delta in (True, False):
        packed, ends = pack_column(values, delta)
        back = unpack_column(packed, ends, values.size, dtype, delta)
        assert back.dtype == dtype and back.tolist() == values.tolist()
        column = LazyColumn(packed, ends, values.size, dtype, delta)
        assert column.cover(4, 5)[4] == values[4] and column.ready.sum() == 1
        lo, hi = np.asarray([0, 20, 60]), np.asarray([2, 20, 61])
        readable = column.cover_all(lo, hi)
        assert readable[[0, 1, 60]].tolist() == values[[0, 1, 60]].tolist()
    assert unpack_column(*pack_column(values[:0], True), 0, dtype, True).size == 0


def test_damaged_columns_are_refused() -> None:
    packed, ends = pack_column(np.arange(10, dtype=np.uint32), True)
    with pytest.raises(ValueError, match="has 1 blocks, 70000 values need 5"):
        unpack_column(packed, ends, 70_000, np.uint32, True)
    with pytest.raises(ValueError, match="inflates to 40 bytes, not 44"):
        unpack_column(packed, ends, 11, np.uint32, True)


def test_columns_of_older_snapshots_read_in_their_larger_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshots written before blocks of 16,384 values hold blocks of 65,536; the block count
    tells a reader which, and a first read inflates only the block it needs, either way."""
    values = np.cumsum(np.random.default_rng(3).integers(0, 5, 150_000)).astype(np.uint32)
    with monkeypatch.context() as patched:
        patched.setattr(blocks_module, "PACK_BLOCK_VALUES", blocks_module.LEGACY_PACK_BLOCK_VALUES)
        legacy = pack_column(values, True)
    current = pack_column(values, True)
    assert (legacy[1].size, current[1].size) == (3, 10)
    monkeypatch.setattr(blocks_module, "WHOLE_COLUMN_VALUES", 1)  # block by block, however few
    for data, ends in (legacy, current):
        column = LazyColumn(data, ends, values.size, np.uint32, True)
        assert column.read(70_000, 70_010).tolist() == values[70_000:70_010].tolist()
        assert column.cover(100_000, 100_001)[100_000] == values[100_000] and column.missing == ends.size - 1
        assert column.whole().tolist() == values.tolist()


def build(count: int) -> Index:
    index = Index()
    index.add_records([{"id": i, "title": f"star {'wars ' * (i % 4)}alpha{i % 7} w{i}", "n": i}
                       for i in range(count)])
    index.add_records([{"id": i, "title": f"beta star{i % 3}", "n": -i} for i in range(count, count + 50)])
    return index


def answers(index: Index) -> dict[str, Any]:
    postings = index.postings["title"]
    terms, counts, docs, positions = postings.csr_arrays()
    return {"terms": terms.tolist(), "counts": counts.tolist(), "docs": docs.tolist(),
            "positions": positions.tolist(),
            "bitmaps": {term: sorted(bitmap) for term, bitmap in postings.all_terms().items()}}


def test_loaded_chunks_inflate_on_first_read_and_save_as_loaded() -> None:
    index = build(300)
    state = index_to_state(index)
    assert state["version"] == 6
    loaded = index_from_state(state)
    chunks = loaded.postings["title"]._chunks
    assert chunks and not any(chunk._docs.ready.any() or chunk._positions.ready.any() for chunk in chunks)
    star = loaded.lexicon.id_of("star")
    assert star is not None
    assert sorted(loaded.postings["title"].bitmap([star])) == sorted(index.postings["title"].bitmap([star]))
    # A term's docs come from its saved doc set: reading them inflates no token block.
    assert not any(chunk._docs.ready.any() or chunk._positions.ready.any() for chunk in chunks)
    again = index_to_state(loaded)["postings"]["title"]["chunks"]
    for key in ("packed_docs", "doc_sets", "doc_set_offsets"):
        assert [bytes(chunk[key]) for chunk in again] == [bytes(chunk[key]) for chunk in state["postings"]["title"]["chunks"]]
    assert answers(loaded) == answers(index)


def _as_version_2(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with the raw token columns of index state version 2."""
    for saved in state["postings"].values():
        for chunk in saved["chunks"]:
            position_type = np.uint16 if chunk["position_bytes"] == 2 else np.uint32
            tokens = chunk.pop("tokens")
            doc_ends, position_ends, starts = (np.frombuffer(chunk.pop(key), dtype=np.uint64)
                                               for key in ("doc_ends", "position_ends", "block_starts"))
            starts = starts.astype(np.int64)
            chunk["token_docs"] = unpack_column(chunk.pop("packed_docs"), doc_ends, tokens, np.uint32, True, starts).tobytes()
            chunk["token_positions"] = unpack_column(chunk.pop("packed_positions"), position_ends, tokens,
                                                     position_type, False, starts).tobytes()
            del chunk["doc_sets"], chunk["doc_set_offsets"]
    return {**state, "version": 2}


def test_version_2_state_still_loads() -> None:
    index = build(2_000)
    state = index_to_state(index)
    packed = sum(len(chunk["packed_docs"]) + len(chunk["packed_positions"]) for chunk in state["postings"]["title"]["chunks"])
    old = _as_version_2(index_to_state(index))
    raw = sum(len(chunk["token_docs"]) + len(chunk["token_positions"]) for chunk in old["postings"]["title"]["chunks"])
    assert packed * 2 < raw
    assert answers(index_from_state(old)) == answers(index)


def test_fresh_postings_pack_without_loading() -> None:
    postings = FieldPostings()
    postings.add(np.asarray([0, 0, 1], dtype=np.uint32), np.asarray([4, 2, 4], dtype=np.uint32),
                 np.asarray([0, 1, 0], dtype=np.uint32))
    (_chunk, terms, counts, packed, doc_sets), = postings.packed_chunks()
    assert terms.tolist() == [2, 4] and counts.tolist() == [1, 2] and packed.tokens == 3
    assert unpack_column(packed.docs, packed.doc_ends, 3, np.uint32, True).tolist() == [0, 0, 1]
    assert [list(doc_sets.bitmap(slot)) for slot in range(2)] == [[0], [0, 1]]
    assert postings._chunks[0].doc_sets is doc_sets  # written once, kept with the chunk


def _unpacked_columns(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with its column arrays raw, as versions before 3 saved them."""
    types = {"docs": np.uint32, "values": np.float64, "order": np.uint32, "min": np.float64, "max": np.float64,
             "first": np.float64, "vids": np.uint32}
    for saved in state["columns"].values():
        for kind in ("numeric", "values"):
            for key, value in saved.get(kind, {}).items():
                if isinstance(value, dict):
                    first_type = np.int32 if saved[kind].get("first_bits") == 32 else np.int64
                    dtype = first_type if (kind, key) == ("values", "first") else types[key]
                    ends = np.frombuffer(value["ends"], dtype=np.uint64)
                    saved[kind][key] = unpack_column(value["packed"], ends, value["count"], dtype, key == "docs").tobytes()
    return state


def test_column_arrays_are_packed_and_raw_ones_still_load() -> None:
    index = Index()
    index.add_records([{"id": i, "n": (i * 7919) % 1000 / 3, "multi": [i, -i], "kind": ["a", "b", "c"][i % 3]}
                       for i in range(3_000)])
    state = index_to_state(index)
    assert isinstance(state["columns"]["n"]["numeric"]["docs"], dict)
    assert isinstance(state["columns"]["kind"]["values"]["first"], dict)
    for loaded in (index_from_state(state), index_from_state(_unpacked_columns(index_to_state(index)))):
        for field in ("n", "multi"):
            expected, got = index.columns[field].numeric, loaded.columns[field].numeric
            assert expected is not None and got is not None
            assert [a.tolist() for a in got.pairs()] == [a.tolist() for a in expected.pairs()]
            assert got.sort_order().tolist() == expected.sort_order().tolist()
            assert got.minimum.data.tolist() == expected.minimum.data.tolist()
            assert got.maximum.data.tolist() == expected.maximum.data.tolist()
        values, got_values = index.columns["kind"].values, loaded.columns["kind"].values
        assert values is not None and got_values is not None
        assert [a.tolist() for a in got_values.pairs()] == [a.tolist() for a in values.pairs()]
        assert got_values.first.data.tolist() == values.first.data.tolist()


def test_lexicon_arrays_and_record_lengths_are_packed_and_raw_ones_still_load() -> None:
    index = build(500)
    state = index_to_state(index)
    assert isinstance(state["lexicon"]["deletion_keys"], dict)
    assert isinstance(state["docs"]["payload_block"]["lengths"], dict)
    raw = index_to_state(index)
    for key in ("deletion_keys", "deletion_ids", "trigram_keys", "trigram_ids"):
        saved = raw["lexicon"][key]
        ends = np.frombuffer(saved["ends"], dtype=np.uint64)
        raw["lexicon"][key] = unpack_column(saved["packed"], ends, saved["count"], np.uint32, key.endswith("keys")).tobytes()
    lengths = raw["docs"]["payload_block"]["lengths"]
    raw["docs"]["payload_block"]["lengths"] = unpack_column(
        lengths["packed"], np.frombuffer(lengths["ends"], dtype=np.uint64), lengths["count"], np.uint32, False).tobytes()
    for loaded in (index_from_state(state), index_from_state(raw)):
        assert loaded.lexicon.typo_candidates("alpah3", 1) == index.lexicon.typo_candidates("alpah3", 1)
        assert loaded.lexicon.typo_candidates("alphaaa3", 2) == index.lexicon.typo_candidates("alphaaa3", 2)
        assert [loaded.docs.record(doc) for doc in sorted(loaded.alive)] == [
            index.docs.record(doc) for doc in sorted(index.alive)]


def _batches(seed: int, count: int) -> list[list[dict[str, Any]]]:
    """Random records in batches of random sizes; some have a text long enough for uint32 positions."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(40)] + ["star", "wars"]
    batches, next_id = [], 0
    while next_id < count:
        size = int(rng.integers(1, 30))
        batch = []
        for record_id in range(next_id, min(count, next_id + size)):
            length = 70_000 if rng.random() < 0.01 else int(rng.integers(0, 12))
            batch.append({"id": record_id, "title": " ".join(rng.choice(words, length).tolist())})
        batches.append(batch)
        next_id += size
    return batches


def _pack_tiny_merges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Thresholds made tiny: merges of a few hundred tokens write docs and positions packed, in
    blocks of at most 7 values (terms of fewer than 3 tokens sharing blocks of 3 or 4) and slabs
    of 13 tokens."""
    monkeypatch.setattr(blocks_module, "PACK_BLOCK_VALUES", 7)
    monkeypatch.setattr(blocks_module, "SMALL_BLOCK_VALUES", 3)
    monkeypatch.setattr(blocks_module, "WHOLE_COLUMN_VALUES", 16 * 7)
    monkeypatch.setattr(merges_module, "PACK_MERGED_TOKENS", 50)
    monkeypatch.setattr(merges_module, "PACKED_SLAB_TOKENS", 13)
    monkeypatch.setattr(merges_module, "PACK_POSITIONS_TOKENS", 300)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("output", ["memory", "scratch file"])
def test_merges_written_packed_answer_like_raw_ones(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, seed: int,
                                                     output: str) -> None:
    """Merges big enough to write their docs compressed (thresholds made tiny here) give the same tokens,
    bitmaps and occurrences as raw merges, keep nothing inflated, and stay exact when merged again,
    saved and loaded, or upserted into; written to memory (a collection in memory) or to a scratch
    file (a durable one's folder: the output is then read through a mapping of that file)."""
    batches = _batches(seed, 400)
    monkeypatch.setattr(merges_module, "PACK_MERGED_TOKENS", 1 << 40)
    raw = Index()
    for batch in batches:
        raw.add_records(batch)
    _pack_tiny_merges(monkeypatch)
    # Joining a packed column's parts in memory hands freed pages back as it copies (every 20 bytes here).
    trims = []
    monkeypatch.setattr(scratch_module, "TRIM_COPIED_BYTES", 20)
    monkeypatch.setattr(scratch_module, "release_free_memory", lambda: trims.append(1))
    packed = Index()
    if output == "scratch file":
        packed.scratch.directory = str(tmp_path)
    for batch in batches:
        packed.add_records(batch)
    assert bool(trims) == (output == "memory")
    assert not list(tmp_path.iterdir())  # scratch files have no name
    chunks = packed.postings["title"]._chunks
    packed_docs = [chunk._docs for chunk in chunks if isinstance(chunk._docs, LazyColumn)]
    assert packed_docs and not any(docs.ready.any() for docs in packed_docs)
    assert any(chunk.packed is not None for chunk in chunks)  # positions packed too
    file_backed = [chunk for chunk in chunks if chunk.doc_sets is not None
                   and isinstance(getattr(memoryview(chunk.doc_sets.data), "obj", None), mmap.mmap)
                   and MAPPINGS.of_file(memoryview(chunk.doc_sets.data).obj)]
    assert bool(file_backed) == (output == "scratch file")
    title = packed.postings["title"]
    term_ids = np.asarray(sorted(raw.lexicon.id_of(word) for word in ("star", "wars", "w3", "w17")), dtype=np.uint32)
    docs = np.asarray(sorted(range(0, 400, 3)), dtype=np.uint32)
    for left, right in zip(title.occurrences_in(term_ids, docs), raw.postings["title"].occurrences_in(term_ids, docs)):
        assert sorted(left.tolist()) == sorted(right.tolist())
    assert answers(packed) == answers(raw)
    assert answers(index_from_state(index_to_state(packed))) == answers(raw)
    upsert = [{"id": i, "title": "wars again"} for i in range(0, 400, 5)]
    raw.add_records(upsert)
    packed.add_records(upsert)
    assert answers(packed) == answers(raw)


def test_a_merge_still_running_while_the_interpreter_exits_packs_in_its_own_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A program that ends without closing its engine while a merge runs: from then on thread pools
    refuse new work ('cannot schedule new futures after interpreter shutdown'). Packed merges then
    compress in the merging thread and land the same tokens, instead of failing."""
    import concurrent.futures.thread as pool_module

    batches = _batches(4, 300)
    monkeypatch.setattr(merges_module, "PACK_MERGED_TOKENS", 1 << 40)
    raw = Index()
    for batch in batches:
        raw.add_records(batch)
    _pack_tiny_merges(monkeypatch)
    monkeypatch.setattr(pool_module, "_shutdown", True)
    with pytest.raises(RuntimeError, match="interpreter shutdown"):  # what the pools now answer
        concurrent.futures.ThreadPoolExecutor(1).submit(int)
    exiting = Index()
    for batch in batches:
        exiting.add_records(batch)
    assert any(isinstance(chunk._docs, LazyColumn) for chunk in exiting.postings["title"]._chunks)
    assert answers(exiting) == answers(raw)


def test_merges_asked_for_while_the_interpreter_exits_are_left_undone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A settle timer firing while a program exits without closing its engine: the merge it asks
    for is refused by the pools, and the chunks stay as they are, without an exception in that
    thread (it printed a traceback at exit) and without a merge counted as pending."""
    import concurrent.futures.thread as pool_module

    monkeypatch.setattr(merges_module, "MERGE_FACTOR", 1 << 30)  # no tier merge: a chunk per batch
    index, twin = Index(), Index()
    for batch in _batches(3, 300):
        index.add_records(batch)
        twin.add_records(batch)
    assert index.postings["title"].chunk_count() >= 2
    monkeypatch.setattr(pool_module, "_shutdown", True)
    assert merges_module.run_in_background(lambda: None) is None
    index.end_bulk_load(settle=True)
    assert not index.merging()
    assert index.postings["title"].chunk_count() >= 2
    assert answers(index) == answers(twin)


def test_large_lazy_columns_get_ordinary_pages_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A column inflated block by block must not sit in numpy's huge-page-advised memory (a first
    write into each 2 MiB page stalled first-seen queries for milliseconds): past
    ``SMALL_PAGES_BYTES`` its values live in an anonymous mapping of their own."""
    import mmap

    monkeypatch.setattr(blocks_module, "SMALL_PAGES_BYTES", 1 << 12)
    values = np.arange(5_000, dtype=np.uint32) * 3
    data, ends = pack_column(values, True)
    column = LazyColumn(data, ends, values.size, np.uint32, True)
    def mapped(array: np.ndarray) -> bool:
        return isinstance(getattr(array.base, "obj", array.base), mmap.mmap)

    assert mapped(column.values) and column.values.flags.writeable
    assert column.whole().tolist() == values.tolist()
    small = LazyColumn(*pack_column(values[:100], False), 100, np.uint32, False)
    assert not mapped(small.values)


def test_packed_merges_are_saved_and_reopened_by_a_durable_engine(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A merge's packed columns (one untouched mapping, handed on as a view) go through a real
    snapshot file and come back the same."""
    from roarsearch import Engine

    batches = _batches(4, 300)
    raw = Index()
    for batch in batches:
        raw.add_records(batch)
    _pack_tiny_merges(monkeypatch)
    with Engine(str(tmp_path)) as engine:
        for batch in batches:
            engine.add_records("c", batch)
        chunks = engine._collections["c"].index.postings["title"]._chunks
        assert any(chunk.packed is not None for chunk in chunks)
    with Engine(str(tmp_path)) as engine:
        assert answers(engine._collections["c"].index) == answers(raw)


def test_a_newer_index_state_is_refused_by_its_version() -> None:
    state = index_to_state(build(50))
    with pytest.raises(ValueError, match=r"index state version 7 is not one this roarsearch reads \(1, 2, 3, 4, 5, 6\)"):
        index_from_state({**state, "version": 7})


def test_a_version_5_state_without_doc_sets_reads_and_gains_them_when_saved_again() -> None:
    index = build(400)
    state = index_to_state(index)
    for saved in state["postings"].values():
        for chunk in saved["chunks"]:
            del chunk["doc_sets"], chunk["doc_set_offsets"]
    loaded = index_from_state({**state, "version": 5})
    assert all(chunk.doc_sets is None for chunk in loaded.postings["title"]._chunks)
    assert answers(loaded) == answers(index)
    saved_again = index_to_state(loaded)["postings"]["title"]["chunks"]
    assert all(len(chunk["doc_sets"]) for chunk in saved_again)
    assert answers(index_from_state(index_to_state(loaded))) == answers(index)


def test_loaded_positions_read_the_same_whether_docs_come_from_doc_sets_or_blocks() -> None:
    """A term held once per doc takes its tokens' docs from its doc set; one a doc holds twice
    (``wars wars``) from the docs column: either way the positions read are the original's."""
    index = build(3_000)
    loaded = index_from_state(index_to_state(index))
    original, reloaded = index.postings["title"], loaded.postings["title"]
    for word in ("star", "wars", "alpha3", "w17", "beta", "star1", "w2999"):
        term = index.lexicon.id_of(word)
        assert term is not None
        docs = sorted(original.bitmap([term]))
        for few in (docs[:5], docs[-40:], docs[::7][:60]):
            assert reloaded.positions_in([term], FewDocs(few)) == original.positions_in([term], FewDocs(few))
