"""kafkalog verify / stats / cat / export and the command line as a person meets it: on logs
kafkalog writes, on the broker-written example (python/kafkalog/examples/demo-0, a Kafka 4.4.0
broker's folder) and on damaged copies. Folders read are compared byte for byte and by mtime
before and after: nothing is ever written to them."""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import kafkalog
from kafkalog import cli, cli_tools

DEMO = Path(kafkalog.__file__).with_name("examples") / "demo-0"


def run(*args, **kw):
    return subprocess.run([sys.executable, "-m", "kafkalog", *map(str, args)], capture_output=True,
                          text=True, timeout=120, **kw)


def one_line_error(proc, code):
    assert proc.returncode == code, (proc.returncode, proc.stdout[-500:], proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc.stderr.strip()


def fingerprint(root: Path) -> dict:
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()}


def append_orders(data: Path, partition: int, first: int, count: int) -> None:
    log = kafkalog.Log(data / f"orders-{partition}", read_only=False)
    try:
        for i in range(first, first + count, 5):
            log.append([{"key": f"k{j % 3}".encode(), "value": json.dumps({"n": j}).encode(),
                         "timestamp": 1_700_000_000_000 + j * 1000,
                         "headers": [("p", str(partition).encode())]}
                        for j in range(i, min(i + 5, first + count))],
                       compression="zstd" if i % 2 else "none")
    finally:
        log.close()


@pytest.fixture()
def data(tmp_path):
    """A data dir: topic orders (2 partitions, kafkalog-written) and demo-0 (broker-written)."""
    d = tmp_path / "data"
    d.mkdir()
    kafkalog.create_topic(d, "orders", 2)
    append_orders(d, 0, 0, 40)
    append_orders(d, 1, 0, 25)
    shutil.copytree(DEMO, d / "demo-0")
    return d


def lines(text: str) -> list[dict]:
    return [json.loads(x) for x in text.splitlines()]


# ----- verify -----

def test_verify_a_sound_data_dir_reads_only(data):
    before = fingerprint(data)
    p = run("verify", data)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout == ""
    assert "sound; 3 partition(s)" in p.stderr
    assert fingerprint(data) == before
    # A partition folder or a topic alone.
    assert run("verify", data / "demo-0").returncode == 0
    assert "2 partition(s)" in run("verify", data, "--topic", "orders").stderr


