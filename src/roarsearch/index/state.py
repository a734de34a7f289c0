"""An index as msgpack-ready state and back: what a snapshot holds.

Owns: the layout of an index inside a snapshot (the bytes around it belong to
:mod:`roarsearch.storage`). Numpy arrays travel as raw buffers and bitmaps in their portable
serialised form, so saving streams buffers and loading does not re-analyse any record.
Everything a query reads is either saved or derived on load from what is saved (a numeric
column's ``multi_valued`` flag is recomputed from its pairs, so older snapshots that lacked it
load correctly).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
from pyroaring import BitMap, FrozenBitMap

from roarsearch.buffers import JoinedBuffers
from roarsearch.errors import BadRequestError
from roarsearch.index.bitmaps import array_from_bitmap, bitmap_from_array
from roarsearch.index.blocks import fixed_block_starts, pack_column, unpack_column
from roarsearch.index.chunks import Chunk, PackedTokens
from roarsearch.index.columns import FieldColumns, NumericColumn, ValueColumn
from roarsearch.index.docsets import DocSets
from roarsearch.index.docstore import RecordIds, id_sort_key
from roarsearch.index.geo import GeoColumn, extract_points
from roarsearch.index.index import Index
from roarsearch.index.lexicon import Lexicon
from roarsearch.index.postings import FieldPostings
from roarsearch.index.vectors import VectorIndex
from roarsearch.memory import drop_file_pages
from roarsearch.schema import GEO_FIELD, check_geo_point, record_location

INDEX_STATE_VERSION = 6
#: Versions this module still reads (version 1 also saved every term's bitmap; they are rebuilt
#: from the token arrays on demand, so loading ignores them; version 2 saved token columns raw;
#: version 3 saved every record id in a list, version 4 integer ids in increasing order packed;
#: up to version 4 token columns were cut into blocks of one fixed size, version 5 saves where
#: each block starts; up to version 5 no term's doc set was saved: they are gathered from the
#: token columns until the chunk is saved again).
READABLE_STATE_VERSIONS = (1, 2, 3, 4, 5, 6)


def _bytes(array: np.ndarray) -> memoryview:
    # A view, not a copy: the snapshot writer streams it straight from the array's buffer.
    return memoryview(np.ascontiguousarray(array).data).cast("B")


def _array(buffer: bytes | dict[str, Any], dtype: type, delta: bool = False) -> np.ndarray:
    """A saved column array: packed by :func:`_packed` (version 3) or raw (older versions)."""
    if isinstance(buffer, dict):
        return unpack_column(buffer["packed"], np.frombuffer(buffer["ends"], dtype=np.uint64), int(buffer["count"]),
                             dtype, delta)
    return np.frombuffer(buffer, dtype=dtype).copy()


def _packed(array: np.ndarray, delta: bool = False) -> dict[str, Any]:
    """A column array compressed as token columns are (``delta`` for doc ids: mostly ascending)."""
    data, ends = pack_column(np.ascontiguousarray(array), delta)
    return {"packed": data, "ends": _bytes(ends), "count": int(array.size)}


#: A chunk, the entry a state saves it as and its columns packed in it (see :func:`index_to_state`'s
#: ``saved_chunks``).
SavedChunk = tuple[Chunk, dict[str, Any], PackedTokens]


def index_to_state(index: Index, sort_orders: bool = True, saved_chunks: list[SavedChunk] | None = None) -> dict[str, Any]:
    """The whole index as msgpack-ready data: bitmaps serialised, numpy arrays as raw buffers.

    Layout (version 6): ``docs`` (record ids, the live records' msgpack payloads packed and
    compressed in parts with per-doc lengths, alive bitmap, id-order flag),
    ``lexicon`` (the lexicon's own state), ``text_fields``, ``postings`` per field (the
    term-sorted token arrays per chunk: distinct term ids with their token counts, then the
    ``tokens`` count and the compressed blocks of :func:`~roarsearch.index.postings.pack_column`,
    ``packed_docs`` (deltas) and ``packed_positions``, with the byte offsets where their blocks end
    (``doc_ends``, ``position_ends``) and the token offset where each block starts (``block_starts``,
    the same for both columns), and ``doc_sets`` with ``doc_set_offsets``: every term's doc set as a
    portable roaring bitmap, in term order, and the byte offset where each starts
    (:mod:`roarsearch.index.docsets`)), ``columns`` per field (exists bitmap, numeric pairs and per-doc min/max, exact values
    with their pairs and per-doc first value id).

    ``saved_chunks``: filled with every chunk and its entry, for :func:`adopt_saved_chunks`.
    """
    docstore = index.docs
    postings_state: dict[str, Any] = {}
    for path, postings in index.postings.items():
        # Per chunk, tokens grouped by term: distinct terms with their run lengths, then each
        # token's doc and position, compressed (positions as 2-byte integers when every one
        # fits). Chunks are saved as they are: a snapshot merges nothing.
        chunks = []
        for chunk, term_ids, term_counts, packed, doc_sets in postings.packed_chunks():
            chunks.append({"term_ids": _bytes(term_ids), "term_counts": _bytes(term_counts), "tokens": packed.tokens,
                           "packed_docs": packed.docs, "doc_ends": _bytes(packed.doc_ends),
                           "packed_positions": packed.positions, "position_ends": _bytes(packed.position_ends),
                           "position_bytes": np.dtype(packed.position_type).itemsize,
                           "block_starts": _bytes(packed.block_starts.astype(np.uint64)),
                           "doc_sets": doc_sets.data, "doc_set_offsets": _bytes(doc_sets.offsets.astype(np.uint64))})
            if saved_chunks is not None:
                saved_chunks.append((chunk, chunks[-1], packed))
            # A raw chunk kept in a scratch file was read to pack it: its pages go (a chunk read
            # from the snapshot packs nothing, and dropping that mapping would only cost queries).
            drop_file_pages([buffer for buffer in chunk.column_buffers() if isinstance(buffer, np.ndarray)])
        postings_state[path] = {"field_docs": postings.docs.serialize(), "chunks": chunks}
    columns_state: dict[str, Any] = {}
    for path, columns in index.columns.items():
        state: dict[str, Any] = {"exists": columns.exists.serialize(), "has_text": columns.has_text,
                                 "has_bool": columns.has_bool}
        unread = columns.unread_state()
        if unread is not None:  # loaded and never read since: saved again as it was loaded
            state.update({part: unread[part] for part in ("numeric", "values") if part in unread})
            columns_state[path] = state
            continue
        if columns.numeric is not None:
            docs, values = columns.numeric.pairs()
            state["numeric"] = {"docs": _packed(docs, delta=True), "values": _packed(values),
                                "slots": columns.numeric.minimum.data.size, "doc_bitmap": columns.numeric.docs.serialize()}
            # The value order saves the argsort a reopened index would do on its first range or
            # sort; a snapshot taken between writes (sort_orders=False) saves it only if known.
            order = columns.numeric.sort_order() if sort_orders else columns.numeric.known_sort_order()
            if order is not None:
                state["numeric"]["order"] = _packed(order)
            if columns.numeric.multi_valued:  # otherwise a doc's min, max and first are its value
                state["numeric"].update({"min": _packed(columns.numeric.minimum.data),
                                         "max": _packed(columns.numeric.maximum.data),
                                         "first": _packed(columns.numeric.first.data)})
        if columns.values is not None:
            docs, value_ids = columns.values.pairs()
            state["values"] = {"values": columns.values.values, "docs": _packed(docs, delta=True),
                               "vids": _packed(value_ids), "first": _packed(columns.values.first.data), "first_bits": 32,
                               "doc_bitmap": columns.values.docs.serialize()}
        columns_state[path] = state
    return {
        "version": INDEX_STATE_VERSION,
        "docs": {**_record_ids_state(docstore.record_ids), "payload_block": _packed_lengths(docstore.payload_block_to_state()),
                 "alive": docstore.alive.serialize(), "ids_in_doc_order": docstore.ids_in_doc_order,
                 "last_id": None if docstore._last_id_key is None else docstore._last_id_key[1]},
        "lexicon": _packed_lexicon(index.lexicon.to_state()),
        "text_fields": index._text_fields,
        "value_fields": sorted(index.value_fields),
        "auto_value_fields": sorted(index.auto_value_fields),
        "postings": postings_state,
        "columns": columns_state,
        "geo": index.geo.to_state(),
        "vectors": index.vectors.to_state(),
    }


#: The lexicon's typo index arrays, saved compressed: keys (sorted: as deltas) and term ids.
_LEXICON_ARRAYS = {"deletion_keys": True, "deletion_ids": False, "trigram_keys": True, "trigram_ids": False}


def _record_ids_state(record_ids: RecordIds) -> dict[str, Any]:
    """Compact record ids as a packed int64 array and a bitmap of retired docs (no Python int
    per record, saving or loading); others as a list with None for retired docs."""
    ints = record_ids.int_array()
    if ints is None:
        return {"record_ids": record_ids.to_list()}
    # Deltas in uint64 (modular, exact for any int64 ids: negative ones and wide jumps included).
    return {"record_id_ints": _packed(ints.view(np.uint64), delta=True), "retired_docs": record_ids.retired_bitmap().serialize()}


def _record_ids_from_state(docs_state: dict[str, Any]) -> RecordIds:
    if "record_id_ints" in docs_state:
        return RecordIds.from_arrays(_array(docs_state["record_id_ints"], np.uint64, delta=True).view(np.int64),
                                     BitMap.deserialize(docs_state["retired_docs"]))
    return RecordIds.from_list(list(docs_state["record_ids"]))


def _packed_lexicon(state: dict[str, Any]) -> dict[str, Any]:
    return {**state, **{key: _packed(np.frombuffer(state[key], dtype=np.uint32), delta)
                        for key, delta in _LEXICON_ARRAYS.items() if key in state}}


def _unpacked_lexicon(state: dict[str, Any]) -> dict[str, Any]:
    """The lexicon's state as :meth:`Lexicon.from_state` reads it (raw arrays, as before version 3)."""
    return {**state, **{key: _array(state[key], np.uint32, delta) for key, delta in _LEXICON_ARRAYS.items()
                        if isinstance(state.get(key), dict)}}


