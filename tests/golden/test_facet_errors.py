"""This module tests the following properties:

- malformed interval strings in numericFacets and numericFacetFilters are 400s naming the field,
  the position in the list and what is expected (snapshots);
- well-formed spellings (open ends, '*', whitespace) are accepted.
"""

from __future__ import annotations

import pytest

from roarsearch import BadRequestError, Engine

EXPECTED = ("is not an interval; expected '[low,high)', '(low,high]', '[low,high]' or '(low,high)' "
            "with an empty or '*' bound for an open end, like \"[0,100)\" or \"[100,)\"")
CASES = [
    ({"numericFacets": {"p": ["0,100"]}}, f"numericFacets.p[0]: '0,100' {EXPECTED}"),
    ({"numericFacets": {"p": ["[0,1)", "[a,2]"]}}, "numericFacets.p[1]: bound 'a' of '[a,2]' is not a number"),
    ({"numericFacets": {"p": ["[5,1]"]}}, "numericFacets.p[0]: '[5,1]' has its low bound above its high bound"),
    ({"numericFacetFilters": {"p": ["[0;1]"]}}, f"numericFacetFilters.p[0]: '[0;1]' {EXPECTED}"),
    ({"numericFacetFilters": {"p": ["[1e999,)"]}}, "numericFacetFilters.p[0]: bound '1e999' of '[1e999,)' is not finite"),
]


@pytest.fixture(scope="module")
def engine() -> Engine:
    engine = Engine()
    engine.add_records("c", [{"id": 1, "p": 10}, {"id": 2, "p": 200}])
    return engine


@pytest.mark.parametrize(("extra", "message"), CASES)
def test_interval_errors(engine: Engine, extra: dict, message: str) -> None:
    with pytest.raises(BadRequestError) as caught:
        engine.search({"collection": "c", **extra})
    assert caught.value.data == message


def test_interval_spellings(engine: Engine) -> None:
    response = engine.search({"collection": "c", "numericFacets": {"p": [" [ 0 , 100 ) ", "[100,)", "(*,10]", "[*,*]"]}})
    assert [r["count"] for r in response["numericFacets"][0]["ranges"]] == [1, 1, 1, 2]
    assert response["numericFacets"][0]["stats"] == {"min": 10, "max": 200, "avg": 105.0, "count": 2}
    assert engine.search({"collection": "c", "numericFacets": {"p": []}})["numericFacets"][0]["ranges"] == []
