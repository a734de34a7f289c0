"""Comparing a sharded engine's answers with one engine's, call by call."""

from __future__ import annotations

from typing import Any

from roarsearch import Engine, SearchError
from roarsearch.cluster import ShardedEngine


def answer_of(call: Any) -> Any:
    """A response (or each of a list) without its timing, ``avg`` rounded (sums in another order
    differ in the last bits), or the Error object of a failed call."""
    try:
        answer = call()
    except SearchError as error:
        return error.to_dict()
    return [comparable(entry) for entry in answer] if isinstance(answer, list) else comparable(answer)


def comparable(answer: Any) -> Any:
    if isinstance(answer, dict) and "responseTime" in answer:
        answer = dict(answer)
        answer.pop("responseTime")
        for facet in answer["numericFacets"]:
            average = facet["stats"].pop("avg")
            facet["stats"]["avg"] = None if average is None else round(average, 6)
    return answer


def both(sharded: ShardedEngine, single: Engine, call: Any) -> Any:
    """``call`` on each engine; the answers must be equal. Returns the single engine's."""
    mine, theirs = answer_of(lambda: call(sharded)), answer_of(lambda: call(single))
    assert mine == theirs
    return theirs
