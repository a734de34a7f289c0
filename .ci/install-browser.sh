#!/usr/bin/env bash
# Headless Chromium for the search page tests: Debian's chromium package (no browser download) and
# the playwright Python package, which drives it through executable_path. Idempotent.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
    fi
fi
python3 -m pip install --quiet 'playwright>=1.40'