def test_verify_notes_a_crashs_torn_tail_and_reports_one_beside_a_clean_shutdown(tmp_path):
    """Half a batch at the end of the last segment, past the recovery point: what a crash
    leaves, which Kafka's recovery cuts on the broker's next start and `Log()` reads around.
    verify notes it and exits 0 (it exited 1); beside a clean-shutdown marker the same bytes
    are damage, exit 1."""
    folder = tmp_path / "data" / "t-0"
    with kafkalog.Log(folder, read_only=False, create=True) as log:
        for i in range(5):
            log.append([{"value": b"v%d" % i}])
    seg = folder / f"{0:020d}.log"
    whole = seg.read_bytes()
    with open(seg, "ab") as f:
        f.write(whole[:40])
    p = run("verify", folder)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith(f"{seg} at byte {len(whole)}: note: a torn tail, what a crash leaves"), p.stdout
    assert "sound;" in p.stderr and "1 note(s)" in p.stderr
    assert kafkalog.Log(folder).log_end_offset == 5
    (tmp_path / "data" / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":1}')
    p = run("verify", folder)
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"{seg} at byte {len(whole)}: " in p.stdout and ": note:" not in p.stdout


def test_verify_notes_a_missing_index_without_failing(data):
    """A deleted .index or .timeindex is not damage (a broker rebuilds it on load), but verify
    says it checked nothing there rather than calling the partition sound in silence."""
    demo = data / "demo-0"
    (demo / f"{60:020d}.index").unlink()
    (demo / f"{144:020d}.timeindex").unlink()
    p = run("verify", data)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines() == [
        f"{demo / f'{60:020d}.index'}: note: missing, so not checked: a broker rebuilds it from the "
        "segment when it loads the log",
        f"{demo / f'{144:020d}.timeindex'}: note: missing, so not checked: a broker rebuilds it from "
        "the segment when it loads the log"]
    assert "sound; 3 partition(s)" in p.stderr and ", 2 note(s)" in p.stderr


def test_verify_reports_each_problem_with_file_and_byte(data):
    demo = data / "demo-0"
    seg = demo / f"{60:020d}.log"
    raw = bytearray(seg.read_bytes())
    first_len = int.from_bytes(raw[8:12], "big") + 12
    raw[first_len + 70] ^= 0xFF  # inside the second batch's records: its CRC fails
    seg.write_bytes(bytes(raw))
    (data / "recovery-point-offset-checkpoint").write_text("0\n1\norders 1 999\n")
    index = demo / f"{144:020d}.index"
    entries = bytearray(index.read_bytes())
    assert len(entries) >= 8
    entries[4:8] = (int.from_bytes(entries[4:8], "big") + 3).to_bytes(4, "big")
    index.write_bytes(bytes(entries))
    before = fingerprint(data)
    p = run("verify", data)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    out = p.stdout.splitlines()
    assert f"{seg} at byte {first_len}: " in p.stdout and "crc" in p.stdout.lower(), out
    assert f"{data / 'recovery-point-offset-checkpoint'} at byte 4: orders-1 is at offset 999" in p.stdout
    assert any(x.startswith(f"{index} at byte 0: ") for x in out), out
    assert len(out) == 3, out
    assert "3 problem(s) in 2 partition(s)" in p.stderr
    assert fingerprint(data) == before


def test_verify_txn_index_and_unreadable_files(data):
    demo = data / "demo-0"
    txn = demo / f"{232:020d}.txnindex"
    txn.write_bytes(b"")  # the aborted transaction's entry is gone
    p = run("verify", demo)
    assert p.returncode == 1 and "ABORT marker of producer" in p.stdout, p.stdout + p.stderr
    # A folder where an index file is expected: a problem, not a crash.
    shutil.copytree(DEMO, data / "demo2-0")
    idx = data / "demo2-0" / f"{60:020d}.timeindex"
    idx.unlink()
    idx.mkdir()
    p = run("verify", data / "demo2-0")
    assert p.returncode == 1 and f"{idx}: not a regular file" in p.stdout, p.stdout + p.stderr
    assert f"{idx}: a folder where a segment file is expected" in one_line_error(run("stats", data / "demo2-0"), 1)
    # A FIFO under a segment's name would block a reader: refused in one line.
    fifo_dir = data / "fifo-0"
    shutil.copytree(DEMO, fifo_dir)
    (fifo_dir / f"{144:020d}.log").unlink()
    os.mkfifo(fifo_dir / f"{144:020d}.log")
    for cmd in ("stats", "cat", "export"):
        extra = ["--to", data.parent / "out"] if cmd == "export" else []
        assert "not a regular file" in one_line_error(run(cmd, fifo_dir, *extra), 1), cmd
    p = run("verify", fifo_dir)
    assert p.returncode == 1 and "not a regular file" in p.stdout, p.stdout + p.stderr


# ----- stats -----

def test_stats_json_matches_the_log(data):
    p = run("stats", data, "--json")
    assert p.returncode == 0, p.stderr
    rows = {(r["topic"], r["partition"]): r for r in json.loads(p.stdout)["partitions"]}
    assert set(rows) == {("demo", 0), ("orders", 0), ("orders", 1)}
    for (topic, part), r in rows.items():
        log = kafkalog.Log(data / f"{topic}-{part}")
        assert (r["log_start_offset"], r["log_end_offset"], r["high_watermark"], r["last_stable_offset"]) == (
            log.log_start_offset, log.log_end_offset, log.high_watermark, log.last_stable_offset)
        assert r["checkpointed_high_watermark"] == log.checkpointed_high_watermark
        assert r["segments"] == len(log.segments) and r["bytes"] == log.size_in_bytes
        assert r["records"] == sum(1 for _ in log.records(isolation="log_end"))
        batches = log.batches()
        assert r["batches"] == len(batches)
        assert r["producers"] == len({b.producer_id for b in batches if b.producer_id >= 0})
    demo = rows[("demo", 0)]
    assert demo["records"] == 300 and demo["control_batches"] == 2
    assert (demo["committed_transactions"], demo["aborted_transactions"]) == (1, 1)
    assert set(demo["codecs"]) == {"gzip", "none", "zstd"}
    assert rows[("orders", 0)]["first_timestamp"] == 1_700_000_000_000
    assert rows[("orders", 0)]["last_timestamp"] == 1_700_000_000_000 + 39_000
    assert rows[("orders", 1)]["records"] == 25
    table = run("stats", data)
    assert table.returncode == 0
    assert table.stdout.splitlines()[0].split()[:5] == ["partition", "start", "end", "HW", "LSO"]
    assert any(x.startswith("orders-1 ") and " 25 " in x for x in table.stdout.splitlines())
    assert "high watermark" in table.stderr  # the figures explained


def test_stats_counts_from_the_log_start_offset(tmp_path):
    """DeleteRecords moves the log start inside a segment, even inside a batch: stats sums what a
    consumer reads from there on, as the records themselves are read (bytes stay what is on disk)."""
    path = tmp_path / "t-0"
    with kafkalog.Log(path, read_only=False, create=True) as log:
        for b in range(4):  # batches of 10; the first record of each batch is the oldest but one
            log.append([{"value": b"v", "timestamp": 5_000 + 100 * b + (0 if i == 1 else 10 + i)}
                        for i in range(10)])
        log.delete_records(15)  # inside the second batch
    r = json.loads(run("stats", path, "--json").stdout)["partitions"][0]
    log = kafkalog.Log(path)
    assert r["log_start_offset"] == 15 == log.log_start_offset
    assert r["records"] == 25 == sum(1 for _ in log.records(isolation="log_end"))
    assert r["batches"] == 3
    assert r["first_timestamp"] == 5_115  # offset 15's; the batch's base timestamp is offset 10's
    assert r["last_timestamp"] == 5_319
    assert r["bytes"] == log.size_in_bytes


# ----- cat and the range rule -----

def test_cat_across_partitions_formats_and_decoders(data):
    p = run("cat", data, "--topic", "orders")
    assert p.returncode == 0, p.stderr
    got = lines(p.stdout)
    assert [(r["partition"], r["offset"]) for r in got] == \
        [(0, o) for o in range(40)] + [(1, o) for o in range(25)]
    assert got[0]["key"] == "k0" and json.loads(got[3]["value"]) == {"n": 3}
    assert got[0]["headers"] == [["p", "0"]] and got[0]["timestamp"] == 1_700_000_000_000
    j = json.loads(run("cat", data / "orders-1", "--format", "json", "--value-decoder", "json",
                       "--key-decoder", "hex").stdout)
    assert len(j) == 25 and j[7]["value"] == {"n": 7} and j[7]["key"] == b"k1".hex()
    c = list(csv.DictReader(io.StringIO(run("cat", data, "--topic", "orders", "--partition", "1",
                                            "--format", "csv", "--value-decoder", "base64").stdout)))
    assert len(c) == 25 and c[2]["offset"] == "2" and c[2]["topic"] == "orders"
    import base64
    assert json.loads(base64.b64decode(c[2]["value"])) == {"n": 2}
    assert json.loads(c[2]["headers"]) == [["p", "MQ=="]]  # header values as --value-decoder says
    # read_committed leaves the demo's aborted transaction out.
    uncommitted = lines(run("cat", data / "demo-0").stdout)
    committed = lines(run("cat", data / "demo-0", "--isolation", "read_committed").stdout)
    log = kafkalog.Log(data / "demo-0")
    assert len(uncommitted) == 300 == sum(1 for _ in log.records())
    assert len(committed) == sum(1 for _ in log.records(isolation="read_committed")) < 300
    bad = run("cat", data / "orders-0", "--key-decoder", "json")
    assert "offset 0: the key is not json" in one_line_error(bad, 1)
    # A folder named twice, or named and inside a data dir named, is read once.
    assert len(lines(run("cat", data / "orders-1", data / "orders-1").stdout)) == 25
    assert len(lines(run("cat", data, data / "orders-1", data / "demo-0").stdout)) == 365


def test_cat_csv_tells_null_from_empty(tmp_path):
    """A tombstone (null value) and an empty value, a null key and an empty one: PostgreSQL's CSV
    convention (null is nothing, empty is \"\"), read back by the csv module and by pyarrow."""
    with kafkalog.Log(tmp_path / "t-0", read_only=False, create=True) as log:
        log.append([{"key": None, "value": b""}, {"key": b"", "value": None},
                    {"key": b'a,"b"', "value": b"line\nbreak", "headers": [("h", None)]}])
    out = run("cat", tmp_path / "t-0", "--format", "csv")
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()
    assert rows[1].endswith(',,"",') and rows[2].endswith(',"",,'), rows
    parsed = list(csv.reader(io.StringIO(out.stdout)))
    assert [r[5:7] for r in parsed[1:]] == [["", ""], ["", ""], ['a,"b"', "line\nbreak"]]
    assert json.loads(parsed[3][7]) == [["h", None]]
    import pyarrow.csv as pacsv
    t = pacsv.read_csv(io.BytesIO(out.stdout.encode()),
                       convert_options=pacsv.ConvertOptions(column_types={"key": pa.string(), "value": pa.string()},
                                                            strings_can_be_null=True,
                                                            quoted_strings_can_be_null=False))
    assert t.column("key").to_pylist()[:2] == [None, ""]
    assert t.column("value").to_pylist()[:2] == ["", None]


def offsets(proc):
    assert proc.returncode == 0, proc.stderr
    return [(r.get("partition"), r["offset"]) for r in lines(proc.stdout)]


def test_one_range_rule_for_cat_and_records(data):
    o0 = data / "orders-0"
    assert offsets(run("cat", o0, "--from", "10", "--to", "13")) == [(0, 10), (0, 11), (0, 12)]
    # Negative: back from each partition's end.
    assert offsets(run("cat", data, "--topic", "orders", "--from", "-2")) == [(0, 38), (0, 39), (1, 23), (1, 24)]
    assert offsets(run("cat", o0, "--from", "-3", "--to", "-1")) == [(0, 37), (0, 38)]
    # Clamped: past the end is empty with a note, exit 0; before the start reads from the start.
    past = run("cat", data, "--topic", "orders", "--from", "30")
    assert offsets(past) == [(0, o) for o in range(30, 40)]
    far = run("cat", o0, "--from", "1000")
    assert far.returncode == 0 and far.stdout == "" and "orders-0 holds [0, 40)" in far.stderr
    assert "is at or before --from 20" in one_line_error(run("cat", o0, "--from", "20", "--to", "10"), 2)
    assert "is at or before --from -1" in one_line_error(run("cat", o0, "--from", "-1", "--to", "-5"), 2)
    # By time: the first offset whose timestamp is >= T.
    assert offsets(run("cat", o0, "--from-time", str(1_700_000_000_000 + 35_000))) == [(0, o) for o in range(35, 40)]
    assert offsets(run("cat", o0, "--from-time", "2023-11-14T22:13:20Z", "--to-time",
                       "2023-11-14T22:13:22Z")) == [(0, 0), (0, 1)]
    # kafkalog records: the same rule.
    rec = lambda *a: [r["offset"] for r in lines(run("records", o0, *a).stdout)]  # noqa: E731
    assert rec("--start", "-2") == [38, 39]
    assert rec("--start", "10", "--end", "12") == [10, 11]
    far = run("records", o0, "--start", "1000")
    assert far.returncode == 0 and far.stdout == "" and "holds [0, 40)" in far.stderr
    assert "is at or before --start 20" in one_line_error(run("records", o0, "--start", "20", "--end", "10"), 2)
    # By time too, as its help says.
    assert rec("--start-time", str(1_700_000_000_000 + 35_000)) == [35, 36, 37, 38, 39]
    assert rec("--start-time", "2023-11-14T22:13:20Z", "--end-time", "2023-11-14T22:13:22Z") == [0, 1]
    assert "not allowed with" in one_line_error(run("records", o0, "--start", "1", "--start-time", "5"), 2)
    # A negative time is one of ListOffsets' special timestamps (-1 to -4), else a wrong command line.
    assert rec("--start-time", "-1") == []
    assert rec("--start-time", "-2", "--end", "2") == [0, 1]
    for cmd, flag in (("records", "--start-time"), ("cat", "--from-time")):
        assert "ListOffsets" in one_line_error(run(cmd, o0, flag, "-5"), 2)


def test_damage_in_one_partition_is_reported_in_command_line_words(data, tmp_path):
    """stats sums every partition and names the damaged one (exit 1); cat, export and records
    stop on it with the flag that reads around it, and read around it when given that flag."""
    seg = data / "orders-1" / f"{0:020d}.log"
    raw = bytearray(seg.read_bytes())
    first_len = int.from_bytes(raw[8:12], "big") + 12
    raw[first_len + 70] ^= 0xFF  # the second batch's CRC fails; batches after it are whole
    seg.write_bytes(bytes(raw))
    before = fingerprint(data)
    p = run("stats", data, "--json")
    assert p.returncode == 1, p.stderr
    rows = {r["topic"] + "-" + str(r["partition"]): r for r in json.loads(p.stdout)["partitions"]}
    assert set(rows) == {"orders-0", "orders-1", "demo-0"}
    assert rows["orders-1"]["damage"] and not rows["orders-0"]["damage"]
    assert rows["orders-1"]["records"] == 20 and rows["orders-0"]["records"] == 40
    assert "orders-1 is damaged" in p.stderr and str(seg) in p.stderr
    for cmd in (["cat", data, "--topic", "orders"], ["export", data, "--to", tmp_path / "out"],
                ["records", data / "orders-1"]):
        err = one_line_error(run(*cmd), 1)
        assert "give --on-corruption skip to read every valid batch" in err, err
        assert "on_corruption=" not in err and "config" not in err, err
        p = run(*cmd, "--on-corruption", "skip")
        assert p.returncode == 0, p.stderr
        assert "damaged (skipped)" in p.stderr and str(seg) in p.stderr
    exported = read_export(tmp_path / "out").column("topic").to_pylist()
    assert exported.count("orders") == 40 + 20 and exported.count("demo") == 300
    skipped = lines(run("cat", data / "orders-1", "--on-corruption", "skip").stdout)
    assert [r["offset"] for r in skipped] == list(range(0, 5)) + list(range(10, 25))
    assert fingerprint(data) == before


def test_a_tail_lost_on_a_batch_boundary_is_noted_and_a_torn_tail_beside_the_marker_is_damage(data):
    """A last segment cut on a batch boundary reads as a shorter, healthy log (Kafka serves it
    silently); the recovery-point checkpoint says more was flushed, so every command notes it. A
    torn tail beside the clean-shutdown marker (a broker that stopped cleanly leaves none) is
    damage: stats names it and exits 1."""
    seg = data / "orders-0" / f"{0:020d}.log"
    raw = seg.read_bytes()
    starts, pos = [], 0
    while pos < len(raw):
        starts.append(pos)
        pos += int.from_bytes(raw[pos + 8:pos + 12], "big") + 12
    seg.write_bytes(raw[:starts[-1]])  # the last batch (offsets 35..39) gone, nothing torn
    before = fingerprint(data)
    log = kafkalog.Log(data / "orders-0")
    assert (log.log_end_offset, log.checkpointed_recovery_point) == (35, 40)
    assert "offsets up to 39 were flushed" in log.tail_loss and "5 offsets, 35 to 39, are missing" in log.tail_loss
    assert "cut or emptied since?" in log.tail_loss
    assert kafkalog.Log(data / "orders-1").tail_loss is None
    for cmd in (["stats", data], ["cat", data / "orders-0"], ["records", data / "orders-0"]):
        p = run(*cmd)
        assert p.returncode == 0, p.stderr
        assert "note:" in p.stderr and "orders-0" in p.stderr and "5 offsets, 35 to 39, are missing" in p.stderr
    assert json.loads(run("stats", data / "orders-1", "--json").stdout)["partitions"][0]["tail_loss"] is None
    assert fingerprint(data) == before
    # The last batch there in full but one byte of it flipped: not a cut file, and said so.
    flipped = bytearray(raw)
    flipped[-1] ^= 0xFF
    seg.write_bytes(bytes(flipped))
    lost = kafkalog.Log(data / "orders-0")
    assert lost.recovered_bytes_truncated == len(raw) - starts[-1]
    assert f"its last {len(raw) - starts[-1]} bytes are there but do not validate" in lost.tail_loss
    seg.write_bytes(raw[:starts[-1]])

    (data / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":1}')
    seg.write_bytes(raw[:starts[-1] + 20])  # now a torn batch after a clean shutdown
    p = run("stats", data, "--json")
    assert p.returncode == 1, p.stderr
    assert "orders-0 is damaged" in p.stderr and "clean-shutdown marker" in p.stderr
    # The recovery point the clean shutdown left says where the log ended: what is lost.
    assert "offsets 35..39 lost" in p.stderr, p.stderr
    err = one_line_error(run("records", data / "orders-0"), 1)
    assert "give --on-corruption truncate" in err or "--on-corruption truncate" in err, err
    p = run("records", data / "orders-0", "--on-corruption", "truncate")
    assert len(lines(p.stdout)) == 35 and "damaged (removed)" in p.stderr
    assert "offsets 35..39 lost" in p.stderr, p.stderr


def test_cat_and_export_leave_internal_topics_out_unless_named(data, tmp_path):
    shutil.copytree(data / "orders-0", data / "__consumer_offsets-0")
    p = run("cat", data)
    assert p.returncode == 0
    assert {r["topic"] for r in lines(p.stdout)} == {"orders", "demo"}
    assert "internal topics left out (__consumer_offsets)" in p.stderr
    named = run("cat", data, "--topic", "__consumer_offsets")
    assert {r["topic"] for r in lines(named.stdout)} == {"__consumer_offsets"}
    assert len(lines(run("cat", data / "__consumer_offsets-0").stdout)) == 40
    assert run("export", data, "--to", tmp_path / "out").returncode == 0
    assert not (tmp_path / "out" / "topic=__consumer_offsets").exists()
    assert "__consumer_offsets-0" in run("stats", data).stdout


# ----- export -----

def read_export(out: Path) -> pa.Table:
    t = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    return t.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])


