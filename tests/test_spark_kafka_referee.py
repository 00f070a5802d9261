"""kafkalog's Spark data source against Spark's own Kafka source, over one real Kafka broker.

The referee is Spark's Kafka source (``spark.read.format("kafka")``, Maven Central's
``org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0`` and the jars pyspark does not ship,
fetched by ``.ci/fetch_spark_kafka.sh``) reading topics from a running Apache Kafka 4.4.0
broker (``tests/kafka_harness.py``). kafkalog's ``spark.read.format("kafkalog")`` reads the
same broker's data dir after the broker stopped. For every case, at both
``kafka.isolation.level`` values, the DataFrame schemas must be equal and the collected rows
(sorted by topic, partition, offset) must be equal.

Broker session 1 (then a clean stop; the data dir is copied as ``clean``)
  * ``codec-<none|gzip|snappy|lz4|zstd>``: 3 partitions each, explicit partitions and
    CreateTime timestamps (``codec-snappy`` with out-of-order ones), keyed and null-key
    records, null values, records without headers and with headers (a null-valued header,
    an empty one, duplicate keys, a non-ASCII key); small segments and a dense index for
    ``codec-none`` / ``codec-gzip``; ``delete_records`` moves ``codec-none-0``'s log start
    offset to 5.
  * ``txn``: 2 partitions, two transactional producers whose committed and aborted
    transactions interleave with each other and with plain writes, small segments;
    CreateTime from the producer's clock (in line with the markers' broker clock).
  * ``txnopen``: 1 partition, a transaction left open (LSO < high watermark) with a
    committed transaction and plain records after its first record; CreateTimes of 2023
    before it (older than the transaction markers, which a timestamp lookup then finds),
    a few minutes ahead from it on (a lookup past the LSO).
  * ``logappend``: 1 partition, ``message.timestamp.type=LogAppendTime``.

  Cases (``CASES``): every topic with ``includeHeaders``; ``subscribePattern`` (Spark
  matches it with ``find()``, i.e. ``Regex.findFirstIn``, not ``matches()``: ``txn`` also
  picks ``txnopen``), and ``.*`` which must leave out the internal topics and the metadata
  log; ``assign`` JSON (with ``minPartitions``); ``startingOffsets``/``endingOffsets`` JSON
  with specific offsets, -2/-1, an empty range, an offset below the log start offset
  (``failOnDataLoss=false``); ``startingTimestamp``/``endingTimestamp`` (with
  ``maxRecordsPerPartition``); ``startingOffsetsByTimestamp``/``endingOffsetsByTimestamp``
  with ``startingOffsetsByTimestampStrategy=latest`` (timestamps past the end, one inside an
  aborted transaction, one past the LSO of ``txnopen``). ``kafkalog.spark.read_logs`` on
  partition folders is compared with the ``assign`` case.

Broker session 2 (unclean)
  The broker restarts, appends to ``codec-lz4`` and a new topic ``crash`` (a committed, an
  aborted and an open transaction), and is SIGKILLed; the data dir is copied as
  ``unclean``. The broker is started once more on the killed dir (it recovers), and what
  it serves is the referee for kafkalog reading the ``unclean`` copy.

Streams
  Spark's Kafka source as a stream (``spark.readStream``, Trigger.AvailableNow, from earliest,
  ``maxOffsetsPerTrigger`` a quarter of the offsets so the topics take several micro-batches
  shared by backlog) over ``codec-lz4``, ``codec-none``, ``txn`` and ``txnopen`` of session 1,
  at both isolation levels; kafkalog's stream over the ``clean`` copy must cut the same
  micro-batches with the same rows.

kafkalog must leave both copies byte-identical. Nothing skips: when the referee (Kafka,
Spark's Kafka jars) cannot be had, the tests fail and say why.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
import traceback
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest

import kafka_harness as kh

KAFKA_VERSION = "4.4.0"
SPARK_KAFKA_VERSION = "4.2.0"
FETCH_SCRIPT = kh.REPO_ROOT / ".ci" / "fetch_spark_kafka.sh"

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_TOPICS = [f"codec-{c}" for c in CODECS]
CODEC_PARTITIONS = 3
T_TXN = "txn"
T_OPEN = "txnopen"
T_APPEND = "logappend"
T_CRASH = "crash"
TOPICS = CODEC_TOPICS + [T_TXN, T_OPEN, T_APPEND]

TS0 = 1_700_000_000_000          # CreateTime base: record i of a topic has TS0 + 10 * i
T1 = TS0 + 305                   # startingTimestamp
T2 = TS0 + 655                   # endingTimestamp
FAR_FUTURE = TS0 + 10 ** 12
LOG_START_NONE_0 = 5             # delete_records(codec-none-0, 5)
TXN_TIMEOUT_MS = 600_000

ISOLATIONS = ["read_uncommitted", "read_committed"]
CASES = ["subscribe_all", "pattern", "pattern_all", "assign", "offsets_json",
         "timestamps", "offsets_by_timestamp"]
ASSIGN = {"codec-gzip": [0, 2], "codec-none": [1], T_TXN: [1]}


# --------------------------------------------------------------------------- #
# referee prerequisites: Spark's Kafka jars and a SparkSession
# --------------------------------------------------------------------------- #

def _spark_kafka_jars() -> List[str]:
    """Run .ci/fetch_spark_kafka.sh (instant once cached); the jar paths. Raises with the reason."""
    if not FETCH_SCRIPT.is_file():
        raise RuntimeError(f"fetch script not found: {FETCH_SCRIPT}")
    try:
        proc = subprocess.run(["bash", str(FETCH_SCRIPT), SPARK_KAFKA_VERSION],
                              capture_output=True, text=True, timeout=1200)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"fetching spark-sql-kafka-0-10 {SPARK_KAFKA_VERSION} timed out after {e.timeout}s")
    if proc.returncode != 0:
        raise RuntimeError(f".ci/fetch_spark_kafka.sh exited {proc.returncode}:\n{proc.stderr.strip()[-4000:]}")
    lines = proc.stdout.strip().splitlines()
    d = Path(lines[-1]) if lines else Path()
    jars = sorted(str(p) for p in d.glob("*.jar")) if lines else []
    if not any(Path(j).name.startswith("spark-sql-kafka-0-10_") for j in jars):
        raise RuntimeError(f".ci/fetch_spark_kafka.sh printed {d!s}, which holds no spark-sql-kafka jar: {jars}")
    return jars


@pytest.fixture(scope="module")
def spark():
    jars: List[str] = []
    err = None
    try:
        jars = _spark_kafka_jars()
    except Exception as e:
        err = str(e)
    if err is not None:
        pytest.fail(f"referee unavailable: Spark's Kafka source jars (spark-sql-kafka-0-10_2.13:"
                    f"{SPARK_KAFKA_VERSION}) could not be fetched: {err}", pytrace=False)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = None
    try:
        session = (SparkSession.builder.master("local[2]")
                   .appName("kafkalog-spark-kafka-referee")
                   .config("spark.jars", ",".join(jars))
                   .config("spark.driver.memory", "1g")
                   .config("spark.sql.shuffle.partitions", "2")
                   .config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.session.timeZone", "UTC")
                   .getOrCreate())
    except Exception as e:
        err = str(e)
    if session is None:
        pytest.fail(f"referee unavailable: SparkSession with spark.jars={jars} did not start: {err}", pytrace=False)
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


# --------------------------------------------------------------------------- #
# data
# --------------------------------------------------------------------------- #

def _messages(rng: random.Random, tag: str, n: int, partitions: int, ts_base: Optional[int] = TS0,
              step: int = 10, ooo: bool = False, first: int = 0) -> List[Dict[str, Any]]:
    """Message ``first + i`` goes to partition ``(first + i) % partitions`` with timestamp
    ``ts_base + step * (first + i)`` (minus 5 s for every 9th one when ``ooo``); no explicit
    timestamp (the producer's clock) when ``ts_base`` is None."""
    out = []
    for j in range(n):
        i = first + j
        key = None if i % 7 == 3 else f"{tag}-key-{i}".encode()
        value = None if i % 13 == 5 else (f"{tag}-value-{i}-" + "".join(
            rng.choice("abcdefghijklmnopqrstuvwxyz0123456789 ") for _ in range(rng.randint(40, 300)))).encode()
        kind = i % 4
        if kind == 0:
            headers = [("h-str", f"{tag}-{i}".encode()), ("h-null", None), ("h-empty", b"")]
        elif kind == 1:
            headers = [("bin", bytes([0, 1, 255, i % 256])), ("dup", b"1"), ("dup", b"2")]
        elif kind == 2:
            headers = []
        else:
            headers = [("cl\u00e9-\u00fc", "v\u00e4lue \u2603".encode())]
        ts = None if ts_base is None else ts_base + step * i
        if ts is not None and ooo and i % 9 == 4:
            ts -= 5_000
        out.append({"key": key, "value": value, "headers": headers, "timestamp": ts,
                    "partition": i % partitions})
    return out


class _Txn:
    """A transactional producer (confluent-kafka) whose transactions the test interleaves.
    ``commit``/``abort`` return once the broker has appended the transaction's markers (the
    coordinator writes them after answering EndTxn), so the log is complete when it is read."""

    def __init__(self, bootstrap: str, tag: str, compression: str):
        from confluent_kafka import Producer

        cfg = kh._producer_config(bootstrap, compression, True, 2, 1024,
                                  {"transaction.timeout.ms": TXN_TIMEOUT_MS})
        cfg["transactional.id"] = f"spark-referee-{tag}-{uuid.uuid4().hex[:8]}"
        self.p = Producer(cfg)
        self.p.init_transactions(60)
        self.admin = kh._admin(bootstrap)
        self.touched: set = set()

    def begin(self) -> "_Txn":
        self.p.begin_transaction()
        return self

    def send(self, topic: str, msgs: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
        d = kh._Deliveries(len(msgs))
        for i, m in enumerate(msgs):
            kh._produce_one(self.p, topic, m, d.callback(i))
            self.p.poll(0)
        left = self.p.flush(60)
        if left or d.errors:
            raise kh.KafkaHarnessError(f"transactional produce to {topic}: {left} undelivered, {d.errors[:5]}")
        self.touched |= {(topic, r["partition"]) for r in d.results}  # type: ignore[index]
        return d.results  # type: ignore[return-value]

    def _latest(self, tp: Tuple[str, int]) -> int:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        k = TopicPartition(*tp)
        return self.admin.list_offsets({k: OffsetSpec.latest()}, request_timeout=30)[k].result(timeout=30).offset

    def _end(self, commit: bool) -> None:
        before = {tp: self._latest(tp) for tp in self.touched}
        if commit:
            self.p.commit_transaction(60)
        else:
            self.p.abort_transaction(60)
        deadline = time.monotonic() + 30
        for tp, hw in before.items():  # one marker per partition, nothing else is being written
            while self._latest(tp) < hw + 1:
                if time.monotonic() > deadline:
                    raise kh.KafkaHarnessError(f"no transaction marker in {tp} after 30 s")
                time.sleep(0.02)
        self.touched = set()

    def commit(self) -> None:
        self._end(True)

    def abort(self) -> None:
        self._end(False)


class _Seq:
    """Plain and transactional writes to one topic with consecutive message numbers;
    ``delivered[tag]`` keeps the broker's acknowledgements (partition, offset, timestamp)."""

    def __init__(self, rng: random.Random, bs: str, topic: str, partitions: int, ts_base: Optional[int] = TS0):
        self.rng, self.bs, self.topic, self.partitions, self.n = rng, bs, topic, partitions, 0
        self.ts_base = ts_base
        self.delivered: Dict[str, List[Dict[str, Any]]] = {}

    def _next(self, tag: str, n: int) -> List[Dict[str, Any]]:
        out = _messages(self.rng, f"{self.topic}-{tag}", n, self.partitions, ts_base=self.ts_base, first=self.n)
        self.n += n
        return out

    def plain(self, tag: str, n: int, compression: str = "none") -> None:
        self.delivered[tag] = kh.produce(self.bs, self.topic, self._next(tag, n), compression=compression,
                                         linger_ms=2, batch_size=1024)

    def txn(self, producer: _Txn, tag: str, n: int) -> None:
        self.delivered[tag] = producer.send(self.topic, self._next(tag, n))

    def first(self, tag: str, partition: int) -> Dict[str, Any]:
        return next(d for d in self.delivered[tag] if d["partition"] == partition)


def _produce_session1(bs: str, state: Dict[str, Any]) -> None:
    rng = random.Random(20240607)
    small = {"segment.bytes": 4096, "index.interval.bytes": 512}
    for t in CODEC_TOPICS:
        kh.create_topic(bs, t, CODEC_PARTITIONS, small if t in ("codec-none", "codec-gzip") else None)
    kh.create_topic(bs, T_TXN, 2, {"segment.bytes": 4096})
    kh.create_topic(bs, T_OPEN, 1)
    kh.create_topic(bs, T_APPEND, 1, {"message.timestamp.type": "LogAppendTime"})

    for codec, t in zip(CODECS, CODEC_TOPICS):
        msgs = _messages(rng, t, 90, CODEC_PARTITIONS, ooo=(codec == "snappy"))
        # two producer calls: the second one idempotent (producer id, sequence numbers)
        kh.produce(bs, t, msgs[:50], compression=codec, linger_ms=2, batch_size=1024)
        kh.produce(bs, t, msgs[50:], compression=codec, linger_ms=2, batch_size=1024, idempotent=True)

    # Committed and aborted transactions of two producers, interleaved with plain writes.
    # CreateTime is the producer's clock here, so that the transaction markers (stamped with
    # the broker's clock) fall in line and timestamp lookups land on records of each kind.
    s = _Seq(rng, bs, T_TXN, 2, ts_base=None)
    a, b = _Txn(bs, "a", "zstd"), _Txn(bs, "b", "gzip")
    try:
        s.plain("plain1", 6)
        s.txn(a.begin(), "a1-committed", 6)
        s.plain("plain2", 4, "lz4")
        s.txn(b.begin(), "b1-aborted", 5)
        a.commit()
        s.plain("plain3", 3)
        b.abort()
        s.txn(a.begin(), "a2-aborted", 4)
        a.abort()
        s.plain("plain4", 3, "snappy")
        s.txn(b.begin(), "b2-committed", 6)
        s.plain("plain5", 2)
        s.txn(a.begin(), "a3-aborted", 3)
        b.commit()
        a.abort()
        s.txn(a.begin(), "a4-committed", 3)
        a.commit()
        s.plain("plain6", 4, "zstd")
    finally:
        del a, b
    state["txn_ts"] = {
        "start": {"0": s.first("b1-aborted", 0)["timestamp"], "1": s.first("plain3", 1)["timestamp"]},
        "end": {"0": s.first("b2-committed", 0)["timestamp"], "1": FAR_FUTURE},
    }

    # A transaction left open: LSO < high watermark. The records before it have CreateTimes of
    # 2023 (older than every transaction marker), those from its first record on a few minutes
    # in the future (newer than every marker), so a timestamp lookup can land past the LSO.
    s = _Seq(rng, bs, T_OPEN, 1)
    c, e = _Txn(bs, "c", "none"), _Txn(bs, "e", "lz4")
    try:
        s.plain("plain1", 5)
        s.txn(c.begin(), "c-committed", 5)
        c.commit()
        s.plain("plain2", 3)
        s.ts_base = int(time.time() * 1000) + 300_000 - 10 * s.n
        d = _Txn(bs, "d", "gzip")
        s.txn(d.begin(), "d-open", 4)
        s.plain("plain3", 2)
        s.txn(e.begin(), "e-committed-after-open", 3)
        e.commit()
        s.plain("plain4", 3)
        state["open_producers"] = [d]
    finally:
        del c, e
    state["open_after_ts"] = s.delivered["plain4"][1]["timestamp"]

    appended = []
    for k in range(3):
        appended += kh.produce(bs, T_APPEND, _messages(rng, f"app{k}", 10, 1, first=10 * k), batch_size=1024)
        time.sleep(0.02)
    state["append_ts_mid"] = appended[len(appended) // 2]["timestamp"]

    # move codec-none-0's log start offset into the log
    from confluent_kafka import TopicPartition

    tp = TopicPartition("codec-none", 0, LOG_START_NONE_0)
    admin = kh._admin(bs)  # keep a reference until the future is done
    res = admin.delete_records([tp], request_timeout=30, operation_timeout=30)
    low = res[tp].result(timeout=30).low_watermark
    assert low == LOG_START_NONE_0, f"delete_records: low watermark {low}"

    state["offsets"] = {(t, p): kh.list_offsets(bs, t, p) for t, n in ((T_TXN, 2), (T_OPEN, 1)) for p in range(n)}
    assert state["offsets"][(T_OPEN, 0)]["last_stable"] == s.first("d-open", 0)["offset"], state["offsets"]
    for p in range(2):
        o = state["offsets"][(T_TXN, p)]
        assert o["last_stable"] == o["latest"], o


def _case_options(state: Dict[str, Any]) -> Dict[str, Dict[str, str]]:
    """Options of every case (without kafka.bootstrap.servers / path / isolation level)."""
    off = state["offsets"]
    lso_txn = [off[(T_TXN, p)]["last_stable"] for p in range(2)]
    start_json = {
        "codec-lz4": {"0": 3, "1": -2, "2": 7},
        "codec-none": {"0": 2, "1": 4, "2": -2},   # 2 < codec-none-0's log start offset 5
        T_TXN: {"0": 9, "1": -2},
        T_OPEN: {"0": -2},
    }
    end_json = {
        "codec-lz4": {"0": 20, "1": -1, "2": 7},     # codec-lz4-2: an empty range
        "codec-none": {"0": 15, "1": -1, "2": 11},
        T_TXN: {"0": -1, "1": min(17, lso_txn[1])},
        T_OPEN: {"0": -1},
    }
    by_ts_start = {
        "codec-zstd": {"0": TS0 + 100, "1": TS0 - 1, "2": FAR_FUTURE},
        "codec-snappy": {"0": TS0 + 400, "1": TS0 + 41, "2": TS0 + 600},
        T_OPEN: {"0": state["open_after_ts"]},     # past the LSO
        T_APPEND: {"0": state["append_ts_mid"]},
        T_TXN: state["txn_ts"]["start"],
    }
    by_ts_end = {
        "codec-zstd": {"0": TS0 + 400, "1": FAR_FUTURE, "2": FAR_FUTURE + 1},
        "codec-snappy": {"0": TS0 + 700, "1": TS0 + 300, "2": FAR_FUTURE},
        T_OPEN: {"0": FAR_FUTURE},
        T_APPEND: {"0": FAR_FUTURE},
        T_TXN: state["txn_ts"]["end"],
    }
    return {
        "subscribe_all": {"subscribe": ",".join(TOPICS), "includeHeaders": "true"},
        "pattern": {"subscribePattern": "codec-[gs].*|txn|zstd"},
        "pattern_all": {"subscribePattern": ".*", "includeHeaders": "true", "minPartitions": "11"},
        "assign": {"assign": json.dumps(ASSIGN), "includeHeaders": "true", "minPartitions": "5"},
        "offsets_json": {"subscribe": "codec-lz4,codec-none,txn,txnopen", "includeHeaders": "true",
                         "startingOffsets": json.dumps(start_json), "endingOffsets": json.dumps(end_json),
                         "failOnDataLoss": "false"},
        "timestamps": {"subscribe": ",".join(CODEC_TOPICS + [T_OPEN]), "includeHeaders": "true",
                       "startingTimestamp": str(T1), "endingTimestamp": str(T2),
                       "maxRecordsPerPartition": "7"},
        "offsets_by_timestamp": {"subscribe": f"codec-zstd,codec-snappy,{T_OPEN},{T_APPEND},{T_TXN}",
                                 "includeHeaders": "true",
                                 "startingOffsetsByTimestamp": json.dumps(by_ts_start),
                                 "endingOffsetsByTimestamp": json.dumps(by_ts_end),
                                 "startingOffsetsByTimestampStrategy": "latest"},
    }


# --------------------------------------------------------------------------- #
# reading and comparing
# --------------------------------------------------------------------------- #

Row = Tuple[Any, ...]


def _norm(v: Any) -> Any:
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, list):
        return tuple(_norm(x) for x in v)
    if hasattr(v, "asDict"):  # a header struct
        return tuple(_norm(x) for x in v)
    return v


def _collect(df) -> Tuple[List[str], List[Row]]:
    """Rows of ``df`` as tuples (bytes, header tuples, the timestamp also as epoch micros),
    sorted by (topic, partition, offset)."""
    from pyspark.sql import functions as F

    cols = list(df.columns)
    rows = df.select(*cols, F.unix_micros(F.col("timestamp")).alias("timestamp_us")).collect()
    out = [tuple(_norm(x) for x in r) for r in rows]
    it, ip, io = cols.index("topic"), cols.index("partition"), cols.index("offset")
    out.sort(key=lambda r: (r[it], r[ip], r[io]))
    return cols + ["timestamp_us"], out


def _read(spark, fmt: str, options: Dict[str, str]):
    r = spark.read.format(fmt)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _short(row: Row, cols: List[str]) -> str:
    def s(v):
        if isinstance(v, bytes) and len(v) > 40:
            return repr(v[:40]) + f"...({len(v)} bytes)"
        return repr(v)
    return "{" + ", ".join(f"{c}={s(v)}" for c, v in zip(cols, row)) + "}"


def _ranges(rows: List[Row], cols: List[str]) -> Dict[Tuple[str, int], Tuple[int, int, int]]:
    it, ip, io = cols.index("topic"), cols.index("partition"), cols.index("offset")
    out: Dict[Tuple[str, int], List[int]] = {}
    for r in rows:
        out.setdefault((r[it], r[ip]), []).append(r[io])
    return {k: (len(v), min(v), max(v)) for k, v in sorted(out.items())}


def _diff(got: List[Row], exp: List[Row], cols: List[str]) -> str:
    lines = [f"kafkalog has {len(got)} rows, Spark's Kafka source {len(exp)}"]
    rg, re_ = _ranges(got, cols), _ranges(exp, cols)
    for k in sorted(set(rg) | set(re_)):
        if rg.get(k) != re_.get(k):
            lines.append(f"  {k[0]}-{k[1]}: kafkalog (count, min offset, max offset) {rg.get(k)}, "
                         f"Spark Kafka {re_.get(k)}")
    for i, (g, e) in enumerate(zip(got, exp)):
        if g != e:
            lines.append(f"first differing row #{i}:")
            lines.append(f"  kafkalog: {_short(g, cols)}")
            lines.append(f"  Spark   : {_short(e, cols)}")
            cdiff = [c for c, x, y in zip(cols, g, e) if x != y]
            lines.append(f"  differing columns: {cdiff}")
            break
    else:
        if len(got) != len(exp):
            longer, who = (got, "kafkalog") if len(got) > len(exp) else (exp, "Spark")
            lines.append(f"first extra row ({who}): {_short(longer[min(len(got), len(exp))], cols)}")
    return "\n".join(lines)


def _assert_same(kl_df, ref: Dict[str, Any], what: str) -> None:
    assert kl_df.schema == ref["schema"], (
        f"{what}: schema differs\n  kafkalog: {kl_df.schema.simpleString()}\n"
        f"  Spark   : {ref['schema'].simpleString()}")
    cols, rows = _collect(kl_df)
    assert cols == ref["cols"], (cols, ref["cols"])
    if rows != ref["rows"]:
        pytest.fail(f"{what}: rows differ (options {ref['options']})\n{_diff(rows, ref['rows'], cols)}",
                    pytrace=False)


def _referee_read(spark, bs: str, options: Dict[str, str]) -> Dict[str, Any]:
    """Spark's Kafka source; ``options`` are what kafkalog gets too. Only the referee gets the
    bootstrap servers and two transport settings that change no row: a short
    ``fetch.max.wait.ms`` (a fetch at the end of a range otherwise waits 500 ms for data:
    the reads take three times longer) and a fixed group id per isolation level (the
    executors' consumer pool, keyed by group id and partition, then reuses its consumers
    across cases; the Kafka source assigns partitions and commits nothing)."""
    iso = options.get("kafka.isolation.level", "read_uncommitted")
    df = _read(spark, "kafka", dict(options, **{"kafka.bootstrap.servers": bs,
                                                "kafka.fetch.max.wait.ms": "10",
                                                "kafka.group.id": f"kafkalog-referee-{iso}"}))
    cols, rows = _collect(df)
    return {"schema": df.schema, "cols": cols, "rows": rows, "options": options,
            "partitions": df.rdd.getNumPartitions()}


#: The stream case: Spark's Kafka source as a stream over the live broker, kafkalog's stream over
#: the stopped broker's copy; both from earliest, with Trigger.AvailableNow and maxOffsetsPerTrigger
#: (shared among partitions by backlog) cutting the topics into several micro-batches.
STREAM_TOPICS = ["codec-lz4", "codec-none", T_TXN, T_OPEN]
STREAM_BATCHES = 4


def _stream_options(state: Dict[str, Any]) -> Dict[str, str]:
    total = state["stream_offsets_total"]
    return {"subscribe": ",".join(STREAM_TOPICS), "includeHeaders": "true", "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": str(-(-total // STREAM_BATCHES))}


def _stream_read(spark, fmt: str, options: Dict[str, str], checkpoint: Path) -> List[Tuple[List[str], List[Row]]]:
    """Each micro-batch's (columns, rows) of a Trigger.AvailableNow stream query."""
    batches: Dict[int, Tuple[List[str], List[Row]]] = {}

    def each(df, batch_id):
        batches[batch_id] = _collect(df)

    r = spark.readStream.format(fmt)
    for k, v in options.items():
        r = r.option(k, v)
    q = (r.load().writeStream.foreachBatch(each).option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    try:
        finished = q.awaitTermination(300)
    finally:
        q.stop()
    assert finished, f"{fmt} stream did not finish in 300 s"
    assert sorted(batches) == list(range(len(batches))), sorted(batches)
    return [batches[i] for i in range(len(batches))]


def _referee_stream(spark, bs: str, options: Dict[str, str], checkpoint: Path) -> Dict[str, Any]:
    iso = options.get("kafka.isolation.level", "read_uncommitted")
    batches = _stream_read(spark, "kafka", dict(options, **{"kafka.bootstrap.servers": bs,
                                                            "kafka.fetch.max.wait.ms": "10",
                                                            "kafka.group.id": f"kafkalog-referee-{iso}"}),
                           checkpoint)
    return {"batches": batches, "options": options}


def _snapshot(root: Path) -> Dict[str, str]:
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# --------------------------------------------------------------------------- #
# the broker sessions and the referee's rows
# --------------------------------------------------------------------------- #

@pytest.fixture(scope="module")
def env(spark, tmp_path_factory):
    work = tmp_path_factory.mktemp("spark-kafka-referee")
    state: Dict[str, Any] = {"timings": {}}
    t0 = time.monotonic()
    broker = kh.Broker(KAFKA_VERSION, work_dir=work / "broker", properties={
        "transaction.max.timeout.ms": TXN_TIMEOUT_MS,
        "log.retention.ms": -1,   # the CreateTimes of 2023 must not expire
        "replica.high.watermark.checkpoint.interval.ms": 1000,
    })
    err: Optional[str] = None
    try:
        try:
            # ------------------------------ session 1 ------------------------------ #
            broker.start()
            bs = broker.bootstrap
            state["timings"]["broker start"] = broker.last_start_seconds
            _produce_session1(bs, state)
            state["timings"]["produce"] = time.monotonic() - t0
            state["options"] = _case_options(state)
            ref: Dict[Tuple[str, str], Dict[str, Any]] = {}
            t1 = time.monotonic()
            for case in CASES:
                for iso in ISOLATIONS:
                    opts = dict(state["options"][case], **{"kafka.isolation.level": iso})
                    t2 = time.monotonic()
                    ref[(case, iso)] = _referee_read(spark, bs, opts)
                    state["timings"][f"{case}/{iso}"] = time.monotonic() - t2
            state["timings"]["Spark Kafka reads (session 1)"] = time.monotonic() - t1
            state["ref"] = ref
            t1 = time.monotonic()
            partitions = {T_TXN: 2, T_OPEN: 1}
            state["stream_offsets_total"] = sum(
                o["latest"] - o["earliest"]
                for t in STREAM_TOPICS for p in range(partitions.get(t, CODEC_PARTITIONS))
                for o in [kh.list_offsets(bs, t, p)])
            state["stream_ref"] = {
                iso: _referee_stream(spark, bs, dict(_stream_options(state), **{"kafka.isolation.level": iso}),
                                     work / f"stream-checkpoint-{iso}")
                for iso in ISOLATIONS}
            state["timings"]["Spark Kafka streams"] = time.monotonic() - t1
            rc = broker.stop()
            assert rc in (0, 143), f"broker stop: exit {rc}\n{broker.log_tail()}"
            assert broker.clean_shutdown_marker(), "no clean shutdown marker after SIGTERM"
            state["clean"] = work / "clean"
            shutil.copytree(broker.log_dir, state["clean"])

            # ------------------------- session 2: SIGKILL ------------------------- #
            broker.start()
            bs = broker.bootstrap
            rng = random.Random(7)
            kh.create_topic(bs, T_CRASH, 2, {"segment.bytes": 4096})
            s = _Seq(rng, bs, T_CRASH, 2)
            f, g, h = _Txn(bs, "f", "snappy"), _Txn(bs, "g", "zstd"), _Txn(bs, "h", "none")
            s.plain("plain1", 8, "gzip")
            s.txn(f.begin(), "f-committed", 6)
            s.txn(g.begin(), "g-aborted", 4)
            s.plain("plain2", 3)
            f.commit()
            g.abort()
            s.txn(h.begin(), "h-open", 4)
            s.plain("plain3", 5, "lz4")
            kh.produce(bs, "codec-lz4", _messages(rng, "codec-lz4-after-restart", 12, CODEC_PARTITIONS,
                                                  first=90), compression="lz4", batch_size=1024)
            state["open_producers"].append(h)
            del f, g
            crash_opts = {"subscribe": f"codec-lz4,{T_CRASH}", "includeHeaders": "true"}
            state["crash_before_kill"] = {
                iso: _referee_read(spark, bs, dict(crash_opts, **{"kafka.isolation.level": iso}))
                for iso in ISOLATIONS}
            broker.kill()
            state["unclean"] = work / "unclean"
            shutil.copytree(broker.log_dir, state["unclean"])
            assert not (state["unclean"] / ".kafka_cleanshutdown").exists()

            # ------------- session 3: what the recovered broker serves ------------ #
            broker.start()
            bs = broker.bootstrap
            state["crash_ref"] = {
                iso: _referee_read(spark, bs, dict(crash_opts, **{"kafka.isolation.level": iso}))
                for iso in ISOLATIONS}
            broker.stop()
            state["timings"]["referee total"] = time.monotonic() - t0
        except Exception as e:
            err = f"{e!r}\n{traceback.format_exc()[-4000:]}\n{broker.log_tail(30)}"
        if err is not None:
            pytest.fail(f"referee unavailable: Kafka {KAFKA_VERSION} broker / Spark's Kafka source failed: {err}",
                        pytrace=False)
        state["snapshots"] = {k: _snapshot(state[k]) for k in ("clean", "unclean")}
        yield state
    finally:
        for p in state.pop("open_producers", []):
            try:
                p.p.flush(0)
            except Exception:
                pass
        broker.close()
        tm = ", ".join(f"{k} {v:.1f}s" for k, v in state["timings"].items() if v is not None)
        print(f"\nspark kafka referee: {tm}; module {time.monotonic() - t0:.1f}s")


@pytest.fixture(scope="module")
def kafkalog_spark(spark):
    """``kafkalog.spark`` registered on the session (fails, never skips, when it cannot be)."""
    err = None
    try:
        import kafkalog.spark as ks
    except Exception as e:
        err = repr(e)
    if err is not None:
        pytest.fail(f"import kafkalog.spark failed: {err}", pytrace=False)
    ks.register(spark)
    return ks


# --------------------------------------------------------------------------- #
# tests
# --------------------------------------------------------------------------- #

def _topics(ref: Dict[str, Any]) -> set:
    it = ref["cols"].index("topic")
    return {r[it] for r in ref["rows"]}


def test_referee_shape(env):
    """The referee's rows really cover what the cases claim (so a pass means something)."""
    ref = env["ref"]
    allu, allc = ref[("subscribe_all", "read_uncommitted")], ref[("subscribe_all", "read_committed")]
    cols = allu["cols"]
    ix = {c: i for i, c in enumerate(cols)}
    assert _topics(allu) == set(TOPICS)
    assert "headers" in cols and "headers" not in ref[("pattern", "read_committed")]["cols"]
    rows = allu["rows"]
    assert any(r[ix["key"]] is None for r in rows) and any(r[ix["value"]] is None for r in rows)
    assert any(r[ix["headers"]] is None for r in rows), "records without headers"
    assert any(h[1] is None for r in rows if r[ix["headers"]] for h in r[ix["headers"]]), "a null header value"
    assert {r[ix["timestampType"]] for r in rows} == {0, 1}
    assert min(r[ix["offset"]] for r in rows if r[ix["topic"]] == "codec-none" and r[ix["partition"]] == 0) \
        == LOG_START_NONE_0
    for t in (T_TXN, T_OPEN):
        nu = sum(1 for r in allu["rows"] if r[ix["topic"]] == t)
        nc = sum(1 for r in allc["rows"] if r[ix["topic"]] == t)
        assert nc < nu, (t, nc, nu)
    # Spark matches subscribePattern with find() (Regex.findFirstIn), not matches(): "zstd" picks
    # codec-zstd and "txn" picks txnopen too
    assert _topics(ref[("pattern", "read_uncommitted")]) == {"codec-gzip", "codec-snappy", "codec-zstd",
                                                             T_TXN, T_OPEN}
    assert _topics(ref[("pattern_all", "read_uncommitted")]) == set(TOPICS)
    for iso in ISOLATIONS:
        assert ref[("timestamps", iso)]["rows"] and ref[("offsets_json", iso)]["rows"]
        rj = _ranges(ref[("offsets_json", iso)]["rows"], cols)
        assert rj[("codec-none", 0)][1] == LOG_START_NONE_0, rj   # asked for 2, failOnDataLoss=false
        assert ("codec-lz4", 2) not in rj, rj                       # an empty range
    bu = _ranges(ref[("offsets_by_timestamp", "read_uncommitted")]["rows"], cols)
    bc = _ranges(ref[("offsets_by_timestamp", "read_committed")]["rows"], cols)
    assert bu[(T_TXN, 0)][0] > bc[(T_TXN, 0)][0], (bu, bc)         # started inside an aborted txn
    assert (T_OPEN, 0) in bu and (T_OPEN, 0) not in bc, (bu, bc)   # a lookup past the LSO
    assert ("codec-zstd", 2) not in bu, bu                          # a start past the end: latest
    for iso in ISOLATIONS:
        assert env["crash_ref"][iso]["rows"]


def test_unclean_referee_consistent(env):
    """The recovered broker serves what the broker served before the SIGKILL."""
    for iso in ISOLATIONS:
        a, b = env["crash_before_kill"][iso], env["crash_ref"][iso]
        assert a["rows"] == b["rows"], f"{iso}: {_diff(a['rows'], b['rows'], a['cols'])}"


@pytest.mark.parametrize("iso", ISOLATIONS)
@pytest.mark.parametrize("case", CASES)
def test_kafkalog_matches_spark_kafka(env, spark, kafkalog_spark, case, iso):
    ref = env["ref"][(case, iso)]
    opts = dict(ref["options"], path=str(env["clean"]))
    df = _read(spark, "kafkalog", opts)
    _assert_same(df, ref, f"case {case} ({iso})")
    # Spark's batch source reads each topic-partition in a partition, an empty range too, unless
    # minPartitions (or, over offsets it knows as numbers, maxRecordsPerPartition) divides them:
    # a black-box tester counted fewer partitions than Spark's.
    assert df.rdd.getNumPartitions() == ref["partitions"], case


@pytest.mark.parametrize("iso", ISOLATIONS)
def test_read_logs_matches_spark_kafka(env, spark, kafkalog_spark, iso):
    """``read_logs`` over the partition folders of the ``assign`` case."""
    folders = [str(env["clean"] / f"{t}-{p}") for t, ps in ASSIGN.items() for p in ps]
    df = kafkalog_spark.read_logs(spark, folders, includeHeaders="true", **{"kafka.isolation.level": iso})
    _assert_same(df, env["ref"][("assign", iso)], f"read_logs {folders} ({iso})")


@pytest.mark.parametrize("iso", ISOLATIONS)
def test_kafkalog_matches_recovered_broker_after_sigkill(env, spark, kafkalog_spark, iso):
    ref = env["crash_ref"][iso]
    opts = dict(ref["options"], path=str(env["unclean"]))
    _assert_same(_read(spark, "kafkalog", opts), ref, f"SIGKILLed broker's data dir ({iso})")


@pytest.mark.parametrize("iso", ISOLATIONS)
def test_kafkalog_stream_matches_spark_kafka_stream(env, spark, kafkalog_spark, tmp_path, iso):
    """``spark.readStream``: the same micro-batches, row for row, as Spark's Kafka source cut."""
    ref = env["stream_ref"][iso]
    assert len(ref["batches"]) >= 3, f"the referee stream ran {len(ref['batches'])} micro-batches"
    got = _stream_read(spark, "kafkalog", dict(ref["options"], path=str(env["clean"])), tmp_path / "checkpoint")
    for i, ((cols, rows), (ref_cols, ref_rows)) in enumerate(zip(got, ref["batches"])):
        assert cols == ref_cols, (i, cols, ref_cols)
        if rows != ref_rows:
            pytest.fail(f"micro-batch {i} ({iso}) differs\n{_diff(rows, ref_rows, cols)}", pytrace=False)
    assert len(got) == len(ref["batches"]), (
        f"kafkalog's stream ran {len(got)} micro-batches, Spark's Kafka source {len(ref['batches'])}")


def test_kafkalog_left_files_untouched(env, kafkalog_spark):
    """Runs after the reads above: kafkalog changed no file of either copy."""
    for k in ("clean", "unclean"):
        now = _snapshot(env[k])
        before = env["snapshots"][k]
        changed = sorted(p for p in set(now) | set(before) if now.get(p) != before.get(p))
        assert not changed, f"kafkalog changed files of the {k} data dir: {changed[:20]}"
