"""This module tests the following properties of README.md and docs/*.md (the way sqlite-utils keeps
its docs true):

- every ``python``, ``bash`` and ``sh`` block runs, in order, in a fresh temporary directory per
  document (one Python namespace per document, so later blocks build on earlier ones), and what it
  prints matches what the doc says it prints;
- a block that is deliberately not run carries ``<!-- not-run: reason -->`` on the line before its
  fence, and there are only a few of those.

How a doc states output:

- Python: a statement ending in ``# -> EXPECTED``. For ``print(...)`` the printed text is compared;
  for any other expression its value. EXPECTED is compared as a value when it parses as JSON or a
  Python literal, else as text in which ``…`` (or ``...``) matches anything.
- Shell: the ``# `` comment lines right after a command are its output (stdout and stderr), compared
  line by line the same way (a line that is only ``…`` matches any number of lines); a ``json``
  block right after a shell block is the output of its last command. A command with no stated
  output must still succeed. ``responseTime`` is left out of JSON comparisons (it is a measurement)
  and floats are compared to 6 significant digits.
- Examples that call ``curl`` are skipped, naming ``bash .ci/install-tools.sh``, where curl is missing
  (CI installs it and fails on skips).
- ``pip install ...`` is the environment's job (CI installs every extra) and is not run here.
- ``roarsearch serve`` and ``roarsearch demo`` start in the background on a free port (``7700`` in
  later commands becomes that port, and the keys ``roarsearch demo`` prints replace ``ADMIN_KEY``
  and ``SEARCH_KEY``); they stop when the document ends. A serve that exits instead (a refusal) is
  compared like any command.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import queue
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_LANGUAGES = {"python", "bash", "sh"}
NOT_RUN = re.compile(r"^<!-- not-run: (?P<reason>\S.*?) -->$")
#: Blocks not run on purpose stay few: each is a gap in what this test guarantees.
MOST_NOT_RUN = 12  # the test suite, browser and tool installs, benchmark commands (minutes of CPU), a model download
FENCE = re.compile(r"^```(?P<language>[a-z]*)\s*$")
EXPECTED = re.compile(r"#\s*->\s*(?P<expected>.*?)\s*$")
SERVER = re.compile(r"^roarsearch (serve|demo)\b(?!.*--no-serve)")
COMMAND_SECONDS = 300
READY_SECONDS = 180


@dataclass
class Block:
    document: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    not_run: str | None = None
    output: str | None = None  # a ``json`` block right after a shell block
    end_line: int = 0  # of the closing fence, 0-based index

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


def blocks_of(document: Path) -> list[Block]:
    lines = document.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        previous = next((lines[i].strip() for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        marker = NOT_RUN.match(previous)
        block = Block(document, index + 1, opening["language"], "\n".join(lines[index + 1:end]) + "\n",
                      marker["reason"] if marker else None, end_line=end)
        follows_shell = found and found[-1].language in ("bash", "sh") and \
            all(not lines[i].strip() for i in range(found[-1].end_line + 1, index))
        if block.language == "json" and follows_shell:
            found[-1].output = block.code
        found.append(block)
        index = end + 1
    return found


# ---------------------------------------------------------------------- comparing

def _drop_measurements(value: Any) -> Any:
    """``responseTime`` left out, floats to 6 significant digits (a doc shows ``0.99609375``, not every bit)."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {key: _drop_measurements(item) for key, item in value.items() if key != "responseTime"}
    if isinstance(value, list):
        return [_drop_measurements(item) for item in value]
    return value


