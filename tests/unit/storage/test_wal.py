"""This module tests the following properties:

- appended payloads replay in order, with their sequence numbers, across reopenings and resets
  (sequence numbers never restart); records already in a snapshot are skipped;
- a log cut at every byte offset opens with exactly the whole records before the cut, and the
  cut-off tail is removed from the file and reported;
- a bit flipped at many offsets either raises CorruptionError naming the file and the offset
  (damage with intact records after it) or loses only the last record (a torn tail) — a replay
  never returns a payload that was not appended;
- the I/O error loop: failing the Nth operation with ENOSPC or EIO, for N = 1, 2, … until an append
  succeeds, raises StorageError and leaves the file readable with exactly the old records;
  when even the repair fails the log refuses further appends;
- sequence gaps and foreign files are refused with precise messages;
- a batch whose records come already encoded writes the very bytes of the whole payload encoded.
"""

from __future__ import annotations

import errno
import os
import random
from pathlib import Path

import msgpack
import pytest

from roarsearch.errors import CorruptionError, StorageError
from roarsearch.storage.format import WAL_MAGIC, pack_wal_record
from roarsearch.storage.fs import FaultyFileSystem, FileSystem
from roarsearch.storage.wal import WriteAheadLog
from tests.unit.storage.helpers import payload


def opened(path: Path, after_seq: int = 0, fs: FileSystem | None = None) -> tuple[WriteAheadLog, list[tuple[int, dict]]]:
    wal = WriteAheadLog(fs or FileSystem(), str(path))
    return wal, list(wal.open(after_seq))


def written_log(path: Path, count: int) -> list[dict]:
    wal, _ = opened(path)
    payloads = [payload(n, size=n % 4) for n in range(count)]
    for item in payloads:
        wal.append(item)
    return payloads


def test_round_trip_counters_and_reset(tmp_path: Path) -> None:
    path = tmp_path / "wal.rlog"
    wal, replayed = opened(path)
    assert replayed == [] and wal.size_bytes == len(WAL_MAGIC) and wal.record_count == 0
    assert [wal.append(payload(n)) for n in range(5)] == [1, 2, 3, 4, 5]
    assert wal.record_count == 5 and wal.size_bytes == path.stat().st_size
    wal, replayed = opened(path)
    assert replayed == [(n + 1, payload(n)) for n in range(5)]
    assert list(wal.replay(after_seq=3)) == [payload(3), payload(4)]
    wal.reset()
    assert path.read_bytes() == WAL_MAGIC and wal.record_count == 0
    assert wal.append(payload(5)) == 6  # numbering goes on after a reset
    wal, replayed = opened(path, after_seq=5)
    assert replayed == [(6, payload(5))] and wal.next_seq == 7


def test_records_in_the_snapshot_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "wal.rlog"
    written_log(path, 6)
    wal, replayed = opened(path, after_seq=4)  # a crash came between a snapshot of 1..4 and the reset
    assert [seq for seq, _ in replayed] == [5, 6]
    assert wal.record_count == 2 and wal.next_seq == 7
    wal, replayed = opened(path, after_seq=9)  # a backup: older log, newer snapshot
    assert replayed == [] and wal.next_seq == 10


def test_missing_or_half_created_log_is_created(tmp_path: Path) -> None:
    path = tmp_path / "wal.rlog"
    path.write_bytes(WAL_MAGIC[:3])
    wal, replayed = opened(path, after_seq=7)
    assert replayed == [] and path.read_bytes() == WAL_MAGIC and wal.next_seq == 8


def test_torn_tail_at_every_byte_offset(tmp_path: Path) -> None:
    source = tmp_path / "full.rlog"
    payloads = written_log(source, 4)
    full = source.read_bytes()
    ends = [len(WAL_MAGIC)]
    for n, item in enumerate(payloads):
        ends.append(ends[-1] + len(pack_wal_record(n + 1, __import__("msgpack").packb(item, use_bin_type=True))))
    assert ends[-1] == len(full)
    path = tmp_path / "wal.rlog"
    for cut in range(len(WAL_MAGIC), len(full) + 1):
        path.write_bytes(full[:cut])
        wal, replayed = opened(path)
        whole = sum(1 for end in ends[1:] if end <= cut)
        assert [item for _, item in replayed] == payloads[:whole], cut
        assert path.stat().st_size == ends[whole]
        assert wal.truncated_tail == (None if cut == ends[whole] else (ends[whole], cut - ends[whole]))
        assert wal.append(payload(99)) == whole + 1  # and writing goes on after the cut


def test_bit_flips_never_return_wrong_payloads(tmp_path: Path) -> None:
    source = tmp_path / "full.rlog"
    payloads = written_log(source, 6)
    full = source.read_bytes()
    last_start = len(full) - len(pack_wal_record(6, __import__("msgpack").packb(payloads[-1], use_bin_type=True)))
    rng = random.Random(5)
    path = tmp_path / "wal.rlog"
    for offset in sorted(set(rng.randrange(len(full)) for _ in range(150)) | {0, 7, 8, len(full) - 1}):
        damaged = bytearray(full)
        damaged[offset] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(damaged))
        try:
            _, replayed = opened(path)
        except CorruptionError as error:
            assert str(path) in error.data and "offset" in error.data
            assert offset < last_start, offset  # damage to the last record is a torn tail, not an error
            continue
        assert offset >= last_start, offset
        assert [item for _, item in replayed] == payloads[:-1]


