#!/usr/bin/env bash
# CI's short run of every fuzz target (a few seconds each, from the seed corpus), on the stable
# toolchain: the targets are built with the coverage flags `cargo fuzz build --sanitizer none`
# passes (none of them needs nightly), so CI needs neither cargo-fuzz nor a nightly toolchain.
# The long runs use `cargo fuzz` itself (README.md here). FUZZ_SECONDS sets the time per target.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${FUZZ_SECONDS:-3}"
python="${PYTHON:-../.venv/bin/python}"
targets=(batch_v2 legacy decompress_gzip decompress_snappy decompress_lz4 decompress_zstd
         offset_index time_index txn_index checkpoint producer_snapshot log_folder)
triple="$(rustc -vV | sed -n 's/^host: //p')"
# --target keeps these flags off build scripts and proc macros, as cargo-fuzz does.
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares -Cllvm-args=-sanitizer-coverage-stack-depth \
 --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
start=$(date +%s)
cargo build --quiet --profile fuzz-ci --target "$triple" --bins
echo "fuzz: built ${#targets[@]} targets in $(( $(date +%s) - start )) s"
"$python" make_corpus.py >/dev/null
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for t in "${targets[@]}"; do
  mkdir -p "$scratch/$t" artifacts/"$t"
  # New inputs go to the scratch folder; the seeds stay as built. A crash, a leak past the caps
  # or a timeout fails the run and leaves the input in fuzz/artifacts/<target>/.
  if ! "target/$triple/fuzz-ci/$t" "$scratch/$t" "corpus/$t" -max_total_time="$seconds" \
      -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 -max_len=65536 \
      -artifact_prefix="artifacts/$t/" -print_final_stats=1 > "$scratch/$t.log" 2>&1; then
    tail -40 "$scratch/$t.log" >&2
    echo "fuzz: $t failed; input in fuzz/artifacts/$t/" >&2
    exit 1
  fi
  echo "fuzz: $t $(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/$t.log") inputs"
done
echo "fuzz: done in $(( $(date +%s) - start )) s"
