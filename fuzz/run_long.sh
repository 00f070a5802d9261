#!/usr/bin/env bash
# The long fuzz runs (outside CI): the targets built by `cargo fuzz build` (nightly, libFuzzer,
# no sanitizer: the crate's four small `unsafe` blocks are on no decode path; debug assertions
# and overflow checks on), run one after another in one process each (-jobs=1's worth: the
# machine is shared), with an allocation cap. Prints executions, crashes and timeouts per target.
# Usage: fuzz/run_long.sh [target[:runs[:seconds]]]...  (default: every target, 1M runs, 600 s)
set -uo pipefail
cd "$(dirname "$0")"
default=(batch_v2 legacy decompress_gzip decompress_snappy decompress_lz4 decompress_zstd
         offset_index time_index txn_index checkpoint producer_snapshot log_folder)
[ $# -gt 0 ] || set -- "${default[@]}"
[ -d corpus ] || ../.venv/bin/python make_corpus.py >/dev/null
cargo +nightly fuzz build --sanitizer none >/dev/null 2>&1 || { echo "cargo fuzz build failed" >&2; exit 1; }
bin="target/$(rustc -vV | sed -n 's/^host: //p')/release"
mkdir -p logs
for spec in "$@"; do
  IFS=: read -r t runs secs <<< "$spec"
  runs="${runs:-1000000}" secs="${secs:-600}"
  mkdir -p "work/$t" "artifacts/$t"
  before=$(ls "artifacts/$t" | wc -l)
  "$bin/$t" "work/$t" "corpus/$t" -runs="$runs" -max_total_time="$secs" -rss_limit_mb=2048 \
    -malloc_limit_mb=512 -timeout=10 -max_len=65536 -artifact_prefix="artifacts/$t/" \
    -print_final_stats=1 > "logs/$t.log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "logs/$t.log")
  new=$(( $(ls "artifacts/$t" | wc -l) - before ))
  hangs=$(grep -c 'ERROR: libFuzzer: timeout' "logs/$t.log")
  echo "$t: rc=$rc executions=$execs new-artifacts=$new timeouts=$hangs seconds=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "logs/$t.log")"
done
