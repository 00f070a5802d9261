#!/usr/bin/env bash
# The long fuzz runs (outside CI): `cargo fuzz run` (nightly, libFuzzer, no sanitizer: the crate
# has four small `unsafe` blocks, none on a decode path) of each target one after another, with
# an allocation cap; prints executions, crashes and timeouts per target for README.md.
# Usage: fuzz/run_long.sh [target[:runs[:seconds]]]...  (default: every target, 1M runs, 600 s)
set -uo pipefail
cd "$(dirname "$0")"
default=(batch_v2 legacy decompress_gzip decompress_snappy decompress_lz4 decompress_zstd
         offset_index time_index txn_index checkpoint producer_snapshot log_folder)
[ $# -gt 0 ] || set -- "${default[@]}"
[ -d corpus ] || ../.venv/bin/python make_corpus.py
mkdir -p logs
for spec in "$@"; do
  IFS=: read -r t runs secs <<< "$spec"
  runs="${runs:-1000000}" secs="${secs:-600}"
  mkdir -p "work/$t" "artifacts/$t"
  cargo +nightly fuzz run --sanitizer none "$t" "work/$t" "corpus/$t" -- \
    -runs="$runs" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 \
    -max_len=65536 -print_final_stats=1 > "logs/$t.log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "logs/$t.log")
  crashes=$(grep -c '^==[0-9]*== ERROR: libFuzzer: deadly signal\|panicked at\|out-of-memory\|malloc(' "logs/$t.log")
  hangs=$(grep -c 'ERROR: libFuzzer: timeout' "logs/$t.log")
  echo "$t: rc=$rc executions=$execs crash-lines=$crashes timeouts=$hangs time=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "logs/$t.log")s"
done
