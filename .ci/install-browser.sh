#!/usr/bin/env bash
# What tests/browser needs: headless Chromium and its driver from Debian's packages (chromium,
# chromium-driver; no browser download from anywhere else) and selenium from PyPI, which the tests
# point at /usr/bin/chromedriver explicitly so that selenium-manager never downloads a driver.
# Idempotent: installs only what is missing. Usage: bash .ci/install-browser.sh  (.ci/run calls it).
set -euo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
if [ "${#missing[@]}" -gt 0 ]; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "install-browser: need ${missing[*]} but apt-get is not available; install them by hand" >&2
        exit 1
    fi
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    echo "install-browser: installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! python3 -c "import selenium" >/dev/null 2>&1; then
    echo "install-browser: installing selenium"
    python3 -m pip install --quiet 'selenium>=4.11'
fi

chromium --version 2>/dev/null | head -n 1
chromedriver --version | head -n 1
