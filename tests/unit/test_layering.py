"""This module tests the following properties:

- imports in ``src/roarsearch`` flow one way (docs/architecture.md):
  errors/schema → analysis → index (storage beside it) → query → ranking/facets → engine →
  server → cli/demo/cluster; a module imports only from its own folder or a lower layer, never
  from a sibling folder of the same layer (index ↔ storage, ranking ↔ facets, cli ↔ demo);
- imports made inside functions count too (a late import is still a dependency);
- no module of ``src/roarsearch`` keeps mutable state at module level (dicts, lists, sets or
  bitmaps assigned at the top of a module, other than upper-case constant tables that nothing
  mutates), so no cache can outlive the index it was derived from.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2] / "src" / "roarsearch"

#: Layer of each top-level part of the package (a module's part is its first path component).
LAYERS: dict[str, float] = {
    "errors": 0, "schema": 1, "datasets": 1, "buffers": 1, "memory": 1, "scratch": 1.5, "analysis": 2,
    "index": 3, "storage": 3,
    "query": 4,
    "ranking": 5, "facets": 5,
    "engine": 6, "__init__": 6.5, "keys": 6.5,
    "server": 7,
    "cluster": 7.5, "cli": 8, "quickstart": 8, "__main__": 9,
}


def _part(module: str) -> str:
    """``roarsearch.index.cache`` → ``index``; ``roarsearch`` (the public API) → ``__init__``."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "roarsearch":  # ``from roarsearch import Engine`` or a subpackage
                for alias in node.names:
                    submodule = f"roarsearch.{alias.name}"
                    is_package = (SOURCE / alias.name).is_dir() or (SOURCE / f"{alias.name}.py").exists()
                    found.append((node.lineno, submodule if is_package else "roarsearch"))
            elif node.module.startswith("roarsearch."):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names if alias.name.startswith("roarsearch"))
    return found


MODULES = sorted(SOURCE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda path: str(path.relative_to(SOURCE)))
def test_imports_flow_one_way(path: Path) -> None:
    relative = path.relative_to(SOURCE)
    own = relative.parts[0].removesuffix(".py")
    assert own in LAYERS, f"{relative}: add its folder to LAYERS and to docs/architecture.md"
    for line, module in _imports(path):
        target = _part(module)
        assert target in LAYERS, f"{relative}:{line} imports unknown part {module}"
        if target == own:
            continue
        assert LAYERS[target] < LAYERS[own], (
            f"{relative}:{line} imports {module}: layer {target} ({LAYERS[target]}) is not below {own} ({LAYERS[own]})")


MUTABLE_CALLS = {"dict", "list", "set", "OrderedDict", "defaultdict", "BitMap", "deque"}


@pytest.mark.parametrize("path", MODULES, ids=lambda path: str(path.relative_to(SOURCE)))
def test_no_module_level_mutable_state(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        elif isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        else:
            continue
        names = [target.id for target in targets if isinstance(target, ast.Name)]
        if not names or value is None or all(name.isupper() or name == "__all__" for name in names):
            continue  # constants (upper case) are tables that nothing mutates
        mutable = isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)) or (
            isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in MUTABLE_CALLS)
        assert not mutable, f"{path.relative_to(SOURCE)}:{node.lineno}: module-level mutable state {names}"


def test_the_rules_catch_a_violation(tmp_path: Path) -> None:
    """The checks above can fail: a lower layer importing a higher one, and a module-level cache."""
    bad = tmp_path / "bad.py"
    bad.write_text("from roarsearch.engine.request import SortKey\n_cache = {}\n", encoding="utf-8")
    assert _imports(bad) == [(1, "roarsearch.engine.request")]
    assert LAYERS[_part("roarsearch.engine.request")] > LAYERS["ranking"]
    tree = ast.parse(bad.read_text(encoding="utf-8"))
    assigned = [node for node in tree.body if isinstance(node, ast.Assign)]
    assert isinstance(assigned[0].value, ast.Dict)
