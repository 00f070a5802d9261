#!/usr/bin/env bash
# Kafka's own Java code (JMH) vs kafkalog's Rust (benches/kafka_peer.rs) on the same segment,
# run from the bundle benches/device/make_bundle.py writes (it copies this script there): its
# own jlink'd Java runtime, KafkaPeer compiled with its jars, the segment of run_all.py's java
# section. No JDK, Maven, cargo, network or Python packages needed.
#
#   OUT=/some/folder bash target/device-bundle/run.sh            # full run (~2 min)
#   OUT=/some/folder QUICK=1 bash target/device-bundle/run.sh    # smoke run (seconds; figures meaningless)
#
# Writes $OUT/machine.txt, rust_before.jsonl, checksum.txt, jmh.json, jmh.log, rust_after.jsonl.
# Render with: .venv/bin/python benches/device/render.py $OUT
set -euo pipefail

BUNDLE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${OUT:?set OUT to an output folder}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
T0=$(date +%s)
log() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*"; }
die() { echo "[$(date -u +%H:%M:%S)] FAILED: $*" >&2; exit 1; }

if [[ "${QUICK:-0}" == "1" ]]; then
  JMH_ARGS=(-f 0 -wi 0 -i 1 -r 100ms)
  RUST_SECS=0.05
else
  JMH_ARGS=(-f 1 -wi 3 -w 1s -i 5 -r 1s)
  RUST_SECS=2
fi

# Nothing from the environment may change the JVM's flags.
unset JAVA_HOME JAVA_TOOL_OPTIONS _JAVA_OPTIONS JDK_JAVA_OPTIONS CLASSPATH || true

WORK="$(mktemp -d /tmp/kafkalog-device-bundle.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
trap 'echo "[$(date -u +%H:%M:%S)] FAILED (exit $?) at run.sh line $LINENO: $BASH_COMMAND" >&2' ERR

log "unpacking the JRE and the segment into $WORK"
tar -C "$WORK" -xzf "$BUNDLE/jre.tar.gz"
mkdir -p "$WORK/seg"
if command -v xz >/dev/null 2>&1; then
  tar -C "$WORK/seg" -xJf "$BUNDLE/segment.tar.xz"
elif command -v python3 >/dev/null 2>&1; then
  log "no xz binary: unpacking the segment with python3's tarfile (stdlib lzma)"
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$BUNDLE/segment.tar.xz" "$WORK/seg"
else
  die "need xz or python3 to unpack segment.tar.xz"
fi
JAVA="$WORK/jre/bin/java"
SEG="$WORK/seg/java-0/00000000000000000000.log"
[[ -x "$JAVA" ]] || die "no java in the bundle's JRE"
[[ -f "$SEG" ]] || die "no segment after unpacking"
if [[ -f "$BUNDLE/segment.sha256" ]] && command -v sha256sum >/dev/null 2>&1; then
  (cd "$WORK/seg/java-0" && sha256sum -c --quiet "$BUNDLE/segment.sha256") || die "segment checksum mismatch"
fi
CP="$BUNDLE/classes:$BUNDLE/lib/*"
RUST="$BUNDLE/kafka_peer"
[[ -x "$RUST" ]] || die "no executable $RUST"

log "recording the machine into $OUT/machine.txt"
{
  echo "## date"; date -u
  echo "## uname -a"; uname -a
  echo "## lscpu"; lscpu 2>&1 || echo "(lscpu failed)"
  echo "## nproc"; nproc 2>&1 || echo "(nproc failed)"
  echo "## free -g"; free -g 2>&1 || echo "(free failed)"
  echo "## uptime"; uptime 2>&1 || echo "(uptime failed)"
  echo "## java -version"; "$JAVA" -version 2>&1
  echo "## kafka_peer"; ls -l "$RUST"; sha256sum "$RUST" 2>/dev/null || true
  echo "## segment"; ls -l "$WORK/seg/java-0"
  echo "## mode"; echo "QUICK=${QUICK:-0} JMH ${JMH_ARGS[*]} -t 1, rust secs $RUST_SECS"
} > "$OUT/machine.txt"

log "Rust peer (before the JVM): kafka_peer <segment> $RUST_SECS"
"$RUST" "$SEG" "$RUST_SECS" > "$OUT/rust_before.jsonl"
cat "$OUT/rust_before.jsonl"

log "checksum: Kafka's FileRecords vs kafkalog"
JAVA_SUM="$("$JAVA" -cp "$CP" kafkalog.bench.KafkaPeer checksum "$SEG" 2>"$OUT/checksum.stderr" | grep '^CHECKSUM' | awk '{print $2, $3}')" \
  || die "Java checksum failed: $(cat "$OUT/checksum.stderr")"
RUST_SUM="$(grep '"op": *"checksum"' "$OUT/rust_before.jsonl" | sed -E 's/.*"records": *([0-9]+).*"crc32": *([0-9]+).*/\1 \2/')"
echo "java $JAVA_SUM" > "$OUT/checksum.txt"
echo "rust $RUST_SUM" >> "$OUT/checksum.txt"
if [[ -z "$JAVA_SUM" || "$JAVA_SUM" != "$RUST_SUM" ]]; then
  die "Kafka's FileRecords read '$JAVA_SUM' (records crc32), kafkalog '$RUST_SUM'"
fi
log "checksums equal: $JAVA_SUM (records crc32)"

log "JMH: ${JMH_ARGS[*]} -t 1 (log in $OUT/jmh.log)"
rc=0
"$JAVA" -Xmx1g -cp "$CP" org.openjdk.jmh.Main kafkalog.bench.KafkaPeer -p "log=$SEG" \
  "${JMH_ARGS[@]}" -t 1 -rf json -rff "$OUT/jmh.json" > "$OUT/jmh.log" 2>&1 || rc=$?
# JMH exits 0 even when a benchmark throws: count the results.
n=$(grep -c '"benchmark"' "$OUT/jmh.json" 2>/dev/null || true)
if [[ $rc -ne 0 || "$n" != "6" ]]; then
  tail -40 "$OUT/jmh.log" >&2
  die "JMH rc=$rc, $n of 6 benchmarks in jmh.json"
fi
sed -n '/^Benchmark /,$p' "$OUT/jmh.log" | tail -8

log "Rust peer (after the JVM)"
"$RUST" "$SEG" "$RUST_SECS" > "$OUT/rust_after.jsonl"
cat "$OUT/rust_after.jsonl"

log "done in $(( $(date +%s) - T0 )) s; results in $OUT"
