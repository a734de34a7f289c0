"""This module tests the following properties:

- when a field's chunks are replaced (a background merge or a settle, a reader's full merge),
  the old chunks are released only once the field names the new ones: code that runs during
  their release (here a finalizer; in production an unmapping, which gives the GIL to other
  threads) sees the new chunks, never the list being freed. Compiled code releases an
  attribute's old value before storing the new one, so this holds only through
  ``FieldPostings._set_chunks``;
- mappings roarsearch makes (lazy columns, snapshot files) stay mapped while a view or an array
  refers to them, and a sweep unmaps them once nothing does: dropping the last array never
  unmaps inside the drop; a write or a merge asks for one sweep a little later;
- a settle beside searches, on a collection opened from its snapshot (chunks of compressed
  columns, inflated into mappings of their own), answers throughout and does not crash the
  process (real threads, in a subprocess: a crash must fail the test, not end the run).

The scenarios run in subprocesses with the interpreter and the roarsearch the tests import (the
compiled build under CI), where the fault they guard against lived.
"""

from __future__ import annotations

import mmap
import subprocess
import sys
import textwrap
import time
import weakref
from pathlib import Path

import numpy as np
import pytest

from roarsearch import memory

_SWAP_WITNESS = textwrap.dedent("""
    import sys
    import numpy as np
    from roarsearch.index.postings import FieldPostings

    seen = []

    class Witness:
        # Held only by the oldest chunk: released with it, it reads the field's chunks.
        def __init__(self, postings):
            self.postings = postings

        def __del__(self):
            seen.append(len(self.postings._chunks))

    postings = FieldPostings()
    for first in (0, 10):  # two chunks of one batch each (too few for a tier merge)
        postings.add(np.arange(first, first + 10, dtype=np.uint32), np.full(10, 7, dtype=np.uint32),
                     np.zeros(10, dtype=np.uint32))
    assert len(postings._chunks) == 2
    postings._chunks[0]._few = {0: Witness(postings)}
    if sys.argv[1] == "settle":
        postings.settle()
        postings.wait_for_merges()
    else:
        postings.csr_arrays()  # merges every chunk into one, in this thread
    print("seen", seen, flush=True)
""")


