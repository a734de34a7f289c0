"""Merging the partial answers of the shards into the single-engine response (contract §10).

Owns: the exact merge — results by the full sort key (explicit keys per ``ranking.sort``
semantics, then the packed relevance cost behind ``_rank``, then the settings' ``customRanking``,
then record id ascending) with
skip/count applied after the merge; ``totalHits`` summed; text facets from every shard's
complete counts, summed, then cut to ``facetCount`` (count descending, then numbers < booleans
< strings, strings by folded text then raw); numeric stats (min, max, record count, ``avg`` =
summed values / number of values) and ranges summed; groups (totals summed, ordered by their
best record, ``groupLimit`` records each after the merge, then skip/groupCount).

Pure functions over plain data: no Ray, no engine state.
"""

from __future__ import annotations

from functools import total_ordering
from typing import Any

from roarsearch.analysis.normalize import fold
from roarsearch.index.docstore import id_sort_key
from roarsearch.query.fields import warnings_for
from roarsearch.query.request import SearchRequest


@total_ordering
class Descending:
    """A value that sorts in reverse (a descending string sort key)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Descending) and self.value == other.value

    def __lt__(self, other: Descending) -> bool:
        return bool(other.value < self.value)

    def __hash__(self) -> int:
        return hash(self.value)


def oriented(part: tuple[int, Any], descending: bool) -> tuple[int, Any]:
    """A shard's ``(class, value)`` sort part turned so that ascending order is the wanted order."""
    kind, value = part
    if descending and kind != 2:
        value = Descending(value) if isinstance(value, tuple) else -value
    return (kind, value)


def order_key(request: SearchRequest, key: Any) -> tuple[Any, ...]:
    """A totally ordered key from a shard's ``(sort parts, relevance cost, customRanking parts,
    record id)``: explicit sort, relevance, the settings' customRanking, then id (``ranking.sort``)."""
    parts, cost, ties, record_id = key
    ordered: list[Any] = []
    for sort_key, part in zip(request.sort, parts):
        if sort_key.field == "_rank":
            ordered.append(part if sort_key.descending else -part)
            continue
        ordered.append(oriented(part, sort_key.descending))
    ordered.append(cost)
    ordered.extend(ties)
    ordered.append(id_sort_key(record_id))
    return tuple(ordered)


def typed(value: Any) -> tuple[str, Any]:
    """Identity of a facet or group value across shards (``True`` is not ``1``)."""
    if value is None:
        return ("null", None)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("num", float(value))
    if isinstance(value, str):
        return ("str", value)
    return ("other", repr(value))


def facet_value_order(value: Any) -> tuple[int, Any]:
    """Order within equal counts: numbers, then booleans, then strings (folded, then raw)."""
    if isinstance(value, bool):
        return (1, "true" if value else "false")
    if isinstance(value, (int, float)):
        return (0, float(value))
    return (2, (fold(str(value)), str(value)))


def merge_text_facet(field: str, parts: list[list[dict[str, Any]]], limit: int) -> dict[str, Any]:
    totals: dict[tuple[str, Any], list[Any]] = {}
    for values in parts:
        for entry in values:
            slot = totals.setdefault(typed(entry["value"]), [entry["value"], 0])
            slot[1] += entry["count"]
    ordered = sorted(totals.values(), key=lambda item: (-item[1], facet_value_order(item[0])))
    return {"field": field, "values": [{"value": value, "count": count} for value, count in ordered[:max(limit, 0)]]}


def merge_facet_values(parts: list[list[tuple[int, Any, int]]], limit: int) -> list[dict[str, Any]]:
    """Facet value search: ``(match rank, value, count)`` per shard, counts summed, then ordered by
    rank, count descending, value (as ``facets.value_search``), cut to ``limit``."""
    totals: dict[tuple[str, Any], list[Any]] = {}
    for values in parts:
        for rank, value, count in values:
            slot = totals.setdefault(typed(value), [rank, value, 0])
            slot[2] += count
    ordered = sorted(totals.values(), key=lambda item: (item[0], -item[2], facet_value_order(item[1])))
    return [{"value": value, "count": count} for _rank, value, count in ordered[:max(limit, 0)]]


