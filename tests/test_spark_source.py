"""The kafkalog Spark data source (``kafkalog.spark``), read side and write side, on local[2].

Written from the data source's spec (Spark's Kafka source/sink semantics on a Kafka data dir),
as an independent tester: the expected rows come from what the tests appended with kafkalog's
own Log API, never from the data source's code. Test data is built once per module; one
SparkSession serves the whole module.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

import kafkalog  # noqa: E402
from kafkalog import Log  # noqa: E402

import pyspark  # noqa: E402  (a missing pyspark fails the module: the referee is required)

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

import kafkalog.spark as ks  # noqa: E402

BASE_TS = 1700000000123
CHECKPOINT_FILES = {
    "log-start-offset-checkpoint",
    "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
    "meta.properties",
}
PARTITION_FILE = re.compile(
    r"^(\d{20}\.(log|index|timeindex|txnindex|snapshot)|leader-epoch-checkpoint|partition\.metadata)$"
)


# --------------------------------------------------------------------------------------------
# helpers


def murmur2(data: bytes) -> int:
    """Kafka's org.apache.kafka.common.utils.Utils.murmur2, written out independently."""
    length = len(data)
    m = 0x5BD1E995
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(length // 4):
        i4 = i * 4
        k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    extra = length % 4
    idx = length & ~3
    if extra == 3:
        h ^= data[idx + 2] << 16
    if extra >= 2:
        h ^= data[idx + 1] << 8
    if extra >= 1:
        h ^= data[idx]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_partition(key: bytes, n: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % n


def _b(x):
    return None if x is None else bytes(x)


def collect(df, headers=False):
    """Rows as sorted tuples (key, value, topic, partition, offset, ts_ms, tstype[, headers])."""
    cols = [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "unix_millis(timestamp) AS ts",
        "timestampType",
    ]
    if headers:
        cols.append("headers")
    out = []
    for r in df.selectExpr(*cols).collect():
        t = (_b(r["key"]), _b(r["value"]), r["topic"], r["partition"], r["offset"], r["ts"], r["timestampType"])
        if headers:
            h = r["headers"]
            t += (None if h is None else [(x["key"], _b(x["value"])) for x in h],)
        out.append(t)
    return sorted(out, key=lambda t: (t[2], t[3], t[4]))


def expected(recs, topics=None, parts=None, headers=False, pred=None):
    out = []
    for e in recs:
        if topics is not None and e["topic"] not in topics:
            continue
        if parts is not None and (e["topic"], e["partition"]) not in parts:
            continue
        if pred is not None and not pred(e):
            continue
        t = (e["key"], e["value"], e["topic"], e["partition"], e["offset"], e["ts"], e["tstype"])
        if headers:
            t += (e["headers"],)
        out.append(t)
    return sorted(out, key=lambda t: (t[2], t[3], t[4]))


def offsets(rows, topic=None, partition=None):
    return [r[4] for r in rows if (topic is None or r[2] == topic) and (partition is None or r[3] == partition)]


def expect_error(build, *words):
    """build() returns a DataFrame (or does the write); it or its first use must fail with an
    error whose message contains one of ``words`` (case-insensitive)."""
    with pytest.raises(Exception) as ei:
        res = build()
        if res is not None and hasattr(res, "collect"):
            res.collect()
    msg = str(ei.value)
    assert any(w.lower() in msg.lower() for w in words), (
        f"error raised but its message names none of {words!r}: {msg[:3000]}"
    )
    return msg


def append(log, topic, partition, records, sink, **kw):
    """Append ``records`` (dicts for Log.append) and record their expected rows in ``sink``."""
    first, last = log.append(records, **kw)
    assert last - first + 1 == len(records)
    for i, r in enumerate(records):
        hs = r.get("headers")
        sink.append(
            {
                "topic": topic,
                "partition": partition,
                "offset": first + i,
                "key": r.get("key"),
                "value": r.get("value"),
                "ts": r["timestamp"],
                "tstype": 0,
                "headers": [tuple(h) for h in hs] if hs else None,
                "txn": kw.get("producer_id", -1),
            }
        )
    return first, last


def check_data_dir_clean(data_dir, expected_tps):
    """The data dir holds exactly the expected <topic>-<n> folders plus Kafka checkpoint files,
    and each partition folder only Kafka's own files (no staging leftovers)."""
    names = sorted(os.listdir(data_dir))
    dirs = {n for n in names if (Path(data_dir) / n).is_dir()}
    files = {n for n in names if not (Path(data_dir) / n).is_dir()}
    assert dirs == set(expected_tps), f"unexpected folders in data dir: {sorted(dirs ^ set(expected_tps))}"
    assert files <= CHECKPOINT_FILES, f"unexpected files in data dir: {sorted(files - CHECKPOINT_FILES)}"
    for d in dirs:
        stray = [n for n in os.listdir(Path(data_dir) / d) if not PARTITION_FILE.match(n)]
        assert not stray, f"unexpected files in {d}: {stray}"


def leos(data_dir):
    out = {}
    for n in sorted(os.listdir(data_dir)):
        p = Path(data_dir) / n
        if p.is_dir() and re.match(r"^.+-\d+$", n):
            log = Log(p)
            try:
                out[n] = (log.log_start_offset, log.log_end_offset)
            finally:
                log.close()
    return out


def log_records(path):
    log = Log(path)
    try:
        return list(log.records())
    finally:
        log.close()


def log_batches(path):
    log = Log(path)
    try:
        return log.batches()
    finally:
        log.close()


# --------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def spark():
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    s = (
        SparkSession.builder.master("local[2,2]")  # 2 cores, a failed task is retried once
        .appName("kafkalog-spark-source-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.python.worker.faulthandler.enabled", "true")
        .getOrCreate()
    )
    s.sparkContext.setLogLevel("ERROR")
    ks.register(s)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """One data dir with several topics; returns (dir, expected records, info)."""
    d = tmp_path_factory.mktemp("kdata") / "data"
    d.mkdir()
    recs = []
    info = {}
    cfg = {"segment.bytes": 1 << 16}

    def open_log(topic, p, config=cfg):
        return Log(d / f"{topic}-{p}", read_only=False, create=True, config=config)

    # orders: 3 partitions; every compression codec, multi-record batches, headers of every kind,
    # null/empty keys and values.
    for p in range(3):
        log = open_log("orders", p)
        ts = BASE_TS + p * 100_000
        append(
            log,
            "orders",
            p,
            [
                {"key": f"k{p}-0".encode(), "value": f"v{p}-0".encode(), "headers": [("h", b"1"), ("h", b"2")], "timestamp": ts},
                {"key": f"k{p}-1".encode(), "value": f"v{p}-1".encode(), "timestamp": ts + 1},
                {"key": None, "value": f"v{p}-2".encode(), "headers": [("n", None), ("", b"")], "timestamp": ts + 2},
            ],
            recs,
        )
        for j, codec in enumerate(["gzip", "snappy", "lz4", "zstd"]):
            batch = []
            for i in range(5):
                n = 10 * (j + 1) + i
                batch.append(
                    {
                        "key": f"k{p}-{n}".encode() if i != 3 else b"",
                        "value": f"{codec}-{p}-{n}".encode() * (i + 1) if i != 4 else None,
                        "headers": [("codec", codec.encode()), ("i", str(i).encode())] if i % 2 == 0 else None,
                        "timestamp": ts + n * 1000 + 999,
                    }
                )
            append(log, "orders", p, batch, recs, compression=codec)
        log.close()

    # orders_archive and other: for subscribePattern tests.
    for topic in ("orders_archive", "other"):
        log = open_log(topic, 0)
        append(log, topic, 0, [{"key": b"a", "value": topic.encode() + b"-%d" % i, "timestamp": BASE_TS + i} for i in range(3)], recs)
        log.close()

    # web-2024: a topic name with a hyphen and digits; 12 partitions (two-digit partition numbers).
    for p in range(12):
        log = open_log("web-2024", p)
        append(log, "web-2024", p, [{"value": b"w%d" % p, "timestamp": BASE_TS + p}], recs)
        log.close()

    # empty: 2 partitions, no records.
    for p in range(2):
        open_log("empty", p).close()

    # tx: transactions (committed, aborted, interleaved, open at the end).
    log = open_log("tx", 0)
    t = BASE_TS
    seq = {}

    def txn(pid, values):
        s = seq.get(pid, 0)
        seq[pid] = s + len(values)
        return append(
            log,
            "tx",
            0,
            [{"value": v, "timestamp": t} for v in values],
            recs,
            producer_id=pid,
            producer_epoch=0,
            base_sequence=s,
            transactional=True,
        )

    aborted = set()
    append(log, "tx", 0, [{"value": b"p0", "timestamp": t}, {"value": b"p1", "timestamp": t}], recs)
    txn(7, [b"c0", b"c1"])
    log.write_txn_marker(7, 0, commit=True)
    txn(8, [b"a0", b"a1"])
    log.write_txn_marker(8, 0, commit=False)
    aborted |= {b"a0", b"a1"}
    append(log, "tx", 0, [{"value": b"p2", "timestamp": t}], recs)
    txn(9, [b"i0"])
    txn(10, [b"j0"])
    txn(9, [b"i1"])
    log.write_txn_marker(9, 0, commit=False)
    aborted |= {b"i0", b"i1"}
    log.write_txn_marker(10, 0, commit=True)
    append(log, "tx", 0, [{"value": b"p3", "timestamp": t}], recs)
    open_first, _ = txn(11, [b"o0"])
    append(log, "tx", 0, [{"value": b"p4", "timestamp": t}], recs)
    info["tx_lso"] = log.last_stable_offset
    info["tx_leo"] = log.log_end_offset
    info["tx_open_first"] = open_first
    info["tx_aborted"] = aborted
    log.close()
    assert info["tx_lso"] == open_first

    # ts: timestamp lookups; p0 has non-monotonic timestamps inside and across batches.
    log = open_log("ts", 0)
    append(log, "ts", 0, [{"value": b"t%d" % i, "timestamp": x} for i, x in enumerate([1000, 2000, 3000])], recs, compression="lz4")
    append(log, "ts", 0, [{"value": b"t%d" % (i + 3), "timestamp": x} for i, x in enumerate([2500, 4000, 5000])], recs, compression="lz4")
    log.close()
    log = open_log("ts", 1)
    for i, x in enumerate([500, 3000, 7000]):
        append(log, "ts", 1, [{"value": b"u%d" % i, "timestamp": x}], recs)
    log.close()

    # trunc: 20 records, log start offset moved to 7.
    log = open_log("trunc", 0)
    for i in range(20):
        append(log, "trunc", 0, [{"value": b"r%d" % i, "timestamp": BASE_TS + i}], recs)
    log.delete_records(7)
    info["trunc_start"] = log.log_start_offset
    log.close()
    assert info["trunc_start"] == 7
    recs[:] = [e for e in recs if not (e["topic"] == "trunc" and e["offset"] < 7)]

    # big: several segments, 300 records of ~1 KiB in batches of 10.
    log = open_log("big", 0)
    for b in range(30):
        append(
            log,
            "big",
            0,
            [{"key": b"b%d" % (b * 10 + i), "value": os.urandom(1000), "timestamp": BASE_TS + b * 10 + i} for i in range(10)],
            recs,
            compression="none" if b % 2 else "zstd",
        )
    info["big_segments"] = len(log.segments)
    log.close()
    assert info["big_segments"] >= 3

    # midtrunc: one compressed batch of 10; log start offset moved into the middle of it.
    log = open_log("midtrunc", 0)
    append(log, "midtrunc", 0, [{"value": b"m%d" % i, "timestamp": BASE_TS + i} for i in range(10)], recs, compression="gzip")
    log.delete_records(4)
    log.close()
    recs[:] = [e for e in recs if not (e["topic"] == "midtrunc" and e["offset"] < 4)]

    # txseg: an aborted transaction whose records and marker lie in three different segments.
    log = open_log("txseg", 0)
    append(log, "txseg", 0, [{"value": b"a0", "timestamp": BASE_TS}], recs, producer_id=5, producer_epoch=0, base_sequence=0, transactional=True)
    append(log, "txseg", 0, [{"value": b"p0", "timestamp": BASE_TS}], recs)
    log.roll()
    append(log, "txseg", 0, [{"value": b"p1", "timestamp": BASE_TS}], recs)
    append(log, "txseg", 0, [{"value": b"a1", "timestamp": BASE_TS}], recs, producer_id=5, producer_epoch=0, base_sequence=1, transactional=True)
    log.roll()
    append(log, "txseg", 0, [{"value": b"p2", "timestamp": BASE_TS}], recs)
    log.write_txn_marker(5, 0, commit=False)
    append(log, "txseg", 0, [{"value": b"p3", "timestamp": BASE_TS}], recs)
    info["txseg_segments"] = len(log.segments)
    log.close()

    # huge: records larger than any default fetch size (3 MiB alone; two 1 MiB ones in an lz4 batch).
    log = open_log("huge", 0, config={"max.message.bytes": 20 << 20})
    append(log, "huge", 0, [{"value": b"A" * (3 << 20), "timestamp": BASE_TS}], recs)
    append(log, "huge", 0, [{"value": os.urandom(1 << 20), "timestamp": BASE_TS + 1}, {"value": os.urandom(1 << 20), "timestamp": BASE_TS + 2}], recs, compression="lz4")
    log.close()

    # lat: a LogAppendTime topic.
    log = open_log("lat", 0, config={"message.timestamp.type": "LogAppendTime"})
    log.append([{"value": b"l0", "timestamp": 5}, {"value": b"l1", "timestamp": 6}])
    log.close()
    info["lat"] = [(r.offset, r.timestamp, r.timestamp_type) for r in log_records(d / "lat-0")]

    return d, recs, info


@pytest.fixture(scope="module")
def data2(tmp_path_factory):
    """A second data dir (for comma-separated data dirs)."""
    d = tmp_path_factory.mktemp("kdata2") / "data"
    d.mkdir()
    recs = []
    log = Log(d / "second-0", read_only=False, create=True)
    append(log, "second", 0, [{"key": b"s", "value": b"second-%d" % i, "timestamp": BASE_TS + i} for i in range(4)], recs)
    log.close()
    return d, recs


def reader(spark, path, **opts):
    r = spark.read.format("kafkalog").option("path", str(path))
    for k, v in opts.items():
        r = r.option(k, v)
    return r


def read(spark, path, **opts):
    return reader(spark, path, **opts).load()


# --------------------------------------------------------------------------------------------
# schema


KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)
HEADERS_FIELD = StructField(
    "headers", ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
)


def _types(schema):
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def test_kafka_schema_function():
    assert _types(ks.kafka_schema(False)) == _types(KAFKA_SCHEMA)
    assert _types(ks.kafka_schema(True)) == _types(StructType(KAFKA_SCHEMA.fields + [HEADERS_FIELD]))
    assert ks.kafka_schema(True)["headers"].dataType == HEADERS_FIELD.dataType


def test_schema_of_loaded_dataframe(spark, data):
    d, _, _ = data
    df = read(spark, d, subscribe="orders")
    assert _types(df.schema) == _types(KAFKA_SCHEMA)
    assert _types(df.schema) == _types(ks.kafka_schema(False))
    dfh = read(spark, d, subscribe="orders", includeHeaders="true")
    assert _types(dfh.schema) == _types(ks.kafka_schema(True))
    assert dfh.schema["headers"].dataType == HEADERS_FIELD.dataType


# --------------------------------------------------------------------------------------------
# reading rows


def test_read_all_rows_with_headers(spark, data):
    d, recs, _ = data
    got = collect(read(spark, d, subscribe="orders", includeHeaders="true"), headers=True)
    want = expected(recs, topics={"orders"}, headers=True)
    assert len(want) == 3 * 23
    assert got == want


def test_headers_null_when_absent_and_order_kept(spark, data):
    d, _, _ = data
    df = read(spark, d, assign=json.dumps({"orders": [0]}), includeHeaders="true", endingOffsets=json.dumps({"orders": {"0": 3}}))
    rows = {r["offset"]: r for r in df.collect()}
    assert sorted(rows) == [0, 1, 2]
    assert [(h["key"], _b(h["value"])) for h in rows[0]["headers"]] == [("h", b"1"), ("h", b"2")]
    assert rows[1]["headers"] is None, "a record without headers must give NULL, not an empty array"
    assert [(h["key"], _b(h["value"])) for h in rows[2]["headers"]] == [("n", None), ("", b"")]


def test_null_and_empty_keys_and_values(spark, data):
    d, _, _ = data
    df = read(spark, d, assign=json.dumps({"orders": [1]}))
    by_off = {r["offset"]: (_b(r["key"]), _b(r["value"])) for r in df.collect()}
    # offset 2: null key; in each codec batch, record 3 has an empty key, record 4 a null value
    assert by_off[2][0] is None
    assert by_off[2][1] == b"v1-2"
    assert by_off[3 + 3] == (b"", b"gzip-1-13" * 4)
    assert by_off[3 + 4] == (b"k1-14", None)


def test_timestamps_exact_millis_and_create_time(spark, data):
    d, recs, _ = data
    df = read(spark, d, subscribe="orders")
    got = {(r["partition"], r["offset"]): (r["ms"], r["timestampType"]) for r in df.selectExpr("partition", "offset", "unix_millis(timestamp) AS ms", "timestampType").collect()}
    want = {(e["partition"], e["offset"]): (e["ts"], 0) for e in recs if e["topic"] == "orders"}
    assert got == want
    # microsecond precision too: nothing below the millisecond
    micros = df.selectExpr("unix_micros(timestamp) % 1000 AS us").distinct().collect()
    assert [r["us"] for r in micros] == [0]


def test_log_append_time_timestamp_type(spark, data):
    d, _, info = data
    rows = read(spark, d, subscribe="lat").selectExpr("offset", "unix_millis(timestamp) AS ms", "timestampType").collect()
    got = sorted((r["offset"], r["ms"], r["timestampType"]) for r in rows)
    want = [(o, ts, 1) for o, ts, tt in info["lat"]]
    assert all(tt == "log_append_time" for _, _, tt in info["lat"])
    assert got == want, "LogAppendTime records have timestampType 1 and the broker's append time"


def test_read_partition_folder_path(spark, data):
    d, recs, _ = data
    got = collect(read(spark, d / "orders-1", subscribe="orders"))
    assert got == expected(recs, parts={("orders", 1)})


def test_read_comma_separated_partition_folders(spark, data):
    d, recs, _ = data
    got = collect(read(spark, f"{d / 'orders-0'},{d / 'orders-2'}", subscribe="orders"))
    assert got == expected(recs, parts={("orders", 0), ("orders", 2)})


def test_read_comma_separated_data_dirs(spark, data, data2):
    d, recs, _ = data
    d2, recs2 = data2
    got = collect(read(spark, f"{d},{d2}", subscribe="orders,second"))
    assert got == expected(recs + recs2, topics={"orders", "second"})


def test_load_with_path_argument(spark, data):
    d, recs, _ = data
    got = collect(spark.read.format("kafkalog").option("subscribe", "other").load(str(d)))
    assert got == expected(recs, topics={"other"})


def test_topic_with_hyphen_digits_and_many_partitions(spark, data):
    d, recs, _ = data
    df = read(spark, d, subscribe="web-2024")
    got = collect(df)
    assert got == expected(recs, topics={"web-2024"})
    assert sorted(r[3] for r in got) == list(range(12))


def test_empty_partitions_give_no_rows(spark, data):
    d, _, _ = data
    df = read(spark, d, subscribe="empty")
    assert df.count() == 0
    assert _types(df.schema) == _types(KAFKA_SCHEMA)


def test_multi_segment_topic(spark, data):
    d, recs, info = data
    assert info["big_segments"] >= 3
    got = collect(read(spark, d, subscribe="big"))
    assert got == expected(recs, topics={"big"})


def test_read_logs_matches_format(spark, data):
    d, _, _ = data
    folders = [str(d / f"orders-{p}") for p in range(3)]
    cases = [
        dict(subscribe="orders", includeHeaders="true"),
        dict(subscribe="orders", startingOffsets=json.dumps({"orders": {"0": 3, "1": -2, "2": 10}})),
        dict(subscribe="orders", endingOffsets=json.dumps({"orders": {"0": 5, "1": -1, "2": 4}}), minPartitions="4"),
    ]
    for opts in cases:
        df_fmt = read(spark, ",".join(folders), **opts)
        df_fn = ks.read_logs(spark, folders, **opts)
        assert df_fn.schema == df_fmt.schema, opts
        h = opts.get("includeHeaders") == "true"
        assert collect(df_fn, headers=h) == collect(df_fmt, headers=h), opts
    df_tx_fmt = read(spark, d / "tx-0", subscribe="tx", **{"kafka.isolation.level": "read_committed"})
    df_tx_fn = ks.read_logs(spark, [str(d / "tx-0")], subscribe="tx", **{"kafka.isolation.level": "read_committed"})
    assert collect(df_tx_fn) == collect(df_tx_fmt)


def test_log_start_offset_inside_a_batch(spark, data):
    d, recs, _ = data
    got = collect(read(spark, d, subscribe="midtrunc"))
    assert offsets(got) == list(range(4, 10)), "records of the batch below the log start offset are gone"
    assert got == expected(recs, topics={"midtrunc"})
    got = collect(read(spark, d, subscribe="midtrunc", minPartitions="3"))
    assert offsets(got) == list(range(4, 10))
    expect_error(lambda: read(spark, d, subscribe="midtrunc", startingOffsets='{"midtrunc":{"0":2}}'), "failOnDataLoss", "data loss", "lost", "offset")
    # ListOffsets never answers below the log start offset
    got = collect(read(spark, d, subscribe="midtrunc", startingTimestamp=str(BASE_TS + 1)))
    assert offsets(got) == list(range(4, 10))


def test_transaction_across_segments_read_committed(spark, data):
    d, _, info = data
    assert info["txseg_segments"] >= 3
    iso = {"kafka.isolation.level": "read_committed"}
    want = [b"p0", b"p1", b"p2", b"p3"]
    assert [r[1] for r in collect(read(spark, d, subscribe="txseg", **iso))] == want
    df = read(spark, d, subscribe="txseg", maxRecordsPerPartition="1", **iso)
    assert df.rdd.getNumPartitions() >= 4
    assert [r[1] for r in collect(df)] == want, "a range inside the first segment must still see the later abort"
    got = collect(read(spark, d, subscribe="txseg", startingOffsets='{"txseg":{"0":0}}', endingOffsets='{"txseg":{"0":2}}', **iso))
    assert [r[1] for r in got] == [b"p0"]


def test_records_larger_than_fetch_sizes(spark, data):
    d, recs, _ = data
    got = collect(read(spark, d, subscribe="huge"))
    assert got == expected(recs, topics={"huge"})
    assert [len(r[1]) for r in got] == [3 << 20, 1 << 20, 1 << 20]


def test_trailing_slashes_in_paths(spark, data):
    d, recs, _ = data
    assert collect(read(spark, f"{d}/", subscribe="other")) == expected(recs, topics={"other"})
    assert collect(read(spark, f"{d / 'orders-1'}/", subscribe="orders")) == expected(recs, parts={("orders", 1)})


def test_kafka_deleted_and_future_dirs_are_not_partitions(spark, data, tmp_path):
    """A live data dir may hold Kafka's '<tp>.<uuid>-delete' / '-future' / '-stray' folders:
    they are not partitions of the topic."""
    import shutil

    d, recs, _ = data
    d3 = tmp_path / "data"
    d3.mkdir()
    shutil.copytree(d / "other-0", d3 / "other-0")
    shutil.copytree(d / "other-0", d3 / "other-0.0123456789abcdef0123456789abcdef-delete")
    shutil.copytree(d / "other-0", d3 / "other-1.0123456789abcdef0123456789abcdef-future")
    got = collect(read(spark, d3, subscribe="other"))
    assert got == expected(recs, topics={"other"})


def test_options_are_case_insensitive_and_topics_trimmed(spark, data):
    d, recs, _ = data
    got = collect(
        spark.read.format("kafkalog").option("PATH", str(d)).option("SUBSCRIBE", " other , orders_archive ").option("STARTINGOFFSETS", '{"other":{"0":1},"orders_archive":{"0":2}}').load()
    )
    assert got == expected(recs, topics={"other", "orders_archive"}, pred=lambda e: e["offset"] >= (1 if e["topic"] == "other" else 2))


# --------------------------------------------------------------------------------------------
# topic selection


def test_subscribe_several_topics(spark, data):
    d, recs, _ = data
    got = collect(read(spark, d, subscribe="other,orders_archive"))
    assert got == expected(recs, topics={"other", "orders_archive"})


def _topics(df):
    return {r["topic"] for r in df.select("topic").distinct().collect()}


def test_subscribe_pattern_selects_topics(spark, data):
    d, recs, _ = data
    assert _topics(read(spark, d, subscribePattern="orders.*")) == {"orders", "orders_archive"}
    assert _topics(read(spark, d, subscribePattern=r"web-\d+")) == {"web-2024"}
    assert _topics(read(spark, d, subscribePattern="o.*")) == {"orders", "orders_archive", "other"}
    got = collect(read(spark, d, subscribePattern="orders_arch.*"))
    assert got == expected(recs, topics={"orders_archive"})
    # Spark's Kafka source trims the pattern (a black-box tester's " t1 " read nothing here).
    assert collect(read(spark, d, subscribePattern=" orders_arch.* ")) == got


@pytest.mark.parametrize("pattern", ["", "   "])
def test_empty_subscribe_pattern_is_an_error_as_in_spark(spark, data, pattern):
    # An empty pattern would match every topic; Spark's source refuses it (referee-checked by a
    # black-box tester against spark-sql-kafka 4.2.0).
    d, _, _ = data
    expect_error(lambda: read(spark, d, subscribePattern=pattern), "Pattern to subscribe is empty")


def test_subscribe_pattern_is_found_in_topic_names_as_spark_does(spark, data):
    # Spark's Kafka source picks topics with Regex.findFirstIn: the pattern anywhere in the name
    # (tests/test_spark_kafka_referee.py checks this against Spark itself).
    d, recs, _ = data
    topics = lambda df: {r["topic"] for r in df.select("topic").distinct().collect()}  # noqa: E731
    assert topics(read(spark, d, subscribePattern="^orders$")) == {"orders"}
    assert topics(read(spark, d, subscribePattern="orders")) == {"orders", "orders_archive"}
    assert topics(read(spark, d, subscribePattern=r"web-\d+")) == {"web-2024"}
    assert topics(read(spark, d, subscribePattern="^o.*")) == {"orders", "orders_archive", "other"}
    assert topics(read(spark, d, subscribePattern="rders")) == {"orders", "orders_archive"}
    got = collect(read(spark, d, subscribePattern="orders_arch.*"))
    assert got == expected(recs, topics={"orders_archive"})
    # Spark's Kafka source trims the pattern (a black-box tester's " t1 " read nothing here).
    assert collect(read(spark, d, subscribePattern=" orders_arch.* ")) == got


def test_assign(spark, data):
    d, recs, _ = data
    got = collect(read(spark, d, assign=json.dumps({"orders": [0, 2], "other": [0]})))
    assert got == expected(recs, parts={("orders", 0), ("orders", 2), ("other", 0)})


def test_assign_reads_the_partitions_a_topic_has(spark, data):
    # As Spark's Kafka source: an assigned partition the topic lacks is read as empty (a warning
    # here); an assigned topic with no partition at all is an error.
    d, recs, _ = data
    assign = json.dumps({"orders": [0], "other": [0, 7]})
    with pytest.warns(UserWarning, match=r"\('other', 7\)"):  # planned in a Spark worker below
        ks.plan_read({"path": str(d), "assign": assign})
    got = collect(read(spark, d, assign=assign))
    assert got == expected(recs, parts={("orders", 0), ("other", 0)})
    expect_error(lambda: read(spark, d, assign=json.dumps({"nope": [0]})), "nope")


# --------------------------------------------------------------------------------------------
# spark.readStream (checked row for row against Spark's own Kafka source stream in
# test_spark_kafka_referee.py)


def stream_batches(spark, path, checkpoint, **opts):
    """Each micro-batch's rows (sorted as ``collect`` sorts them) of a Trigger.AvailableNow query."""
    got = {}

    def each(df, batch_id):
        got[batch_id] = collect(df)

    r = spark.readStream.format("kafkalog").option("path", str(path))
    for k, v in opts.items():
        r = r.option(k, v)
    q = r.load().writeStream.foreachBatch(each).option("checkpointLocation", str(checkpoint)).trigger(
        availableNow=True).start()
    try:
        assert q.awaitTermination(180), "stream did not finish"
    finally:
        q.stop()
    return [got[i] for i in sorted(got)]


def stream_records(d, topic, partition, records, sink):
    with Log(d / f"{topic}-{partition}", read_only=False, create=True) as log:
        append(log, topic, partition, records, sink)


def test_stream_cuts_micro_batches_by_max_offsets_per_trigger_and_resumes(spark, tmp_path):
    d, recs = tmp_path / "data", []
    for p, n in ((0, 35), (1, 50)):
        for i in range(0, n, 5):
            stream_records(d, "clicks", p, [{"key": b"k%d" % (i + j), "value": b"v" * (i + j),
                                              "timestamp": BASE_TS + i + j} for j in range(5)], recs)
    cp = tmp_path / "cp"
    batches = stream_batches(spark, d, cp, subscribe="clicks", startingOffsets="earliest",
                             maxOffsetsPerTrigger="30")
    assert len(batches) >= 3 and all(0 < len(b) <= 30 for b in batches), [len(b) for b in batches]
    # Each partition's offsets go on from one micro-batch to the next, none twice.
    assert sorted((r for b in batches for r in b), key=lambda t: (t[2], t[3], t[4])) == expected(recs)
    for p in (0, 1):
        assert [o for b in batches for o in offsets(b, "clicks", p)] == list(range(35 if p == 0 else 50))
    # Spark's share of the limit: in proportion to each partition's backlog (35:50 of 30).
    assert [len(offsets(batches[0], "clicks", p)) for p in (0, 1)] == [12, 17]

    # The same checkpoint later: only what was appended since, and a new partition from its start.
    more = []
    stream_records(d, "clicks", 0, [{"value": b"late", "timestamp": BASE_TS + 99}], more)
    stream_records(d, "clicks", 2, [{"value": b"new partition", "timestamp": BASE_TS + 7}] * 3, more)
    batches = stream_batches(spark, d, cp, subscribe="clicks", startingOffsets="earliest")
    assert batches == [expected(more)]
    assert stream_batches(spark, d, cp, subscribe="clicks") == []


def test_stream_starts_at_latest_by_default_and_reads_committed_data_only(spark, tmp_path):
    d, recs = tmp_path / "data", []
    stream_records(d, "t", 0, [{"value": b"before", "timestamp": BASE_TS}], recs)
    cp = tmp_path / "cp"
    # Spark runs the first micro-batch of a new query even when it is empty.
    assert [r for b in stream_batches(spark, d, cp, subscribe="t") for r in b] == []
    later = []
    with Log(d / "t-0", read_only=False) as log:
        append(log, "t", 0, [{"value": b"committed", "timestamp": BASE_TS + 1}], later,
               producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
        log.append_txn_marker(7, 0, commit=True, timestamp=BASE_TS + 2)
        log.append([{"value": b"open", "timestamp": BASE_TS + 3}], producer_id=8, producer_epoch=0,
                   base_sequence=0, transactional=True)
    got = stream_batches(spark, d, cp, subscribe="t", **{"kafka.isolation.level": "read_committed"})
    assert got == [expected(later)], got   # the open transaction is past the last stable offset


def test_stream_offsets_lost_to_retention_fail_or_are_stepped_over(spark, tmp_path):
    d, recs = tmp_path / "data", []
    stream_records(d, "r", 0, [{"value": b"%d" % i, "timestamp": BASE_TS + i} for i in range(5)], recs)
    cp = tmp_path / "cp"
    assert len(stream_batches(spark, d, cp, subscribe="r", startingOffsets="earliest")[0]) == 5
    with Log(d / "r-0", read_only=False) as log:
        log.append([{"value": b"%d" % i, "timestamp": BASE_TS + i} for i in range(5, 10)])
        log.delete_records(8)
    expect_error(lambda: stream_batches(spark, d, cp, subscribe="r"), "failOnDataLoss")
    got = stream_batches(spark, d, cp, subscribe="r", failOnDataLoss="false")
    assert [offsets(b) for b in got] == [[8, 9]]


def test_stream_options_checked_as_the_query_starts(spark, data):
    d, _, _ = data
    ok = {"path": str(d), "subscribe": "orders"}
    # Wrong for any read: refused by load(), as Spark's Kafka source refuses them (it checks the
    # pair of limits for a batch too).
    for bad, words in [({"minOffsetsPerTrigger": "5", "maxOffsetsPerTrigger": "2"}, "higher than"),
                       ({"assign": '{"orders":[0]}'}, "exactly one of"),
                       ({"maxOfsetsPerTrigger": "5"}, "unknown option")]:
        with pytest.raises(Exception, match=words):
            spark.readStream.format("kafkalog").options(**{**ok, **bad}).load()
        with pytest.raises(Exception, match=words):
            spark.read.format("kafkalog").options(**{**ok, **bad}).load()
    # Wrong for a stream: refused as the query starts. A batch query ignores a stream's limits,
    # whatever their value, as Spark's Kafka source does (a black-box tester's batch read with
    # maxOffsetsPerTrigger=0 failed here where Spark's read its rows).
    expected_rows = collect(read(spark, d, subscribe="orders"))
    for bad, words in [({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger must be positive"),
                       ({"maxOffsetsPerTrigger": "abc"}, "maxOffsetsPerTrigger must be an integer"),
                       ({"maxTriggerDelay": "soon"}, "maxTriggerDelay must be a duration")]:
        with pytest.raises(kafkalog.KafkaLogError, match=words):
            ks.KafkaLogDataSource({**ok, **bad}).streamReader(ks.kafka_schema()).initialOffset()
        assert collect(read(spark, d, subscribe="orders", **bad)) == expected_rows
    for bad, words in [({"endingOffsets": "latest"}, "not valid in streaming"),
                       ({"endingOffsetsByTimestamp": '{"orders":{"0":5}}'}, "not valid in streaming"),
                       ({"commitToGroup": "g"}, "checkpointLocation"),
                       ({"startingOffsets": json.dumps({"orders": {"0": 1}})}, "all TopicPartitions"),
                       ({"subscribe": "nope"}, "nope")]:
        with pytest.raises(kafkalog.KafkaLogError, match=words):
            reader = ks.KafkaLogDataSource({**ok, **bad}).streamReader(ks.kafka_schema())
            reader.initialOffset()
    # minOffsetsPerTrigger=0, or -1 (Spark's stream runs with it), waits for nothing.
    for least in ("0", "-1"):
        reader = ks.KafkaLogDataSource({**ok, "minOffsetsPerTrigger": least, "startingOffsets": "earliest"}) \
            .streamReader(ks.kafka_schema())
        start = reader.initialOffset()
        first = reader.latestOffset(start, reader.getDefaultReadLimit())
        assert first != start and reader.latestOffset(first, reader.getDefaultReadLimit()) == first
    # Spark's Kafka source ignores endingTimestamp in a stream.
    with pytest.warns(UserWarning, match="endingtimestamp"):
        ks.KafkaLogDataSource({**ok, "endingTimestamp": "5"}).streamReader(ks.kafka_schema())


def test_stream_refused_options_reach_the_user_as_their_own_error(spark, tmp_path):
    """A running query with options wrong only in a stream fails with kafkalog's error, not with
    the `UnboundLocalError` of PySpark's stream runner, which stops the reader in a `finally`
    around making it (a reader refusing its options there never existed)."""
    d, recs = tmp_path / "data", []
    stream_records(d, "clicks", 0, [{"value": b"v", "timestamp": BASE_TS}], recs)
    for option, value in [("endingOffsets", "latest"), ("startingOffsets", json.dumps({"clicks": {"7": 1}}))]:
        with pytest.raises(Exception) as caught:
            stream_batches(spark, d, tmp_path / f"cp-{option}", subscribe="clicks", **{option: value})
        message = str(caught.value)
        assert "UnboundLocalError" not in message, message[:2000]
        assert "KafkaLogOptionError" in message or "KafkaLogError" in message, message[:2000]


def test_stream_min_offsets_per_trigger_waits_up_to_max_trigger_delay(tmp_path):
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMinRows

    d, recs = tmp_path / "data", []
    stream_records(d, "m", 0, [{"value": b"x", "timestamp": BASE_TS}] * 4, recs)
    source = ks.KafkaLogDataSource({"path": str(d), "subscribe": "m", "startingOffsets": "earliest",
                                    "minOffsetsPerTrigger": "10", "maxTriggerDelay": "1h"})
    reader = source.streamReader(ks.kafka_schema())
    assert reader.getDefaultReadLimit() == ReadMinRows(10)
    start = reader.initialOffset()
    assert start == {"m": {"0": 0}}
    # The first trigger never waits (as Spark's source: no micro-batch yet to wait from).
    first = reader.latestOffset(start, ReadMinRows(10))
    assert first == {"m": {"0": 4}}
    stream_records(d, "m", 0, [{"value": b"y", "timestamp": BASE_TS}] * 6, recs)
    assert reader.latestOffset(first, ReadMinRows(11)) == first          # 6 new offsets of 11: wait
    assert reader.latestOffset(first, ReadMinRows(6)) == {"m": {"0": 10}}
    assert reader.latestOffset(first, ReadAllAvailable()) == {"m": {"0": 10}}
    reader.max_trigger_delay_ms = 0                                       # the delay has passed
    assert reader.latestOffset(first, ReadMinRows(11)) == {"m": {"0": 10}}
    assert [(r.start, r.end) for r in reader.partitions(first, {"m": {"0": 10}})] == [(4, 10)]


def test_available_now_leaves_a_tail_under_min_offsets_per_trigger_as_spark_does(spark, tmp_path):
    """Spark's Kafka source (4.2.0, from a 4.4 broker, seen by a black-box tester) with
    availableNow, minOffsetsPerTrigger=50, maxOffsetsPerTrigger=100 and maxTriggerDelay=30s over
    backlogs of 200/20/3 runs two micro-batches of 98 rows and ends: the last 27 offsets are under
    the minimum and the delay has not passed, so they wait for a later run."""
    d, recs = tmp_path / "data", []
    for p, n in ((0, 200), (1, 20), (2, 3)):
        stream_records(d, "u", p, [{"value": b"v", "timestamp": BASE_TS}] * n, recs)
    opts = {"subscribe": "u", "startingOffsets": "earliest", "minOffsetsPerTrigger": "50",
            "maxOffsetsPerTrigger": "100", "maxTriggerDelay": "30s"}
    batches = stream_batches(spark, d, tmp_path / "cp", **opts)
    assert [len(b) for b in batches] == [98, 98]
    # The next run, the delay since the last micro-batch long passed: the tail is read.
    source = ks.KafkaLogDataSource(dict(opts, path=str(d)))
    reader = source.streamReader(ks.kafka_schema())
    reader.prepareForTriggerAvailableNow()
    end = {"u": {"0": 177, "1": 17, "2": 2}}
    assert reader.latestOffset(end, reader.getDefaultReadLimit()) == {"u": {"0": 200, "1": 20, "2": 3}}


def test_no_topic_selection_is_an_error(spark, data):
    d, _, _ = data
    expect_error(lambda: read(spark, d), "subscribe", "assign")


@pytest.mark.parametrize(
    "opts",
    [
        dict(subscribe="orders", assign='{"orders":[0]}'),
        dict(subscribe="orders", subscribePattern="orders"),
        dict(subscribePattern="orders", assign='{"orders":[0]}'),
    ],
)
def test_two_topic_selections_are_an_error(spark, data, opts):
    d, _, _ = data
    expect_error(lambda: read(spark, d, **opts), "subscribe", "assign", "one of")


# --------------------------------------------------------------------------------------------
# offsets


def test_starting_and_ending_offsets_json(spark, data):
    d, recs, _ = data
    df = read(
        spark,
        d,
        subscribe="orders",
        startingOffsets=json.dumps({"orders": {"0": 5, "1": -2, "2": 23}}),
        endingOffsets=json.dumps({"orders": {"0": 12, "1": 4, "2": -1}}),
    )
    got = collect(df)
    want = expected(
        recs,
        topics={"orders"},
        pred=lambda e: (e["partition"] == 0 and 5 <= e["offset"] < 12) or (e["partition"] == 1 and e["offset"] < 4),
    )
    assert got == want
    assert offsets(got, partition=0) == list(range(5, 12))
    assert offsets(got, partition=1) == [0, 1, 2, 3]
    assert offsets(got, partition=2) == []


def test_latest_in_starting_json_and_earliest_in_ending_json_are_errors(spark, data):
    """As Spark's Kafka source: -1 (latest) can't start, -2 (earliest) can't end a batch query."""
    d, _, _ = data
    expect_error(lambda: read(spark, d, assign='{"orders":[0]}', startingOffsets='{"orders":{"0":-1}}'), "latest", "startingOffsets")
    expect_error(lambda: read(spark, d, assign='{"orders":[0]}', endingOffsets='{"orders":{"0":-2}}'), "earliest", "endingOffsets")


def test_explicit_earliest_latest_strings(spark, data):
    d, recs, _ = data
    got = collect(read(spark, d, subscribe="orders", startingOffsets="earliest", endingOffsets="latest"))
    assert got == expected(recs, topics={"orders"})


def test_start_equal_end_gives_no_rows(spark, data):
    d, _, _ = data
    df = read(spark, d, assign='{"orders":[0]}', startingOffsets='{"orders":{"0":4}}', endingOffsets='{"orders":{"0":4}}')
    assert df.count() == 0


def test_starting_offsets_json_must_list_every_partition(spark, data):
    d, _, _ = data
    expect_error(lambda: read(spark, d, subscribe="orders", startingOffsets='{"orders":{"0":1,"1":1}}'), "orders", "partition")


def test_ending_offsets_json_must_list_every_partition(spark, data):
    d, _, _ = data
    expect_error(lambda: read(spark, d, subscribe="orders", endingOffsets='{"orders":{"0":1}}'), "orders", "partition")


def test_starting_offsets_latest_is_an_error_for_batch(spark, data):
    d, _, _ = data
    expect_error(lambda: read(spark, d, subscribe="orders", startingOffsets="latest"), "latest", "startingOffsets")
    # A JSON asking for latest: Spark's message names the partition.
    expect_error(lambda: read(spark, d, assign='{"orders":[0]}', startingOffsets='{"orders":{"0":-1}}'),
                 "startingOffsets for orders-0 can't be latest")


def test_ending_offsets_earliest_is_an_error_for_batch(spark, data):
    d, _, _ = data
    expect_error(lambda: read(spark, d, subscribe="orders", endingOffsets="earliest"), "earliest", "endingOffsets")
    expect_error(lambda: read(spark, d, assign='{"orders":[0]}', endingOffsets='{"orders":{"0":-2}}'),
                 "endingOffsets for orders-0 can't be earliest")


def test_start_after_end_is_an_error(spark, data):
    d, _, _ = data
    expect_error(
        lambda: read(spark, d, assign='{"orders":[0]}', startingOffsets='{"orders":{"0":8}}', endingOffsets='{"orders":{"0":3}}'),
        "offset",
    )


def test_start_after_latest_is_an_error(spark, data):
    d, _, _ = data
    expect_error(lambda: read(spark, d, assign='{"orders":[0]}', startingOffsets='{"orders":{"0":1000}}'), "offset")


def test_invalid_offsets_json_is_an_error(spark, data):
    d, _, _ = data
    expect_error(lambda: read(spark, d, subscribe="orders", startingOffsets="{not json"), "startingOffsets", "json", "offset")


@pytest.mark.parametrize("opts", [
    {"subscribe": "orders", "startingOffsets": '{"orders":{"0":"3","1":-2,"2":-2}}'},
    {"subscribe": "orders", "startingOffsets": '{"orders":{"0":3.5,"1":-2,"2":-2}}'},
    {"subscribe": "orders", "startingOffsets": '{"orders":{"0":true,"1":-2,"2":-2}}'},
    {"subscribe": "orders", "startingOffsets": '{"orders":{"zero":1,"1":-2,"2":-2}}'},
    {"subscribe": "orders", "startingOffsetsByTimestamp": '{"orders":{"0":"5","1":5,"2":5}}'},
    {"assign": '{"orders":["0"]}'},
    {"assign": '{"orders":[0.5]}'},
    {"assign": '{"orders":[false]}'},
])
def test_offsets_and_partitions_in_json_options_are_json_integers(spark, data, opts):
    # Spark's source reads them with json4s into Long and Int: "3" is refused, not read as 3; 3.0 is
    # read as 3 (test_options_spark_takes_that_were_refused), a fraction refused here.
    d, _, _ = data
    expect_error(lambda: read(spark, d, **opts), "must be JSON like")


# --------------------------------------------------------------------------------------------
# timestamps -> offsets (ListOffsets)


def test_starting_and_ending_timestamp(spark, data):
    d, recs, _ = data
    # p0 timestamps by offset: 1000 2000 3000 2500 4000 5000; p1: 500 3000 7000
    got = collect(read(spark, d, subscribe="ts", startingTimestamp="2600", endingTimestamp="6000"))
    assert offsets(got, partition=0) == [2, 3, 4, 5]  # start: first ts >= 2600 is offset 2; end: none -> latest
    assert offsets(got, partition=1) == [1]  # start 1 (3000); end: first ts >= 6000 is offset 2
    assert got == expected(recs, topics={"ts"}, pred=lambda e: (e["partition"], e["offset"]) in {(0, 2), (0, 3), (0, 4), (0, 5), (1, 1)})


def test_starting_timestamp_non_monotonic(spark, data):
    d, _, _ = data
    got = collect(read(spark, d, assign='{"ts":[0]}', startingTimestamp="2500"))
    assert offsets(got) == [2, 3, 4, 5], "first offset whose timestamp >= 2500 is 2 (3000), not 3 (2500)"
    got = collect(read(spark, d, assign='{"ts":[0]}', startingTimestamp="3500"))
    assert offsets(got) == [4, 5]
    got = collect(read(spark, d, assign='{"ts":[0]}', startingTimestamp="0"))
    assert offsets(got) == [0, 1, 2, 3, 4, 5]


def test_ending_timestamp_exclusive(spark, data):
    d, _, _ = data
    got = collect(read(spark, d, assign='{"ts":[0]}', endingTimestamp="3000"))
    assert offsets(got) == [0, 1], "ending offset = first offset with ts >= 3000 (offset 2), exclusive"
    got = collect(read(spark, d, assign='{"ts":[0]}', endingTimestamp="2001"))
    assert offsets(got) == [0, 1]


def test_offsets_by_timestamp_json(spark, data):
    d, _, _ = data
    got = collect(
        read(
            spark,
            d,
            subscribe="ts",
            startingOffsetsByTimestamp=json.dumps({"ts": {"0": 2500, "1": 0}}),
            endingOffsetsByTimestamp=json.dumps({"ts": {"0": 3500, "1": 99999}}),
        )
    )
    assert offsets(got, partition=0) == [2, 3]
    assert offsets(got, partition=1) == [0, 1, 2]


def test_starting_timestamp_no_match_is_an_error_by_default(spark, data):
    d, _, _ = data
    expect_error(lambda: read(spark, d, subscribe="ts", startingTimestamp="5001"), "timestamp", "offset")
    expect_error(
        lambda: read(spark, d, subscribe="ts", startingTimestamp="5001", startingOffsetsByTimestampStrategy="error"),
        "timestamp",
        "offset",
    )
    expect_error(
        lambda: read(spark, d, subscribe="ts", startingOffsetsByTimestamp=json.dumps({"ts": {"0": 99999, "1": 0}})),
        "timestamp",
        "offset",
    )


def test_starting_timestamp_no_match_strategy_latest(spark, data):
    d, _, _ = data
    got = collect(read(spark, d, subscribe="ts", startingTimestamp="5001", startingOffsetsByTimestampStrategy="latest"))
    assert offsets(got, partition=0) == []
    assert offsets(got, partition=1) == [2]
    got = collect(read(spark, d, subscribe="ts", startingTimestamp="99999", startingOffsetsByTimestampStrategy="latest"))
    assert got == []


def test_timestamp_options_take_precedence_over_offsets(spark, data):
    d, _, _ = data
    got = collect(
        read(
            spark,
            d,
            assign='{"ts":[0]}',
            startingOffsets='{"ts":{"0":0}}',
            startingTimestamp="3500",
        )
    )
    assert offsets(got) == [4, 5]
    got = collect(
        read(
            spark,
            d,
            assign='{"ts":[0]}',
            startingOffsets='{"ts":{"0":5}}',
            startingOffsetsByTimestamp='{"ts":{"0":0}}',
        )
    )
    assert offsets(got) == [0, 1, 2, 3, 4, 5]
    got = collect(read(spark, d, assign='{"ts":[0]}', endingOffsets='{"ts":{"0":6}}', endingTimestamp="2001"))
    assert offsets(got) == [0, 1]


# --------------------------------------------------------------------------------------------
# isolation


def test_read_uncommitted_default(spark, data):
    d, recs, info = data
    got = collect(read(spark, d, subscribe="tx"))
    want = expected(recs, topics={"tx"})
    assert got == want
    vals = [r[1] for r in got]
    assert vals == [b"p0", b"p1", b"c0", b"c1", b"a0", b"a1", b"p2", b"i0", b"j0", b"i1", b"p3", b"o0", b"p4"]
    got2 = collect(read(spark, d, subscribe="tx", **{"kafka.isolation.level": "read_uncommitted"}))
    assert got2 == want


def test_read_committed(spark, data):
    d, recs, info = data
    got = collect(read(spark, d, subscribe="tx", **{"kafka.isolation.level": "read_committed"}))
    want = expected(
        recs,
        topics={"tx"},
        pred=lambda e: e["value"] not in info["tx_aborted"] and e["offset"] < info["tx_lso"],
    )
    assert [r[1] for r in got] == [b"p0", b"p1", b"c0", b"c1", b"p2", b"j0", b"p3"]
    assert got == want
    # cross-check with kafkalog's own read_committed reader
    log = Log(d / "tx-0")
    try:
        own = [(r.offset, r.value) for r in log.records(isolation="read_committed")]
    finally:
        log.close()
    assert [(r[4], r[1]) for r in got] == own


def test_read_committed_split_ranges(spark, data):
    """Splitting the partition must not let aborted records leak at range boundaries."""
    d, _, _ = data
    iso = {"kafka.isolation.level": "read_committed"}
    whole = collect(read(spark, d, subscribe="tx", **iso))
    df = read(spark, d, subscribe="tx", maxRecordsPerPartition="2", **iso)
    assert df.rdd.getNumPartitions() >= 2
    assert collect(df) == whole
    df = read(spark, d, subscribe="tx", startingOffsets='{"tx":{"0":6}}', **iso)
    assert [r[1] for r in collect(df)] == [b"p2", b"j0", b"p3"]


def test_control_records_never_appear(spark, data):
    d, _, info = data
    got = collect(read(spark, d, subscribe="tx"))
    marker_offsets = {4, 7, 12, 13}
    assert not marker_offsets & set(offsets(got))
    assert all(r[1] is not None for r in got)


# --------------------------------------------------------------------------------------------
# failOnDataLoss


def test_earliest_starts_at_log_start_offset(spark, data):
    d, recs, info = data
    got = collect(read(spark, d, subscribe="trunc"))
    assert offsets(got) == list(range(info["trunc_start"], 20))
    assert got == expected(recs, topics={"trunc"})
    got = collect(read(spark, d, subscribe="trunc", startingOffsets='{"trunc":{"0":-2}}'))
    assert offsets(got) == list(range(7, 20))


def test_fail_on_data_loss_default(spark, data):
    d, _, _ = data
    expect_error(lambda: read(spark, d, subscribe="trunc", startingOffsets='{"trunc":{"0":3}}'), "failOnDataLoss", "data loss", "lost", "offset")
    expect_error(
        lambda: read(spark, d, subscribe="trunc", startingOffsets='{"trunc":{"0":3}}', failOnDataLoss="true"),
        "failOnDataLoss",
        "data loss",
        "lost",
        "offset",
    )


def test_fail_on_data_loss_false(spark, data):
    d, _, _ = data
    got = collect(read(spark, d, subscribe="trunc", startingOffsets='{"trunc":{"0":3}}', failOnDataLoss="false"))
    assert offsets(got) == list(range(7, 20))
    got = collect(read(spark, d, subscribe="trunc", startingOffsets='{"trunc":{"0":9}}'))
    assert offsets(got) == list(range(9, 20))


def test_fail_on_data_loss_false_with_a_range_wholly_lost_reads_nothing_from_it(spark, data):
    # Spark's KafkaSourceRDD steps over lost offsets at read time: a range ending below the log
    # start (7) reads nothing, and the other topics of the query are read as usual.
    d, recs, _ = data
    for start, end in ((2, 5), (3, 3)):
        got = collect(read(spark, d, subscribe="trunc", failOnDataLoss="false",
                           startingOffsets=f'{{"trunc":{{"0":{start}}}}}',
                           endingOffsets=f'{{"trunc":{{"0":{end}}}}}'))
        assert got == []
    got = collect(read(spark, d, assign=json.dumps({"trunc": [0], "other": [0]}), failOnDataLoss="false",
                       startingOffsets='{"trunc":{"0":2},"other":{"0":-2}}',
                       endingOffsets='{"trunc":{"0":5},"other":{"0":-1}}'))
    assert got == expected(recs, topics={"other"})
    expect_error(lambda: read(spark, d, subscribe="trunc", startingOffsets='{"trunc":{"0":2}}',
                              endingOffsets='{"trunc":{"0":5}}'), "failOnDataLoss")


def test_offsets_below_minus_two_are_an_error(spark, data):
    d, _, _ = data
    for flag in ("true", "false"):
        expect_error(lambda: read(spark, d, subscribe="trunc", failOnDataLoss=flag,
                                  startingOffsets='{"trunc":{"0":-3}}'), "are not offsets")


# --------------------------------------------------------------------------------------------
# splitting


def test_splits_are_those_of_sparks_offset_range_calculator(spark):
    """minPartitions and maxRecordsPerPartition cut offset ranges into the pieces Spark's own
    KafkaOffsetRangeCalculator (the connector's class, called in Spark's JVM) cuts: the same
    count, boundaries and order, over random ranges (empty ones too, which kafkalog keeps as a
    piece of their own and Spark drops)."""
    import random

    jvm = spark._jvm
    kafka010 = jvm.org.apache.spark.sql.kafka010
    as_scala = jvm.scala.jdk.javaapi.CollectionConverters.asScala

    def sparks(ranges, min_partitions, max_records):
        options = jvm.java.util.HashMap()
        if min_partitions is not None:
            options.put("minPartitions", str(min_partitions))
        if max_records is not None:
            options.put("maxRecordsPerPartition", str(max_records))
        calculator = kafka010.KafkaOffsetRangeCalculator.apply(jvm.org.apache.spark.sql.util.CaseInsensitiveStringMap(options))
        given = jvm.java.util.ArrayList()
        for p, (start, end) in enumerate(ranges):
            given.add(kafka010.KafkaOffsetRange(jvm.org.apache.kafka.common.TopicPartition("t", p), start, end,
                                                jvm.scala.Option.empty()))
        out = calculator.getRanges(as_scala(given).toList(), as_scala(jvm.java.util.ArrayList()).toList())
        return [(out.apply(i).partition(), out.apply(i).fromOffset(), out.apply(i).untilOffset())
                for i in range(out.size())]

    def ours(ranges, min_partitions, max_records):
        given = [ks.OffsetRange("/x", "t", p, start, end) for p, (start, end) in enumerate(ranges)]
        return [(r.partition, r.start, r.end) for r in ks._split(given, max_records, min_partitions) if r.size]

    rng = random.Random(11)
    cases = [([(0, 50), (0, 50)], 13, None), ([(5, 5), (0, 100)], 3, None), ([(0, 7)], None, 2)]
    for _ in range(150):
        ranges = []
        for _ in range(rng.randint(1, 6)):
            start = rng.randint(0, 1000)
            ranges.append((start, start + rng.choice([0, 1, 2, 3, rng.randint(0, 50), rng.randint(0, 5000)])))
        cases.append((ranges, rng.choice([None, rng.randint(1, 40)]), rng.choice([None, rng.randint(1, 300)])))
    for ranges, min_partitions, max_records in cases:
        assert ours(ranges, min_partitions, max_records) == sparks(ranges, min_partitions, max_records), \
            (ranges, min_partitions, max_records)


def test_min_partitions(spark, data):
    d, recs, _ = data
    whole = collect(read(spark, d, subscribe="big"))
    df = read(spark, d, subscribe="big", minPartitions="5")
    assert df.rdd.getNumPartitions() >= 5
    assert collect(df) == whole == expected(recs, topics={"big"})


def test_min_partitions_several_topics(spark, data):
    d, recs, _ = data
    df = read(spark, d, subscribe="orders,other", minPartitions="8")
    # About 8, as Spark's calculator rounds each range's share (here 7: exact pieces in
    # test_splits_are_those_of_sparks_offset_range_calculator).
    assert 7 <= df.rdd.getNumPartitions() <= 9
    assert collect(df, headers=False) == expected(recs, topics={"orders", "other"})


def test_max_records_per_partition_splits_compressed_batches(spark, data):
    d, recs, _ = data
    # orders partitions hold 23 records each in batches of 3 and 5: splits fall inside batches
    df = read(spark, d, subscribe="orders", maxRecordsPerPartition="4", includeHeaders="true")
    assert df.rdd.getNumPartitions() >= 3 * math.ceil(23 / 4)
    assert collect(df, headers=True) == expected(recs, topics={"orders"}, headers=True)
    df = read(spark, d, subscribe="big", maxRecordsPerPartition="40", startingOffsets='{"big":{"0":3}}', endingOffsets='{"big":{"0":298}}')
    assert df.rdd.getNumPartitions() >= math.ceil(295 / 40)
    assert offsets(collect(df)) == list(range(3, 298))


def test_min_partitions_above_record_count(spark, data):
    d, recs, _ = data
    df = read(spark, d, subscribe="other", minPartitions="10")
    assert df.rdd.getNumPartitions() >= 2
    assert collect(df) == expected(recs, topics={"other"})


@pytest.mark.parametrize("opt", ["minPartitions", "maxRecordsPerPartition"])
def test_split_options_must_be_positive(spark, data, opt):
    d, _, _ = data
    expect_error(lambda: read(spark, d, subscribe="other", **{opt: "0"}), opt)


def test_split_with_non_contiguous_offsets(spark, data):
    """tx has control-record holes: splitting by offsets must still give each record once."""
    d, recs, _ = data
    df = read(spark, d, subscribe="tx", minPartitions="6")
    assert df.rdd.getNumPartitions() >= 6
    assert collect(df) == expected(recs, topics={"tx"})


# --------------------------------------------------------------------------------------------
# option validation and paths


def test_unknown_option_lists_valid_ones(spark, data):
    d, _, _ = data
    msg = expect_error(lambda: read(spark, d, subscribe="orders", startingOffset="earliest"), "startingOffset")
    assert "startingOffsets" in msg and "subscribePattern" in msg, (
        f"the error should list the valid options, spelt as Spark's documentation spells them: {msg[:2000]}"
    )


def test_options_that_change_nothing_here_are_ignored_with_a_warning(spark, data):
    """A job moves over from Spark's Kafka source by changing the format and adding `path`: its
    consumer configs and stream-only options (Spark ignores those in batch queries too) read the
    same rows, with one warning naming them."""
    d, _, _ = data
    moved = {"kafka.bootstrap.servers": "broker:9092", "kafka.group.id": "g", "kafka.security.protocol": "SASL_SSL",
             "kafka.sasl.jaas.config": "x", "maxOffsetsPerTrigger": "100", "groupIdPrefix": "p",
             "kafkaConsumer.pollTimeoutMs": "512", "fetchOffset.numRetries": "3"}
    assert collect(read(spark, d, subscribe="orders", **moved)) == collect(read(spark, d, subscribe="orders"))
    with pytest.warns(UserWarning) as caught:
        ks.plan_read({"path": str(d), "subscribe": "orders", **moved})
    text = " ".join(str(w.message) for w in caught)
    assert all(name.lower() in text for name in moved), text
    # Without `path`, the error says what replaces the broker.
    expect_error(lambda: spark.read.format("kafkalog").option("subscribe", "orders")
                 .option("kafka.bootstrap.servers", "broker:9092").load(), "path is required")


@pytest.mark.parametrize("opt", ["kafka.auto.offset.reset", "kafka.value.deserializer", "kafka.enable.auto.commit",
                                 "kafka.interceptor.classes"])
def test_client_configs_spark_refuses_are_refused(spark, data, opt):
    d, _, _ = data
    expect_error(lambda: read(spark, d, subscribe="orders", **{opt: "x"}), opt)


def test_a_batch_read_has_a_partition_per_topic_partition_empty_ones_too(spark, tmp_path):
    """As Spark's batch source plans a read (a black-box tester counted 8 partitions where Spark
    had 9): one per topic-partition, empty ranges included, until minPartitions divides them.
    A serializer is a sink's setting: Spark's source takes one on a read, and so does this."""
    d = tmp_path / "data"
    d.mkdir()
    _prepare_topic(d, "sparse", 3, per_partition=0)
    with Log(d / "sparse-1", read_only=False) as log:
        log.append([{"value": b"only"}])
    df = read(spark, d, subscribe="sparse")
    assert (df.rdd.getNumPartitions(), df.count()) == (3, 1)
    assert read(spark, d, subscribe="sparse", minPartitions="4").rdd.getNumPartitions() == 1
    assert read(spark, d, subscribe="sparse", **{"kafka.key.serializer": "x"}).count() == 1
    with pytest.warns(UserWarning, match="kafka.key.serializer"):
        ks.plan_read({"path": str(d), "subscribe": "sparse", "kafka.key.serializer": "x"})


def test_invalid_isolation_level(spark, data):
    d, _, _ = data
    expect_error(lambda: read(spark, d, subscribe="tx", **{"kafka.isolation.level": "serializable"}), "isolation", "serializable")
    # Kafka's ConfigDef matches the value exactly, as Spark's source passes it on.
    expect_error(lambda: read(spark, d, subscribe="tx", **{"kafka.isolation.level": "READ_COMMITTED"}),
                 "READ_COMMITTED")


def test_path_does_not_exist(spark, tmp_path):
    expect_error(lambda: read(spark, tmp_path / "nope", subscribe="orders"), "nope", "exist", "path")


def test_path_is_a_regular_file(spark, tmp_path):
    f = tmp_path / "file.txt"
    f.write_text("hello")
    expect_error(lambda: read(spark, f, subscribe="orders"), "file", "directory", "folder", "kafka", "path")


def test_path_is_not_kafka_data(spark, tmp_path):
    d = tmp_path / "notkafka"
    (d / "foo").mkdir(parents=True)
    (d / "foo" / "bar.txt").write_text("x")
    (d / "readme.txt").write_text("x")
    expect_error(lambda: read(spark, d, subscribe="foo"), "kafka", "partition", "log", "data")


def test_one_bad_path_among_several(spark, data, tmp_path):
    d, _, _ = data
    expect_error(lambda: read(spark, f"{d},{tmp_path / 'missing'}", subscribe="orders"), "missing", "exist", "path")


# --------------------------------------------------------------------------------------------
# write side


def writer(df, path, **opts):
    w = df.write.format("kafkalog").option("path", str(path)).mode("append")
    for k, v in opts.items():
        w = w.option(k, v)
    return w


def test_murmur2_partitioner():
    assert kafkalog._kafkalog.murmur2(b"21") == -973932308
    assert murmur2(b"21") == -973932308
    for key in [b"", b"a", b"ab", b"abc", b"key", b"21", b"user-123", bytes(range(37))]:
        assert kafkalog._kafkalog.murmur2(key) == murmur2(key), key
        for n in (1, 3, 7, 12):
            assert kafkalog._kafkalog.partition_for_key(key, n) == kafka_partition(key, n), (key, n)


def test_write_and_read_back(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    hdr = "array<struct<key:string,value:binary>>"
    df = spark.createDataFrame(
        [
            ("k1", "v1", [("a", bytearray(b"1")), ("b", None)]),
            (None, "v2", None),
            ("k3", "", []),
            ("k4", "v4 ünïcode", [("x", bytearray(b""))]),
        ],
        f"key string, value string, headers {hdr}",
    ).coalesce(1)
    writer(df, d, topic="out").save()
    check_data_dir_clean(d, ["out-0"])  # default: 1 partition
    recs = log_records(d / "out-0")
    assert [(r.offset, r.key, r.value) for r in recs] == [
        (0, b"k1", b"v1"),
        (1, None, b"v2"),
        (2, b"k3", b""),
        (3, b"k4", "v4 ünïcode".encode()),
    ]
    assert recs[0].headers == [("a", b"1"), ("b", None)]
    assert recs[1].headers == []
    assert recs[3].headers == [("x", b"")]
    assert all(r.timestamp > 0 and r.timestamp_type == "create_time" for r in recs)
    back = collect(read(spark, d, subscribe="out", includeHeaders="true"), headers=True)
    assert [(r[0], r[1], r[3], r[4], r[7]) for r in back] == [
        (b"k1", b"v1", 0, 0, [("a", b"1"), ("b", None)]),
        (None, b"v2", 0, 1, None),
        (b"k3", b"", 0, 2, None),
        (b"k4", "v4 ünïcode".encode(), 0, 3, [("x", b"")]),
    ]


def test_write_binary_columns_and_topic_column(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    df = spark.createDataFrame(
        [(bytearray(b"\x00\x01"), bytearray(b"\xff\xfe"), "ta"), (None, bytearray(b"x"), "tb"), (bytearray(b"k"), bytearray(b"y"), "ta")],
        "key binary, value binary, topic string",
    )
    writer(df, d).save()
    check_data_dir_clean(d, ["ta-0", "tb-0"])
    assert sorted((r.key, r.value) for r in log_records(d / "ta-0")) == [(b"\x00\x01", b"\xff\xfe"), (b"k", b"y")]
    assert [(r.key, r.value) for r in log_records(d / "tb-0")] == [(None, b"x")]


def test_topic_option_overrides_column(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    df = spark.createDataFrame([("v1", "ignored"), ("v2", "also-ignored")], "value string, topic string")
    writer(df, d, topic="forced").save()
    check_data_dir_clean(d, ["forced-0"])
    assert sorted(r.value for r in log_records(d / "forced-0")) == [b"v1", b"v2"]
    # Under the option the column is not read, whatever its type, as in Spark's sink (an int
    # column was refused; a black-box tester).
    numbers = spark.createDataFrame([("v3", 5)], "value string, topic int")
    writer(numbers, d, topic="forced").save()
    assert sorted(r.value for r in log_records(d / "forced-0")) == [b"v1", b"v2", b"v3"]


def test_write_keyed_rows_use_murmur2(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    keys = [f"user-{i}" for i in range(60)]
    df = spark.createDataFrame([(k, f"val-{k}") for k in keys], "key string, value string").repartition(3)
    writer(df, d, topic="users", partitions="4").save()
    check_data_dir_clean(d, [f"users-{p}" for p in range(4)])
    seen = {}
    for p in range(4):
        for r in log_records(d / f"users-{p}"):
            seen[r.key.decode()] = (p, r.value)
    assert sorted(seen) == sorted(keys)
    for k in keys:
        assert seen[k] == (kafka_partition(k.encode(), 4), f"val-{k}".encode()), k
        assert seen[k][0] == kafkalog._kafkalog.partition_for_key(k.encode(), 4)


def test_write_creates_all_partitions(spark, tmp_path):
    """partitions=N creates the topic with N partitions even if some receive no row, so that a
    later keyed write hashes over the same partition count."""
    d = tmp_path / "w"
    d.mkdir()
    df = spark.createDataFrame([("only", 1)], "value string, partition int")
    writer(df, d, topic="sparse", partitions="5").save()
    check_data_dir_clean(d, [f"sparse-{p}" for p in range(5)])
    keys = [f"k{i}" for i in range(30)]
    df2 = spark.createDataFrame([(k, "x") for k in keys], "key string, value string")
    writer(df2, d, topic="sparse").save()
    for p in range(5):
        got = {r.key.decode() for r in log_records(d / f"sparse-{p}") if r.key is not None}
        assert got == {k for k in keys if kafka_partition(k.encode(), 5) == p}, p


def test_write_existing_topic_uses_its_partition_count(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    for p in range(3):
        Log(d / f"pre-{p}", read_only=False, create=True).close()
    keys = [f"key{i}" for i in range(40)]
    df = spark.createDataFrame([(k, "x") for k in keys], "key string, value string")
    writer(df, d, topic="pre").save()
    check_data_dir_clean(d, [f"pre-{p}" for p in range(3)])
    for p in range(3):
        got = sorted(r.key.decode() for r in log_records(d / f"pre-{p}"))
        assert got == sorted(k for k in keys if kafka_partition(k.encode(), 3) == p), p


def test_write_explicit_partition_column_wins(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    rows = [(f"k{i}", f"v{i}", i % 3) for i in range(30)]
    df = spark.createDataFrame(rows, "key string, value string, partition int").repartition(2)
    writer(df, d, topic="exp", partitions="3").save()
    for p in range(3):
        got = sorted(r.value.decode() for r in log_records(d / f"exp-{p}"))
        assert got == sorted(v for _, v, q in rows if q == p), p


def test_write_without_key_or_partition_goes_to_valid_partitions(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    df = spark.range(0, 50, 1, 3).selectExpr("cast(id as string) AS value")
    writer(df, d, topic="free", partitions="3").save()
    check_data_dir_clean(d, [f"free-{p}" for p in range(3)])
    vals = []
    for p in range(3):
        recs = log_records(d / f"free-{p}")
        assert [r.offset for r in recs] == list(range(len(recs))), "offsets contiguous from 0"
        vals += [int(r.value) for r in recs]
    assert sorted(vals) == list(range(50))


def test_append_twice_continues_offsets(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    df = spark.range(0, 20, 1, 4).selectExpr("cast(id as string) AS value")
    writer(df, d, topic="twice").save()
    writer(df, d, topic="twice").save()
    recs = log_records(d / "twice-0")
    assert [r.offset for r in recs] == list(range(40))
    assert sorted(int(r.value) for r in recs) == sorted(list(range(20)) * 2)
    assert sorted(int(r.value) for r in recs[20:]) == list(range(20)), "the second write comes after the first"
    back = read(spark, d, subscribe="twice")
    assert back.count() == 40
    check_data_dir_clean(d, ["twice-0"])


def test_many_spark_partitions_into_one_kafka_partition(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    df = spark.range(0, 400, 1, 8).selectExpr("cast(id as string) AS value", "0 AS partition")
    writer(df, d, topic="one").save()
    recs = log_records(d / "one-0")
    assert [r.offset for r in recs] == list(range(400))
    assert sorted(int(r.value) for r in recs) == list(range(400))
    check_data_dir_clean(d, ["one-0"])


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_write_compression(spark, tmp_path, codec):
    d = tmp_path / "w"
    d.mkdir()
    df = spark.range(0, 30, 1, 1).selectExpr("cast(id as string) AS key", "repeat(cast(id as string), 50) AS value")
    writer(df, d, topic="c", **{"kafka.compression.type": codec}).save()
    batches = [b for b in log_batches(d / "c-0") if not b.is_control]
    assert batches and all(b.compression == codec for b in batches), [b.compression for b in batches]
    recs = log_records(d / "c-0")
    assert [(r.key, r.value) for r in recs] == [(str(i).encode(), str(i).encode() * 50) for i in range(30)]


def test_write_invalid_compression_is_an_error(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    df = spark.createDataFrame([("v",)], "value string")
    expect_error(lambda: writer(df, d, topic="c", **{"kafka.compression.type": "brotli"}).save(), "compression", "brotli")


def test_write_batch_size(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    df = spark.range(0, 200, 1, 1).selectExpr("repeat('x', 100) AS value")
    writer(df, d, topic="small", **{"kafka.batch.size": "1024"}).save()
    writer(df, d, topic="dflt").save()
    small = log_batches(d / "small-0")
    dflt = log_batches(d / "dflt-0")
    assert sum(b.records_count for b in small) == 200
    assert len(small) >= 10, f"batch.size=1024 with 200 records of ~100 bytes: {len(small)} batches"
    assert len(small) > len(dflt)
    assert all(b.size_in_bytes <= 1024 + 200 for b in small), [b.size_in_bytes for b in small]


def test_write_value_column_required(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    df = spark.createDataFrame([("k",)], "key string")
    expect_error(lambda: writer(df, d, topic="t").save(), "value")
    check_data_dir_clean(d, [])


def test_write_without_topic_is_an_error(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    df = spark.createDataFrame([("v",)], "value string")
    expect_error(lambda: writer(df, d).save(), "topic")
    check_data_dir_clean(d, [])


@pytest.mark.parametrize("schema, rows, words", [
    ("key string", [("k",)], ["needs a 'value' column"]),
    ("key string", [], ["needs a 'value' column"]),
    ("value string", [], ["'topic' option or a 'topic' column"]),
    ("value string, key int", [], ["column 'key' has type int32"]),
    ("value string, partition string", [], ["column 'partition' has type"]),
    ("value string, headers array<string>", [], ["column 'headers'"]),
])
def test_write_columns_are_checked_on_the_driver_before_any_task(spark, tmp_path, schema, rows, words):
    """As Spark's Kafka sink analyses the write: the error comes before any task runs (no Python
    worker traceback, nothing staged), an empty DataFrame included."""
    d = tmp_path / "w"
    d.mkdir()
    df = spark.createDataFrame(rows, schema)
    opts = {} if "'topic' option" in words[0] else {"topic": "t"}
    msg = expect_error(lambda: writer(df, d, **opts).save(), *words)
    assert "Task" not in msg and "stage" not in msg.lower(), msg[:2000]
    check_data_dir_clean(d, [])
    assert not list(tmp_path.glob(".w.kafkalog-staging/*")), "a task staged something"


def test_write_creates_no_topic_in_a_brokers_log_dir(spark, tmp_path):
    """A broker would delete the folders of a topic it does not know as strays: the write is
    refused on the driver before any task, and writes into the broker's own topics go on."""
    d = tmp_path / "w"
    d.mkdir()
    kafkalog.Topic.create(d, "known", partitions=1)
    (d / "meta.properties").write_text("version=1\nnode.id=1\n")
    df = spark.createDataFrame([("v",)], "value string")
    before = sorted(p.name for p in d.iterdir())
    msg = expect_error(lambda: writer(df, d, topic="unknown").save(), "broker's log dir")
    assert "Task" not in msg, msg[:2000]
    assert sorted(p.name for p in d.iterdir()) == before
    # No cluster metadata beside it (a ZooKeeper-mode broker's dir): the topic's configs are not
    # on disk, so the write is refused on the driver until they are given.
    msg = expect_error(lambda: writer(df, d, topic="known").save(), "set_config")
    assert "Task" not in msg, msg[:2000]
    kafkalog.Topic(d, "known").set_config({})
    writer(df, d, topic="known").save()
    assert kafkalog.Log(d / "known-0").log_end_offset == 1


def test_write_mode_overwrite_is_an_error(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    Log(d / "t-0", read_only=False, create=True).close()
    before = leos(d)
    df = spark.createDataFrame([("v",)], "value string")
    expect_error(
        lambda: df.write.format("kafkalog").option("path", str(d)).option("topic", "t").mode("overwrite").save(),
        "overwrite",
        "append",
        "mode",
    )
    assert leos(d) == before
    check_data_dir_clean(d, ["t-0"])


def _prepare_topic(d, topic, n, per_partition=3):
    for p in range(n):
        log = Log(d / f"{topic}-{p}", read_only=False, create=True)
        if per_partition:
            log.append([{"value": b"pre-%d" % i, "timestamp": BASE_TS} for i in range(per_partition)])
        log.close()


def test_write_partition_out_of_range_changes_nothing(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    _prepare_topic(d, "t", 2)
    before = leos(d)
    df = spark.createDataFrame([("a", 0), ("b", 1), ("c", 2)], "value string, partition int")
    expect_error(lambda: writer(df, d, topic="t").save(), "partition")
    assert leos(d) == before
    check_data_dir_clean(d, ["t-0", "t-1"])
    df = spark.createDataFrame([("a", 0), ("b", -1)], "value string, partition int")
    expect_error(lambda: writer(df, d, topic="t").save(), "partition")
    assert leos(d) == before
    check_data_dir_clean(d, ["t-0", "t-1"])


def test_write_failure_in_last_task_is_all_or_nothing(spark, tmp_path):
    """4 Spark partitions; only the very last row of the last one is bad. The tasks that
    succeeded (and the good rows of the failing one) must leave no trace in any log."""
    d = tmp_path / "w"
    d.mkdir()
    _prepare_topic(d, "t", 3)
    _prepare_topic(d, "u", 1)
    before = leos(d)
    # even ids -> topic t (3 partitions), odd ids -> topic u (1 partition); id 399 (the last row of
    # the last Spark partition) names partition 7 of u, which does not exist.
    df = spark.range(0, 400, 1, 4).selectExpr(
        "cast(id as string) AS value",
        "cast(id as string) AS key",
        "CASE WHEN id % 2 = 0 THEN 't' ELSE 'u' END AS topic",
        "CASE WHEN id = 399 THEN 7 WHEN id % 2 = 0 THEN cast(id % 3 AS int) ELSE 0 END AS partition",
    )
    assert df.rdd.getNumPartitions() == 4
    expect_error(lambda: writer(df, d).save(), "partition")
    assert leos(d) == before, "a failed write job must not change any log"
    check_data_dir_clean(d, ["t-0", "t-1", "t-2", "u-0"])
    for p in range(3):
        assert [r.value for r in log_records(d / f"t-{p}")] == [b"pre-0", b"pre-1", b"pre-2"]


def test_write_failure_does_not_create_topics(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    _prepare_topic(d, "old", 1)
    before = leos(d)
    df = spark.range(0, 40, 1, 4).selectExpr(
        "cast(id as string) AS value",
        "CASE WHEN id < 20 THEN 'old' ELSE 'new' END AS topic",
        "CASE WHEN id = 39 THEN NULL ELSE 'k' END AS key",
        "CASE WHEN id = 39 THEN 5 ELSE 0 END AS partition",
    )
    expect_error(lambda: writer(df, d, partitions="2").save(), "partition")
    assert leos(d) == before
    check_data_dir_clean(d, ["old-0"])


def test_write_null_topic_is_an_error_and_changes_nothing(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    _prepare_topic(d, "t", 1)
    before = leos(d)
    df = spark.range(0, 40, 1, 4).selectExpr("cast(id as string) AS value", "CASE WHEN id = 39 THEN NULL ELSE 't' END AS topic")
    expect_error(lambda: writer(df, d).save(), "topic")
    assert leos(d) == before
    check_data_dir_clean(d, ["t-0"])


def test_write_retried_task_is_written_once(spark, tmp_path):
    """The first attempt of the last task fails after its good rows were handed to the writer;
    Spark retries it (local[2,2]); every row must be in the log exactly once."""
    d = tmp_path / "w"
    d.mkdir()
    _prepare_topic(d, "r", 2, per_partition=0)

    from pyspark import TaskContext

    @F.udf("int")
    def part(i):
        ctx = TaskContext.get()
        if i == 39 and ctx is not None and ctx.attemptNumber() == 0:
            return 9  # out of range on the first attempt only
        return int(i % 2)

    df = spark.range(0, 40, 1, 4).select(
        F.col("id").cast("string").alias("value"), part.asNondeterministic()(F.col("id")).alias("partition")
    )
    sc = spark.sparkContext
    sc.setJobGroup("kl-retry", "write with a retried task")
    try:
        writer(df, d, topic="r").save()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    tracker = sc.statusTracker()
    failed = sum(
        tracker.getStageInfo(sid).numFailedTasks
        for j in tracker.getJobIdsForGroup("kl-retry")
        for sid in tracker.getJobInfo(j).stageIds
        if tracker.getStageInfo(sid) is not None
    )
    assert failed >= 1, "the first attempt of the last task was expected to fail"
    vals = []
    for p in range(2):
        recs = log_records(d / f"r-{p}")
        assert [r.offset for r in recs] == list(range(len(recs)))
        assert all(int(r.value) % 2 == p for r in recs)
        vals += [int(r.value) for r in recs]
    assert sorted(vals) == list(range(40)), "each row exactly once after a retried task"
    check_data_dir_clean(d, ["r-0", "r-1"])


def test_write_round_trip_through_reader(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    hdr = "array<struct<key:string,value:binary>>"
    src = spark.createDataFrame(
        [(f"k{i}".encode() if i % 5 else None, f"value-{i}".encode(), [("i", str(i).encode())] if i % 3 else None, i % 2) for i in range(50)],
        f"key binary, value binary, headers {hdr}, partition int",
    ).repartition(3)
    writer(src, d, topic="rt", partitions="2", **{"kafka.compression.type": "zstd"}).save()
    back = read(spark, d, subscribe="rt", includeHeaders="true").select("key", "value", "headers", "partition")
    norm = lambda rows: sorted(  # noqa: E731
        [
            (_b(r["key"]), _b(r["value"]), None if r["headers"] is None else [(h["key"], _b(h["value"])) for h in r["headers"]], r["partition"])
            for r in rows
        ],
        key=lambda t: t[1],
    )
    want = norm(src.collect())
    # a record written without headers reads back as NULL headers
    assert norm(back.collect()) == want
    check_data_dir_clean(d, ["rt-0", "rt-1"])


def test_write_null_value_and_null_partition(spark, tmp_path):
    """A null value is a tombstone; a null partition means 'no partition' (the key decides)."""
    d = tmp_path / "w"
    d.mkdir()
    keys = [f"key-{i}" for i in range(12)]
    df = spark.createDataFrame([(k, None if i % 4 == 0 else "v", None) for i, k in enumerate(keys)], "key string, value string, partition int")
    writer(df, d, topic="tomb", partitions="3").save()
    seen = {}
    for p in range(3):
        for r in log_records(d / f"tomb-{p}"):
            seen[r.key.decode()] = (p, r.value)
    assert seen == {k: (kafka_partition(k.encode(), 3), None if i % 4 == 0 else b"v") for i, k in enumerate(keys)}


def test_write_extra_columns_are_ignored(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    df = spark.createDataFrame([("k", "v", 1, "x")], "key string, value string, foo int, bar string")
    writer(df, d, topic="extra").save()
    assert [(r.key, r.value) for r in log_records(d / "extra-0")] == [(b"k", b"v")]


def test_write_value_of_wrong_type_is_an_error(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    df = spark.createDataFrame([(1,)], "value int")
    expect_error(lambda: writer(df, d, topic="t").save(), "value")
    check_data_dir_clean(d, [])


def test_write_partitions_must_be_positive(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    df = spark.createDataFrame([("v",)], "value string")
    expect_error(lambda: writer(df, d, topic="zero", partitions="0").save(), "partitions")
    check_data_dir_clean(d, [])


def test_write_path_is_a_partition_folder(spark, tmp_path):
    """The write path is a data dir. Given a partition folder, the write must fail or write
    into that partition; it must not create a data dir (checkpoints, <topic>-0) inside it."""
    d = tmp_path / "w"
    d.mkdir()
    _prepare_topic(d, "t", 1)
    before = leos(d)
    df = spark.createDataFrame([("v",)], "value string")
    try:
        writer(df, d / "t-0", topic="t").save()
    except Exception:  # noqa: BLE001 - an error is an acceptable answer
        assert leos(d) == before
    stray = [n for n in os.listdir(d / "t-0") if not PARTITION_FILE.match(n)]
    assert not stray, f"the write put foreign files into the partition folder t-0: {stray}"
    check_data_dir_clean(d, ["t-0"])


def test_write_too_large_record_changes_nothing(spark, tmp_path):
    """A record over max.message.bytes fails the job; no log changes and no topic is created."""
    d = tmp_path / "w"
    d.mkdir()
    _prepare_topic(d, "t", 3)
    before = leos(d)
    df = spark.range(0, 40, 1, 4).selectExpr(
        "CASE WHEN id = 39 THEN repeat('x', 3000000) ELSE cast(id as string) END AS value",
        "CASE WHEN id < 20 THEN 't' ELSE 'brandnew' END AS topic",
    )
    expect_error(lambda: writer(df, d).save(), "large", "max.message.bytes", "size")
    assert leos(d) == before, "a failed write job must not change or create any log"
    check_data_dir_clean(d, ["t-0", "t-1", "t-2"])


def test_write_stream_appends_each_micro_batch(spark, tmp_path):
    """writeStream.format("kafkalog"): a stream read from one data dir written into another, as
    a job moving off Spark's Kafka sink writes it; a second run of the query (same checkpoint)
    appends only what arrived since, and nothing stays beside the data dir (a black-box tester
    found an empty staging folder per micro-batch, and a failed micro-batch's late file)."""
    src, dst, recs = tmp_path / "src", tmp_path / "dst", []
    for i in range(0, 40, 10):
        stream_records(src, "clicks", i % 20 // 10, [{"key": b"k%d" % (i + j), "value": b"v%d" % (i + j),
                                                      "timestamp": BASE_TS + i + j} for j in range(10)], recs)

    def run():
        q = (spark.readStream.format("kafkalog").option("path", str(src)).option("subscribe", "clicks")
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "15").load()
             .selectExpr("key", "value", "partition")
             .writeStream.format("kafkalog").option("path", str(dst)).option("topic", "copy").option("partitions", "2")
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
        try:
            assert q.awaitTermination(180), "stream did not finish"
        finally:
            q.stop()
        assert q.exception() is None, q.exception()

    def copied():
        return sorted((r.key, r.value, p) for p in (0, 1) for r in log_records(dst / f"copy-{p}"))

    staging = tmp_path / ".dst.kafkalog-staging"
    run()
    assert copied() == sorted((r[0], r[1], r[3]) for r in expected(recs))
    assert not staging.exists(), sorted(staging.rglob("*"))
    # A staged file a task of a failed micro-batch wrote after its abort: the query's next
    # commit removes it (the query stages in one folder, named after its checkpoint).
    writer = ks.KafkaLogDataSource({"path": str(dst), "topic": "copy",
                                    "checkpointLocation": str(tmp_path / "cp")}).streamWriter(None, False)
    os.makedirs(writer.batch.staging)
    left = Path(writer.batch.staging) / "copy-0.task1-late.batches"
    left.write_bytes(b"staged after the abort")
    more = []
    stream_records(src, "clicks", 1, [{"key": b"late", "value": b"late", "timestamp": BASE_TS + 99}], more)
    run()
    assert copied() == sorted((r[0], r[1], r[3]) for r in expected(recs + more))
    assert not staging.exists(), sorted(staging.rglob("*"))


def test_write_follows_the_topics_configs(spark, tmp_path):
    """The commit appends as a broker would under each topic's configs (those Topic.create
    stored): a topic compression.type rewrites the batches, LogAppendTime stamps them, a compacted
    topic refuses keyless rows (the job fails, no log changes), and a max.message.bytes raised
    to 8 MiB takes a 5 MiB record (a staged batch past 4 MiB once read as corrupt)."""
    d = tmp_path / "w"
    d.mkdir()
    kafkalog.Topic.create(d, "z", partitions=1, config={"compression.type": "zstd"})
    kafkalog.Topic.create(d, "lat", partitions=1, config={"message.timestamp.type": "LogAppendTime"})
    kafkalog.Topic.create(d, "cmp", partitions=1, config={"cleanup.policy": "compact"})
    kafkalog.Topic.create(d, "big", partitions=1, config={"max.message.bytes": str(8 << 20)})
    keyed = spark.range(0, 20, 1, 2).selectExpr("cast(id as string) AS key", "cast(id as string) AS value",
                                               "timestamp'2001-01-01 00:00:00' AS timestamp")
    writer(keyed, d, topic="z", **{"kafka.compression.type": "gzip"}).save()
    assert {b.compression for b in log_batches(d / "z-0")} == {"zstd"}
    assert sorted(int(r.value) for r in log_records(d / "z-0")) == list(range(20))
    writer(keyed, d, topic="lat").save()
    stamped = log_records(d / "lat-0")
    assert {r.timestamp_type for r in stamped} == {"log_append_time"}
    assert all(r.timestamp > 1_700_000_000_000 for r in stamped), [r.timestamp for r in stamped]
    keyless = spark.range(0, 5, 1, 1).selectExpr("cast(id as string) AS value")
    expect_error(lambda: writer(keyless, d, topic="cmp").save(), "compacted topic")
    assert Log(d / "cmp-0").log_end_offset == 0
    writer(keyed, d, topic="cmp").save()
    assert Log(d / "cmp-0").log_end_offset == 20
    large = spark.range(0, 2, 1, 1).selectExpr("repeat('x', 5242880) AS value")
    writer(large, d, topic="big", **{"kafka.batch.size": str(16 << 20)}).save()
    assert [len(r.value) for r in log_records(d / "big-0")] == [5242880, 5242880]


def test_write_batch_size_past_max_message_bytes_splits_batches(spark, tmp_path):
    """kafka.batch.size above the topic's max.message.bytes closes each batch before it would go
    past the limit (Kafka's producer splits a batch the broker refused as too large): the write
    succeeds, uncompressed and compressed, every batch within the limit."""
    d = tmp_path / "w"
    d.mkdir()
    df = spark.range(0, 3000, 1, 1).selectExpr("repeat('x', 1000) AS value")
    for codec in ("none", "gzip"):
        writer(df, d, topic=f"b{codec}", **{"kafka.batch.size": "2000000", "kafka.compression.type": codec}).save()
        batches = log_batches(d / f"b{codec}-0")
        assert sum(b.records_count for b in batches) == 3000
        assert max(b.size_in_bytes for b in batches) <= 1048588, [b.size_in_bytes for b in batches]
    assert len(log_batches(d / "bnone-0")) >= 3


def test_write_failed_job_leaves_no_staged_files(spark, tmp_path):
    """A row failing in one of four tasks fails the job: every log stays as it was, and neither
    the failed task's nor the other tasks' staged batches stay behind beside the data dir. (The
    tasks race the driver's clean-up, which this fixture rarely loses: the steps of that race
    are played one by one in `test_a_failed_task_removes_its_staged_files`.)"""
    from pyspark.sql.functions import col, udf

    @udf("string")
    def fail_on_777(x):
        if x == "777":
            raise RuntimeError("row 777 refused")
        return x

    d = tmp_path / "w"
    d.mkdir()
    _prepare_topic(d, "f", 3)
    before = leos(d)
    # Shuffled into 4 tasks, which then run as the failed one's job is aborted.
    df = (spark.range(0, 1000, 1, 2).selectExpr("cast(id as string) AS key", "cast(id as string) AS v")
          .repartition(4).withColumn("value", fail_on_777(col("v"))).drop("v"))
    for _ in range(3):
        expect_error(lambda: writer(df, d, topic="f").save(), "777")
    assert leos(d) == before
    staging = tmp_path / ".w.kafkalog-staging"
    left = [str(p) for p in staging.rglob("*") if p.is_file()] if staging.exists() else []
    assert left == [], left


def test_a_failed_task_removes_its_staged_files(tmp_path):
    """A task's rows that fail part way (the stream Spark hands it raises: a UDF's error) take
    the task's staged files with them, and a task started after its job was aborted (the
    staging folder gone) fails without making the folder again: the race a failed job's other
    tasks run against the driver's clean-up, played step by step."""
    import pyarrow as pa

    d = tmp_path / "w"
    d.mkdir()
    _prepare_topic(d, "f", 3)
    staging = tmp_path / "staging" / "job"
    staging.mkdir(parents=True)
    schema = pa.schema([("key", pa.binary()), ("value", pa.binary())])

    def rows(fail_after):
        for i in range(0, 3000, 100):
            if i >= fail_after:
                raise RuntimeError("row refused")
            keys = [b"%d" % j for j in range(i, i + 100)]
            yield pa.record_batch([pa.array(keys, pa.binary()), pa.array(keys, pa.binary())], schema=schema)

    done = kafkalog._kafkalog.stage_arrow(pa.RecordBatchReader.from_batches(schema, rows(10**9)), d, staging,
                                          "task0", topic="f", batch_bytes=1024)
    assert sorted(p for _, p, _ in done) == [0, 1, 2] and all(os.path.exists(f) for _, _, f in done)
    with pytest.raises(Exception, match="row refused"):
        kafkalog._kafkalog.stage_arrow(pa.RecordBatchReader.from_batches(schema, rows(2000)), d, staging,
                                       "task1", topic="f", batch_bytes=1024)
    assert sorted(os.listdir(staging)) == sorted(os.path.basename(f) for _, _, f in done)
    shutil.rmtree(staging.parent)
    with pytest.raises(kafkalog.KafkaLogError, match="staging folder is gone"):
        kafkalog._kafkalog.stage_arrow(pa.RecordBatchReader.from_batches(schema, rows(10**9)), d, staging,
                                       "task2", topic="f")
    assert not staging.parent.exists()


def test_written_logs_are_valid_and_timestamp_searchable(spark, tmp_path):
    import time

    d = tmp_path / "w"
    d.mkdir()
    df = spark.range(0, 20, 1, 2).selectExpr("cast(id as string) AS value")
    writer(df, d, topic="tl").save()
    time.sleep(0.05)
    writer(df, d, topic="tl").save()
    log = Log(d / "tl-0")
    try:
        assert log.recovered_bytes_truncated == 0
        recs = list(log.records())
        batches = log.batches()
    finally:
        log.close()
    assert [r.offset for r in recs] == list(range(40))
    assert all(b.is_valid and b.magic == 2 and not b.is_transactional and not b.is_control for b in batches)
    assert all(r.timestamp_type == "create_time" for r in recs)
    # the first offset whose timestamp >= T, for T = the smallest timestamp of the second write
    t2 = min(r.timestamp for r in recs[20:])
    first = next(r.offset for r in recs if r.timestamp >= t2)
    got = offsets(collect(read(spark, d, subscribe="tl", startingTimestamp=str(t2))))
    assert got == list(range(first, 40))


def _error_summary(e):
    lines = str(e).splitlines()
    keep = [l.strip() for l in lines if re.search(r"Fatal Python error|crashed|Error:|Exception:", l) and not l.strip().startswith("at ")]
    return " | ".join(dict.fromkeys(keep[:6])) or lines[0][:300]


def test_concurrent_append_jobs_to_one_topic(spark, tmp_path):
    """Append jobs to the same topic at the same time, as concurrent producers would (three jobs
    that create the topic, then three that append to it). kafkalog allows one writer
    per log, so a job may fail with a clear error; but no job may crash a Python worker, and each
    job is all-or-nothing: its rows are all in the log exactly once, or none is."""
    import threading

    d = tmp_path / "w"
    d.mkdir()
    outcome = {}
    rounds = ("abc", "def")

    def job(tag):
        try:
            # PySpark runs a Python data source write only with an active JVM session in the thread
            spark._jvm.org.apache.spark.sql.classic.SparkSession.setActiveSession(spark._jsparkSession)
            df = spark.range(0, 300, 1, 3).selectExpr(f"concat('{tag}', cast(id as string)) AS value")
            writer(df, d, topic="conc").save()
            outcome[tag] = None
        except Exception as e:  # noqa: BLE001
            outcome[tag] = _error_summary(e)

    for tags in rounds:
        threads = [threading.Thread(target=job, args=(t,)) for t in tags]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    recs = log_records(d / "conc-0")
    assert [r.offset for r in recs] == list(range(len(recs))), "offsets contiguous"
    assert len({r.value for r in recs}) == len(recs), "no row twice"
    by_tag = {}
    for r in recs:
        by_tag.setdefault(r.value[:1].decode(), set()).add(int(r.value[1:]))
    crashed = {t: e for t, e in outcome.items() if e and re.search(r"crash|Fatal Python error|Bus error|Segmentation", e)}
    assert not crashed, f"concurrent append jobs crashed a Python worker: {crashed}"
    unclear = {t: e for t, e in outcome.items() if e and not re.search(r"writ", e, re.I)}
    assert not unclear, f"concurrent append jobs failed with unexpected errors: {unclear}"
    for tag, err in sorted(outcome.items()):
        if err is None:
            assert by_tag.get(tag) == set(range(300)), f"job {tag} succeeded but its rows are not all in the log"
        else:
            assert tag not in by_tag, f"job {tag} failed ({err}) but left {len(by_tag[tag])} rows in the log"
    assert any(e is None for e in outcome.values()), f"no job succeeded: {outcome}"
    check_data_dir_clean(d, ["conc-0"])


_APPENDER = r"""
import os, sys, time, kafkalog
path, stop = sys.argv[1], sys.argv[2]
end = time.time() + 60
n = 0
while time.time() < end and not os.path.exists(stop):
    log = kafkalog.Log(path, read_only=False, create=True)
    leo = log.log_end_offset
    log.append([{"value": b"live-%d" % (leo + i), "timestamp": 1700000000000 + n} for i in range(5)])
    log.close()
    n += 1
print(n)
"""


def test_read_while_another_process_appends(spark, tmp_path):
    """Reading a live data dir: another process keeps appending to (opening, appending, closing)
    the log while Spark reads it. Each read gives a consistent prefix of the log and no read
    crashes a Python worker."""
    import subprocess

    d = tmp_path / "live"
    d.mkdir()
    log = Log(d / "live-0", read_only=False, create=True)
    log.append([{"value": b"live-%d" % i, "timestamp": BASE_TS} for i in range(20)])
    log.close()
    stop = tmp_path / "stop"
    proc = subprocess.Popen([sys.executable, "-c", _APPENDER, str(d / "live-0"), str(stop)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    failures = []
    try:
        for i in range(8):
            try:
                rows = read(spark, d, subscribe="live", minPartitions="16").select("offset", "value").collect()
            except Exception as e:  # noqa: BLE001
                failures.append(f"read {i}: {_error_summary(e)}")
                continue
            got = sorted((r["offset"], bytes(r["value"])) for r in rows)
            n = len(got)
            if got != [(o, b"live-%d" % o) for o in range(n)]:
                failures.append(f"read {i}: not a consistent prefix of the log ({n} rows)")
    finally:
        stop.touch()
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    assert proc.returncode == 0, f"the appender failed: {err.decode()[-2000:]}"
    assert not failures, f"reads of a log being appended to failed: {failures}"


# --------------------------------------------------------------------------------------------
# consumer groups: a daily batch job picks up where yesterday's stopped


def test_a_daily_job_resumes_from_its_group(spark, tmp_path):
    d = tmp_path / "daily"
    t = kafkalog.Topic.create(d, "events", 3)

    def produce(day, n):
        with kafkalog.Producer(t, partitioner="round_robin") as p:
            for i in range(n):
                p.send(b"%s-%d" % (day, i))

    def job():
        df = (
            spark.read.format("kafkalog").option("path", str(d)).option("subscribe", "events")
            .option("startingOffsetsFromGroup", "daily").option("commitToGroup", "daily")
            .option("maxRecordsPerPartition", "4").load()
        )
        return sorted(r.value for r in df.select("value").collect())

    produce(b"day1", 30)
    assert job() == sorted(b"day1-%d" % i for i in range(30)), "the first run starts at startingOffsets"
    group = kafkalog.ConsumerGroup(d, "daily")
    assert group.committed() == {("events", p): 10 for p in range(3)}
    produce(b"day2", 15)
    assert job() == sorted(b"day2-%d" % i for i in range(15)), "the next run reads only what is new"
    assert group.committed() == {("events", p): 15 for p in range(3)}
    assert job() == [], "nothing new: nothing read, offsets kept"
    assert group.committed() == {("events", p): 15 for p in range(3)}
    # A kafkalog Consumer of the same group continues from the job's commits.
    produce(b"day3", 3)
    with kafkalog.Consumer(d, "daily", ["events"]) as c:
        assert sorted(r.value for r in c.poll()) == [b"day3-0", b"day3-1", b"day3-2"]
    # Starting from a group that does not exist (and is not this job's own) is an error.
    with pytest.raises(Exception, match="not a kafkalog group"):
        spark.read.format("kafkalog").option("path", str(d)).option("subscribe", "events") \
            .option("startingOffsetsFromGroup", "nobody").load().collect()


def test_write_ignores_producer_configs_and_refuses_serializers(spark, tmp_path):
    """As on the read side: a sink job moves over with its producer configs (ignored, with a
    warning), while the serializers Spark's sink refuses are refused here too."""
    d = tmp_path / "w"
    d.mkdir()
    df = spark.createDataFrame([("k", "v")], "key string, value string").coalesce(1)
    writer(df, d, topic="out", **{"kafka.bootstrap.servers": "broker:9092", "kafka.acks": "all",
                                  "kafka.linger.ms": "5"}).save()
    assert [(r.key, r.value) for r in log_records(d / "out-0")] == [(b"k", b"v")]
    expect_error(lambda: writer(df, d, topic="out", **{"kafka.value.serializer": "x"}).save(), "value.serializer")
    assert len(log_records(d / "out-0")) == 1


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_offsets_gone_between_planning_and_reading(spark, tmp_path, fail_on_data_loss):
    """Retention or deleteRecords can move the log start after a query is planned (a DataFrame's
    read is planned once, at its first action): its tasks then fail saying data was lost, or,
    with failOnDataLoss=false, read what is left, as Spark's own source does."""
    d = tmp_path / "data"
    with Log(d / "gone-0", read_only=False, create=True, config={"segment.bytes": 1000}) as log:
        log.append([{"value": b"v%03d" % i} for i in range(100)])
        log.update_high_watermark(log.log_end_offset)
    df = read(spark, d, subscribe="gone", failOnDataLoss=fail_on_data_loss, maxRecordsPerPartition="30")
    assert df.count() == 100
    with Log(d / "gone-0", read_only=False) as log:
        log.delete_records(45)
        start = log.log_start_offset
    assert 0 < start <= 45
    if fail_on_data_loss == "true":
        msg = expect_error(lambda: df.agg(F.count("*")), "failOnDataLoss")
        assert re.search(rf"Cannot fetch offsets \[\d+, \d+\) of gone-0: the log now holds \[{start}, 100\)", msg), msg[:3000]
    else:
        assert sorted(r.offset for r in df.select("offset").collect()) == list(range(start, 100))


@pytest.mark.parametrize("outside", ["no kafkalog", "kafkalog without pyarrow"])
def test_register_runs_kafkalog_workers_on_an_interpreter_that_imports_it(tmp_path, outside):
    """A script run with a venv's python, the venv not activated: Spark starts its workers with
    ``python3``, which has no kafkalog, or finds kafkalog through PYTHONPATH but has no pyarrow
    (the workers hand Arrow batches). Reads, streams and read_logs still work, with a warning."""
    script = tmp_path / "job.py"
    script.write_text(
        "import os, sys\n"
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()\n"
        "import kafkalog.spark as ks\n"
        "ks.register(spark)\n"
        f"ex = {str(Path(kafkalog.__file__).parent / 'examples')!r}\n"
        "print('rows', spark.read.format('kafkalog').option('path', ex).option('subscribe', 'demo').load().count())\n"
        "print('read_logs', ks.read_logs(spark, [ex + '/demo-0']).count())\n"
        "print('workers', spark.sparkContext.pythonExec)\n"
    )
    # Spark's default worker, `python3` on the PATH: the machine's, outside the venv.
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and not os.path.realpath(p).startswith(os.path.realpath(sys.prefix)))
    if outside == "kafkalog without pyarrow":
        site = tmp_path / "site"
        site.mkdir()
        (site / "kafkalog").symlink_to(Path(kafkalog.__file__).parent, target_is_directory=True)
        env["PYTHONPATH"] = str(site)
        probe = subprocess.run(["python3", "-c", "import kafkalog"], env=env, capture_output=True, text=True)
        assert probe.returncode == 0, f"the python3 outside the venv cannot import kafkalog from {site}: {probe.stderr}"
        probe = subprocess.run(["python3", "-c", "import pyarrow"], env=env, capture_output=True)
        assert probe.returncode != 0, "the python3 outside the venv has pyarrow: this test needs one that has not"
    else:
        probe = subprocess.run(["python3", "-c", "import kafkalog"], env=env, capture_output=True)
        assert probe.returncode != 0, "the python3 outside the venv imports kafkalog: this test needs one that does not"
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert "rows 300" in lines and "read_logs 300" in lines, out.stdout
    assert "workers python3" in lines   # Spark's own setting is left as it was
    assert "cannot import kafkalog and pyarrow" in out.stderr


# --------------------------------------------------------------------------------------------
# Options as Spark's Kafka source reads them (a black-box tester's finds)

def _planned(ranges):
    return sorted((r.topic, r.partition) for r in ranges)


def test_subscribe_pattern_is_a_java_regex(spark, data):
    """Spark compiles subscribePattern with java.util.regex: a class intersection, \\Q..\\E and
    \\p{Lower} pick the topics Java picks (Python's re read the first as nothing at all)."""
    d, recs, _ = data
    assert _topics(read(spark, d, subscribePattern="o[a-z&&[^t]]ders")) == {"orders", "orders_archive"}
    assert _topics(read(spark, d, subscribePattern="^o[a-z&&[^r]]")) == {"other"}
    assert _topics(read(spark, d, subscribePattern=r"\Qorders_\E\p{Lower}+")) == {"orders_archive"}
    expect_error(lambda: read(spark, d, subscribePattern=r"\p{IsHan}"), "not a valid Java pattern")


def test_a_topic_with_partitions_missing_under_the_path_is_refused(tmp_path):
    """Partitions are 0..N-1: holes mean another log dir (JBOD) or broker holds the rest, and
    reading on would leave their records out unsaid. Every log dir read together is whole;
    failOnDataLoss=false reads the partitions found, with a warning."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    for p in range(6):
        log = Log((d1 if p % 2 else d2) / f"jbod-{p}", read_only=False, create=True)
        log.append([{"value": b"v%d" % p}])
        log.close()
    for how in ({"subscribe": "jbod"}, {"subscribePattern": "jb.d"}):
        with pytest.raises(ks.KafkaLogOptionError, match=r"jbod: partitions \[0, 2, 4\] are missing"):
            ks.plan_read({"path": str(d1), **how})
        assert len(ks.plan_read({"path": f"{d1},{d2}", **how}).ranges) == 6
        with pytest.warns(UserWarning, match=r"\[0, 2, 4\]"):
            plan = ks.plan_read({"path": str(d1), "failOnDataLoss": "false", **how})
        assert _planned(plan.ranges) == [("jbod", 1), ("jbod", 3), ("jbod", 5)]
    # assign names its partitions: nothing is missing that was not asked for.
    assert _planned(ks.plan_read({"path": str(d1), "assign": '{"jbod":[1,3]}'}).ranges) == [("jbod", 1), ("jbod", 3)]
    # An assigned partition the topic has (below its highest folder) with no folder is missing
    # data, as for subscribe (it was dropped with a warning, a black-box tester); one past the
    # topic's partitions is read as empty, as Spark's source reads it.
    with pytest.raises(ks.KafkaLogOptionError, match=r"assigned topic \(jbod: partitions \[2\] are missing"):
        ks.plan_read({"path": str(d1), "assign": '{"jbod":[1,2,3]}'})
    with pytest.warns(UserWarning, match=r"\[2\] are missing"):
        plan = ks.plan_read({"path": str(d1), "assign": '{"jbod":[1,2,3]}', "failOnDataLoss": "false"})
    assert _planned(plan.ranges) == [("jbod", 1), ("jbod", 3)]
    with pytest.warns(UserWarning, match=r"\('jbod', 9\)"):
        plan = ks.plan_read({"path": str(d1), "assign": '{"jbod":[5,9]}'})
    assert _planned(plan.ranges) == [("jbod", 5)]
    # Partition folders named one by one are read as asked.
    named = f"{d1 / 'jbod-1'},{d1 / 'jbod-5'}"
    assert _planned(ks.plan_read({"path": named, "subscribe": "jbod"}).ranges) == [("jbod", 1), ("jbod", 5)]


def test_options_spark_takes_that_were_refused(data):
    d, _, _ = data
    # 'topic' is a write option; Spark's source ignores it on a read.
    with pytest.warns(UserWarning, match="topic"):
        ks.plan_read({"path": str(d), "subscribe": "other", "topic": "x"})
    # JSON offsets as 1.0 (json4s reads them as integers); a fraction stays refused.
    plan = ks.plan_read({"path": str(d), "subscribe": "other", "startingOffsets": '{"other":{"0":1.0}}'})
    assert [r.start for r in plan.ranges] == [1]
    with pytest.raises(ks.KafkaLogOptionError, match="must be JSON like"):
        ks.plan_read({"path": str(d), "subscribe": "other", "startingOffsets": '{"other":{"0":1.5}}'})
    # minOffsetsPerTrigger=-1 waits for nothing, as Spark's stream runs with it.
    ks._check_options({"path": str(d), "subscribe": "other", "minoffsetspertrigger": "-1"})


def test_negative_timestamps_match_no_offset_as_in_spark(data):
    d, _, _ = data
    with pytest.raises(ks.KafkaLogOptionError, match="No offset matched from request of topic-partition other-0 and timestamp -5"):
        ks.plan_read({"path": str(d), "subscribe": "other", "startingTimestamp": "-5"})
    plan = ks.plan_read({"path": str(d), "subscribe": "other", "startingTimestamp": "-5",
                         "startingOffsetsByTimestampStrategy": "latest"})
    assert [r.size for r in plan.ranges] == [0]


def test_the_metadata_log_is_not_a_topic(tmp_path):
    log = Log(tmp_path / "__cluster_metadata-0", read_only=False, create=True)
    log.append([{"value": b"x"}])
    log.close()
    for how in ({"subscribe": "__cluster_metadata"}, {"assign": '{"__cluster_metadata":[0]}'}):
        with pytest.raises(ks.KafkaLogOptionError, match="KRaft's metadata log"):
            ks.plan_read({"path": str(tmp_path), **how})


def test_a_metadata_log_that_cannot_be_read_does_not_stop_the_read(tmp_path):
    for topic, p in (("t", 0), ("t", 1), ("__cluster_metadata", 0)):
        log = Log(tmp_path / f"{topic}-{p}", read_only=False, create=True)
        log.append([{"value": b"\x07 not a metadata record"}])
        log.close()
    with pytest.warns(UserWarning, match="__cluster_metadata log could not be read"):
        plan = ks.plan_read({"path": str(tmp_path), "subscribe": "t"})
    assert _planned(plan.ranges) == [("t", 0), ("t", 1)]


def test_paths_given_by_hand_split_as_path_does(data):
    """Spark sets `paths` to a JSON list for load([...]); set by hand as a comma-separated string,
    it was taken as one path that did not exist (a black-box tester)."""
    d, _, _ = data
    folders = [str(d / "other-0"), str(d / "orders-0")]
    for paths in (",".join(folders), json.dumps(folders)):
        assert sorted(_planned(ks.plan_read({"paths": paths, "subscribe": "other,orders"}).ranges)) == [
            ("orders", 0), ("other", 0)]
