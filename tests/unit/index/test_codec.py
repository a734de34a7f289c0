"""``index.codec``: zstd blocks round-trip from any bytes-like input in any thread, and blocks
written by zlib (snapshots from before zstd) still read — as stored-record parts and as token
columns inflated lazily."""

from __future__ import annotations

import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from roarsearch.index import codec
from roarsearch.index.blocks import PACK_BLOCK_VALUES, LazyColumn, _shuffle, pack_column


@given(st.binary(max_size=5000), st.sampled_from([1, 2, 3]))
def test_round_trip_and_zlib_blocks_still_read(data: bytes, level: int) -> None:
    packed = codec.compress(data, level)
    assert packed[:4] == b"\x28\xb5\x2f\xfd"
    assert codec.decompress(packed) == data
    assert codec.decompress(memoryview(b"pad" + packed)[3:]) == data  # views of a mapped file
    assert codec.decompress(zlib.compress(data, 4)) == data
    assert codec.decompress(zlib.compress(data, 1)) == data


def test_threads_each_use_their_own_contexts() -> None:
    blocks = [bytes([i]) * (1000 + i) for i in range(64)]
    with ThreadPoolExecutor(4) as pool:
        packed = list(pool.map(lambda block: codec.compress(block, 2), blocks))
        assert list(pool.map(codec.decompress, packed)) == blocks


def test_a_token_column_of_zlib_blocks_reads_like_one_of_zstd_blocks() -> None:
    values = np.cumsum(np.random.default_rng(3).integers(0, 9, PACK_BLOCK_VALUES * 3 + 17)).astype(np.uint32)
    data, ends = pack_column(values, True)
    old_parts = []
    for start in range(0, values.size, PACK_BLOCK_VALUES):
        block = np.diff(values[start:start + PACK_BLOCK_VALUES], prepend=np.uint32(0))
        old_parts.append(zlib.compress(_shuffle(block), 1))
    old_ends = np.cumsum([len(part) for part in old_parts]).astype(np.uint64)
    for column_data, column_ends in ((data, ends), (b"".join(old_parts), old_ends)):
        column = LazyColumn(column_data, column_ends, values.size, np.uint32, delta=True)
        assert column.read(PACK_BLOCK_VALUES + 5, PACK_BLOCK_VALUES + 9).tolist() == values[PACK_BLOCK_VALUES + 5:PACK_BLOCK_VALUES + 9].tolist()
        assert column.whole().tolist() == values.tolist()