def _packed_lengths(block: dict[str, Any]) -> dict[str, Any]:
    """The stored records' block with its per-doc lengths compressed."""
    return {**block, "lengths": _packed(np.frombuffer(block["lengths"], dtype=np.uint32))}


def saved_payloads(state: dict[str, Any]) -> JoinedBuffers:
    """The stored records' compressed bytes in a state from :func:`index_to_state`."""
    data: JoinedBuffers = state["docs"]["payload_block"]["data"]
    return data


def adopt_saved_payloads(index: Index, state: dict[str, Any], saved: memoryview) -> None:
    """After ``state`` was written as a snapshot, keep the stored records as ``saved`` (a view of
    the snapshot's copy of :func:`saved_payloads`) rather than in memory, as a reopened index
    does. The caller holds the index's write lock: no reader may see the parts half swapped."""
    block = state["docs"]["payload_block"]
    index.docs.payload_block_from_state({**block, "lengths": _array(block["lengths"], np.uint32), "data": saved})


#: The large parts of a saved chunk, read from the snapshot's file once it is written.
CHUNK_VIEWS = ("packed_docs", "packed_positions", "doc_sets")


def chunk_buffers(saved_chunks: list[SavedChunk]) -> list[Any]:
    """The large buffers of ``saved_chunks``' entries, in order: three per chunk (:data:`CHUNK_VIEWS`)."""
    return [entry[part] for _chunk, entry, _packed in saved_chunks for part in CHUNK_VIEWS]