def full_read(data: Path) -> list[tuple]:
    rows = []
    for topic, part, folder in kafkalog.partition_folders(data):
        t = kafkalog.Log(folder).to_arrow(include_headers=True).read_all()
        for r in t.to_pylist():
            rows.append((topic, part, r["offset"], r["key"], r["value"], r["timestamp"], r["timestampType"],
                         tuple((h["key"], h["value"]) for h in r["headers"] or ())))
    return sorted(rows, key=lambda r: (r[0], r[1], r[2]))


def as_rows(t: pa.Table) -> list[tuple]:
    return [(r["topic"], int(r["partition"]), r["offset"], r["key"], r["value"], r["timestamp"], r["timestampType"],
             tuple((h["key"], h["value"]) for h in r["headers"] or ())) for r in t.to_pylist()]


def test_export_twice_equals_one_full_read(data, tmp_path):
    out = tmp_path / "out"
    before = fingerprint(data)
    p = run("export", data, "--to", out)
    assert p.returncode == 0, p.stderr
    assert fingerprint(data) == before
    first = read_export(out)
    assert first.num_rows == 40 + 25 + 300
    assert (out / "topic=orders" / "partition=1" / f"part-{0:020d}-{25:020d}.parquet").is_file()
    state = json.loads((out / cli_tools.STATE_FILE).read_text())
    assert state["offsets"]["orders"] == {"0": 40, "1": 25} and state["offsets"]["demo"] == {"0": 302}
    # New records in one partition; the second export appends only them.
    append_orders(data, 1, 25, 10)
    p = run("export", data, "--to", out)
    assert p.returncode == 0 and "10 records in 1 new file(s)" in p.stderr, p.stderr
    assert (out / "topic=orders" / "partition=1" / f"part-{25:020d}-{35:020d}.parquet").is_file()
    assert as_rows(read_export(out)) == full_read(data)
    state_file = (out / cli_tools.STATE_FILE).stat()
    assert "0 records in 0 new file(s)" in run("export", data, "--to", out).stderr
    # Nothing new: the state file is left as it was (it was rewritten and fsynced once per
    # partition, which a black-box tester's 6,000 partitions turned into 45 s).
    again = (out / cli_tools.STATE_FILE).stat()
    assert (again.st_ino, again.st_mtime_ns) == (state_file.st_ino, state_file.st_mtime_ns)
    assert not [p for p in out.rglob("*") if p.name.startswith(".")]  # no temp files left
    assert "same" in one_line_error(run("export", data, "--to", out, "--isolation", "read_committed"), 2)


