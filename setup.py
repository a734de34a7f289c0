"""Build hook: the search path compiled to C by mypyc, from roarsearch's own typed Python.

pyproject.toml holds the project's metadata; this file only adds the compiled modules. A query
on a small match set is Python's fixed cost per step (parse the request, plan the words, look up
bitmaps, rank a handful of records, project the page); mypyc turns those steps into C calls and
roughly halves it. The source stays the Python in ``src/roarsearch``: the compiled modules are
the same code, type-checked by mypy ``--strict`` as CI already requires.

``ROARSEARCH_COMPILE`` chooses:
- ``auto`` (default): compile for an installed copy (``pip install .``, wheels); an editable
  install (``pip install -e .``, for working on roarsearch) stays pure Python, so that an edited
  module takes effect without a rebuild. With no C compiler, or when mypyc refuses the code, the
  install goes on in pure Python (the same behaviour, slower).
- ``1``: compile, and fail the install if it cannot.
- ``0``: pure Python.

``roarsearch.compiled()`` tells which one is running.
"""

from __future__ import annotations

import os
import shutil
import sys

from setuptools import setup

#: Modules of the per-query path that are Python orchestration rather than numpy or bitmap calls:
#: request parsing, analysis, word planning, the lexicon, bitmap lookups per word and field, the
#: ranking rules and sorts, the field warnings, facet filters and counts, highlights, the
#: postings (a few docs' positions, for proximity), the record ids of a page and the
#: collection's search (settings, response). Compiled code enforces the annotations (a numpy integer where
#: ``int`` is declared is a TypeError there), so a module is listed only once the whole test
#: suite passes with it compiled. Calls inside a compiled module are bound at build time: a test
#: that replaces a module function or a method is not seen by them, so the tests pause and fail
#: compiled modules through their own seams (``postings.merges_held``, the pure-Python ``index.writer``
#: called through its module), not by replacing code.
COMPILED_MODULES = [
    "analysis/analyzer", "analysis/normalize", "analysis/tokenize",
    "engine/collection", "engine/request",
    "facets/counts",
    "index/bitmaps", "index/blocks", "index/cache", "index/chunks", "index/docsets", "index/docstore", "index/index",
    "index/lexicon", "index/merges", "index/positions", "index/postings",
    "query/context", "query/facet_filters", "query/fields", "query/match", "query/plan",
    "ranking/bucket_sort", "ranking/highlight", "ranking/ranker", "ranking/sort",
]


def compiled_extensions() -> list:
    choice = os.environ.get("ROARSEARCH_COMPILE", "auto")
    if choice not in ("auto", "0", "1"):
        raise SystemExit(f"ROARSEARCH_COMPILE must be auto, 0 or 1, got {choice!r}")
    editable = any(command in sys.argv for command in ("editable_wheel", "develop"))
    if not editable:
        # pip builds in the source tree: the compiled modules a previous build left in build/
        # would be copied into this install beside (or instead of) this build's.
        shutil.rmtree(os.path.join(os.path.dirname(os.path.abspath(__file__)), "build"), ignore_errors=True)
    if choice == "0" or (choice == "auto" and editable):
        return []
    try:
        from mypyc.build import mypycify

        extensions = mypycify([f"src/roarsearch/{module}.py" for module in COMPILED_MODULES],
                              opt_level="3", group_name="roarsearch")
    except (SystemExit, Exception) as error:  # mypyc missing, or it refused the code
        if choice == "1":
            raise
        print(f"roarsearch: building pure Python ({type(error).__name__}: {error})", file=sys.stderr)
        return []
    for extension in extensions:
        extension.optional = choice != "1"  # no C compiler: pure Python, same behaviour
    return extensions


setup(ext_modules=compiled_extensions())
