#!/usr/bin/env bash
# Sets up a development environment from scratch: a virtualenv in .venv with the test
# dependencies (PySpark among them), kafkalog built into it (maturin, cargo's dev profile, shared
# with `cargo test`), and the jars the referee tests run: Apache Kafka and Spark's own Kafka
# source (from Maven Central, cached in ~/.cache/kafkalog).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "setup: cargo (Rust) is required" >&2; exit 1; }
python3 -m venv .venv
# `cargo test`'s build (scripts/test.sh) runs while pip downloads; the two cargo builds share the
# target dir's lock, so maturin's waits for it.
cargo test --lib --no-run --quiet > .venv/cargo-test-build.log 2>&1 &
test_build_pid=$!
.venv/bin/python -m pip install -q --upgrade pip
fetch_pid=
if [ "${KAFKALOG_SKIP_KAFKA_JARS:-0}" != 1 ]; then
  command -v java >/dev/null && command -v mvn >/dev/null || { echo "setup: java and mvn are required for the Kafka referee" >&2; exit 1; }
  # The downloads from Maven Central run while pip and the Rust build do.
  ( for v in 4.4.0 3.9.2; do bash .ci/fetch_kafka.sh "$v" >/dev/null; done
    bash .ci/fetch_spark_kafka.sh 4.2.0 >/dev/null ) > .venv/fetch-jars.log 2>&1 &
  fetch_pid=$!
fi
.venv/bin/python -m pip install -q "maturin>=1.9,<2" -r tests/requirements.txt
# pip's chatter about requirements already met is kept in a log, shown only when the build fails.
.venv/bin/maturin develop -q -E spark > .venv/maturin-develop.log 2>&1 || { cat .venv/maturin-develop.log >&2; exit 1; }
if ! wait "$test_build_pid"; then
  cat .venv/cargo-test-build.log >&2
  echo "setup: building the crate's tests failed" >&2
  exit 1
fi
if [ -n "$fetch_pid" ] && ! wait "$fetch_pid"; then
  cat .venv/fetch-jars.log >&2
  echo "setup: fetching Apache Kafka's and Spark's Kafka jars from Maven Central failed" >&2
  exit 1
fi
echo "setup: done (.venv ready; run 'bash scripts/test.sh' or '.venv/bin/kafkalog demo')"