def test_export_reports_records_lost_between_exports(data, tmp_path):
    """As Spark's Kafka source with failOnDataLoss (its default): offsets deleted before an
    export reached them, or a log now ending below what was exported, fail the export before it
    writes anything; --on-data-loss warn says so and goes on."""
    out = tmp_path / "out"
    assert run("export", data, "--to", out).returncode == 0
    append_orders(data, 1, 25, 10)  # orders-1: 25..34, exported up to 25
    with kafkalog.Log(data / "orders-1", read_only=False) as log:
        log.delete_records(30)
    with kafkalog.Log(data / "orders-0", read_only=False) as log:  # exported up to 40
        log.truncate_to(35)
    append_orders(data, 0, 35, 2)
    before = sorted(p.name for p in out.rglob("*.parquet"))
    err = one_line_error(run("export", data, "--to", out), 1)
    assert "orders-1: offsets 25 to 29 were deleted" in err and "orders-0: exported up to offset 40, " \
        "but the log now ends at 37" in err and "--on-data-loss warn" in err, err
    assert sorted(p.name for p in out.rglob("*.parquet")) == before
    p = run("export", data, "--to", out, "--on-data-loss", "warn")
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("warning:") == 2 and "5 records in 1 new file(s)" in p.stderr, p.stderr
    assert (out / "topic=orders" / "partition=1" / f"part-{30:020d}-{35:020d}.parquet").is_file()
    # orders-1 goes on from 35; orders-0 still ends below what was exported.
    err = one_line_error(run("export", data, "--to", out), 1)
    assert "orders-0: exported up to offset 40" in err and "orders-1" not in err, err


