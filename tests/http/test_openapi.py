"""This module tests the following properties of the OpenAPI document:

- its paths and methods are exactly the routes the service serves (``server/app.py`` ``ROUTES``),
  and the running server hands out the same document;
- the search body's properties are exactly the request fields the engine accepts, so a field added
  to the engine without the document (or the other way round) fails here;
- every error status it lists has an exception class and a meaning, and every route lists 405 and 500.
"""

from __future__ import annotations

from roarsearch.engine.request import DEFAULTS
from roarsearch.errors import ERROR_BY_STATUS
from roarsearch.server.app import ROUTES
from roarsearch.server.openapi import openapi_document
from tests.http.conftest import Server

METHODS = {"get", "post", "put", "patch", "delete", "head", "options"}


def test_paths_are_the_served_routes(server: Server) -> None:
    document = openapi_document()
    documented = {path: {method.upper() for method in item if method in METHODS}
                  for path, item in document["paths"].items()}
    assert documented == {path: set(methods) for path, methods in ROUTES.items()}
    with server.client(None) as anonymous:
        assert anonymous.get("/openapi.json").json() == document


def test_search_body_is_what_the_engine_accepts() -> None:
    schemas = openapi_document()["components"]["schemas"]
    assert set(schemas["SearchRequestBody"]["properties"]) == set(DEFAULTS)
    assert set(schemas["FacetRequestBody"]["properties"]) == set(DEFAULTS)
    assert schemas["SearchRequestBody"]["required"] == ["collection"] and "required" not in schemas["FacetRequestBody"]


def test_error_statuses_are_known() -> None:
    for path, item in openapi_document()["paths"].items():
        for method, operation in item.items():
            if method not in METHODS:
                continue
            errors = {int(status) for status in operation["responses"] if int(status) >= 400}
            assert errors <= set(ERROR_BY_STATUS), (path, method)
            assert {405, 500} <= errors, (path, method)
            for status in errors:
                assert operation["responses"][str(status)]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/Error"}
