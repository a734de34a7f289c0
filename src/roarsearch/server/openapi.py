"""The OpenAPI 3.1 description of the service, served at ``GET /openapi.json``.

Owns: the document only. Invariants, each checked by ``tests/http/test_openapi.py``: its paths and
methods are exactly ``server/app.py``'s ``ROUTES``; the search body's properties are exactly the
request fields the engine accepts; every route lists the error statuses it can really answer.
"""

from __future__ import annotations

from typing import Any

ERROR = {"$ref": "#/components/schemas/Error"}

#: What each error status means on this service (the same table as docs/service.md).
ERROR_MEANINGS = {
    400: "Bad input: malformed JSON, wrong content type, wrong type, unknown field, bad filter, invalid record "
         "(the message names the field)",
    401: "Missing, invalid, revoked or expired key or tenant token (with WWW-Authenticate: Bearer)",
    403: "The key or token lacks the action, or the collection is outside its patterns or rules (the message "
         "names which; the same whether the collection exists or not)",
    404: "Unknown collection or route",
    405: "Method not allowed on this path (with Allow)",
    413: "Body over the limit (default 100 MiB)",
    500: "Internal error: logged with a request id, which is all the answer carries",
    507: "The write could not be made durable (disk full, I/O error); nothing was changed",
}

SEARCH_ERRORS = (400, 401, 403, 404, 405, 413, 500)
READ_ERRORS = (400, 401, 403, 404, 405, 500)
LIST_ERRORS = (401, 403, 405, 500)
KEY_WRITE_ERRORS = (400, 401, 403, 404, 405, 413, 500)
WRITE_ERRORS = (400, 401, 403, 404, 405, 413, 500, 507)
OPEN_ERRORS = (405, 500)


def _errors(statuses: tuple[int, ...]) -> dict[str, Any]:
    return {str(status): {"description": ERROR_MEANINGS[status], "content": {"application/json": {"schema": ERROR}}}
            for status in statuses}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


STRINGS = {"type": "array", "items": {"type": "string"}}
RANGES = {"type": "object", "additionalProperties": STRINGS}

SEARCH_REQUEST = {
    "type": "object", "required": ["collection"], "additionalProperties": False,
    "properties": {
        "collection": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
        "query": {"type": "string", "default": ""},
        "searchFields": {**STRINGS, "default": ["*"]},
        "fields": {**STRINGS, "default": ["*"]},
        "filter": {"type": "string", "default": "", "description": "e.g. price >= 10 AND NOT name = \"T Shirt\""},
        "sort": {**STRINGS, "default": [], "description": "\"field\", \"-field\", \"_rank\", \"field:desc\""},
        "skip": {"type": "integer", "minimum": 0, "default": 0},
        "count": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 30},
        "typoTolerance": {"type": "integer", "minimum": 0, "maximum": 2, "default": 1},
        "textFacets": {**STRINGS, "default": []},
        "facetCount": {"type": "integer", "minimum": 1, "default": 100},
        "textFacetFilters": {"type": "object", "additionalProperties": {"type": "array"}, "default": {}},
        "numericFacets": {**RANGES, "default": {}},
        "numericFacetFilters": {**RANGES, "default": {}},
        "groupBy": {"type": ["string", "null"], "default": None},
        "groupCount": {"type": "integer", "default": -1},
        "groupLimit": {"type": "integer", "minimum": 1, "default": 3},
        "highlightFields": {**STRINGS, "default": []},
        "textFacetQuery": {"type": ["object", "null"], "default": None,
                           "description": "only on the facet value search route: {\"query\": \"ac\", \"count\": 100}",
                           "properties": {"query": {"type": "string"}, "count": {"type": "integer", "minimum": 1}}},
        "geo": {"type": ["object", "null"], "default": None, "description": "accepted when empty; not implemented"},
        "vector": {"type": ["object", "null"], "default": None, "additionalProperties": False,
                   "required": ["name", "values"],
                   "description": "the k records nearest a query vector among those passing every filter "
                                  "(docs/vectors.md); with a query too, hybrid search by reciprocal rank fusion",
                   "properties": {"name": {"type": "string"},
                                  "values": {"type": "array", "items": {"type": "number"}, "minItems": 1},
                                  "k": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 100},
                                  "exact": {"type": "boolean", "default": False}}},
        "semanticRatio": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5,
                          "description": "weight of the vector order against the keyword order in hybrid search"},
    },
}

