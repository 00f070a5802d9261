"""The embedded example ``python/kafkalog/examples/demo-0`` (a partition folder a real Kafka
4.4.0 broker wrote, see tests/make_demo_example.py and its README.md): kafkalog opens it
read-only, without a broker, and reads what the broker's consumers read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import kafkalog
from compat_util import snapshot_files

EXAMPLES = Path(kafkalog.__file__).with_name("examples")
DEMO = EXAMPLES / "demo-0"
N_RECORDS = 300        # what the broker's read_uncommitted consumer got
N_COMMITTED = 292      # ... and its read_committed consumer (8 aborted)
LEO = 302              # 300 records + COMMIT + ABORT markers

LSO_BUG = ("BUG: a folder opened without the broker's clean-shutdown marker / checkpoints next to it "
           "(any copied partition folder) is fully recovered: the producer state is rebuilt by replaying "
           "the log, transactions completed during the replay stay 'unreplicated' although the high "
           "watermark is past their markers, so last_stable_offset is stuck at the first transaction "
           "(220 here) and read_committed stops there")


@pytest.fixture(scope="module")
def log():
    before = snapshot_files([DEMO])
    lg = kafkalog.Log(DEMO, read_only=True)
    yield lg
    lg.close()
    assert snapshot_files([DEMO]) == before, "a read-only open changed the embedded example"


def test_demo_files():
    names = sorted(p.name for p in DEMO.iterdir())
    suffixes = {Path(n).suffix for n in names}
    assert {".log", ".index", ".timeindex", ".txnindex", ".snapshot"} <= suffixes
    assert "leader-epoch-checkpoint" in names and "partition.metadata" in names
    assert 3 <= len(list(DEMO.glob("*.log"))) <= 5
    assert sum(p.stat().st_size for p in DEMO.iterdir()) < 300 * 1024


def test_demo_offsets(log):
    assert log.log_start_offset == 0
    assert log.log_end_offset == LEO
    assert log.high_watermark == LEO
    assert 3 <= len(log.segments) <= 5
    assert log.recovered_bytes_truncated == 0


def test_demo_records_read_uncommitted(log):
    recs = list(log.records(isolation="read_uncommitted"))
    assert len(recs) == N_RECORDS
    orders = [json.loads(r.value)["order"] for r in recs]
    assert orders == list(range(1, N_RECORDS + 1))
    assert all(r.key.decode().startswith("customer-") for r in recs)
    assert all(r.timestamp == 1_735_689_600_000 + o * 1000 for r, o in zip(recs, orders))
    assert any(dict(r.headers).get("store") for r in recs)
    txn = [dict(r.headers).get("txn") for r in recs]
    assert txn.count(b"committed") == 12 and txn.count(b"aborted") == 8
    batches = log.batches()
    assert {b.compression for b in batches if not b.is_control} == {"none", "gzip", "zstd"}
    assert sorted(b.control_type for b in batches if b.is_control) == ["ABORT", "COMMIT"]
    assert any(b.producer_id >= 0 and not b.is_transactional and not b.is_control for b in batches)


def test_demo_read_committed_drops_aborted(log):
    unc = list(log.records(isolation="read_uncommitted"))
    com = list(log.records(isolation="read_committed"))
    aborted = {r.offset for r in unc if dict(r.headers).get("txn") == b"aborted"}
    assert len(aborted) == 8
    assert all(r.offset not in aborted for r in com)
    assert all("rolled back" not in r.value.decode() for r in com)
    assert [(r.offset, r.value) for r in com] == [(r.offset, r.value) for r in unc if r.offset in {c.offset for c in com}]


def test_demo_read_committed_is_everything_but_aborted(log):
    unc = list(log.records(isolation="read_uncommitted"))
    com = list(log.records(isolation="read_committed"))
    assert log.last_stable_offset == LEO
    assert [r.offset for r in com] == [r.offset for r in unc if dict(r.headers).get("txn") != b"aborted"]
    assert len(com) == N_COMMITTED


def test_cli_demo_runs():
    proc = subprocess.run([sys.executable, "-m", "kafkalog", "demo"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"{N_RECORDS} records read_uncommitted" in proc.stdout, proc.stdout
    assert '"item": ' in proc.stdout


def test_cli_records_json():
    proc = subprocess.run([sys.executable, "-m", "kafkalog", "records", str(DEMO), "--end", "5"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [x["offset"] for x in lines] == [0, 1, 2, 3, 4]
    assert json.loads(lines[0]["value"])["order"] == 1