def test_export_refuses_an_output_folder_inside_what_it_reads(data, tmp_path):
    """Parquet written into a log dir stops its broker from starting (Kafka 4.4: "Found directory
    .../out, 'out' is not in the form of topic-partition"), and into a partition folder it sits
    among the log's files: both refused before anything is written."""
    before = fingerprint(data)
    for to, where in ((data / "out", f"log dir {data}:"), (data, f"log dir {data}:"),
                      (data / "orders-0" / "out", f"partition folder {data / 'orders-0'},"),
                      (data / "orders-0", f"partition folder {data / 'orders-0'},")):
        err = one_line_error(run("export", data, "--to", to), 2)
        assert f"--to {to} is inside the {where}" in err, err
    assert fingerprint(data) == before
    # One partition folder named: its parent is a log dir, which its writers' checkpoints tell.
    err = one_line_error(run("export", data / "orders-1", "--to", data / "parquet"), 2)
    assert f"inside the log dir {data.resolve()}" in err, err
    checkpoints = {p: p.read_bytes() for p in data.glob("*-checkpoint")}
    assert checkpoints
    for p in checkpoints:
        p.unlink()
    assert run("export", data / "orders-1", "--to", data / "parquet").returncode == 0
    shutil.rmtree(data / "parquet")
    for p, b in checkpoints.items():
        p.write_bytes(b)
    # Or a broker's (meta.properties).
    (data / "meta.properties").write_text("version=1\nnode.id=1\n")
    before = fingerprint(data)
    err = one_line_error(run("export", data / "orders-1", "--to", data / "parquet"), 2)
    assert f"inside the log dir {data.resolve()}" in err, err
    assert fingerprint(data) == before
    (data / "meta.properties").unlink()
    # Beside the data dir, and beside a lone partition folder, is where an export goes.
    assert run("export", data / "orders-1", "--to", tmp_path / "beside").returncode == 0
    assert run("export", data, "--to", tmp_path / "out").returncode == 0
    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == ["demo-0", "orders-0", "orders-1"]