def _literal(text: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(text)
    except ValueError:
        pass
    try:
        return True, ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _pattern(expected: str) -> re.Pattern[str]:
    parts = re.split(r"…|\.\.\.", expected)
    return re.compile(".*?".join(re.escape(part) for part in parts), re.S)


def text_matches(actual: str, expected: str) -> bool:
    """Line by line; ``…`` matches within a line, a line of only ``…`` matches any number of lines."""
    if json_matches(actual, expected):
        return True
    actual_lines = [line.rstrip() for line in actual.replace("\r\n", "\n").strip("\n").split("\n")]
    expected_lines = [line.rstrip() for line in expected.strip("\n").split("\n")]
    if len(expected_lines) == 1 and len(actual_lines) == 1:
        parsed_ok, wanted = _literal(expected_lines[0])
        got_ok, got = _literal(actual_lines[0])
        if parsed_ok and got_ok:
            return bool(_drop_measurements(got) == _drop_measurements(wanted))
    pieces = [r"(?:[^\n]*\n)*?" if line in ("…", "...") else _pattern(line).pattern + "\n" for line in expected_lines]
    return re.fullmatch("".join(pieces), "\n".join(actual_lines) + "\n") is not None


def json_matches(actual: str, expected: str) -> bool:
    try:
        return bool(_drop_measurements(json.loads(actual)) == _drop_measurements(json.loads(expected)))
    except ValueError:
        return False


def value_matches(value: Any, expected: str) -> bool:
    parsed_ok, wanted = _literal(expected)
    if parsed_ok:
        return bool(_drop_measurements(value) == _drop_measurements(wanted))
    return text_matches(repr(value), expected)


# ---------------------------------------------------------------------- Python blocks

class _Checks(ast.NodeTransformer):
    """Rewrites each ``expression  # -> EXPECTED`` statement into a call that checks it."""

    def __init__(self, expected: dict[int, str]) -> None:
        self.expected = expected

    def visit_Expr(self, node: ast.Expr) -> Any:
        line = node.end_lineno or node.lineno
        if line not in self.expected:
            return node
        text = ast.Constant(self.expected[line])
        value = node.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "print":
            call = ast.Call(ast.Name("__doc_print", ast.Load()), [ast.Constant(line), text, *value.args], value.keywords)
        else:
            call = ast.Call(ast.Name("__doc_value", ast.Load()), [ast.Constant(line), text, value], [])
        return ast.copy_location(ast.Expr(call), node)


def run_python(block: Block, namespace: dict[str, Any]) -> None:
    expected = {number: found["expected"] for number, line in enumerate(block.code.splitlines(), start=1)
                if (found := EXPECTED.search(line))}

    def check_print(line: int, wanted: str, *args: Any, sep: str = " ", end: str = "\n", **_: Any) -> None:
        printed = sep.join(str(arg) for arg in args)
        assert text_matches(printed, wanted) or value_matches(printed, wanted), \
            f"{block.where} (+{line}): printed {printed!r}, the doc says {wanted!r}"

    def check_value(line: int, wanted: str, value: Any) -> None:
        assert value_matches(value, wanted), f"{block.where} (+{line}): got {value!r}, the doc says {wanted!r}"

    namespace.update(__doc_print=check_print, __doc_value=check_value)
    tree = ast.fix_missing_locations(_Checks(expected).visit(ast.parse(block.code)))
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(tree, block.where, "exec"), namespace)  # the docs' own examples


# ---------------------------------------------------------------------- shell blocks

def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Session:
    """One document's run: its directory, its Python namespace, its servers."""

    directory: Path
    namespace: dict[str, Any] = field(default_factory=dict)
    servers: list[subprocess.Popen[str]] = field(default_factory=list)
    readers: list[threading.Thread] = field(default_factory=list)
    substitutions: dict[str, str] = field(default_factory=dict)

    def environment(self) -> dict[str, str]:
        environment = {key: value for key, value in os.environ.items()
                       if key not in ("ROARSEARCH_API_KEY", "ROARSEARCH_SEARCH_KEYS")}
        environment["PATH"] = os.path.dirname(sys.executable) + os.pathsep + environment.get("PATH", "")
        environment["PYTHONUNBUFFERED"] = "1"
        return environment

    def substitute(self, command: str) -> str:
        for placeholder, value in self.substitutions.items():
            command = command.replace(placeholder, value)
        return command

    def stop(self) -> None:
        for server in self.servers:
            server.send_signal(signal.SIGTERM)
        for server in self.servers:
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        for server, reader in zip(self.servers, self.readers):
            reader.join(timeout=10)  # it ends at the end of the output; then the pipe can be closed
            assert server.stdout is not None
            server.stdout.close()


def commands_of(code: str) -> Iterator[tuple[str, list[str]]]:
    """(command, the output lines the doc states for it); a command may span lines (``\\``, loops)."""
    pending: list[str] = []
    command: str | None = None
    output: list[str] = []
    for line in code.splitlines():
        stripped = line.strip()
        if pending:
            pending.append(line)
            if _complete("\n".join(pending)):
                command, output, pending = "\n".join(pending), [], []
            continue
        if stripped.startswith("#"):
            if command is not None:
                output.append(stripped[2:] if stripped.startswith("# ") else stripped[1:])
            continue
        if not stripped:
            continue
        if command is not None:
            yield command, output
            command = None
        pending = [line]
        if _complete(line):
            command, output, pending = line, [], []
    if command is not None:
        yield command, output
    assert not pending, f"an unfinished shell command: {pending}"


def _complete(text: str) -> bool:
    if text.rstrip().endswith("\\"):
        return False
    return subprocess.run(["bash", "-n", "-c", text], capture_output=True).returncode == 0


def run_shell(block: Block, session: Session) -> None:
    commands = list(commands_of(block.code))
    for position, (command, stated) in enumerate(commands):
        if block.output is not None and position == len(commands) - 1:
            stated = block.output.strip().splitlines()
        command = command.replace("\\\n", " ")
        if command.startswith("pip install"):
            if "&&" not in command:
                continue
            command = command.split("&&", 1)[1].strip()
        command = session.substitute(command)
        expected = session.substitute("\n".join(stated))
        if SERVER.match(command):  # its ready line names its own port, not the previous server's
            start_server(block, session, command, "\n".join(stated))
            continue
        result = subprocess.run(command, shell=True, executable="/bin/bash", cwd=session.directory, text=True,
                                capture_output=True, env=session.environment(), timeout=COMMAND_SECONDS)
        printed = result.stdout + result.stderr
        if expected:
            assert text_matches(printed, expected), \
                f"{block.where}: `{command}` printed:\n{printed}\nthe doc says:\n{expected}"
        else:
            assert result.returncode == 0, f"{block.where}: `{command}` failed ({result.returncode}):\n{printed}"


