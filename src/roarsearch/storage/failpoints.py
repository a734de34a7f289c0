"""Named failpoints for crash tests: test-only hooks at each step of a durable write.

Owns: ``hit(name)``, called by the storage layer at each step that matters for crash safety. It
costs one dict lookup when no failpoint is armed. Armed through the environment, so that a test
can arm one in a writer subprocess it is about to lose:

    ROARSEARCH_FAILPOINTS="wal.after_append_before_fsync=kill"        # SIGKILL this process
    ROARSEARCH_FAILPOINTS="wal.after_fsync=kill@3"                    # ... on the third hit
    ROARSEARCH_FAILPOINTS="snapshot.after_rename=raise,wal.after_fsync=sleep:50"

Names: ``wal.after_append_before_fsync``, ``wal.after_fsync`` (durable, not yet acknowledged),
``snapshot.during_write`` (half the snapshot written to its temporary file),
``snapshot.after_rename`` (new snapshot in place, log not yet reset), ``wal.after_reset``.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

NAMES = (
    "wal.after_append_before_fsync",
    "wal.after_fsync",
    "snapshot.during_write",
    "snapshot.after_rename",
    "wal.after_reset",
)


class FailpointError(RuntimeError):
    """Raised by a failpoint armed with ``raise``."""


def _parse(spec: str) -> dict[str, str]:
    armed: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, action = item.partition("=")
        armed[name.strip()] = action.strip() or "raise"
    return armed


_armed: dict[str, str] = _parse(os.environ.get("ROARSEARCH_FAILPOINTS", ""))


def arm(name: str, action: str) -> None:
    """Arm a failpoint in this process (tests); ``action``: kill, kill@<n>, raise or sleep:<ms>."""
    if name not in NAMES:
        raise ValueError(f"unknown failpoint {name!r}; known: {', '.join(NAMES)}")
    _armed[name] = action


def disarm_all() -> None:
    _armed.clear()


@contextmanager
def armed(name: str, action: str) -> Iterator[None]:
    """Arm ``name`` for the duration of a ``with`` block (tests)."""
    arm(name, action)
    try:
        yield
    finally:
        _armed.pop(name, None)


def hit(name: str) -> None:
    """Run the action armed for ``name``, if any. Disarmed (always, outside tests): one truth test."""
    if not _armed:
        return
    action = _armed.get(name)
    if action is None:
        return
    if action.startswith("kill@"):  # kill on the Nth hit
        remaining = int(action[5:]) - 1
        _armed[name] = f"kill@{remaining}" if remaining > 0 else "kill"
        if remaining > 0:
            return
        action = "kill"
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "raise":
        raise FailpointError(f"failpoint {name}")
    elif action.startswith("sleep:"):
        time.sleep(int(action.split(":", 1)[1]) / 1000)