def merge_numeric_facet(parts: list[dict[str, Any]], sums: list[tuple[float, int]]) -> dict[str, Any]:
    first = parts[0]
    minimums = [part["stats"]["min"] for part in parts if part["stats"]["min"] is not None]
    maximums = [part["stats"]["max"] for part in parts if part["stats"]["max"] is not None]
    total, values = sum(s for s, _ in sums), sum(n for _, n in sums)
    stats = {
        "min": min(minimums) if minimums else None,
        "max": max(maximums) if maximums else None,
        "avg": float(total / values) if values else None,
        "count": sum(part["stats"]["count"] for part in parts),
    }
    ranges = [{"range": entry["range"], "count": sum(part["ranges"][position]["count"] for part in parts)}
              for position, entry in enumerate(first["ranges"])]
    return {"field": first["field"], "stats": stats, "ranges": ranges}


def merge_responses(request: SearchRequest, body: dict[str, Any], shards: list[dict[str, Any]]) -> dict[str, Any]:
    """The single-engine response from the shards' partial answers (``responseTime`` left to the caller)."""
    if request.group_by is None:
        placed = [(order_key(request, key), result)
                  for shard in shards for result, key in zip(shard["response"]["results"], shard["keys"])]
        placed.sort(key=lambda item: item[0])
        results: list[Any] = [result for _key, result in placed[request.skip:request.skip + request.count]]
    else:
        results = merge_groups(request, shards)
    return merge_counts(request, body, shards, results)


def merge_counts(request: SearchRequest, body: dict[str, Any], shards: list[dict[str, Any]],
                 results: list[Any]) -> dict[str, Any]:
    """The response around ``results`` (merged by the caller): facets, stats, ``totalHits`` and
    warnings from the shards' partial answers (each a ``response`` with those keys, ``sums`` and
    ``held``)."""
    responses = [shard["response"] for shard in shards]
    text = [merge_text_facet(field, [response["textFacets"][position]["values"] for response in responses],
                             request.facet_count)
            for position, field in enumerate(request.text_facets)]
    numeric = [merge_numeric_facet([response["numericFacets"][position] for response in responses],
                                   [shard["sums"][position] for shard in shards])
               for position in range(len(request.numeric_facets))]
    merged: dict[str, Any] = {
        "query": body,
        "results": results,
        "textFacets": text,
        "numericFacets": numeric,
        "totalHits": sum(response["totalHits"] for response in responses),
        "responseTime": 0,
    }
    held = frozenset(field for shard in shards for field in shard.get("held", ()))
    warnings = warnings_for(held, request)
    if warnings:
        merged["warnings"] = warnings
    return merged


def merge_warnings(parts: list[list[str] | None]) -> list[str]:
    """Warnings every shard gives (a field some shard holds is no warning), in the first shard's order.
    Exact once the shards are told the collection-wide set of fields (see docs/cluster.md)."""
    if not parts or any(part is None for part in parts):
        return []
    common = set(parts[0] or [])
    for part in parts[1:]:
        common &= set(part or [])
    return [warning for warning in parts[0] or [] if warning in common]


def merge_groups(request: SearchRequest, shards: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, Any], dict[str, Any]] = {}
    for shard_number, shard in enumerate(shards):
        for position, (group, keys) in enumerate(zip(shard["response"]["results"], shard["keys"])):
            slot = groups.setdefault(typed(group["value"]), {"value": group["value"], "totalHits": 0, "members": [], "best": None})
            slot["totalHits"] += group["totalHits"]
            members = [(order_key(request, key), result) for result, key in zip(group["results"], keys)]
            slot["members"].extend(members)
            if members:
                # Ties (one record opening several groups) keep the order of the shard holding it.
                best = (min(key for key, _ in members), shard_number, position)
                if slot["best"] is None or best < slot["best"]:
                    slot["best"] = best
    ordered = sorted((slot for slot in groups.values() if slot["best"] is not None), key=lambda slot: slot["best"])
    group_count = request.count if request.group_count == -1 else request.group_count
    merged = []
    for slot in ordered[request.skip:request.skip + max(group_count, 0)]:
        slot["members"].sort(key=lambda item: item[0])
        merged.append({"value": slot["value"], "totalHits": slot["totalHits"],
                       "results": [result for _key, result in slot["members"][:request.group_limit]]})
    return merged
