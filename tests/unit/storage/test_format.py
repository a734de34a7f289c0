"""This module tests the following properties:

- a framed log record reads back as itself, at any offset, and every proper prefix of it reads
  as incomplete (None) — a torn record is never mistaken for an intact one;
- a flipped bit anywhere in a record makes it fail its checksums;
- the streaming snapshot encoder produces exactly ``msgpack.packb``'s bytes for any msgpack-able
  state, passes large binary values through without copying them, and writes in bounded pieces.
"""

from __future__ import annotations

import msgpack
from hypothesis import given
from hypothesis import strategies as st

from roarsearch.storage.format import WAL_RECORD_HEADER, pack_wal_record, read_wal_record, wal_record_length
from roarsearch.storage.snapshot import DIRECT_WRITE_BYTES, WRITE_CHUNK_BYTES, encode_chunks

leaves = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=20) \
    | st.binary(max_size=40)
states = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=80) | st.dictionaries(st.text(max_size=8) | st.integers(0, 99), inner, max_size=12),
    max_leaves=200,
)


@given(st.binary(max_size=300), st.integers(1, 2**64 - 1), st.binary(max_size=30))
def test_wal_record_round_trip_and_prefixes(body: bytes, seq: int, before: bytes) -> None:
    record = pack_wal_record(seq, body)
    data = before + record
    found = read_wal_record(data, len(before))
    assert found is not None
    assert (found.seq, data[found.body_start:found.end]) == (seq, body)
    assert found.end == len(data)
    assert wal_record_length(data, len(before)) == len(record)
    for cut in range(len(before), len(data)):
        assert read_wal_record(data[:cut], len(before)) is None


@given(st.binary(min_size=1, max_size=100), st.integers(1, 2**40), st.data())
def test_any_bit_flip_fails_the_checksums(body: bytes, seq: int, data: st.DataObject) -> None:
    record = bytearray(pack_wal_record(seq, body))
    position = data.draw(st.integers(0, len(record) - 1))
    record[position] ^= 1 << data.draw(st.integers(0, 7))
    assert read_wal_record(bytes(record), 0) is None
    if position < WAL_RECORD_HEADER.size - 4:  # the length, sequence or header checksum
        assert wal_record_length(bytes(record), 0) is None


@given(states)
def test_streamed_encoding_equals_packb(state: object) -> None:
    streamed = b"".join(bytes(chunk) for chunk in encode_chunks(state))
    assert streamed == msgpack.packb(state, use_bin_type=True)


def test_large_values_pass_through_uncopied_and_chunks_stay_bounded() -> None:
    big = bytes(range(256)) * (DIRECT_WRITE_BYTES // 64)  # 4 × the direct-write threshold
    view = memoryview(bytearray(big))
    state = {
        "postings": {"title": {"bitmaps": big, "offsets": view}},
        "payloads": [b"x" * 100] * 30_000,  # ~3 MB of small items: packed in slices
        "words": {f"w{i}": i for i in range(10_000)},  # a large map: packed in slices
        "few": [big, 1, "two"],  # a short list: walked, so its large item is not copied
        "blobs": [big] * 3 + [b"small"] * 100,  # a long list of binaries: its large items are not copied
    }
    chunks = list(encode_chunks(state))
    assert b"".join(bytes(chunk) for chunk in chunks) == msgpack.packb(state, use_bin_type=True)
    assert sum(chunk is big for chunk in chunks) == 5
    assert any(isinstance(chunk, memoryview) and chunk.obj is view.obj for chunk in chunks)
    assert max(len(chunk) for chunk in chunks if chunk is not big and not isinstance(chunk, memoryview)) \
        < WRITE_CHUNK_BYTES + 600_000
    decoded = msgpack.unpackb(b"".join(bytes(chunk) for chunk in chunks), raw=False, strict_map_key=False)
    assert decoded["postings"]["title"]["offsets"] == big
