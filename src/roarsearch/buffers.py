"""Buffers written as one binary value without being joined in memory first.

Owns: :class:`JoinedBuffers`, which the index hands to the snapshot writer (stored records saved
part after part) — below both, as ``index`` and ``storage`` do not import each other.
"""

from __future__ import annotations

Buffer = bytes | bytearray | memoryview


class JoinedBuffers(tuple[Buffer, ...]):
    """Buffers saved as one binary value (their bytes back to back) without being joined in
    memory first: a reader gets one value (in the snapshot's blob layout, one view of the mapping)."""

    @property
    def size(self) -> int:
        return sum(map(len, self))