def start_server(block: Block, session: Session, command: str, expected: str) -> None:
    port = free_port()
    arguments = shlex.split(command, comments=True)
    if "--port" in arguments:
        arguments[arguments.index("--port") + 1] = str(port)
    else:
        arguments += ["--port", str(port)]
    server = subprocess.Popen(arguments, cwd=session.directory, env=session.environment(), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    lines: queue.Queue[str | None] = queue.Queue()

    def drain() -> None:
        assert server.stdout is not None
        for line in server.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    printed: list[str] = []
    deadline = time.monotonic() + READY_SECONDS
    while not any(line.startswith("roarsearch ready on ") for line in printed):
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            server.kill()
            server.wait()
            reader.join(timeout=10)
            assert server.stdout is not None
            server.stdout.close()
            pytest.fail(f"{block.where}: `{command}` was not ready in {READY_SECONDS} s:\n{''.join(printed)}")
        if line is None:  # it exited: a refusal, compared like any command's output
            server.wait()
            reader.join(timeout=10)
            assert server.stdout is not None
            server.stdout.close()
            assert expected, f"{block.where}: `{command}` exited ({server.returncode}):\n{''.join(printed)}"
            assert text_matches("".join(printed), expected), \
                f"{block.where}: `{command}` printed:\n{''.join(printed)}\nthe doc says:\n{expected}"
            return
        printed.append(line)
    session.servers.append(server)
    session.readers.append(reader)
    output = "".join(printed)
    session.substitutions["127.0.0.1:7700"] = f"127.0.0.1:{port}"
    for placeholder, label in (("SEARCH_KEY", "search-only key"), ("ADMIN_KEY", "admin key")):
        found = re.search(rf"^{label}:\s+(\S+)", output, re.M)
        if found:
            session.substitutions[placeholder] = found[1]
    for line in expected.splitlines():  # the doc's lines appear in the server's output
        wanted = line.replace(":7700", f":{port}")
        assert any(_pattern(wanted).fullmatch(printed_line.rstrip("\n")) for printed_line in printed), \
            f"{block.where}: `{command}` printed:\n{output}\nthe doc says:\n{expected}"


# ---------------------------------------------------------------------- the tests

def _runnable(document: Path) -> list[Block]:
    return [block for block in blocks_of(document) if block.language in RUN_LANGUAGES and block.not_run is None]


@pytest.mark.parametrize("document", [doc for doc in DOCUMENTS if _runnable(doc)], ids=lambda doc: doc.name)
def test_examples_run_and_print_what_the_doc_says(document: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    if document.name == "cluster.md":  # its examples start a local Ray cluster
        pytest.importorskip("ray", reason="the sharded engine needs Ray: pip install -e '.[cluster]'")
    monkeypatch.chdir(tmp_path)
    session = Session(tmp_path)
    blocks = _runnable(document)
    if any("curl " in block.code for block in blocks) and shutil.which("curl") is None:
        pytest.skip(f"the examples of {document.name} call curl, which is missing: run `bash .ci/install-tools.sh` "
                    "(or apt-get install curl)")
    try:
        for block in blocks:
            if block.language == "python":
                run_python(block, session.namespace)
            else:
                run_shell(block, session)
    finally:
        session.stop()
        engine = session.namespace.get("engine")
        if engine is not None and hasattr(engine, "close"):
            engine.close()


def test_blocks_not_run_are_marked_and_few() -> None:
    not_run = [block for document in DOCUMENTS for block in blocks_of(document)
               if block.language in RUN_LANGUAGES and block.not_run is not None]
    assert len(not_run) <= MOST_NOT_RUN, [block.where for block in not_run]
    for document in DOCUMENTS:
        for block in blocks_of(document):
            assert block.language != "shell" and block.language != "console", \
                f"{block.where}: write shell examples as ```bash so that they are run"


def test_the_comparison_can_fail() -> None:
    assert text_matches("3 hits in 59 ms", "3 hits in … ms") and not text_matches("4 hits in 59 ms", "3 hits in … ms")
    assert text_matches('{"a": 1, "responseTime": 3}', '{"a": 1, "responseTime": 9}')
    assert not text_matches('[{"status": 404, "id": 1}]', '[{"status": 200, "id": 1}]')
    assert text_matches("HTTP/1.1 200 OK\nx: 1\ny: 2", "HTTP/1.1 200 OK\n…\ny: 2")
    assert value_matches({"status": 201}, '{"status": 201}') and not value_matches([1], "[2]")