def test_ctrl_c_stops_cleanly(data, tmp_path, monkeypatch, capsys):
    import pyarrow.parquet as pq

    out = tmp_path / "out"
    real = pq.ParquetWriter.write_batch
    calls = []

    def interrupted(self, batch, *a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, batch, *a, **kw)

    monkeypatch.setattr(pq.ParquetWriter, "write_batch", interrupted)
    assert cli.main(["export", str(data), "--to", str(out)]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "kafkalog export: interrupted"
    # The partition written when interrupted left neither a part file nor a temp file.
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == ["_kafkalog_export.json", f"topic=demo/partition=0/part-{0:020d}-{302:020d}.parquet"]
    # verify: an interrupt reaches the Rust loop through its progress callback.
    monkeypatch.setattr(cli_tools._Progress, "update", lambda self, n: (_ for _ in ()).throw(KeyboardInterrupt))
    assert cli.main(["verify", str(data)]) == 130
    assert capsys.readouterr().err.strip() == "kafkalog verify: interrupted"


# ----- what a person meets first -----

def test_help_version_and_examples():
    parser = cli.build_parser()
    v = run("--version")
    assert v.returncode == 0 and v.stdout.strip() == f"kafkalog {kafkalog.__version__}"
    top = run("--help")
    assert top.returncode == 0 and "exit codes" in top.stdout and "130" in top.stdout
    # Every command line the top-level help shows is one the parser accepts.
    shown = [x.strip() for x in top.stdout.splitlines() if x.strip().startswith("kafkalog ")
             and "COMMAND" not in x]
    assert len(shown) >= 8
    for line in shown:
        parser.parse_args(shlex.split(line)[1:])
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    assert set(sub.choices) >= {"dump", "records", "verify", "stats", "cat", "export", "demo"}
    for name, p in sub.choices.items():
        assert "example" in (p.epilog or ""), name
        for line in (p.epilog or "").splitlines():
            if line.strip().startswith("kafkalog "):
                parser.parse_args(shlex.split(line.strip().split("|")[0])[1:])
        for a in p._actions:
            if a.option_strings and a.dest != "help":
                assert a.help, (name, a.option_strings)
    for name in ("verify", "stats", "cat", "export"):
        h = run(name, "--help")
        assert h.returncode == 0 and "examples:" in h.stdout


def test_errors_are_one_line_with_documented_codes(tmp_path, data):
    missing = tmp_path / "missing"
    regular = tmp_path / "file.txt"
    regular.write_text("hello")
    empty = tmp_path / "empty"
    empty.mkdir()
    for cmd in ("verify", "stats", "cat", "export"):
        extra = ["--to", tmp_path / "o"] if cmd == "export" else []
        assert "no such file" in one_line_error(run(cmd, missing, *extra), 1)
        assert "a file, not" in one_line_error(run(cmd, regular, *extra), 1)
        assert "neither a partition folder" in one_line_error(run(cmd, empty, *extra), 1)
    assert "no partition of topic 'nope'" in one_line_error(run("cat", data, "--topic", "nope"), 1)
    assert "not an offset" in one_line_error(run("cat", data, "--from", "x"), 2)
    assert "ISO 8601" in one_line_error(run("cat", data, "--from-time", "yesterday"), 2)
    assert "required" in one_line_error(run("export", data), 2)
    assert "--to" in one_line_error(run("export", data, "--to", regular), 1)


def test_quiet_when_piped(data, tmp_path):
    # stderr is a pipe here: no progress bar, only the summary line.
    for args in (["verify", data], ["stats", data, "--json"], ["export", data, "--to", tmp_path / "o"]):
        p = run(*args)
        assert p.returncode == 0, p.stderr
        assert "\r" not in p.stderr and len(p.stderr.strip().splitlines()) <= 1, p.stderr


def test_demo_explains_itself_and_names_no_temp_path():
    p = run("demo", "--no-spark")
    assert p.returncode == 0, p.stderr
    assert "/tmp" not in p.stdout and "kafkalog-demo-" not in p.stdout
    for words in ("high watermark", "last stable offset", "read_committed"):
        assert words in p.stdout


def test_verify_and_stats_on_legacy_message_sets(tmp_path):
    """v0/v1 message sets with compressed wrappers (what a pre-0.11 broker left on disk)."""
    from kafkalog import _kafkalog
    from test_kafka_legacy_dump import _write

    for magic in (0, 1):
        d = tmp_path / f"legacy{magic}-0"
        expected, batches, idx, _ = _write(d, magic)
        segments, n, _, _, problems, notes = _kafkalog.verify_partition(str(d))
        assert problems == [] and notes == [] and n == len(batches), (problems, notes)
        s = _kafkalog.partition_stats(str(d))
        assert s["records"] == len(expected) and s["magic"] == {magic: len(batches)}
        assert (s["first_timestamp"] is None) == (magic == 0)
        # An index entry pointing into the middle of a wrapper.
        index = d / f"{0:020d}.index"
        raw = bytearray(index.read_bytes())
        raw[4:8] = (int.from_bytes(raw[4:8], "big") + 1).to_bytes(4, "big")
        index.write_bytes(bytes(raw))
        problems = _kafkalog.verify_partition(str(d))[4]
        assert [(f, pos) for f, pos, _ in problems] == [(str(index), 0)], problems


def test_progress_bar_on_a_terminal(data):
    import pty

    import threading

    master, slave = pty.openpty()
    seen = bytearray()

    def drain():
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO once the terminal's last writer is gone
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    p = subprocess.Popen([sys.executable, "-m", "kafkalog", "verify", str(data)], stdout=subprocess.PIPE,
                         stderr=slave, text=True)
    os.close(slave)
    out = p.stdout.read()
    p.wait(timeout=120)
    reader.join(timeout=60)
    os.close(master)
    assert p.returncode == 0 and out == ""
    text = seen.decode(errors="replace")
    assert "verify:" in text and "%" in text, text  # tqdm's bar, then the summary line
    assert "sound" in text


def test_a_real_ctrl_c_exits_130_without_a_traceback(data):
    """SIGINT while `cat` is blocked writing to a full pipe (a reader that stopped reading)."""
    import fcntl
    import signal
    import termios
    import time

    cmd = [sys.executable, "-m", "kafkalog", "cat", str(data), "--key-decoder", "hex", "--value-decoder", "hex"]
    # More than a pipe holds (64 KiB) plus Python's buffer: cat cannot end while no one reads.
    assert len(subprocess.run(cmd, capture_output=True, timeout=120).stdout) > 100_000
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    avail = bytearray(4)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait for the state, not for a time
        fcntl.ioctl(p.stdout.fileno(), termios.FIONREAD, avail)
        if int.from_bytes(avail, sys.byteorder) > 0 or p.poll() is not None:  # cat is writing
            break
        time.sleep(0.05)
    assert p.poll() is None, "cat ended before the pipe filled: the test needs more output"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert err.decode().strip() == "kafkalog cat: interrupted"


def test_export_holds_one_partition_open_at_a_time(tmp_path):
    """A data dir can hold more segments than a process may open files: export plans every
    partition, then opens each only for its own turn (as stats, cat and verify already do)."""
    data = tmp_path / "data"
    for p in range(60):
        with kafkalog.Log(data / f"wide-{p}", read_only=False, create=True) as log:
            for s in range(3):
                log.append([{"key": b"k%d" % s, "value": b"v%d-%d" % (p, s)}])
                if s < 2:
                    log.roll()
    import resource

    def few_files():
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))

    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "kafkalog", "export", str(data), "--to", str(out)],
                          capture_output=True, text=True, timeout=300, preexec_fn=few_files)
    assert done.returncode == 0, done.stderr[-2000:]
    table = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    assert table.num_rows == 180
    assert sorted(set(table.column("partition").to_pylist())) == list(range(60))


