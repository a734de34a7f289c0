"""This module tests the following properties of the service and CLI docs:

- every route the service serves (``server/app.py`` ``ROUTES``) is named as ``METHOD /path`` in
  docs/service.md and has a curl example there with that method and a matching URL;
- every error status (``errors.ERROR_BY_STATUS``) and every status the OpenAPI document lists has a
  row in the error table of docs/service.md and an example answer ``{"status": N, ...}``;
- every CLI command is documented as ``roarsearch NAME`` in docs/cli.md, and every option of serve,
  import, search and check is named there (demo's options belong to docs/demo.md).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from roarsearch.cli.main import _parser
from roarsearch.errors import ERROR_BY_STATUS
from roarsearch.server.app import ROUTES
from roarsearch.server.openapi import openapi_document

#: Statuses never answered over HTTP: a locked data directory stops ``roarsearch serve`` at start.
AT_START_ONLY = {409}
DOCS = Path(__file__).resolve().parents[2] / "docs"
SERVICE = (DOCS / "service.md").read_text()
CLI = (DOCS / "cli.md").read_text()


def curl_commands(text: str) -> list[str]:
    """Every curl command of the doc's bash blocks, continuation lines joined."""
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    joined = "\n".join(block.replace("\\\n", " ") for block in blocks)
    return [line.strip() for line in joined.splitlines() if line.strip().startswith("curl ")]


def test_every_route_is_documented_with_a_curl_example() -> None:
    commands = curl_commands(SERVICE)
    for path, methods in ROUTES.items():
        url = re.compile(r"http://127\.0\.0\.1:7700" + re.sub(r"\\\{\w+\\\}", r"[A-Za-z0-9_-]+", re.escape(path))
                         + r"(?:[?\"' ]|$)")
        for method in methods:
            assert f"{method} {path}" in SERVICE, (method, path)
            examples = [command for command in commands if url.search(command)]
            if method == "GET":
                examples = [command for command in examples if " -d " not in command and " -X " not in command]
            elif method == "POST":
                examples = [command for command in examples if " -d " in command and " -X " not in command]
            else:
                examples = [command for command in examples if f"-X {method}" in command]
            assert examples, f"no curl example for {method} {path}"


def test_every_error_status_is_documented() -> None:
    table = {int(status) for status in re.findall(r"^\| (\d{3}) \|", SERVICE, flags=re.M)}
    listed = {int(status) for item in openapi_document()["paths"].values() for operation in item.values()
              if isinstance(operation, dict) and "responses" in operation
              for status in operation["responses"] if int(status) >= 400}
    for status in set(ERROR_BY_STATUS) | listed:
        assert status in table, f"status {status} has no row in the error table of docs/service.md"
        if status in AT_START_ONLY:
            assert "roarsearch serve: data directory" in SERVICE, "the start-up refusal needs its example"
        else:
            assert f'{{"status": {status}, "data": "' in SERVICE, f"status {status} has no example answer"


def test_every_cli_command_and_option_is_documented() -> None:
    parser = _parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    for name, subparser in commands.choices.items():
        assert f"roarsearch {name}" in CLI, name
        if name == "demo":
            continue
        for action in subparser._actions:
            for option in action.option_strings:
                if option.startswith("--") and option != "--help":
                    assert option in CLI, f"roarsearch {name} {option} is not in docs/cli.md"
