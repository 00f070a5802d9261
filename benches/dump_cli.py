"""`kafkalog dump --deep-iteration --print-data-log` against Kafka's DumpLogSegments
(kafka-dump-log.sh), whole processes side by side in one run, on the same files:

* small: one segment a real Kafka 4.4 broker wrote (the embedded example), where start-up is
  what a person waits for;
* large: `--mb` megabytes of segments in Kafka's format (written by kafkalog, byte-identical to a
  broker's: see tests/test_kafka_compat.py), 1 GiB segments as a broker rolls them.

Both print to /dev/null; before timing, the two outputs are checked to be identical (sha256 of
stdout). Prints seconds per run (median of --repeat) and kafkalog's speed-up.

    .venv/bin/python benches/dump_cli.py [--mb 1024] [--repeat 3] [--kafka 4.4.0]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kafkalog

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import kafka_harness as kh  # noqa: E402  (the Kafka jars and the DumpLogSegments class)

OPTIONS = ["--deep-iteration", "--print-data-log"]


def build_segments(directory: Path, megabytes: int) -> list[Path]:
    path = directory / "bench-0"
    target = megabytes << 20
    with kafkalog.Log(path, read_only=False, create=True, config={"segment.bytes": 1 << 30}) as log:
        n = 0
        codecs = ["none", "none", "none", "lz4"]  # mostly uncompressed, as many topics are
        while log.size_in_bytes < target:
            batch = [{"key": b"customer-%06d" % (i % 5000),
                      "value": b'{"order": %d, "item": "coffee", "qty": %d, "note": "%s"}'
                               % (i, i % 7, b"x" * (20 + i % 60)),
                      "timestamp": 1_700_000_000_000 + i}
                     for i in range(n, n + 200)]
            log.append(batch, compression=codecs[(n // 200) % len(codecs)])
            n += 200
    return sorted(path.glob("*.log"))


def java_command(version: str, files: list[Path], tmp: Path) -> list[str]:
    log_flags = kh._log4j_config(kh.kafka_tools_version(version), tmp / "log4j-bench.properties", None, "WARN")
    # The JVM flags of Kafka's own kafka-run-class.sh (G1, server compiler), heap as the script's.
    return [kh._java(), "-Xmx512m", "-XX:+UseG1GC", "-Dfile.encoding=UTF-8", "-Dsun.stdout.encoding=UTF-8",
            *log_flags, "-cp", kh.kafka_classpath(version, tools=True), kh.dump_log_segments_class(version),
            "--files", ",".join(map(str, files)), *OPTIONS]


def kafkalog_command(files: list[Path]) -> list[str]:
    return [sys.executable, "-m", "kafkalog", "dump", "--files", ",".join(map(str, files)), *OPTIONS]


def stdout_digest(cmd: list[str]) -> tuple[str, int]:
    h, n = hashlib.sha256(), 0
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as p:
        for chunk in iter(lambda: p.stdout.read(1 << 20), b""):
            h.update(chunk)
            n += len(chunk)
    if p.returncode != 0:
        raise SystemExit(f"{cmd[0]} exited {p.returncode}")
    return h.hexdigest(), n


def timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def compare(name: str, files: list[Path], version: str, repeat: int, tmp: Path) -> None:
    java, ours = java_command(version, files, tmp), kafkalog_command(files)
    jd, ours_d = stdout_digest(java), stdout_digest(ours)
    if jd != ours_d:
        raise SystemExit(f"{name}: outputs differ (DumpLogSegments {jd[1]} bytes, kafkalog {ours_d[1]} bytes)")
    size = sum(f.stat().st_size for f in files)
    print(f"{name}: {len(files)} file(s), {size / 2**20:.1f} MiB of segments, {jd[1] / 2**20:.1f} MiB printed; "
          "same output checked (sha256)")
    tj, tk = [], []
    for _ in range(repeat):  # interleaved, so load on the machine hits both alike
        tj.append(timed(java))
        tk.append(timed(ours))
    mj, mk = statistics.median(tj), statistics.median(tk)
    print(f"  DumpLogSegments {kh.kafka_tools_version(version)}: {mj:.3f} s   kafkalog dump: {mk:.3f} s   "
          f"speed-up {mj / mk:.1f}x (median of {repeat})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=1024, help="size of the large case in MiB (default 1024)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kafka", default=kh.KAFKA_VERSIONS[0], help="Kafka release whose tool runs")
    args = ap.parse_args()
    demo = Path(kafkalog.__file__).with_name("examples") / "demo-0"
    with tempfile.TemporaryDirectory(prefix="kafkalog-dump-bench-") as tmp:
        tmp = Path(tmp)
        compare("small (one broker-written segment)", [demo / f"{232:020d}.log"], args.kafka, args.repeat, tmp)
        compare("large", build_segments(tmp, args.mb), args.kafka, args.repeat, tmp)


if __name__ == "__main__":
    main()
