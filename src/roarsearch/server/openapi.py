"""The OpenAPI 3.1 description of the service, built from the routes it really serves."""

from __future__ import annotations

from typing import Any

ERROR = {"$ref": "#/components/schemas/Error"}


def _errors(*statuses: int) -> dict[str, Any]:
    text = {400: "Bad input (the message names the field)", 401: "Missing or invalid key",
            403: "A search-only key tried to write", 404: "Unknown collection or route",
            405: "Method not allowed", 413: "Body over the limit", 500: "Internal error (with a request id)",
            507: "The write could not be made durable"}
    return {str(status): {"description": text[status], "content": {"application/json": {"schema": ERROR}}}
            for status in statuses}


def openapi_document() -> dict[str, Any]:
    collection_id = {"name": "collectionId", "in": "path", "required": True,
                     "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "roarsearch — Record Search and Management Service", "version": "1.0.0"},
        "components": {
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "required": ["status", "data"],
                          "properties": {"status": {"type": "integer"}, "data": {"type": "string"}}},
                "SearchRequestBody": {"type": "object", "required": ["collection"], "additionalProperties": False,
                                      "properties": {
                                          "collection": {"type": "string"}, "query": {"type": "string"},
                                          "fields": {"type": "array", "items": {"type": "string"}},
                                          "searchFields": {"type": "array", "items": {"type": "string"}},
                                          "filter": {"type": "string"},
                                          "sort": {"type": "array", "items": {"type": "string"}},
                                          "skip": {"type": "integer", "minimum": 0},
                                          "count": {"type": "integer", "minimum": 0, "maximum": 1000},
                                          "typoTolerance": {"type": "integer", "minimum": 0, "maximum": 2},
                                          "textFacets": {"type": "array", "items": {"type": "string"}},
                                          "facetCount": {"type": "integer"},
                                          "textFacetFilters": {"type": "object"},
                                          "numericFacets": {"type": "object"},
                                          "numericFacetFilters": {"type": "object"},
                                          "groupBy": {"type": "string"}, "groupCount": {"type": "integer"},
                                          "groupLimit": {"type": "integer"},
                                          "highlightFields": {"type": "array", "items": {"type": "string"}},
                                          "textFacetQuery": {"type": ["object", "null"]},
                                          "geo": {"type": ["object", "null"]}}},
                "SearchResponse": {"type": "object", "properties": {
                    "query": {"type": "object"}, "results": {"type": "array"}, "textFacets": {"type": "array"},
                    "numericFacets": {"type": "array"}, "responseTime": {"type": "integer"},
                    "totalHits": {"type": "integer"}}},
                "OperationResult": {"type": "object", "properties": {"status": {"type": "integer"}}},
            },
        },
        "security": [{"bearerAuth": []}],
        "paths": {
            "/v2": {"post": {
                "summary": "Search records", "operationId": "search",
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/SearchRequestBody"}}}},
                "responses": {"200": {"description": "Search results", "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/SearchResponse"}}}}, **_errors(400, 401, 404, 405, 413, 500)}}},
            "/v2/collections/{collectionId}/records": {
                "parameters": [collection_id],
                "post": {"summary": "Add records (one object or an array; upsert by id)", "operationId": "addRecords",
                         "requestBody": {"required": True, "content": {"application/json": {"schema": {
                             "oneOf": [{"type": "object"}, {"type": "array", "items": {"type": "object"}}]}}}},
                         "responses": {"201": {"description": "Created", "content": {"application/json": {
                             "schema": {"$ref": "#/components/schemas/OperationResult"}}}},
                             **_errors(400, 401, 403, 405, 413, 500, 507)}},
                "delete": {"summary": "Delete records by ids (array body), by {\"filter\": ...}, or all (?clear=true)",
                           "operationId": "deleteRecords",
                           "parameters": [{"name": "clear", "in": "query", "schema": {"type": "boolean"}},
                                          {"name": "isClear", "in": "query", "schema": {"type": "boolean"}}],
                           "requestBody": {"required": False, "content": {"application/json": {"schema": {
                               "oneOf": [{"type": "array"}, {"type": "object", "properties": {"filter": {"type": "string"}}}]}}}},
                           "responses": {"200": {"description": "One result per id, or the deleted count",
                                                 "content": {"application/json": {"schema": {"type": "array", "items": {
                                                     "$ref": "#/components/schemas/OperationResult"}}}}},
                                         **_errors(400, 401, 403, 404, 405, 413, 500, 507)}},
            },
            "/v2/collections/{collectionId}/facet/{facetName}/query": {
                "parameters": [collection_id, {"name": "facetName", "in": "path", "required": True, "schema": {"type": "string"}}],
                "post": {"summary": "Facet value search", "operationId": "searchFacetValues",
                         "requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}},
                         "responses": {"200": {"description": "Matching facet values with counts"},
                                       **_errors(400, 401, 404, 405, 413, 500)}},
            },
            "/health": {"get": {"summary": "Liveness (no key needed)", "operationId": "health", "security": [],
                                "responses": {"200": {"description": "OK"}}}},
            "/openapi.json": {"get": {"summary": "This document (no key needed)", "operationId": "openapi",
                                      "security": [], "responses": {"200": {"description": "OpenAPI 3.1"}}}},
        },
    }
