#!/usr/bin/env bash
# Runs every test: the crate's unit tests, then the pytest suite (which starts real Kafka brokers
# on 127.0.0.1 and fails, never skips, when Kafka cannot run).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --lib --quiet
# A few seconds of every fuzz target from its seed corpus (the long runs: fuzz/README.md).
FUZZ_SECONDS="${FUZZ_SECONDS:-2}" bash fuzz/ci.sh
# The type stub against the built module (no allowlist): every name, signature and default.
.venv/bin/python -m mypy.stubtest --mypy-config-file pyproject.toml kafkalog._kafkalog
# The pure-Python modules against it.
.venv/bin/python -m mypy --config-file pyproject.toml --follow-imports=silent \
  -m kafkalog.results -m kafkalog.clients -m kafkalog.cli -m kafkalog.cli_tools -m kafkalog.demo \
  -m kafkalog.spark -m kafkalog.java_regex
# The slowest tests are listed, to keep the run within CI's 30 minutes.
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 tests "$@"
