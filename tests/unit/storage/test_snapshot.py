"""This module tests the following properties:

- a state written as a snapshot reads back equal, bytes values as bytes, integer map keys kept;
- a bit flipped at many offsets, or the file cut at many lengths, makes reading raise
  CorruptionError naming the file and an offset — never a wrong state;
- the I/O error loop: failing the Nth operation (ENOSPC, EIO) of a snapshot write, N = 1, 2, …
  until it succeeds, raises StorageError and leaves the previous snapshot readable and intact,
  with no temporary file behind;
- the failpoint in the middle of the write leaves the old snapshot in place, and the half-written
  temporary file carries no valid header;
- another format version is named in the error;
- ``JoinedBuffers`` (parts saved as one value, never joined in memory) read back as the one
  value their bytes make, small and large, with what follows them intact.
"""

from __future__ import annotations

import errno
import os
import random
from pathlib import Path

import msgpack
import pytest

from roarsearch.errors import CorruptionError, StorageError
from roarsearch.storage import failpoints
from roarsearch.storage.format import SNAPSHOT_HEADER
from roarsearch.storage.fs import FaultyFileSystem, FileSystem
from roarsearch.storage.snapshot import DIRECT_WRITE_BYTES, JoinedBuffers, encode_chunks, read_snapshot, write_snapshot


def sample_state(seed: int) -> dict:
    rng = random.Random(seed)
    return {
        "format": 1, "last_seq": seed,
        "index": {
            "bitmaps": rng.randbytes(DIRECT_WRITE_BYTES + 17),  # written straight from this buffer
            "small": rng.randbytes(40),
            "record_ids": list(range(seed, seed + 500)),
            "payloads": [rng.randbytes(rng.randrange(30)) for _ in range(300)],
            "by_id": {i: f"value {i}" for i in range(5000)},  # a large map with integer keys
        },
    }


def test_round_trip(tmp_path: Path) -> None:
    path = str(tmp_path / "snapshot.rsnap")
    state = sample_state(1)
    size = write_snapshot(FileSystem(), path, state)
    assert size == os.path.getsize(path)
    assert read_snapshot(FileSystem(), path) == state
    assert not os.path.exists(path + ".tmp")
    view = memoryview(bytearray(b"abc" * DIRECT_WRITE_BYTES))
    write_snapshot(FileSystem(), path, {"buffer": view})  # memoryviews (e.g. of numpy arrays) are accepted
    assert read_snapshot(FileSystem(), path) == {"buffer": bytes(view)}


def test_missing_snapshot_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_snapshot(FileSystem(), str(tmp_path / "nothing.rsnap"))


def test_bit_flips_and_truncations_are_detected(tmp_path: Path) -> None:
    source = tmp_path / "snapshot.rsnap"
    write_snapshot(FileSystem(), str(source), sample_state(2))
    full = source.read_bytes()
    rng = random.Random(9)
    path = tmp_path / "damaged.rsnap"
    offsets = sorted(set(rng.randrange(len(full)) for _ in range(120)) | set(range(SNAPSHOT_HEADER.size)) | {len(full) - 1})
    damages = [("flip", offset) for offset in offsets] + [("cut", offset) for offset in offsets[::4]] + [("extend", 0)]
    for kind, offset in damages:
        damaged = bytearray(full)
        if kind == "flip":
            damaged[offset] ^= 1 << rng.randrange(8)
        elif kind == "cut":
            del damaged[offset:]
        else:
            damaged += b"\0"
        path.write_bytes(bytes(damaged))
        with pytest.raises(CorruptionError, match=r"damaged.rsnap: offset \d+: ") as caught:
            read_snapshot(FileSystem(), str(path))
        assert caught.value.status == 500, (kind, offset)


