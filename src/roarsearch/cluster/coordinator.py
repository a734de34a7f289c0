"""The driver's durable state: shard count, the first-seen order of text fields, the commit log.

Owns: the root of a sharded data directory —

    CLUSTER            JSON: {"format": 1, "shards": N, "text_fields": {collection: [field, ...]},
                       "settings": {collection: {key: value, ...}}}
    COMMITS            the coordinator log: one line per committed batch, "<crc32 hex> <json>\\n"
                       (a settings batch carries the collection's new settings; a drop says so)
    LOCK               held (flock) by the one open ShardedEngine
    shard-K/           shard K's own data directory (an Engine directory plus its prepare area)

A batch is committed exactly when its line is durable in ``COMMITS`` (written and fsynced); a torn
last line is no commit. On open the log is folded into ``CLUSTER`` (written atomically) and then
emptied, once every shard has resolved its prepared batches against it.

The driver keeps each collection's settings here as well as in every shard (they change only
through committed batches, so both agree): a search needs them before it is scattered (the
settings' ``searchFields`` are resolved over the collection-wide field order).
"""

from __future__ import annotations

import json
import os
import zlib
from typing import Any

from roarsearch.errors import BadRequestError, CorruptionError, StorageError
from roarsearch.storage.fs import FileSystem
from roarsearch.storage.lock import DirectoryLock

STATE_FILE = "CLUSTER"
COMMIT_LOG = "COMMITS"
FORMAT = 1


#: File operations go through the storage layer, as every other durable write does.
FILES = FileSystem()


def write_durably(path: str, data: bytes) -> None:
    """``path`` holds ``data`` whole or keeps its old content: temp file, fsync, rename, fsync dir."""
    temporary = path + ".tmp"
    FILES.write_new(temporary, [data])
    FILES.fsync(temporary)
    FILES.replace(temporary, path)
    FILES.fsync_dir(os.path.dirname(path))


class Coordinator:
    """State and commit log of one sharded data directory (the caller serialises writers)."""

    def __init__(self, path: str, shards: int | None) -> None:
        self.path = os.path.abspath(path)
        os.makedirs(self.path, exist_ok=True)
        self.lock = DirectoryLock(self.path)
        self.lock.acquire()
        try:
            self.state_path = os.path.join(self.path, STATE_FILE)
            self.log_path = os.path.join(self.path, COMMIT_LOG)
            state = self._read_state()
            if state is None:
                if shards is None:
                    raise BadRequestError(f"shards: {self.path!r} is not a sharded data directory yet; give shards=N", field="shards")
                if any(name not in ("LOCK",) for name in os.listdir(self.path)):
                    raise BadRequestError(f"path: {self.path!r} is not a sharded data directory and not empty", field="path")
                state = {"format": FORMAT, "shards": shards, "text_fields": {}, "settings": {}}
                self._write_state(state)
            elif shards is not None and shards != state["shards"]:
                raise BadRequestError(
                    f"shards: {self.path!r} holds {state['shards']} shards; it cannot be opened with {shards}", field="shards")
            self.shards: int = state["shards"]
            self.text_fields: dict[str, list[str]] = {name: list(fields) for name, fields in state["text_fields"].items()}
            #: Settings of the collections that have some (older states have none: defaults).
            self.settings: dict[str, dict[str, Any]] = dict(state.get("settings") or {})
            #: Transactions whose commit line is in the log (in-doubt batches resolve against these).
            self.committed: set[str] = set()
            for entry in self._read_log():
                self.committed.add(entry["tx"])
                self._note(entry)
        except BaseException:
            self.lock.release()
            raise

    def shard_path(self, shard: int) -> str:
        return os.path.join(self.path, f"shard-{shard}")

    def _note(self, entry: dict[str, Any]) -> None:
        """Fold one committed batch into the driver's view of its collection."""
        collection = entry["collection"]
        if entry.get("drop"):
            self.text_fields.pop(collection, None)
            self.settings.pop(collection, None)
            return
        self.note_fields(collection, entry["fields"])
        if entry.get("settings") is not None:
            self.settings[collection] = entry["settings"]

    def note_fields(self, collection: str, fields: list[str]) -> None:
        known = self.text_fields.setdefault(collection, [])
        seen = set(known)
        known.extend(field for field in fields if field not in seen and not seen.add(field))  # type: ignore[func-returns-value]

    # ------------------------------------------------------------------ files

    def _read_state(self) -> dict[str, Any] | None:
        if not os.path.exists(self.state_path):
            return None
        try:
            with open(self.state_path, encoding="utf-8") as handle:
                state = json.load(handle)
        except (OSError, ValueError) as error:
            raise CorruptionError(f"{self.state_path}: offset 0: unreadable cluster state ({error})") from error
        if not isinstance(state, dict) or state.get("format") != FORMAT or not isinstance(state.get("shards"), int):
            raise CorruptionError(f"{self.state_path}: offset 0: not a roarsearch cluster state of format {FORMAT}")
        return state

    def _write_state(self, state: dict[str, Any]) -> None:
        write_durably(self.state_path, json.dumps(state).encode("utf-8"))

    def _read_log(self) -> list[dict[str, Any]]:
        if not os.path.exists(self.log_path):
            return []
        with open(self.log_path, "rb") as handle:
            data = handle.read()
        entries = []
        for line in data.split(b"\n"):
            checksum, _, body = line.partition(b" ")
            try:
                if int(checksum, 16) != zlib.crc32(body):
                    break
                entries.append(json.loads(body))
            except ValueError:
                break  # a torn last line: that batch was never committed
        return entries

    def append_commit(self, tx: str, collection: str, fields: list[str], *,
                      settings: dict[str, Any] | None = None, drop: bool = False) -> None:
        """Commit a batch: its line is durable when this returns (raises StorageError otherwise)."""
        entry: dict[str, Any] = {"tx": tx, "collection": collection, "fields": fields}
        if settings is not None:
            entry["settings"] = settings
        if drop:
            entry["drop"] = True
        body = json.dumps(entry).encode()
        line = f"{zlib.crc32(body):08x} ".encode() + body + b"\n"
        try:
            with open(self.log_path, "ab") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as error:
            raise StorageError(f"{self.log_path}: the commit could not be written ({error.strerror or error})") from error
        self.committed.add(tx)
        self._note(entry)

    def checkpoint(self) -> None:
        """Fold the log into the state file and empty the log (every shard has resolved it)."""
        self._write_state({"format": FORMAT, "shards": self.shards, "text_fields": self.text_fields,
                           "settings": self.settings})
        write_durably(self.log_path, b"")
        self.committed = set()

    def close(self) -> None:
        self.lock.release()
