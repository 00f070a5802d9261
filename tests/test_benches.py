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
