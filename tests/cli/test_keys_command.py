"""This module tests the following properties of ``roarsearch keys``:

- ``create`` prints the key with its secret (derived from the admin key given), ``list`` shows
  the prefix only (as a table, or JSON with ``--json``), ``revoke`` deletes it without any key;
- a bad action exits 1 naming it, a missing admin key exits 2, and an admin key other than the
  one the keys were made with exits 1 and says so;
- a server started without an admin key keeps its master secret in ``DATA/keys.secret``, which the
  command then uses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from roarsearch.keys import derive_secret

ROOT = Path(__file__).resolve().parents[2]


def run(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {name: value for name, value in os.environ.items() if name != "ROARSEARCH_API_KEY"}
    environment.update(env or {}, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "roarsearch", "keys", *arguments], capture_output=True, text=True,
                          env=environment, cwd=ROOT, timeout=60)


def test_create_list_revoke(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    created = run("create", "--data", data, "--api-key", "admin", "--action", "search", "--collection", "logs-*",
                  "--name", "reader", "--expires-at", "2099-01-01T00:00:00Z")
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)
    assert key["key"] == derive_secret("admin", key["uid"]) and key["collections"] == ["logs-*"]
    assert key["expiresAt"] == "2099-01-01T00:00:00Z"
    listed = run("list", "--data", data, env={"ROARSEARCH_API_KEY": "admin"})
    assert listed.returncode == 0 and key["uid"] in listed.stdout and key["key"] not in listed.stdout
    assert listed.stdout.split("\n")[0].split() == ["uid", "prefix", "actions", "collections", "expires", "name"]
    as_json = json.loads(run("list", "--data", data, "--api-key", "admin", "--json").stdout)
    assert [entry["keyPrefix"] for entry in as_json] == [key["key"][:8]] and "key" not in as_json[0]
    other = run("list", "--data", data, "--api-key", "another")
    assert other.returncode == 1 and "created under another admin key" in other.stderr
    assert run("create", "--data", data, "--api-key", "another", "--action", "search").returncode == 1
    revoked = run("revoke", key["uid"], "--data", data)
    assert revoked.returncode == 0 and revoked.stdout == f"revoked key {key['uid']}\n"
    again = run("revoke", key["uid"], "--data", data)
    assert again.returncode == 1 and "not found" in again.stderr
    assert json.loads(run("list", "--data", data, "--api-key", "admin", "--json").stdout) == []


def test_usage_errors(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    bad = run("create", "--data", data, "--api-key", "admin", "--action", "fly")
    assert bad.returncode == 1 and "actions[0]: unknown action 'fly'" in bad.stderr
    missing = run("create", "--data", data, "--action", "search")
    assert missing.returncode == 2 and "--api-key" in missing.stderr
    assert run("create", "--data", data, "--api-key", "admin").returncode == 2  # --action is required
    assert run("revoke", "nope", "--data", data).returncode == 1


def test_the_generated_master_secret_is_used(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "keys.secret").write_text("generated-secret")
    created = run("create", "--data", str(data), "--action", "search")
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)
    assert key["key"] == derive_secret("generated-secret", key["uid"])