def test_corruption_in_the_middle_names_the_record_offset(tmp_path: Path) -> None:
    path = tmp_path / "wal.rlog"
    written_log(path, 3)
    data = bytearray(path.read_bytes())
    second = len(WAL_MAGIC) + len(pack_wal_record(1, __import__("msgpack").packb(payload(0, size=0), use_bin_type=True)))
    data[second + 2] ^= 0xFF  # the second record's length: its header checksum fails
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match=rf"wal.rlog: offset {second}: .*intact records follow"):
        opened(path)
    assert path.read_bytes() == bytes(data)  # nothing was cut


def test_sequence_gap_and_foreign_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "wal.rlog"
    path.write_bytes(WAL_MAGIC + pack_wal_record(1, b"\xc0") + pack_wal_record(3, b"\xc0"))
    with pytest.raises(CorruptionError, match="sequence 3 follows 1"):
        opened(path)
    path.write_bytes(WAL_MAGIC + pack_wal_record(5, b"\xc0"))
    with pytest.raises(CorruptionError, match=r"offset 8: the log starts at sequence 5 but the snapshot ends at 2"):
        opened(path, after_seq=2)
    path.write_bytes(b"RSWAL\x07\0\0")
    with pytest.raises(CorruptionError, match="format version 7; this roarsearch reads format version 1"):
        opened(path)
    path.write_bytes(b"hello world")
    with pytest.raises(CorruptionError, match="offset 0: not a roarsearch write-ahead log"):
        opened(path)


def test_undecodable_checksummed_payload_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / "wal.rlog"
    path.write_bytes(WAL_MAGIC + pack_wal_record(1, b"\xc1"))  # 0xc1 is never valid msgpack
    with pytest.raises(CorruptionError, match="offset 28: write-ahead log payload does not decode"):
        opened(path)


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EIO])
def test_io_error_loop_leaves_the_old_records(tmp_path: Path, error: int) -> None:
    path = tmp_path / "wal.rlog"
    old = written_log(path, 3)
    for n in range(1, 20):
        before = path.read_bytes()
        fs = FaultyFileSystem(fail_errno=error)
        wal, _ = opened(path, fs=fs)
        fs.fail_at = fs.operations + n
        try:
            wal.append(payload(50))
        except StorageError as failure:
            assert os.strerror(error) in failure.data and str(path) in failure.data
            assert path.read_bytes() == before
            _, replayed = opened(path)
            assert [item for _, item in replayed] == old
            continue
        _, replayed = opened(path)
        assert [item for _, item in replayed] == old + [payload(50)]
        assert n > 2  # append and fsync must both have been given a chance to fail
        return
    pytest.fail("the append never succeeded")


def test_failed_repair_makes_the_log_refuse_appends(tmp_path: Path) -> None:
    path = tmp_path / "wal.rlog"
    old = written_log(path, 2)
    fs = FaultyFileSystem(fail_errno=errno.EIO, fail_kind="fsync", fail_at=1, sticky=True)
    wal, _ = opened(path, fs=fs)
    with pytest.raises(StorageError, match=r"could not be made durable .* may reappear whole"):
        wal.append(payload(7))
    fs.sticky, fs.fail_at = False, None
    fs._failing = False
    with pytest.raises(StorageError, match=r"could not be repaired after an earlier failure.*reopen"):
        wal.append(payload(8))
    # Batch 7 was never acknowledged; like a batch cut by a crash after its fsync, it comes back
    # whole (its bytes reached the file) or not at all — never in part, never batch 8.
    wal, replayed = opened(path)
    assert [item for _, item in replayed] == old + [payload(7)]
    assert wal.append(payload(9)) == 4


def test_append_before_open_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="open"):
        WriteAheadLog(FileSystem(), str(tmp_path / "wal.rlog")).append({"op": "clear"})


def test_prepacked_records_write_the_same_bytes(tmp_path: Path) -> None:
    records = [{"id": 1, "title": "Ørsted", "tags": ["a", "b"]}, {"id": "x", "n": 2.5, "b": True, "z": None}]
    batch = {"op": "add", "records": records}
    items = [msgpack.packb(record, use_bin_type=True) for record in records]
    plain, _ = opened(tmp_path / "plain")
    prepacked, _ = opened(tmp_path / "prepacked")
    plain.append(batch)
    prepacked.append(batch, ("records", items))
    assert (tmp_path / "plain").read_bytes() == (tmp_path / "prepacked").read_bytes()
    assert [item for _, item in opened(tmp_path / "prepacked")[1]] == [batch]