def test_commands_take_the_open_file_limit_the_hard_limit_allows(tmp_path):
    """A partition with more segments than the soft open-file limit: the command raises its own
    soft limit to the hard one (a log holds a descriptor per segment file, as a broker does);
    with no room left, the error says which limit to raise."""
    folder = tmp_path / "data" / "segs-0"
    with kafkalog.Log(folder, read_only=False, create=True) as log:
        for s in range(60):
            log.append([{"value": b"v%d" % s}])
            log.roll()
    import resource

    def limits(soft, hard):
        return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    raised = subprocess.run([sys.executable, "-m", "kafkalog", "stats", str(folder), "--json"], capture_output=True,
                            text=True, timeout=120, preexec_fn=limits(48, 4096))
    assert raised.returncode == 0, raised.stderr[-2000:]
    assert json.loads(raised.stdout)["partitions"][0]["segments"] == 61
    stuck = subprocess.run([sys.executable, "-m", "kafkalog", "stats", str(folder)], capture_output=True,
                           text=True, timeout=120, preexec_fn=limits(48, 48))
    assert "ulimit -n" in one_line_error(stuck, 1)


def test_stats_of_a_data_dir_goes_on_past_a_partition_it_cannot_open(tmp_path):
    """A data dir whose middle partition has more segments than the process may hold open: stats
    prints the other partitions' figures, names the one it could not read (with the limit to
    raise) and exits 1; it used to stop at that partition, printing nothing for the rest."""
    import resource

    data = tmp_path / "data"
    for name, segments in (("a-0", 1), ("b-0", 60), ("c-0", 1)):
        with kafkalog.Log(data / name, read_only=False, create=True) as log:
            for s in range(segments):
                log.append([{"value": b"v%d" % s}])
                if s + 1 < segments:
                    log.roll()

    def few_files():
        resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))

    for extra in ([], ["--json"]):
        done = subprocess.run([sys.executable, "-m", "kafkalog", "stats", str(data), *extra],
                              capture_output=True, text=True, timeout=120, preexec_fn=few_files)
        assert done.returncode == 1, done.stderr[-2000:]
        assert "Traceback" not in done.stderr
        errors = [line for line in done.stderr.splitlines() if "could not be read" in line]
        assert len(errors) == 1 and errors[0].startswith("kafkalog stats: b-0 could not be read")
        assert "ulimit -n" in errors[0]
        if extra:
            out = json.loads(done.stdout)
            assert [(r["topic"], r["records"]) for r in out["partitions"]] == [("a", 1), ("c", 1)]
            assert [(e["topic"], e["partition"]) for e in out["errors"]] == [("b", 0)]
        else:
            names = [line.split()[0] for line in done.stdout.splitlines()[1:]]
            assert names == ["a-0", "c-0"]