ACTIONS = ["search", "records.read", "records.write", "settings.read", "settings.write", "collections.read",
           "collections.write", "keys", "*"]

KEY_REQUEST = {
    "type": "object", "required": ["actions"], "additionalProperties": False,
    "properties": {
        "uid": {"type": "string", "format": "uuid", "description": "default: a random UUID; never one used before"},
        "name": {"type": ["string", "null"]},
        "description": {"type": ["string", "null"]},
        "actions": {"type": "array", "minItems": 1, "items": {"enum": ACTIONS}},
        "collections": {**STRINGS, "default": ["*"], "description": "collection ids or patterns ending in *"},
        "expiresAt": {"type": ["string", "null"], "format": "date-time", "default": None},
    },
}

KEY = {
    "type": "object", "required": ["uid", "actions", "collections", "expiresAt", "createdAt", "updatedAt"],
    "properties": {
        "uid": {"type": "string"}, "name": {"type": ["string", "null"]}, "description": {"type": ["string", "null"]},
        "key": {"type": "string", "description": "the secret: only in the answer to the creation"},
        "keyPrefix": {"type": "string", "description": "the secret's first 8 characters"},
        "actions": {"type": "array", "items": {"enum": ACTIONS}}, "collections": STRINGS,
        "expiresAt": {"type": ["string", "null"], "format": "date-time"},
        "createdAt": {"type": "string", "format": "date-time"}, "updatedAt": {"type": "string", "format": "date-time"},
    },
}

SETTINGS = {
    "type": "object", "additionalProperties": False,
    "description": "Collection settings (every key optional in a PUT; null resets a key to its default)",
    "properties": {
        "searchFields": {**STRINGS, "default": ["*"], "description": "used when a request gives no searchFields"},
        "customRanking": {**STRINGS, "default": [],
                          "description": "sort keys applied after relevance and before id, e.g. [\"-population\"]"},
        "stopWords": {**STRINGS, "default": []},
        "synonyms": {"type": "object", "additionalProperties": STRINGS, "default": {},
                     "description": "one-way: {\"nyc\": [\"new york\"]}"},
        "typoMinWordSize": {"type": "object", "additionalProperties": False, "default": {"oneTypo": 4, "twoTypos": 8},
                            "properties": {"oneTypo": {"type": "integer", "minimum": 1},
                                           "twoTypos": {"type": "integer", "minimum": 1}}},
        "typoDisabledFields": {**STRINGS, "default": []},
        "typoDisabledWords": {**STRINGS, "default": []},
        "searchPage": {"type": "object", "default": {},
                       "description": "Extension: how the bundled search page shows the collection (title, "
                                      "subtitle, facts, lines, textFacets, numericFacets, sort, placeholder); "
                                      "searches never read it.",
                       "properties": {"title": {"type": "string"}, "subtitle": {"type": "string"},
                                      "placeholder": {"type": "string"},
                                      "facts": {"type": "array", "items": {"type": "object"}},
                                      "lines": {"type": "array", "items": {"type": "object"}},
                                      "textFacets": {"type": "array", "items": {"type": "object"}},
                                      "numericFacets": {"type": "array", "items": {"type": "object"}},
                                      "sort": {"type": "array", "items": {"type": "object"}}}},
        "vectors": {"type": "object", "default": {},
                    "description": "vector spaces: {\"text\": {\"dimensions\": 384, \"metric\": \"cosine\"}}",
                    "additionalProperties": {
                        "type": "object", "additionalProperties": False, "required": ["dimensions"],
                        "properties": {"dimensions": {"type": "integer", "minimum": 1, "maximum": 4096},
                                       "metric": {"type": "string", "enum": ["cosine", "dot", "l2"],
                                                  "default": "cosine"}}}},
    },
}

