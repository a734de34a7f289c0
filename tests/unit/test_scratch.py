"""Scratch buffers: a merge's output written to a nameless file and read back through a mapping,
or kept in memory (no folder, or a disk that refuses); file pages dropped and read again."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

from roarsearch import scratch as scratch_module
from roarsearch.memory import MAPPINGS, drop_file_pages
from roarsearch.scratch import ScratchBuffer, ScratchSpace

PARTS = [os.urandom(size) for size in (1, 4096, 70_000, 0, 12_345)]


def _written(buffer: ScratchBuffer) -> bytes:
    for part in PARTS:
        buffer.append(memoryview(part))
    return bytes(buffer.finish())


def test_a_buffer_in_a_folder_is_a_read_only_mapping_of_a_file_without_a_name(tmp_path: Path) -> None:
    buffer = ScratchSpace(str(tmp_path)).buffer()
    for part in PARTS:
        buffer.append(part)
    data = buffer.finish()
    assert bytes(data) == b"".join(PARTS)
    source = memoryview(data).obj
    assert isinstance(source, mmap.mmap) and MAPPINGS.of_file(source)
    assert memoryview(data).readonly
    assert not list(tmp_path.iterdir())


def test_without_a_folder_the_parts_are_joined_in_memory() -> None:
    data = ScratchSpace(None).buffer()
    assert _written(data) == b"".join(PARTS)
    assert bytes(ScratchBuffer(None).finish()) == b""
    assert bytes(ScratchBuffer("/nonexistent-folder").finish()) == b""  # nothing appended: no file


@pytest.mark.parametrize("failing_write", [1, 2, 4])
def test_a_disk_that_refuses_a_write_keeps_the_buffer_whole_in_memory(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path, failing_write: int) -> None:
    """The parts written before the refusal are read back, the rest kept: the same bytes."""
    calls = []

    def pwrite(fd: int, data: memoryview, offset: int) -> int:
        calls.append(1)
        if len(calls) == failing_write:
            raise OSError(28, "No space left on device")
        return os.pwrite(fd, data, offset)

    monkeypatch.setattr(scratch_module, "_pwrite", pwrite)
    buffer = ScratchBuffer(str(tmp_path))
    for part in PARTS:
        buffer.append(part)
    data = buffer.finish()
    assert bytes(data) == b"".join(PARTS)
    source = memoryview(data).obj
    assert not (isinstance(source, mmap.mmap) and MAPPINGS.of_file(source))


def test_a_folder_that_cannot_hold_files_keeps_the_buffer_in_memory(tmp_path: Path) -> None:
    assert _written(ScratchBuffer(str(tmp_path / "missing"))) == b"".join(PARTS)


def test_dropping_file_pages_keeps_their_bytes_and_leaves_anonymous_mappings_alone(tmp_path: Path) -> None:
    in_file = ScratchSpace(str(tmp_path)).buffer()
    in_file.append(b"x" * (1 << 20))
    file_view = memoryview(in_file.finish())
    anonymous = memoryview(MAPPINGS.keep(mmap.mmap(-1, 1 << 16)))
    anonymous[:5] = b"hello"
    assert bytes(file_view[-3:]) == b"xxx"  # resident now
    drop_file_pages([file_view, anonymous, b"not a mapping"])
    assert bytes(file_view[:3]) == b"xxx" and bytes(file_view).count(b"x") == 1 << 20
    assert bytes(anonymous[:5]) == b"hello"  # an anonymous mapping's pages would have been zeroed