def test_records_and_cat_never_print_two_byte_strings_alike(tmp_path):
    """`records` writes bytes that are not UTF-8 as `base64:` and their base64; a text that itself
    starts with `base64:` is written that way too, so the byte 0xff and the text "base64:/w=="
    read back apart (they printed alike). `cat`'s default utf8 decoder prints U+FFFD where
    Kafka's console consumer does, and now says on stderr how many fields it changed. Both found
    by a black-box tester."""
    import base64

    folder = tmp_path / "t-0"
    with kafkalog.Log(str(folder), read_only=False, create=True) as log:
        log.append([{"key": b"\xff", "value": b"base64:/w=="}, {"key": b"k", "value": b"plain"}])
    lines = [json.loads(line) for line in run("records", folder).stdout.splitlines()]
    decoded = [[base64.b64decode(v[len("base64:"):]) if v.startswith("base64:") else v.encode()
                for v in (line["key"], line["value"])] for line in lines]
    assert decoded == [[b"\xff", b"base64:/w=="], [b"k", b"plain"]]
    assert lines[0]["key"] != lines[0]["value"]

    cat = run("cat", folder)
    assert cat.returncode == 0 and json.loads(cat.stdout.splitlines()[0])["key"] == "\ufffd"
    assert "1 keys, values or header values were not UTF-8" in cat.stderr
    exact = run("cat", folder, "--key-decoder", "hex")
    assert exact.returncode == 0 and exact.stderr == ""


def test_records_says_what_a_folder_is_in_the_command_lines_words(tmp_path):
    """`records` on a data dir or an empty folder says so without the library's Python options
    (`read_only=False, create=True`), which the command line does not have (a black-box tester)."""
    data = tmp_path / "data"
    kafkalog.Topic.create(data, "orders", 2)
    message = one_line_error(run("records", data), 1)
    assert "is a Kafka data dir" in message and "orders-0" in message and "kafkalog cat" in message
    empty = tmp_path / "empty"
    empty.mkdir()
    message = one_line_error(run("records", empty), 1)
    assert "not a Kafka partition folder" in message and "create=True" not in message


def test_cat_json_values_are_read_as_utf8_text(tmp_path):
    """A value starting with a NUL: json.loads on bytes guessed UTF-16 from it and reported that
    guess's error (a black-box tester's); the value is JSON's UTF-8 text, so the error is JSON's."""
    with kafkalog.Log(tmp_path / "t-0", read_only=False, create=True) as log:
        log.append([{"value": b'\x00{"n": 1}'}])
    bad = run("cat", tmp_path / "t-0", "--value-decoder", "json")
    message = one_line_error(bad, 1)
    assert "the value is not json" in message and "Expecting value" in message, message
    assert "utf-16" not in message, message


def test_a_segment_file_removed_after_its_folder_was_listed_is_passed_over(tmp_path, monkeypatch):
    """On a running broker's dir, retention and the log cleaner remove segment files and producer
    snapshots between a command's listing of a folder and its look at each file: `stats` and
    `cat` exited 1 on the raw ENOENT (a black-box tester, 3 runs in 1,242)."""
    folder = tmp_path / "t-0"
    with kafkalog.Log(folder, read_only=False, create=True) as log:
        log.append([{"value": b"v"}])
    gone = [folder / "00000000000000000007.index", folder / "00000000000000000007.log",
            folder / "00000000000000000007.snapshot"]
    listed = Path.iterdir
    monkeypatch.setattr(Path, "iterdir", lambda self: iter([*listed(self), *(gone if self == folder else [])]))
    cli_tools._check_readable_folder(folder)
    assert cli_tools._segment_bytes(folder) == (folder / "00000000000000000000.log").stat().st_size
