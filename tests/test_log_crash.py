"""Crash durability of kafkalog.Log: a child process appends in a loop and prints every
acknowledged last offset; the parent SIGKILLs it at random moments, reopens the log writable
(recovery) and checks that every acknowledged batch is there, whole and consistent, before the next
child continues. A SIGKILL keeps the page cache, so nothing acknowledged may be lost, whether or
not every append is fsynced (flush.messages=1) or flushing is left to the OS."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import textwrap
import sys
import time
from pathlib import Path

import pytest

import kafkalog
from kafkalog import Log

CHILD = r"""
import sys, json, kafkalog
path, cfg = sys.argv[1], json.loads(sys.argv[2])
log = kafkalog.Log(path, read_only=False, create=True, config=cfg)
n = log.log_end_offset
out = sys.stdout
out.write("open %d\n" % n); out.flush()
i = 0
while True:
    k = 1 + n % 5
    recs = [{"value": b"r%d" % o, "key": b"%d" % n} for o in range(n, n + k)]
    if i % 9 == 0:
        recs[0]["headers"] = [("pad", b"p" * (3000 + (n * 7919) % 9000))]  # some batches span pages
    first, last = log.append(recs, compression=("none", "gzip")[i % 2])
    assert first == n, (first, n)
    n = last + 1
    out.write("%d\n" % last); out.flush()
    i += 1
"""


def batch_size(base):
    return 1 + base % 5


def verify(d: Path, cfg, acked_last: int, verified_to: int):
    """Reopen writable (recovery), check everything from `verified_to` on; returns (leo, truncated)."""
    log = Log(d, read_only=False, config=cfg)
    truncated = log.recovered_bytes_truncated
    leo = log.log_end_offset
    assert leo >= acked_last + 1, f"acknowledged offset {acked_last} lost (log end {leo})"
    expect = verified_to
    for b in log.batches(verified_to, None, "log_end"):
        assert b.base_offset == expect, (b.base_offset, expect)
        assert b.last_offset == b.base_offset + batch_size(b.base_offset) - 1, "partial batch"
        assert [r.value for r in b.records] == [b"r%d" % o for o in range(b.base_offset, b.last_offset + 1)]
        expect = b.last_offset + 1
    assert expect == leo
    log.close()
    # indexes consistent: sanity checks, and every batch found through them
    for base in log.segments:
        seg = kafkalog.Segment(d, base)
        seg.sanity_check()
        if base >= verified_to or base == log.segments[-1]:
            for b in seg.batches():
                t = seg.translate_offset(b.base_offset)
                assert t is not None and t[0] == b.last_offset and t[1] == b.position
    ro = Log(d)
    assert ro.log_end_offset == leo and ro.recovered_bytes_truncated == 0
    for o in random.Random(leo).sample(range(leo), min(leo, 50)):
        bs = ro.read(o, max_bytes=1, isolation="log_end")["batches"]
        assert bs[0].base_offset <= o <= bs[0].last_offset
    return leo, truncated


def crash_loop(tmp_path, cfg, kills, budget_s, tear=False):
    d = tmp_path / "topic-0"
    rnd = random.Random(int(time.time()))
    figures = {"kills": 0, "acked_batches": 0, "lost_acked_batches": 0, "torn_bytes_truncated": 0,
               "log_end_offset": 0, "config": cfg}
    verified_to = 0
    deadline = time.time() + budget_s
    while figures["kills"] < kills and time.time() < deadline:
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(d), json.dumps(cfg)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = child.stdout.readline()
        assert line.startswith(b"open "), (line, child.stderr.read())
        time.sleep(rnd.uniform(0.05, 0.5))
        child.send_signal(signal.SIGKILL)
        out, err = child.communicate()
        assert child.returncode == -signal.SIGKILL, err.decode()
        lines = out.split(b"\n")
        acked = [int(x) for x in lines[:-1] if x]  # the last piece may be a partly written line
        figures["kills"] += 1
        figures["acked_batches"] += len(acked)
        acked_last = acked[-1] if acked else verified_to - 1
        if tear:
            # what a kill during write() of a multi-page batch leaves: the head of an unacknowledged batch
            active = sorted(d.glob("*.log"))[-1]
            data = active.read_bytes()
            with open(active, "ab") as f:
                f.write(data[: rnd.randint(1, min(len(data), 200))] if data else b"\0" * 20)
        try:
            leo, truncated = verify(d, cfg, acked_last, verified_to)
        except AssertionError:
            figures["lost_acked_batches"] += 1
            raise
        figures["torn_bytes_truncated"] += truncated
        verified_to = leo
        figures["log_end_offset"] = leo
    # a final full pass over the whole log
    ro = Log(d)
    expect = 0
    for b in ro.batches(None, None, "log_end"):
        for r in b.records:
            assert r.offset == expect and r.value == b"r%d" % expect
            expect += 1
    assert expect == figures["log_end_offset"]
    print("\ncrash figures:", json.dumps(figures))
    return figures


# Size-based rolling is left at Kafka's default (1 GiB): with small segments a child killed just
# after a roll leaves an empty active segment, and the next writable open then fails every append
# that needs an index entry ("attempt to append to a full index"), see
# test_log.py::test_append_after_reopen_with_empty_active_segment (a known bug). Segments still
# roll here, once per reopen (the spurious roll bug, test_log.py::test_no_spurious_roll_after_reopen).
@pytest.mark.parametrize("cfg", [
    {"flush.messages": 1, "index.interval.bytes": 512},
    {"index.interval.bytes": 512},
], ids=["flush_every_append", "os_flushing"])
def test_sigkill_loses_nothing_acknowledged(tmp_path, cfg):
    figures = crash_loop(tmp_path, cfg, kills=15, budget_s=25)
    assert figures["kills"] >= 5
    assert figures["acked_batches"] > 50
    assert figures["lost_acked_batches"] == 0


def test_sigkill_with_torn_write_recovers(tmp_path):
    figures = crash_loop(tmp_path, {"index.interval.bytes": 512}, kills=3, budget_s=10, tear=True)
    assert figures["torn_bytes_truncated"] > 0


TRUNCATE_THEN_DIE = textwrap.dedent(
    """
    import os, signal, sys, kafkalog
    log = kafkalog.Log(sys.argv[1], read_only=False, create=True)
    for i in range(10):
        log.append([{"value": b"x" * 100}] * 10)
    log.close()                      # the checkpoints say 100
    log = kafkalog.Log(sys.argv[1], read_only=False)
    log.truncate_to(50)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_a_crash_after_truncate_to_loses_nothing_flushed(tmp_path):
    """Kafka's LogManager checkpoints recovery points once it truncated: killed after
    `truncate_to(50)` returned, the checkpoints said 100 and the index kept entries past 50, so
    the next open reported offsets 50-99 as flushed and lost, and `verify` exited 1 (a black-box
    tester). The truncation was done: nothing is reported."""
    folder = tmp_path / "t-0"
    proc = subprocess.run([sys.executable, "-c", TRUNCATE_THEN_DIE, str(folder)], timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text().split()[-1] == "50"
    log = kafkalog.Log(folder)
    assert (log.log_end_offset, log.tail_loss) == (50, None)
    log.close()
    verify = subprocess.run([sys.executable, "-m", "kafkalog", "verify", str(folder)], capture_output=True,
                            text=True, timeout=120)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    with kafkalog.Log(folder, read_only=False) as log:
        assert log.log_end_offset == 50 and log.recovered_bytes_truncated == 0
