"""The per-search objects of compiled modules are made by compiled code.

mypyc compiles a class's own ``__init__``, but a dataclass's generated ``__init__`` stays an
interpreted Python function: a search makes a SearchContext, a WordMatcher, the RelevanceRules
and a WordPlan per word, and their generated constructors cost a small search 7 % of its
instructions. Each writes its ``__init__`` out; these tests keep them written out and keep what
the dataclass still gives (repr, ==, fields).
"""

from __future__ import annotations

import dataclasses
import types

import pytest

import roarsearch
from roarsearch.query.context import SearchContext
from roarsearch.query.match import WordMatcher
from roarsearch.query.plan import Variant, WordPlan
from roarsearch.ranking.bucket_sort import RelevanceRules

PER_SEARCH = [SearchContext, WordMatcher, WordPlan, RelevanceRules]


@pytest.mark.parametrize("cls", PER_SEARCH, ids=lambda cls: cls.__name__)
def test_per_search_classes_write_their_constructor_out(cls: type) -> None:
    assert "__init__" in vars(cls) and dataclasses.is_dataclass(cls)
    if roarsearch.compiled():  # compiled: a native slot, not a Python function
        assert not isinstance(cls.__init__, types.FunctionType), cls
    else:  # pure: the written-out one (a generated __init__ is compiled from a string)
        assert cls.__init__.__code__.co_filename.endswith(".py"), cls


def test_a_word_plan_sets_every_field() -> None:
    variants = (Variant(4, 1, False), Variant(9, 0, True))
    plan = WordPlan("cat", 2, True, variants, "cat", ((4, 5),))
    assert (plan.text, plan.position, plan.is_prefix, plan.variants, plan.prefix, plan.synonyms, plan.max_typos) == (
        "cat", 2, True, variants, "cat", ((4, 5),), 1)
    assert plan == WordPlan("cat", 2, True, variants, "cat", ((4, 5),)) and "max_typos=1" in repr(plan)
    assert WordPlan("a", 0, False, ()).max_typos == 0
