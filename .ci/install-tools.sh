#!/usr/bin/env bash
# Command-line tools the docs' examples call (tests/docs/test_examples.py runs them): curl, from
# Debian's packages. Idempotent: installs only what is missing. Usage: bash .ci/install-tools.sh
# (.ci/run calls it).
set -euo pipefail

if ! command -v curl >/dev/null 2>&1; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "install-tools: need curl but apt-get is not available; install it by hand" >&2
        exit 1
    fi
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    echo "install-tools: installing curl"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq curl >/dev/null
fi
curl --version | head -n 1