#: The facet value search body: a search body whose collection, if any, the path overrides.
FACET_REQUEST = {key: value for key, value in SEARCH_REQUEST.items() if key != "required"}


def openapi_document() -> dict[str, Any]:
    """The whole document (a fresh dict each call: callers may change it)."""
    collection_id = {"name": "collectionId", "in": "path", "required": True,
                     "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}}
    facet_name = {"name": "facetName", "in": "path", "required": True, "schema": {"type": "string"}}
    flag = {"type": "string", "enum": ["true", "false", "1", "0"]}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "roarsearch — Record Search and Management Service",
            "version": "1.0.0",
            "description": "Every API route needs 'Authorization: Bearer <key>': admin keys may do everything, "
                           "search-only keys may search, run facet value searches and read records, collections and settings; "
                           "stored keys (/v2/keys) may do their actions on their collections; a tenant token (an HS256 "
                           "JWT signed with a stored key) searches and reads only the records its searchRules allow. /health, /openapi.json and "
                           "the search page at / need no key. The application is the first label of the Host "
                           "header (a trailing -fast removed) when it is served, else the default one. Every "
                           "failure is an Error object with the same HTTP status.",
        },
        "components": {
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "required": ["status", "data"], "additionalProperties": False,
                          "properties": {"status": {"type": "integer"}, "data": {"type": "string"}}},
                "SearchRequestBody": SEARCH_REQUEST,
                "FacetRequestBody": FACET_REQUEST,
                "SearchResponse": {"type": "object", "required": [
                    "query", "results", "textFacets", "numericFacets", "responseTime", "totalHits"], "properties": {
                    "query": {"type": "object", "description": "the request body as received"},
                    "results": {"type": "array", "items": {"type": "object"},
                                "description": "records with id and _rank; with groupBy: {value, totalHits, results}"},
                    "textFacets": {"type": "array", "items": {"type": "object", "properties": {
                        "field": {"type": "string"}, "values": {"type": "array", "items": _ref("FacetValue")}}}},
                    "numericFacets": {"type": "array", "items": {"type": "object"}},
                    "responseTime": {"type": "integer"},
                    "totalHits": {"type": "integer"}}},
                "FacetValue": {"type": "object", "required": ["value", "count"], "properties": {
                    "value": {}, "count": {"type": "integer"}}},
                "FacetValues": {"type": "object", "required": ["values"], "properties": {
                    "values": {"type": "array", "items": _ref("FacetValue")}}},
                "Record": {"type": "object", "required": ["id"], "properties": {
                    "id": {"oneOf": [{"type": "integer"}, {"type": "string", "minLength": 1, "maxLength": 512}]}}},
                "Created": {"type": "object", "properties": {"status": {"const": 201}}},
                "DeleteResult": {"type": "object", "required": ["status"], "properties": {
                    "status": {"type": "integer"}, "id": {"type": ["integer", "string"]},
                    "deleted": {"type": "integer"}}},
                "Settings": SETTINGS,
                "CollectionSummary": {"type": "object", "required": ["collection", "records"], "properties": {
                    "collection": {"type": "string"}, "records": {"type": "integer"}}},
                "CollectionInfo": {"type": "object", "required": ["collection", "records", "fields", "settings"],
                                   "properties": {
                    "collection": {"type": "string"}, "records": {"type": "integer"},
                    "fields": {"type": "array", "items": {"type": "object", "properties": {
                        "field": {"type": "string"}, "kinds": STRINGS, "records": {"type": "integer"}}}},
                    "settings": _ref("Settings")}},
                "RecordsPage": {"type": "object", "required": ["records", "next"], "properties": {
                    "records": {"type": "array", "items": _ref("Record")},
                    "next": {"type": ["string", "null"], "description": "cursor of the next page (after=...)"}}},
                "MultiSearchRequest": {"type": "object", "required": ["searches"], "additionalProperties": False,
                                       "properties": {"searches": {"type": "array", "maxItems": 100,
                                                                   "items": _ref("SearchRequestBody")}}},
                "MultiSearchResponse": {"type": "object", "required": ["results"], "properties": {
                    "results": {"type": "array", "items": {"oneOf": [_ref("SearchResponse"), ERROR]}}}},
                "Health": {"type": "object", "properties": {"status": {"const": "ok"}, "apps": STRINGS}},
                "KeyRequest": KEY_REQUEST,
                "KeyUpdate": {"type": "object", "additionalProperties": False, "properties": {
                    "name": {"type": ["string", "null"]}, "description": {"type": ["string", "null"]}}},
                "Key": KEY,
                "KeyList": {"type": "object", "required": ["results"], "properties": {
                    "results": {"type": "array", "items": _ref("Key")}}},
            },
        },
        "security": [{"bearerAuth": []}],
        "paths": {
            "/v2": {"post": {
                "summary": "Search records", "operationId": "search",
                "requestBody": {"required": True, **_json(_ref("SearchRequestBody"))},
                "responses": {"200": {"description": "Search results", **_json(_ref("SearchResponse"))},
                              **_errors(SEARCH_ERRORS)}}},
            "/v2/collections/{collectionId}/records": {
                "parameters": [collection_id],
                "get": {"summary": "Page through every record in id order (search key allowed)",
                        "operationId": "pageRecords",
                        "parameters": [{"name": "count", "in": "query",
                                        "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 1000}},
                                       {"name": "after", "in": "query", "schema": {"type": "string"},
                                        "description": "the next cursor of the previous page"}],
                        "responses": {"200": {"description": "A page of records and the next cursor (null at the end)",
                                              **_json(_ref("RecordsPage"))},
                                      **_errors(READ_ERRORS)}},
                "post": {"summary": "Add records: one object or an array, all or nothing, upsert by id",
                         "operationId": "addRecords",
                         "requestBody": {"required": True, **_json(
                             {"oneOf": [_ref("Record"), {"type": "array", "minItems": 1, "items": _ref("Record")}]})},
                         "responses": {"201": {"description": "Created", **_json(_ref("Created"))},
                                       **_errors(WRITE_ERRORS)}},
                "delete": {"summary": "Delete records by ids (array body), by {\"filter\": ...}, or all (?clear=true)",
                           "operationId": "deleteRecords",
                           "parameters": [{"name": "clear", "in": "query", "schema": flag},
                                          {"name": "isClear", "in": "query", "schema": flag}],
                           "requestBody": {"required": False, **_json({"oneOf": [
                               {"type": "array", "items": {"type": ["integer", "string"]}},
                               {"type": "object", "additionalProperties": False,
                                "properties": {"filter": {"type": "string"}, "ids": {"type": "array"}}}]})},
                           "responses": {"200": {"description": "One result per id (200 or 404), or {status, deleted}",
                                                 **_json({"type": "array", "items": _ref("DeleteResult")})},
                                         **_errors(WRITE_ERRORS)}},
            },
            "/v2/collections/{collectionId}/facet/{facetName}/query": {
                "parameters": [collection_id, facet_name],
                "post": {"summary": "Facet value search: values of the facet matching textFacetQuery.query, "
                                    "counted over the records the rest of the body selects",
                         "operationId": "searchFacetValues",
                         "requestBody": {"required": True, **_json(_ref("FacetRequestBody"))},
                         "responses": {"200": {"description": "Matching values with counts", **_json(_ref("FacetValues"))},
                                       **_errors(SEARCH_ERRORS)}},
            },
            "/v2/multi-search": {"post": {
                "summary": "Up to 100 searches in one request, answered in order; a failing search is its Error "
                           "object in place and never fails the others", "operationId": "multiSearch",
                "requestBody": {"required": True, **_json(_ref("MultiSearchRequest"))},
                "responses": {"200": {"description": "One answer per search", **_json(_ref("MultiSearchResponse"))},
                              **_errors(SEARCH_ERRORS)}}},
            "/v2/collections": {"get": {
                "summary": "List collections with their record counts (search key allowed)",
                "operationId": "listCollections",
                "responses": {"200": {"description": "Collections, by name",
                                      **_json({"type": "array", "items": _ref("CollectionSummary")})},
                              **_errors(LIST_ERRORS)}}},
            "/v2/collections/{collectionId}": {
                "parameters": [collection_id],
                "get": {"summary": "A collection's record count, fields (kinds, records holding each) and settings",
                        "operationId": "getCollection",
                        "responses": {"200": {"description": "Collection details", **_json(_ref("CollectionInfo"))},
                                      **_errors(READ_ERRORS)}},
                "delete": {"summary": "Drop a collection, its records and settings, durably (admin key)",
                           "operationId": "dropCollection",
                           "responses": {"200": {"description": "Dropped", **_json(
                               {"type": "object", "properties": {"status": {"const": 200}}})},
                                         **_errors(WRITE_ERRORS)}},
            },
            "/v2/collections/{collectionId}/settings": {
                "parameters": [collection_id],
                "get": {"summary": "Every settings key, with its default where unset (search key allowed)",
                        "operationId": "getSettings",
                        "responses": {"200": {"description": "Settings", **_json(_ref("Settings"))},
                                      **_errors(READ_ERRORS)}},
                "put": {"summary": "Change the keys named (null resets one), all or nothing; creates the collection "
                                   "if needed (admin key)", "operationId": "updateSettings",
                        "requestBody": {"required": True, **_json(_ref("Settings"))},
                        "responses": {"200": {"description": "Every settings key after the change",
                                              **_json(_ref("Settings"))},
                                      **_errors(WRITE_ERRORS)}},
            },
            "/v2/collections/{collectionId}/records/{id}": {
                "parameters": [collection_id, {"name": "id", "in": "path", "required": True, "schema": {
                    "type": "string"}, "description": "a canonical integer names an integer id when one exists, "
                                                      "else the string id"}],
                "get": {"summary": "One stored record by id (search key allowed)", "operationId": "getRecord",
                        "responses": {"200": {"description": "The record", **_json(_ref("Record"))},
                                      **_errors(READ_ERRORS)}},
            },
            "/v2/keys": {
                "get": {"summary": "List the stored keys, without their secrets (admin key, or the keys action: "
                                   "the keys within its own scope)", "operationId": "listKeys",
                        "responses": {"200": {"description": "Keys, oldest first", **_json(_ref("KeyList"))},
                                      **_errors(LIST_ERRORS)}},
                "post": {"summary": "Create a key; its secret is in the answer, once (docs/security.md)",
                         "operationId": "createKey",
                         "requestBody": {"required": True, **_json(_ref("KeyRequest"))},
                         "responses": {"201": {"description": "The key, with its secret as key", **_json(_ref("Key"))},
                                       **_errors(KEY_WRITE_ERRORS)}},
            },
            "/v2/keys/{uid}": {
                "parameters": [{"name": "uid", "in": "path", "required": True, "schema": {"type": "string"}}],
                "get": {"summary": "One key, without its secret", "operationId": "getKey",
                        "responses": {"200": {"description": "The key", **_json(_ref("Key"))},
                                      **_errors(READ_ERRORS)}},
                "patch": {"summary": "Rename a key (name, description)", "operationId": "updateKey",
                          "requestBody": {"required": True, **_json(_ref("KeyUpdate"))},
                          "responses": {"200": {"description": "The key", **_json(_ref("Key"))},
                                        **_errors(KEY_WRITE_ERRORS)}},
                "delete": {"summary": "Revoke a key: its secret and the tenant tokens it signed are refused at once",
                           "operationId": "revokeKey",
                           "responses": {"200": {"description": "Revoked", **_json(
                               {"type": "object", "properties": {"status": {"const": 200}, "uid": {"type": "string"}}})},
                                         **_errors(READ_ERRORS)}},
            },
            "/health": {"get": {"summary": "Liveness (no key needed)", "operationId": "health", "security": [],
                                "responses": {"200": {"description": "OK", **_json(_ref("Health"))},
                                              **_errors(OPEN_ERRORS)}}},
            "/openapi.json": {"get": {"summary": "This document (no key needed)", "operationId": "openapi",
                                      "security": [], "responses": {"200": {"description": "OpenAPI 3.1"},
                                                                    **_errors(OPEN_ERRORS)}}},
        },
    }