@pytest.mark.parametrize("replace", ["settle", "full merge"])
def test_old_chunks_are_released_after_the_field_names_the_new_ones(replace: str) -> None:
    done = subprocess.run([sys.executable, "-c", _SWAP_WITNESS, replace], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "seen [1]", (done.stdout, done.stderr[-3000:])


def _still_mapped(mapping: weakref.ref[mmap.mmap]) -> bool:
    """Whether the keeper still holds the mapping, open (counts would also see mappings other
    tests left, which a sweep may unmap meanwhile)."""
    held = mapping()
    return held is not None and not held.closed


def test_a_kept_mapping_stays_mapped_while_an_array_refers_to_it() -> None:
    mapping = memory.kept_mapping(mmap.mmap(-1, 1 << 16))
    ref = weakref.ref(mapping)
    array = np.frombuffer(mapping, dtype=np.uint32)
    array[:3] = [1, 2, 3]  # a read-write anonymous mapping
    del mapping
    memory.unmap_unused()
    assert _still_mapped(ref) and array[:3].tolist() == [1, 2, 3]
    view = array[1:]
    del array  # the view still refers to it
    memory.unmap_unused()
    assert _still_mapped(ref) and view[:2].tolist() == [2, 3]
    del view  # the last reference: nothing is unmapped here ...
    assert _still_mapped(ref)
    memory.unmap_unused()  # ... but by the sweep
    assert ref() is None


def test_the_sweep_after_a_release_unmaps_what_readers_held(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory.KeptMappings, "SWEEP_DELAY_S", 0.05)
    pending = memory.MAPPINGS.timer  # a sweep earlier tests asked for: let it run first
    if pending is not None:
        pending.join(10)
    array = np.frombuffer(memory.kept_mapping(mmap.mmap(-1, 1 << 16)), dtype=np.uint8)
    ref = weakref.ref(array.base.obj if isinstance(array.base, memoryview) else array.base)
    assert ref() is not None
    del array
    memory.unmap_unused_soon()  # no scan now: one sweep, a little later
    assert _still_mapped(ref)
    deadline = time.monotonic() + 10
    while ref() is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ref() is None


def test_lazy_columns_and_snapshot_files_are_kept_mappings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from roarsearch.index import blocks as blocks_module
    from roarsearch.index.blocks import LazyColumn, pack_column
    from roarsearch.storage.fs import FileSystem

    monkeypatch.setattr(blocks_module, "SMALL_PAGES_BYTES", 1 << 12)
    values = np.arange(5_000, dtype=np.uint32)
    column = LazyColumn(*pack_column(values, True), values.size, np.uint32, True)
    (tmp_path / "file").write_bytes(b"x" * 5000)
    mapped = FileSystem().map_file(str(tmp_path / "file"))
    assert isinstance(mapped, mmap.mmap)
    base = column.values.base
    refs = [weakref.ref(mapped), weakref.ref(base.obj if isinstance(base, memoryview) else base)]
    assert column.whole().tolist() == values.tolist() and bytes(mapped[:2]) == b"xx"
    del column, mapped, base
    assert all(_still_mapped(ref) for ref in refs)  # held by the keeper, not unmapped on release
    memory.unmap_unused()
    assert all(ref() is None for ref in refs)


_SETTLE_BESIDE_SEARCHES = textwrap.dedent("""
    import faulthandler, random, shutil, sys, threading
    faulthandler.enable()
    from roarsearch import Engine, datasets
    from roarsearch.index import blocks as blocks_module

    blocks_module.SMALL_PAGES_BYTES = 1 << 12  # every loaded column in a mapping of its own, as big ones are
    base, rounds = sys.argv[1], int(sys.argv[2])
    movies = datasets.load_movies(15000)
    with Engine(base + "/built") as engine:
        start = 0
        for size in (8000, 4000, 2000, 1000):  # sizes the tier rule keeps apart: four chunks a field
            engine.add_records("movies", movies[start:start + size])
            start += size
    words = [word for movie in movies[:300] for word in (movie.get("title") or "").lower().split() if word.isalpha()]
    rng = random.Random(1)
    queries = [{"collection": "movies", "query": " ".join(rng.sample(words, count)) + " ", "typoTolerance": 1}
               for count in (1, 2, 2, 3) for _ in range(30)]
    for round_ in range(rounds):
        shutil.rmtree(base + "/open", ignore_errors=True)
        shutil.copytree(base + "/built", base + "/open")
        engine = Engine(base + "/open")
        index = engine._collection("movies").index
        assert all(len(postings._chunks) == 4 for postings in index.postings.values())
        expected = [engine.search(body)["totalHits"] for body in queries[:20]]
        stop = threading.Event()
        answers = []

        def search():
            while not stop.is_set():
                answers.append([engine.search(body)["totalHits"] for body in queries[:20]])
                for body in queries[20:]:
                    engine.search(body)

        searcher = threading.Thread(target=search)
        searcher.start()
        for postings in index.postings.values():
            postings.settle()
        for postings in index.postings.values():
            postings.wait_for_merges()
        stop.set()
        searcher.join()
        assert all(len(postings._chunks) == 1 for postings in index.postings.values())
        assert answers and all(counts == expected for counts in answers), "answers changed during the settle"
        engine.close()
    print("ok", flush=True)
""")


def test_a_settle_beside_searches_on_a_reopened_collection(tmp_path: Path) -> None:
    """The reproduction of a crash of the compiled build (it died within two rounds before the
    fix): each round opens a copy of a collection of four chunks a field, searches in one
    thread while every field settles into one chunk in the merge thread."""
    done = subprocess.run([sys.executable, "-c", _SETTLE_BESIDE_SEARCHES, str(tmp_path), "6"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-4000:]}"
    assert done.stdout.strip().endswith("ok"), done.stdout
