#!/usr/bin/env bash
# Runs every test: the crate's unit tests, a short run of each fuzz target, then the pytest suite
# (which starts real Kafka brokers on 127.0.0.1 and fails, never skips, when Kafka cannot run).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --lib --quiet
# A few seconds of each libFuzzer target (fuzz/README.md), on the stable toolchain.
bash fuzz/ci.sh
.venv/bin/python -m pytest -q -p no:cacheprovider tests "$@"