def test_other_versions_are_named(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.rsnap"
    write_snapshot(FileSystem(), str(path), {"a": 1})
    data = bytearray(path.read_bytes())
    assert data[5] == 4  # compressed token columns
    for older in (1, 2):  # versions 1 and 2 still load
        data[5] = older
        path.write_bytes(bytes(data))
        assert read_snapshot(FileSystem(), str(path)) == {"a": 1}
    data[5] = 3
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match="snapshot of format version 3; this roarsearch reads format versions 1, 2 and 4"):
        read_snapshot(FileSystem(), str(path))


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EIO])
def test_io_error_loop_keeps_the_previous_snapshot(tmp_path: Path, error: int) -> None:
    path = str(tmp_path / "snapshot.rsnap")
    write_snapshot(FileSystem(), path, sample_state(3))
    for n in range(1, 20):
        fs = FaultyFileSystem(fail_at=n, fail_errno=error)
        try:
            write_snapshot(fs, path, sample_state(4))
        except StorageError as failure:
            assert os.strerror(error) in failure.data and path in failure.data
            current = read_snapshot(FileSystem(), path)
            if "directory could not be synced" in failure.data:  # failed after the rename
                assert current == sample_state(4)
            else:
                assert current == sample_state(3)
            assert not os.path.exists(path + ".tmp") or fs.counts.get("remove", 0) >= 1
            continue
        assert read_snapshot(FileSystem(), path) == sample_state(4)
        assert n > 4  # write, header, fsync, rename and directory fsync each had their chance
        return
    pytest.fail("the snapshot was never written")


def test_failpoint_during_write_leaves_old_snapshot(tmp_path: Path) -> None:
    path = str(tmp_path / "snapshot.rsnap")
    write_snapshot(FileSystem(), path, sample_state(5))
    with failpoints.armed("snapshot.during_write", "raise"), pytest.raises(failpoints.FailpointError):
        write_snapshot(FileSystem(), path, sample_state(6))
    assert read_snapshot(FileSystem(), path) == sample_state(5)
    partial = Path(path + ".tmp").read_bytes()
    assert partial[:SNAPSHOT_HEADER.size] == bytes(SNAPSHOT_HEADER.size)  # no valid header on a torn file
    with pytest.raises(CorruptionError, match="offset 0: not a roarsearch snapshot"):
        read_snapshot(FileSystem(), path + ".tmp")


def test_joined_buffers_read_back_as_one_value(tmp_path: Path) -> None:
    path = str(tmp_path / "snapshot.rsnap")
    large = [bytes([n]) * (DIRECT_WRITE_BYTES // 3 + n) for n in range(5)]
    state = {"small": JoinedBuffers([b"ab", memoryview(b"cd"), bytearray(b"e")]), "large": JoinedBuffers(large),
             "empty": JoinedBuffers([]), "after": [b"x" * DIRECT_WRITE_BYTES, 7]}
    write_snapshot(FileSystem(), path, state)
    loaded = read_snapshot(FileSystem(), path)
    assert bytes(loaded["small"]) == b"abcde" and bytes(loaded["large"]) == b"".join(large)
    assert bytes(loaded["empty"]) == b""
    assert bytes(loaded["after"][0]) == b"x" * DIRECT_WRITE_BYTES and loaded["after"][1] == 7
    # Outside the blob layout they are one msgpack binary too.
    assert msgpack.unpackb(b"".join(map(bytes, encode_chunks(state)))) == {
        "small": b"abcde", "large": b"".join(large), "empty": b"", "after": [b"x" * DIRECT_WRITE_BYTES, 7]}


@pytest.mark.parametrize("items", [3, 65, 300])
def test_large_binaries_inside_long_lists_are_placed_not_copied(tmp_path: Path, items: int) -> None:
    """A field's chunks are a list of maps, each with its large token blocks: however long the list
    (a 10M-record load leaves hundreds of chunks in a field), every large binary inside it is
    written from its own buffer into the blob region (its offset in ``placements``) rather than
    packed into the snapshot's own buffer, and reads back equal. So are memoryviews in a long list."""
    path = str(tmp_path / "snapshot.rsnap")
    chunks = [{"packed_docs": bytes([n % 251]) * (DIRECT_WRITE_BYTES + n), "tokens": n, "small": b"s"}
              for n in range(items)]
    views = [memoryview(bytes([n % 251]) * (DIRECT_WRITE_BYTES + 1)) for n in range(items)]
    state = {"postings": {"body": {"chunks": chunks}}, "views": views + [None]}
    placements: dict[int, int] = {}
    write_snapshot(FileSystem(), path, state, placements)
    assert {id(chunk["packed_docs"]) for chunk in chunks} <= set(placements)
    assert {id(view) for view in views} <= set(placements)
    loaded = read_snapshot(FileSystem(), path)
    assert [bytes(chunk["packed_docs"]) for chunk in loaded["postings"]["body"]["chunks"]] == [
        chunk["packed_docs"] for chunk in chunks]
    assert [bytes(view) for view in loaded["views"][:-1]] == [bytes(view) for view in views]
    assert loaded["views"][-1] is None
