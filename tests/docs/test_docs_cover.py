"""This module tests the following properties:

- every route the service serves, every CLI command and every error status of the error table is
  documented (docs/service.md, docs/cli.md, docs/reference.md); a new one without docs fails here;
- the README opens with the two commands (set up and run the main job; set up and run the tests).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from roarsearch.cli.main import _parser
from roarsearch.errors import ERROR_BY_STATUS
from roarsearch.server.openapi import openapi_document

DOCS = Path(__file__).resolve().parents[2] / "docs"
README = Path(__file__).resolve().parents[2] / "README.md"


def test_routes_documented() -> None:
    service = (DOCS / "service.md").read_text()
    for path, item in openapi_document()["paths"].items():
        for method in item:
            if method != "parameters":
                assert f"{method.upper()} {path}" in service, (method, path)


def test_cli_commands_documented() -> None:
    cli = (DOCS / "cli.md").read_text()
    parser = _parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    for name in commands.choices:
        assert f"roarsearch {name}" in cli, name


def test_error_statuses_documented() -> None:
    reference = (DOCS / "reference.md").read_text()
    service = (DOCS / "service.md").read_text()
    for status, error_class in ERROR_BY_STATUS.items():
        assert f"| {status} |" in reference and error_class.__name__ in reference, status
        assert f"| {status} |" in service, status


def test_readme_opens_with_two_commands() -> None:
    text = README.read_text()
    blocks = [part.split("```")[0] for part in text.split("```bash\n")[1:3]]
    assert "pip install" in blocks[0] and "pip install" in blocks[1] and "pytest" in blocks[1]
