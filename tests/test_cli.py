"""The command line as a new user meets it: help, --version, one-line errors with documented exit
codes (never a traceback), `kafkalog dump` on the embedded example (text and --json), pipes.
Byte-for-byte agreement with Kafka's DumpLogSegments is tested beside the brokers
(test_kafka_compat.py, test_kafka_legacy_dump.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kafkalog

DEMO = Path(kafkalog.__file__).with_name("examples") / "demo-0"


def run(*args, **kw):
    return subprocess.run([sys.executable, "-m", "kafkalog", *map(str, args)], capture_output=True, text=True,
                          timeout=120, **kw)


def one_line_error(proc, code):
    assert proc.returncode == code, (proc.returncode, proc.stdout[-500:], proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc.stderr.strip()


def test_version_and_help_with_examples():
    v = run("--version")
    assert v.returncode == 0 and v.stdout.strip() == f"kafkalog {kafkalog.__version__}"
    top = run("--help")
    assert top.returncode == 0 and "kafkalog dump --files" in top.stdout and "exit codes" in top.stdout
    dump = run("dump", "--help")
    assert dump.returncode == 0
    for flag in ("--deep-iteration", "--print-data-log", "--index-sanity-check", "--verify-index-only",
                 "--max-bytes", "--max-message-size", "--skip-record-metadata", "--json", "examples:"):
        assert flag in dump.stdout, flag


def test_errors_are_one_line_with_an_exit_code(tmp_path):
    assert "no such file" in one_line_error(run("dump", tmp_path / "missing"), 1)
    assert "missing" in one_line_error(run("dump", "--files", tmp_path / "missing" / f"{0:020d}.log"), 1)
    regular = tmp_path / "file.txt"
    regular.write_text("hello")
    one_line_error(run("records", regular), 1)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "not a Kafka partition folder" in one_line_error(run("records", empty), 1)
    assert "neither a partition folder" in one_line_error(run("dump", empty), 1)
    # A negative --start counts back from the end (the range rule, tests/test_cli_tools.py).
    last = run("records", DEMO, "--start", "-5")
    assert last.returncode == 0 and json.loads(last.stdout.splitlines()[-1])["offset"] == 301
    assert "before --start" in one_line_error(run("records", DEMO, "--start", "20", "--end", "10"), 2)
    assert "not supported yet" in one_line_error(run("dump", DEMO, "--remote-log-metadata-decoder"), 2)
    assert "nothing to dump" in one_line_error(run("dump"), 2)
    assert "runs no Java classes" in one_line_error(
        run("dump", DEMO, "--value-decoder-class", "com.example.MyDecoder"), 1)


def test_a_corrupt_batch_stops_the_dump_with_one_line(tmp_path):
    d = tmp_path / "demo-0"
    shutil.copytree(DEMO, d)
    log = d / f"{0:020d}.log"
    data = bytearray(log.read_bytes())
    first = kafkalog.decode_batches(bytes(data))[0]
    at = first.size_in_bytes  # the second batch's size field: below Kafka's minimum
    data[at + 8:at + 12] = (3).to_bytes(4, "big")
    log.write_bytes(bytes(data))
    proc = run("dump", "--files", log)
    msg = one_line_error(proc, 1)
    assert "Found record size 3 smaller than minimum record overhead (14)" in msg and str(at) in msg
    assert proc.stdout.count("baseOffset:") == 1  # what came before the damage is printed


def test_an_index_entry_at_the_end_of_an_empty_log_is_named_so(tmp_path):
    """A broker killed just after rolling leaves an empty .log beside a preallocated, zero-filled
    .index: dumping the index fails at its first entry (Kafka's tool throws
    NoSuchElementException there), and the one line says the entry points at the log's end."""
    d = tmp_path / "t-0"
    d.mkdir()
    (d / f"{0:020d}.log").write_bytes(b"")
    (d / f"{0:020d}.index").write_bytes(bytes(8 * 1024))
    proc = run("dump", "--files", d / f"{0:020d}.index")
    msg = one_line_error(proc, 1)
    assert "points at position 0, the end of" in msg and "(0 bytes)" in msg, msg
    assert f"Dumping {d / f'{0:020d}.index'}" in proc.stdout


def test_dump_of_a_folder_as_json_matches_the_log():
    proc = run("dump", DEMO, "--print-data-log", "--json")
    assert proc.returncode == 0, proc.stderr
    objs = [json.loads(line) for line in proc.stdout.splitlines()]
    log = kafkalog.Log(DEMO)
    batches = log.batches()
    got_batches = [o for o in objs if o["type"] == "batch"]
    assert [(b["baseOffset"], b["lastOffset"], b["crc"], b["isvalid"]) for b in got_batches] == \
        [(b.base_offset, b.last_offset, b.crc, True) for b in batches]
    records = [o for o in objs if o["type"] == "record"]
    data = [o for o in records if "control" not in o]
    expected = [r for b in batches if not b.is_control for r in b.records]
    assert [(o["offset"], o["timestamp"], o["key"], o["payload"]) for o in data] == \
        [(r.offset, r.timestamp, r.key.decode() if r.key is not None else None,
          r.value.decode() if r.value is not None else None) for r in expected]
    markers = [o["control"]["type"] for o in records if "control" in o]
    assert markers == ["COMMIT", "ABORT"]
    assert {o["type"] for o in objs} >= {"file", "batch", "record", "index", "timeindex", "abortedTxn", "producer"}


def test_dump_into_a_closed_pipe_ends_quietly():
    proc = subprocess.run(f"{sys.executable} -m kafkalog dump {DEMO} --print-data-log | head -2",
                          shell=True, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 2
    assert "Traceback" not in proc.stderr and "Broken pipe" not in proc.stderr, proc.stderr


def test_dump_json_writes_only_json_lines(tmp_path):
    """`dump --json` writes one JSON object a line, for an empty index and a sanity check too
    (which the text form writes as Kafka's sentences)."""
    from kafkalog import Producer, Topic

    with Producer(Topic.create(tmp_path, "t", partitions=1)) as p:
        p.send(b"x")
    for extra in ([], ["--index-sanity-check"]):
        proc = run("dump", tmp_path / "t-0", "--json", *extra)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert lines and all(isinstance(json.loads(line), dict) for line in lines), proc.stdout
    kinds = {json.loads(line)["type"] for line in run("dump", tmp_path / "t-0", "--json").stdout.splitlines()}
    assert "empty" in kinds, kinds