def adopt_saved_chunks(saved_chunks: list[SavedChunk], views: list[memoryview | None]) -> None:
    """After the state holding ``saved_chunks`` was written as a snapshot, let each chunk read its
    token columns and doc sets from ``views`` (the snapshot's copies of :func:`chunk_buffers`, None
    where one was too small to be written apart) instead of a private copy: they live in the page
    cache then, resident only while read, as a reopened index's do. A chunk built since the
    previous snapshot gives up its raw columns (6 to 8 bytes a token) for blocks inflated as
    reads reach them; blocks already inflated stay."""
    for number, (chunk, _entry, packed) in enumerate(saved_chunks):
        docs, positions, doc_sets = views[3 * number:3 * number + 3]
        chunk.read_saved(packed._replace(docs=packed.docs if docs is None else docs,
                                         positions=packed.positions if positions is None else positions),
                         doc_sets)


def _token_chunk(saved: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    position_type = np.uint16 if saved.get("position_bytes") == 2 else np.uint32
    return (np.frombuffer(saved["term_ids"], dtype=np.uint32), np.frombuffer(saved["term_counts"], dtype=np.uint32),
            np.frombuffer(saved["token_docs"], dtype=np.uint32),
            np.frombuffer(saved["token_positions"], dtype=position_type))


def _packed_chunk(saved: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, PackedTokens, DocSets | None]:
    tokens, doc_ends = int(saved["tokens"]), np.frombuffer(saved["doc_ends"], dtype=np.uint64)
    # Version 4 and before: blocks of one fixed size.
    starts = (np.frombuffer(saved["block_starts"], dtype=np.uint64).astype(np.int64) if "block_starts" in saved
              else fixed_block_starts(tokens, doc_ends.size))
    return (np.frombuffer(saved["term_ids"], dtype=np.uint32), np.frombuffer(saved["term_counts"], dtype=np.uint32),
            PackedTokens(tokens, saved["packed_docs"], doc_ends,
                         saved["packed_positions"], np.frombuffer(saved["position_ends"], dtype=np.uint64),
                         np.uint16 if saved.get("position_bytes") == 2 else np.uint32, starts),
            # Version 5 and before: no doc sets (a term's docs are gathered from its tokens).
            DocSets(saved["doc_sets"], np.frombuffer(saved["doc_set_offsets"], dtype=np.uint64))
            if "doc_sets" in saved else None)


def index_from_state(state: dict[str, Any]) -> Index:
    """Rebuild an :class:`Index` from :func:`index_to_state` output without re-analysing records."""
    if state.get("version") not in READABLE_STATE_VERSIONS:
        raise ValueError(f"index state version {state.get('version')!r} is not one this roarsearch reads "
                         f"({', '.join(map(str, READABLE_STATE_VERSIONS))}): a newer roarsearch wrote it; "
                         "open the directory with that version (or export its records with it and import them here)")
    index = Index()
    docs_state = state["docs"]
    docstore = index.docs
    docstore.record_ids = _record_ids_from_state(docs_state)
    if "payload_block" in docs_state:
        block = docs_state["payload_block"]
        if isinstance(block["lengths"], dict):  # version 3: the per-doc lengths compressed
            block = {**block, "lengths": _array(block["lengths"], np.uint32)}
        docstore.payload_block_from_state(block)
    elif "payload_parts" in docs_state:
        docstore.payloads_from_state(docs_state["payload_parts"])
    else:  # version 1: one msgpack bytes object per doc
        docstore.payloads_from_list(list(docs_state["payloads"]))
    docstore.alive = FrozenBitMap.deserialize(docs_state["alive"])
    docstore.ids_in_doc_order = bool(docs_state["ids_in_doc_order"])
    last_id = docs_state["last_id"]
    docstore._last_id_key = None if last_id is None else id_sort_key(last_id)
    index.lexicon = Lexicon.from_state(_unpacked_lexicon(state["lexicon"]))
    index._text_fields = list(state["text_fields"])
    index.value_fields = set(state.get("value_fields", []))
    # Older snapshots indexed values on demand only: their fields stay so (a field they hold but
    # did not index is indexed on first use); fields first written after the load are indexed then.
    index.auto_value_fields = set(state.get("auto_value_fields", [])) & index.value_fields
    for path, saved in state["postings"].items():
        postings = FieldPostings(index.scratch)
        postings.docs = BitMap.deserialize(saved["field_docs"])
        # Views over the loaded buffers, not copies: token arrays are never written in place.
        if "chunks" in saved and saved["chunks"] and "packed_docs" in saved["chunks"][0]:
            postings.load_packed_chunks([_packed_chunk(chunk) for chunk in saved["chunks"]], docstore.next_doc)
        elif "chunks" in saved:  # version 2: raw token columns
            postings.load_chunk_arrays([_token_chunk(chunk) for chunk in saved["chunks"]], docstore.next_doc)
        elif "term_counts" in saved:  # one chunk (snapshots of early version 2)
            postings.load_chunk_arrays([_token_chunk(saved)], docstore.next_doc)
        else:  # version 1: one term id per token (its per-term bitmaps are not needed)
            postings.load_token_arrays(np.frombuffer(saved["token_terms"], dtype=np.uint32),
                                       np.frombuffer(saved["token_docs"], dtype=np.uint32),
                                       np.frombuffer(saved["token_positions"], dtype=np.uint32))
        index.postings[path] = postings
    for path, saved in state["columns"].items():
        columns = FieldColumns(path, index.cache)
        columns.exists = FrozenBitMap.deserialize(saved["exists"])
        columns.has_text = bool(saved["has_text"])
        columns.has_bool = bool(saved.get("has_bool", False))
        if "numeric" in saved or "values" in saved:
            # Inflated on first use (a filter, sort, facet or group on the field, or a write to it),
            # not on open: what a process holds follows what its queries read.
            columns.load_on_first_use(partial(_columns_from_state, saved), saved)
        index.columns[path] = columns
    if "vectors" in state:  # older snapshots: taken before vector spaces existed
        index.vectors = VectorIndex.from_state(state["vectors"])
    if "geo" in state:
        index.geo = GeoColumn.from_state(state["geo"])
    else:  # snapshots from before geo search: the points are in the stored records
        # (records written then were not checked as points: only valid ones count).
        alive = array_from_bitmap(index.alive)
        records = [docstore.record(doc) for doc in alive.tolist()]
        positions, lat, lng = extract_points([record if valid_point(record_location(record)) else {} for record in records])
        index.geo.add(alive[positions], lat, lng)
    return index




def _columns_from_state(saved: dict[str, Any]) -> tuple[NumericColumn | None, ValueColumn | None]:
    return (_numeric_from_state(saved["numeric"]) if "numeric" in saved else None,
            _values_from_state(saved["values"]) if "values" in saved else None)


def _numeric_from_state(saved: dict[str, Any]) -> NumericColumn:
    """A numeric column as :func:`index_to_state` saved it."""
    numeric = NumericColumn()
    docs = _array(saved["docs"], np.uint32, delta=True)
    numeric.load_pairs(docs, _array(saved["values"], np.float64))
    # Pairs are in doc order within each batch and a doc belongs to one batch: a doc with
    # several values has adjacent pairs.
    if docs.size > 1 and (docs[1:] == docs[:-1]).any():
        numeric.become_multi_valued()
    if "min" in saved:
        numeric.become_multi_valued()  # saved apart: three arrays
        numeric.minimum.data = _array(saved["min"], np.float64)
        numeric.maximum.data = _array(saved["max"], np.float64)
        # Older snapshots lack the first number per doc: the smallest is the best stand-in.
        numeric.first.data = _array(saved.get("first", saved["min"]), np.float64)
    else:  # single-valued: each doc's min, max and first are its one value
        per_doc = np.full(int(saved["slots"]), np.nan)
        per_doc[docs] = numeric.pairs()[1]
        numeric.minimum.data = per_doc  # also max and first (one array while single-valued)
    # The doc set as saved (older snapshots: from the pairs): deserialising is a copy, not a build.
    numeric.docs = (BitMap.deserialize(saved["doc_bitmap"]) if "doc_bitmap" in saved
                    else bitmap_from_array(docs))
    if "order" in saved:  # older snapshots: sorted on first use
        numeric.load_order(_array(saved["order"], np.uint32))
    numeric.share_dense_pairs()
    return numeric


def _values_from_state(saved: dict[str, Any]) -> ValueColumn:
    """An exact-value column as :func:`index_to_state` saved it."""
    values = ValueColumn()
    values.values = list(saved["values"])
    values.ids = {value: value_id for value_id, value in enumerate(values.values)}
    docs = _array(saved["docs"], np.uint32, delta=True)
    values.load_pairs(docs, _array(saved["vids"], np.uint32))
    # Saved in 32 bits as they are held (older snapshots: 64).
    values.first.data = (_array(saved["first"], np.int32) if saved.get("first_bits") == 32
                         else _array(saved["first"], np.int64).astype(np.int32))
    values.docs = (BitMap.deserialize(saved["doc_bitmap"]) if "doc_bitmap" in saved
                   else bitmap_from_array(docs))
    values.share_dense_pairs()
    return values


def valid_point(value: Any) -> bool:
    """Whether a stored ``_geo`` is a point (records written before geo search were not checked)."""
    if value is None:
        return False
    try:
        check_geo_point(value, GEO_FIELD)
    except BadRequestError:
        return False
    return True
