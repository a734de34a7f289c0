"""Batch text analysis in a helper process: a bulk add (``Engine.add_batches``) analyses the next
batch there, on the machine's other core, while this process indexes the current one.

Owns: the helper's life (started on first use as ``python -m roarsearch.analysis.worker``, not
through ``multiprocessing``, which would re-run the caller's main module) and the exchange with
it: one request at a time, each a length-prefixed pickle over its stdin and stdout pipes.

It also maps each batch's distinct terms to the writer's term ids, from a copy of the lexicon
(a *mirror*: term → id) that each request brings up to date with the terms added since the last
one: on a large batch those dictionary lookups are the writer's biggest single step, and here
they run on the other core. Terms the mirror does not hold yet (added by the batch being written
meanwhile, or past :data:`MIRROR_MAX_TERMS`) come back as -1 and are looked up by the writer.

Invariants:
- the helper runs :func:`analyze_fields`, the very function the writer runs inline, so a batch
  analysed there indexes exactly as one analysed here;
- the mirror is a prefix of the lexicon it copies (the lexicon only ever appends terms, and each
  request sends the next terms in id order), so every id it gives is the lexicon's id;
- it is only ever an accelerator: if it cannot start, dies or fails on a batch, that batch is
  analysed inline (``result`` returns None) and the helper is not used again;
- it holds nothing between requests but the mirror, and exits when its stdin closes (``close``,
  or this process's exit).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import select
import struct
import subprocess
import sys
from collections.abc import Sequence
from itertools import repeat
from typing import IO, Any, Protocol

import msgpack
import numpy as np

from roarsearch.analysis.analyzer import Analysed, analyze_fields

log = logging.getLogger("roarsearch")

_LENGTH = struct.Struct("<Q")
#: The largest peak resident memory (KiB) any analysis worker of this process reported: a
#: helper's own figure (``VmHWM`` after its exec), for benchmarks that count helpers' memory.
_peak_kib = 0
#: This process's own peak resident memory (KiB) when it last reaped a helper: what it held at
#: most while a helper lived (its memory after that, a load's final merge, never met a helper's).
_caller_peak_at_close_kib = 0
#: Linux's F_SETPIPE_SZ: bigger pipes move a batch in fewer wake-ups (best effort).
_SET_PIPE_SIZE = 1031
_PIPE_BYTES = 1 << 20
#: How long closing waits for the helper's last word and exit before killing it.
CLOSE_TIMEOUT_S = 10
#: The mirror copies at most this many terms (~60 MB in the helper): ids are given in order of
#: first appearance, so the terms it leaves out are the rarest, which the writer looks up itself.
MIRROR_MAX_TERMS = 1 << 19


class TermSource(Protocol):
    """What the mirror copies (``index.Lexicon``): terms by id, only ever appended to."""

    def __len__(self) -> int: ...

    def terms_since(self, first: int, last: int) -> list[str]: ...


#: A batch's analysis as the helper returns it: each field's tokens, and (when it mirrors a
#: lexicon) each field's distinct terms' ids in that lexicon, -1 for a term it does not hold.
WorkerResult = tuple[dict[str, Analysed], dict[str, np.ndarray] | None]


def _narrowed(analysed: dict[str, Analysed]) -> dict[str, Analysed]:
    """Positions as uint16 when they fit (most fields): fewer bytes through the pipe."""
    narrowed = {}
    for path, (terms, counts, value_index, position, valued) in analysed.items():
        narrowed[path] = (terms, counts, value_index,
                          position if position.size and int(position.max()) >= 1 << 16 else position.astype(np.uint16),
                          valued)
    return narrowed


def _send(stream: IO[bytes], message: Any) -> None:
    _send_bytes(stream, pickle.dumps(message, protocol=5))


def _send_bytes(stream: IO[bytes], data: bytes) -> None:
    stream.write(_LENGTH.pack(len(data)))
    stream.write(data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    return pickle.loads(_receive_bytes(stream))


def _receive_bytes(stream: IO[bytes]) -> bytes:
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        raise EOFError("analysis worker closed its pipe")
    (length,) = _LENGTH.unpack(header)
    data = stream.read(length)
    if len(data) < length:
        raise EOFError("analysis worker closed its pipe mid-message")
    return data


def _widen_pipe(stream: IO[bytes]) -> None:
    with contextlib.suppress(ImportError, OSError, ValueError):
        import fcntl  # POSIX only

        fcntl.fcntl(stream.fileno(), _SET_PIPE_SIZE, _PIPE_BYTES)


def _child_environment() -> dict[str, str]:
    """This environment, with the folder this roarsearch was imported from first on the helper's
    path: the helper runs the same code even when the caller put it on ``sys.path`` by hand."""
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [package_root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


class AnalysisWorker:
    """The helper process, from this side: ``submit`` a batch's texts, later take its ``result``."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._failed = False
        self._waiting = False
        #: The lexicon the helper's mirror copies, and how many of its terms it holds.
        self._mirrored: TermSource | None = None
        self._mirrored_terms = 0

    def submit(self, texts_by_field: dict[str, list[str]], lexicon: TermSource | None = None) -> bool:
        """Send a batch to analyse (and, with ``lexicon``, to map to its term ids); False (nothing
        sent) when the helper is not available."""
        if self._failed or self._waiting:
            return False
        mirror: tuple[int, list[str]] | None = None
        if lexicon is not None:
            if lexicon is not self._mirrored or len(lexicon) < self._mirrored_terms:  # another lexicon: copy anew
                self._mirrored, self._mirrored_terms = lexicon, 0
            # The mirror holds at most the cap, and the lexicon at least what the mirror holds.
            upto = min(len(lexicon), MIRROR_MAX_TERMS)
            mirror = (self._mirrored_terms, lexicon.terms_since(self._mirrored_terms, upto))
            self._mirrored_terms = upto
        try:
            if self._process is None:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", "roarsearch.analysis.worker"], env=_child_environment(),
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, close_fds=True)
                assert self._process.stdin is not None and self._process.stdout is not None
                _widen_pipe(self._process.stdin)
                _widen_pipe(self._process.stdout)
            assert self._process.stdin is not None
            # Texts go as msgpack (twice as fast as pickling 10,000 strings), replies as pickles (arrays).
            _send_bytes(self._process.stdin, msgpack.packb((texts_by_field, mirror)))
        except (OSError, ValueError) as error:
            self._give_up(f"cannot start or reach the analysis worker: {error}")
            return False
        self._waiting = True
        return True

    def result(self) -> WorkerResult | None:
        """The submitted batch's analysis; None when the helper failed (analyse inline then)."""
        if not self._waiting or self._process is None:
            return None
        self._waiting = False
        try:
            assert self._process.stdout is not None
            reply = _receive(self._process.stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as error:
            self._give_up(f"analysis worker failed: {error}")
            return None
        if isinstance(reply, str):  # the helper's own error: this batch is redone here, its mirror copied anew
            log.warning("analysis worker could not analyse a batch (analysed inline): %s", reply)
            self._mirrored, self._mirrored_terms = None, 0
            return None
        analysed, peak_kib, term_ids = reply
        _record_peak(int(peak_kib))
        return analysed, term_ids

    def _give_up(self, reason: str) -> None:
        log.warning("%s; analysing inline from now on", reason)
        self._failed = True
        self._waiting = False
        self.close()

    def close(self) -> None:
        """End the helper (it exits when its stdin closes) and reap it."""
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(OSError, ValueError):
            assert process.stdin is not None
            process.stdin.close()
        if not self._failed and not self._waiting:
            # Its last word: its peak memory over its whole life (replies carried it only up to
            # before each reply was written).
            with contextlib.suppress(OSError, EOFError, ValueError, pickle.UnpicklingError):
                assert process.stdout is not None
                if select.select([process.stdout], [], [], CLOSE_TIMEOUT_S)[0]:  # never hang on a stuck helper
                    _record_peak(int(_receive(process.stdout)))
        try:
            process.wait(timeout=CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
        _record_caller_peak(_own_peak_kib())


def _record_peak(kib: int) -> None:
    global _peak_kib
    _peak_kib = max(_peak_kib, kib)


def _record_caller_peak(kib: int) -> None:
    global _caller_peak_at_close_kib
    _caller_peak_at_close_kib = max(_caller_peak_at_close_kib, kib)


def peak_rss_mb() -> float:
    """The largest peak resident memory (MB) an analysis worker of this process has reported."""
    return _peak_kib / 1024


def caller_peak_at_close_mb() -> float:
    """This process's peak resident memory (MB) as it was when it last reaped a helper: with
    :func:`peak_rss_mb`, what a benchmark adds up as held by both at once at most."""
    return _caller_peak_at_close_kib / 1024


def _own_peak_kib() -> int:
    try:
        with open("/proc/self/status") as status:
            return next((int(line.split()[1]) for line in status if line.startswith("VmHWM:")), 0)
    except OSError:
        return 0


class TermMirror:
    """The helper's copy of a lexicon's first terms: term → id."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def extend(self, first: int, terms: Sequence[str]) -> None:
        """Hold ``terms`` as ids ``first``, ``first + 1``, …: the next ones (``first`` 0: anew)."""
        if first == 0:
            self.ids = {}
        elif first != len(self.ids):
            held, self.ids = len(self.ids), {}  # out of step: emptied (the caller copies anew), never a wrong id
            raise ValueError(f"term mirror holds {held} terms, was sent terms from id {first}")
        self.ids.update(zip(terms, range(first, first + len(terms))))

    def term_ids(self, analysed: dict[str, Analysed]) -> dict[str, np.ndarray]:
        """Each field's distinct terms' ids (int64; -1 for a term not held)."""
        get = self.ids.get
        return {path: np.fromiter(map(get, terms, repeat(-1)), dtype=np.int64, count=len(terms))
                for path, (terms, *_tokens) in analysed.items()}


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """The helper's loop: analyse each request until the pipe closes."""
    mirror = TermMirror()
    while True:
        try:
            texts_by_field, mirrored = msgpack.unpackb(_receive_bytes(requests))
        except EOFError:  # the caller closed the pipe: say the peak, then exit
            with contextlib.suppress(OSError, ValueError):
                _send(replies, _own_peak_kib())
            return
        try:
            analysed = analyze_fields(texts_by_field)
            term_ids = None
            if mirrored is not None:
                mirror.extend(*mirrored)
                term_ids = mirror.term_ids(analysed)
            reply: Any = (_narrowed(analysed), _own_peak_kib(), term_ids)
            del analysed, term_ids
        except Exception as error:  # reported back; the batch is analysed by the caller instead
            reply = f"{type(error).__name__}: {error}"
        _send(replies, reply)
        del texts_by_field, mirrored, reply


if __name__ == "__main__":
    # Replies go out on a private copy of stdout; anything printed goes to stderr instead of
    # into the pipe's framing.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, replies)
