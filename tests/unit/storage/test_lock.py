"""This module tests the following properties:

- a second lock on a locked data directory fails with DirectoryLockedError (409) naming the
  holder's pid — from the same process and from another process, both ways round;
- the kernel releases the lock when its holder exits or is killed, so no stale lock survives;
- release is idempotent and the lock works as a context manager.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from roarsearch.errors import DirectoryLockedError
from roarsearch.storage.lock import DirectoryLock

ROOT = Path(__file__).resolve().parents[3]
HOLDER = """
import sys
from roarsearch.storage.lock import DirectoryLock
lock = DirectoryLock(sys.argv[1])
lock.acquire()
print("LOCKED", flush=True)
sys.stdin.read()
"""
TRY = """
import sys
from roarsearch.errors import DirectoryLockedError
from roarsearch.storage.lock import DirectoryLock
try:
    DirectoryLock(sys.argv[1]).acquire()
    print("ACQUIRED")
except DirectoryLockedError as error:
    print(error.status, error.data)
"""


def python(code: str, directory: Path, **options: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code, str(directory)], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stdin=subprocess.PIPE, **options)  # type: ignore[call-overload]


def test_same_process_second_holder_is_refused(tmp_path: Path) -> None:
    with DirectoryLock(str(tmp_path)) as first:
        assert first.held
        with pytest.raises(DirectoryLockedError, match=rf"in use by another open engine \(pid {os.getpid()},") as caught:
            DirectoryLock(str(tmp_path)).acquire()
        assert caught.value.status == 409
        with pytest.raises(DirectoryLockedError, match="already locked by this engine"):
            first.acquire()
        assert (tmp_path / "LOCK").read_text() == f"{os.getpid()}\n"  # the refused attempt changed nothing
    assert not first.held
    first.release()  # idempotent
    with DirectoryLock(str(tmp_path)):
        pass


def test_other_process_holder_is_named_and_released_on_exit(tmp_path: Path) -> None:
    holder = python(HOLDER, tmp_path)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "LOCKED"
        with pytest.raises(DirectoryLockedError, match=rf"\(pid {holder.pid},"):
            DirectoryLock(str(tmp_path)).acquire()
    finally:
        holder.communicate("")  # closing its stdin ends it without a release call
    with DirectoryLock(str(tmp_path)):
        pass


def test_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    holder = python(HOLDER, tmp_path)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "LOCKED"
    holder.send_signal(signal.SIGKILL)
    holder.communicate()
    assert (tmp_path / "LOCK").read_text() == f"{holder.pid}\n"  # the pid stays, the lock does not
    with DirectoryLock(str(tmp_path)):
        assert (tmp_path / "LOCK").read_text() == f"{os.getpid()}\n"


def test_this_process_holding_refuses_another_process(tmp_path: Path) -> None:
    with DirectoryLock(str(tmp_path)):
        output, _ = python(TRY, tmp_path).communicate("")
    assert output.startswith("409 ") and f"pid {os.getpid()}" in output
    output, _ = python(TRY, tmp_path).communicate("")
    assert output.strip() == "ACQUIRED"
