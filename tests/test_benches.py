"""The Python benchmark scripts run (tiny sizes) so they cannot rot; each checks that every
reader produced the same records before it prints a figure."""

import subprocess
import sys
from pathlib import Path

BENCHES = Path(__file__).resolve().parent.parent / "benches"


def test_python_decoders_bench_runs_and_agrees():
    out = subprocess.run(
        [sys.executable, str(BENCHES / "python_decoders.py"), "--records", "3000", "--repeat", "1"],
        check=True, capture_output=True, text=True, timeout=300,
    ).stdout
    assert "same records checked" in out
    assert "kafkalog Log.to_arrow" in out and "aiokafka" in out


def test_dump_bench_runs_and_agrees():
    out = subprocess.run(
        [sys.executable, str(BENCHES / "dump_cli.py"), "--mb", "2", "--repeat", "1"],
        check=True, capture_output=True, text=True, timeout=300,
    ).stdout
    assert out.count("same output checked") == 2, out
    assert "DumpLogSegments" in out and "speed-up" in out


def test_run_all_tiny_runs_every_row_and_writes_nothing(tmp_path):
    """benches/run_all.py at tiny sizes: every section runs (Kafka's Java code under JMH, the Rust
    peer, the Python peers to Arrow and as objects, Spark's Kafka source against the kafkalog
    source, index lookups, streaming RSS, partitions read on every core) and checks its pairs
    read the same records; RESULTS.md is left alone."""
    results = BENCHES / "RESULTS.md"
    before = results.read_bytes() if results.exists() else None
    out = subprocess.run(
        [sys.executable, str(BENCHES / "run_all.py"), "--tiny", "--out", str(tmp_path / "never.md")],
        check=True, capture_output=True, text=True, timeout=1800,
    ).stdout
    assert not (tmp_path / "never.md").exists()
    assert (results.read_bytes() if results.exists() else None) == before
    for heading in ("Log.to_arrow vs aiokafka vs kafka-python", "Log.records() vs aiokafka vs kafka-python",
                    "Kafka's own Java code (JMH)",
                    "Against the machine's limits", "Spark's Kafka source vs the kafkalog source",
                    "Index lookups", "Memory while streaming", "Scaling over cores"):
        assert heading in out, out
    # Every codec and record size has its row, and Spark ran on one core.
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        for size in ("10 B", "100 B", "1024 B", "102400 B"):
            assert f"| {codec} | {size} |" in out, (codec, size)
    assert "| 1 | " in out
    # The scaling rows: one core, then every core of the machine.
    assert out.count("(1.0x) | ") >= 3, out


def test_spark_overhead_bench_runs_and_agrees():
    """benches/spark_overhead.py at a tiny size: both sources give the same rows (it exits
    otherwise) and it prints its ratio."""
    out = subprocess.run(
        [sys.executable, str(BENCHES / "spark_overhead.py"), "--records-per-partition", "2000", "--repeat", "1"],
        check=True, capture_output=True, text=True, timeout=600,
    ).stdout
    assert "RATIO spark_overhead local[1]" in out, out
