#!/usr/bin/env bash
# The text-heavy benchmark corpus (Debian package descriptions) for tests/unit/benchmarks: apt lists
# with English descriptions fetched into the git-ignored benchmarks/.cache (about 16 MB, root).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m benchmarks.datasets --fetch
