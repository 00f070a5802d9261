"""The partition log ``kafkalog.Log`` (UnifiedLog + LogLoader) against a real Apache Kafka broker.

One module-scoped broker session per pinned Kafka version (two broker starts each):

Read direction (the broker writes, ``kafkalog.Log`` opens the folder read-only)
  Topic ``logread``: small segments, every codec, headers (None values), null keys/values,
  out-of-order timestamps, an idempotent producer, two transactional producers whose
  transactions interleave with each other and with plain records (committed and aborted),
  and one transaction still open when the broker stops (so LSO < HW). AdminClient
  ``delete_records`` moves the log start offset into the middle of a later segment (the
  segments below it are renamed ``.deleted`` by the broker's retention check and left on
  disk). The broker's ListOffsets answers and both consumers' records are recorded, the
  broker is stopped cleanly and the partition folder (with the log dir's checkpoint files
  and clean shutdown marker) is copied, hashed and made read-only. ``Log(dir)`` must agree
  on every record (both isolation levels), every offset (log start, LEO, HW, LSO), the
  timestamp lookups, the aborted transactions of the ``.txnindex`` files -- and leave every
  file byte-identical.

Unclean shutdown
  In the second broker session the open transaction is committed, more records are
  produced and the broker is SIGKILLed. The copied folder (no clean shutdown marker,
  preallocated indexes) opens read-only with every record; a copy whose last batch is torn
  opens read-only with every complete record and nothing written, and a writable open
  truncates the torn tail (Kafka's DumpLogSegments then finds no invalid bytes).

Write direction (``kafkalog.Log`` writes, Kafka verifies and serves)
  Topic ``logwrite`` is created by the broker (partition.metadata, leader epoch), the
  broker is stopped, its segments are removed and ``Log(dir, read_only=False)`` appends
  records across many small segments: every codec, headers, an idempotent producer,
  two transactional producers (committed and aborted transactions with
  ``write_txn_marker``, and one left open), the broker's leader epoch; retention
  (``retention.bytes``) and ``delete_records`` move the log start offset > 0; ``close()``.
  DumpLogSegments (deep iteration, index sanity check, index entries, ``.txnindex``,
  producer snapshot) reports no errors and the same records. The restarted broker
  reports kafkalog's log start offset, LEO and LSO, serves exactly kafkalog's
  ``records(isolation=...)`` to both consumers and appends after kafkalog's LEO.

Nothing skips: if Kafka cannot be fetched or run, these tests fail.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import time
import traceback
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

import kafka_harness as kh
import kafkalog
import compat_util
from compat_util import TS_TYPE_KAFKA, make_read_only, snapshot_files

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
T_READ = "logread"
T_WRITE = "logwrite"
T_RECOMPRESS = "logrecompress"
# Topics whose configs live only in the broker's __cluster_metadata log (CreateTopics' configs,
# then IncrementalAlterConfigs setting and deleting some): kafkalog's writers must follow them.
T_CONFIGURED = {
    "logappendtime": {"message.timestamp.type": "LogAppendTime", "compression.type": "lz4"},
    "logcompacted": {"cleanup.policy": "compact", "max.message.bytes": "2000000"},
    # No configs of its own (retention.ms aside): it runs with the broker's dynamic configs.
    "logbrokerdefaults": {},
}
# Timestamp limits, whose defaults 4.0 changed (message.timestamp.after.max.ms: unlimited, then an
# hour) and whose 3.x config message.timestamp.difference.max.ms 4.0 removed (a 4.x broker refuses
# it at creation). Each broker's verdict on a record this far from its clock, in ms, is the
# referee of kafkalog's writers in its dir.
T_TIMESTAMP_LIMITS = {"logtsdefault": {}, "logtsdifference": {"message.timestamp.difference.max.ms": "600000"}}
TIMESTAMP_OFFSETS_MS = [2 * 3_600_000, -3_600_000, -60_000]
# Dynamic broker configs (`kafka-configs --entity-type brokers`), set once the other topics are
# written: the cluster-wide default (--entity-default) and the broker's own (--entity-name 1).
BROKER_DEFAULT_CONFIGS = {"message.max.bytes": "3500000"}
BROKER_OWN_CONFIGS = {"compression.type": "gzip"}
# What producers send to a topic with compression.type=zstd: (their codec, their records). The
# timestamps are recent, so the broker's retention (7 days) keeps them.
_RECOMPRESS_TS = int(time.time() * 1000) - 60_000
RECOMPRESS_SENDS = [
    (codec, [{"key": None if i % 3 == 0 else b"%s-%d" % (codec.encode(), i), "value": b"v" * (i * 7),
              "headers": [("h", None), ("n", b"%d" % i)] if i % 2 else [],
              "timestamp": _RECOMPRESS_TS + i}
             for i in range(12)])
    for codec in ("lz4", "none", "gzip")
]
READ_SEGMENT_BYTES = 4 * 1024
WRITE_SEGMENT_BYTES = 4 * 1024
WRITE_INDEX_INTERVAL = 512
PID_IDEM = 10_000_000
PID_TXN_A = 10_000_001
PID_TXN_B = 10_000_002
PID_TXN_OPEN = 10_000_003
TXN_TIMEOUT_MS = 300_000


# --------------------------------------------------------------------------- #
# helpers
# --------------------------------------------------------------------------- #

def _messages(rng, n, tag, ts_base, ooo=False):
    return compat_util.messages(rng, n, tag, ts_base, ooo, value_len=(30, 160))
def _consumer_view(rec: Dict[str, Any]) -> tuple:
    return (rec["offset"], rec["timestamp"], rec["timestamp_type"], rec["key"], rec["value"],
            [tuple(h) for h in rec["headers"]])


def _kafkalog_view(r) -> tuple:
    return (r.offset, r.timestamp, TS_TYPE_KAFKA[r.timestamp_type], r.key, r.value, [tuple(h) for h in r.headers])


def _first_diff(got: List[tuple], exp: List[tuple]) -> str:
    for i, (g, e) in enumerate(zip(got, exp)):
        if g != e:
            return f"first difference at #{i}: kafkalog {g[:3]}... broker {e[:3]}..."
    return f"kafkalog has {len(got)} records, broker {len(exp)}" + (
        f"; kafkalog offsets {got[0][0]}..{got[-1][0]}" if got else "") + (
        f"; broker offsets {exp[0][0]}..{exp[-1][0]}" if exp else "")


def _assert_same_records(got: List[tuple], exp: List[tuple], what: str) -> None:
    assert got == exp, f"{what}: {_first_diff(got, exp)}"


def _read_leader_epoch_checkpoint(path: Path) -> List[tuple]:
    lines = path.read_text().split("\n")
    assert lines[0].strip() == "0", f"unknown leader-epoch-checkpoint version: {lines[0]!r}"
    n = int(lines[1])
    return [tuple(int(x) for x in lines[2 + i].split()) for i in range(n)]


def _read_offset_checkpoint(path: Path) -> Dict[str, int]:
    if not path.exists():
        return {}
    lines = path.read_text().split("\n")
    assert lines[0].strip() == "0", lines[0]
    n = int(lines[1])
    out = {}
    for i in range(n):
        topic, part, off = lines[2 + i].split()
        out[f"{topic}-{part}"] = int(off)
    return out


def _offsets_for_timestamps(bootstrap: str, topic: str, targets: List[int]) -> Dict[int, int]:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    admin = kh._admin(bootstrap)
    tp = TopicPartition(topic, 0)
    out = {}
    for t in targets:
        res = admin.list_offsets({tp: OffsetSpec.for_timestamp(t)}, request_timeout=30)
        out[t] = res[tp].result(timeout=30).offset
    return out


def _delete_records(bootstrap: str, topic: str, offset: int) -> int:
    """AdminClient.delete_records; returns the new low watermark."""
    from confluent_kafka import TopicPartition

    admin = kh._admin(bootstrap)
    tp = TopicPartition(topic, 0, offset)
    res = admin.delete_records([tp], request_timeout=30, operation_timeout=30)
    return res[tp].result(timeout=30).low_watermark


class _TxnProducer:
    """A transactional producer (confluent-kafka) whose transactions the test interleaves."""

    def __init__(self, bootstrap: str, tag: str, compression: str):
        from confluent_kafka import Producer

        cfg = kh._producer_config(bootstrap, compression, True, 5, 1024,
                                  {"transaction.timeout.ms": TXN_TIMEOUT_MS})
        cfg["transactional.id"] = f"logkafka-{tag}-{uuid.uuid4().hex[:8]}"
        self.p = Producer(cfg)
        self.p.init_transactions(60)

    def begin(self):
        self.p.begin_transaction()

    def send(self, topic: str, msgs) -> List[Dict[str, Any]]:
        d = kh._Deliveries(len(msgs))
        for i, m in enumerate(msgs):
            kh._produce_one(self.p, topic, m, d.callback(i))
            self.p.poll(0)
        left = self.p.flush(60)
        if left or d.errors:
            raise kh.KafkaHarnessError(f"transactional produce: {left} undelivered, {d.errors[:5]}")
        return d.results  # type: ignore[return-value]

    def commit(self):
        self.p.commit_transaction(60)

    def abort(self):
        self.p.abort_transaction(60)


def _copy_partition(log_dir: Path, topic: str, dest_root: Path) -> Path:
    """Copy ``<topic>-0`` and the log dir's own files (checkpoints, clean shutdown marker,
    meta.properties) into ``dest_root``; returns the copied partition dir."""
    dest_root.mkdir(parents=True)
    for p in log_dir.iterdir():
        if p.is_file():
            shutil.copy2(p, dest_root / p.name)
    dest = dest_root / f"{topic}-0"
    shutil.copytree(log_dir / f"{topic}-0", dest)
    return dest


def _copy_topics(log_dir: Path, topics: List[str], dest_root: Path) -> Path:
    """Copy the log dir's own files and partition 0 of each of ``topics``; returns the copy."""
    dest_root.mkdir(parents=True)
    for p in log_dir.iterdir():
        if p.is_file():
            shutil.copy2(p, dest_root / p.name)
    for topic in topics:
        shutil.copytree(log_dir / f"{topic}-0", dest_root / f"{topic}-0")
    return dest_root


def _alter_topic_configs(bootstrap: str, topic: str, set_: Dict[str, str], delete: List[str]) -> None:
    """IncrementalAlterConfigs on ``topic``: the broker writes CONFIG_RECORDs (a null value for a
    deleted config) to its metadata log."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    admin = kh._admin(bootstrap)  # held until the futures are done: its handle serves them
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def _alter_broker_configs(version: str, bootstrap: str, broker: Optional[int], configs: Dict[str, str]) -> None:
    """Kafka's ConfigCommand: the cluster-wide dynamic broker configs (``broker`` None,
    --entity-default) or one broker's; the broker writes CONFIG_RECORDs of resource type BROKER
    to its metadata log (librdkafka's admin refuses the default's empty resource name)."""
    cp = kh.kafka_classpath(version, tools=True)
    jars = {Path(p).parent for p in cp.split(os.pathsep)}
    cls = next(c for c in ("org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand")
               if kh._class_in_jars(jars, c))
    entity = ["--entity-default"] if broker is None else ["--entity-name", str(broker)]
    add = ",".join(f"{k}={v}" for k, v in configs.items())
    run = subprocess.run(["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", cp, cls, "--bootstrap-server",
                          bootstrap, "--alter", "--entity-type", "brokers", *entity, "--add-config", add],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def _wait_for_topic_configs(bootstrap: str, topic: str, wanted: Dict[str, str], timeout: float = 60) -> None:
    """Until the broker describes ``topic`` with ``wanted`` (its own or inherited values)."""
    from confluent_kafka.admin import ConfigResource

    admin = kh._admin(bootstrap)  # held: a collected client never answers
    deadline = time.monotonic() + timeout
    while True:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        entries = admin.describe_configs([resource])[resource].result(30)
        seen = {k: entries[k].value for k in wanted if k in entries}
        if seen == wanted:
            time.sleep(1)  # the describe reads the broker's config; its logs take it just after
            return
        assert time.monotonic() < deadline, f"{topic} never ran with {wanted}: {seen}"
        time.sleep(0.5)


def _segment_bases(pdir: Path) -> List[int]:
    return sorted(int(p.stem) for p in pdir.glob("*.log") if p.stem.isdigit())


# --------------------------------------------------------------------------- #
# broker session 1: the read topic; kafkalog writes the write topic (broker stopped)
# --------------------------------------------------------------------------- #

def _produce_read_topic(state: Dict[str, Any], bs: str, rng: random.Random, ts_base: int) -> None:
    produced = []
    for ci, codec in enumerate(CODECS):
        msgs = _messages(rng, 30, f"plain-{codec}", ts_base + ci * 1000, ooo=(codec == "snappy"))
        produced += kh.produce(bs, T_READ, msgs, compression=codec, linger_ms=2, batch_size=1024)
    kh.produce(bs, T_READ, _messages(rng, 30, "idem", ts_base + 6000), compression="lz4",
               idempotent=True, batch_size=1024)

    # two transactional producers, interleaved with each other and with plain records
    ta = _TxnProducer(bs, "a", "zstd")
    tb = _TxnProducer(bs, "b", "gzip")
    tsb = ts_base + 10_000
    ta.begin()
    a1 = ta.send(T_READ, _messages(rng, 8, "txa1", tsb))                     # committed
    tb.begin()
    b1 = tb.send(T_READ, _messages(rng, 6, "txb1", tsb + 100))               # aborted
    kh.produce(bs, T_READ, _messages(rng, 5, "mid1", tsb + 200), compression="snappy", batch_size=1024)
    a1 += ta.send(T_READ, _messages(rng, 4, "txa1b", tsb + 300))
    ta.commit()
    # more than a segment between B's first record and its ABORT marker: the marker (and the
    # .txnindex entry) land in a later segment than the transaction's first offset
    kh.produce(bs, T_READ, _messages(rng, 45, "mid2", tsb + 400), batch_size=1024)
    tb.abort()
    ta.begin()
    a2 = ta.send(T_READ, _messages(rng, 5, "txa2", tsb + 500))               # aborted
    tb.begin()
    b2 = tb.send(T_READ, _messages(rng, 7, "txb2", tsb + 600))               # committed
    ta.abort()
    kh.produce(bs, T_READ, _messages(rng, 5, "mid3", tsb + 700), compression="zstd", batch_size=1024)
    tb.commit()
    kh.produce(bs, T_READ, _messages(rng, 6, "mid4", tsb + 800), compression="lz4", batch_size=1024)
    ta.begin()
    open_dels = ta.send(T_READ, _messages(rng, 3, "txopen", tsb + 900))     # left open
    kh.produce(bs, T_READ, _messages(rng, 4, "after-open", tsb + 1000), batch_size=1024)
    state["read_txn"] = {"committed": a1 + b2, "aborted": b1 + a2, "aborted_groups": [b1, a2], "open": open_dels}
    state["open_txn_producer"] = ta
    state["tb"] = tb
    state["first_txn_offset"] = a1[0]["offset"]
    state["plain_deliveries"] = produced


def _write_with_kafkalog(pdir: Path) -> Dict[str, Any]:
    """Broker stopped: replace the broker's segments of ``pdir`` with a log kafkalog writes."""
    epochs = _read_leader_epoch_checkpoint(pdir / "leader-epoch-checkpoint")
    assert epochs, "the broker recorded no leader epoch"
    epoch = epochs[-1][0]
    for p in list(pdir.iterdir()):
        if p.suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"):
            p.unlink()
    kept = sorted(p.name for p in pdir.iterdir())
    assert "partition.metadata" in kept and "leader-epoch-checkpoint" in kept, kept

    rng = random.Random(99)
    ts = int(time.time() * 1000) - 120_000
    expected: List[Dict[str, Any]] = []
    # compression.type: the broker's own dynamic config (BROKER_OWN_CONFIGS) would recompress
    # the batches this test lays out byte for byte.
    cfg = {"segment.bytes": WRITE_SEGMENT_BYTES, "index.interval.bytes": WRITE_INDEX_INTERVAL,
           "file.delete.delay.ms": 0, "compression.type": "producer"}
    log = kafkalog.Log(pdir, read_only=False, config=cfg)
    assert log.log_end_offset == 0 and log.log_start_offset == 0, repr(log)
    seqs: Dict[int, int] = {}

    def msgs(n, tag):
        nonlocal ts
        out = []
        for i in range(n):
            ts += 5
            out.append({
                "key": None if i % 5 == 2 else f"{tag}-k{i}".encode(),
                "value": None if i % 7 == 4 else (f"{tag}-v{i}-" + "".join(
                    rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(rng.randint(20, 220)))).encode(),
                "headers": [("a", f"{tag}{i}".encode()), ("n", None)] if i % 2 == 0 else [],
                "timestamp": ts,
            })
        return out

    def add(recs, *, status="committed", pid=-1, pepoch=-1, transactional=False, compression="none"):
        base_seq = -1
        if pid >= 0:
            base_seq = seqs.get(pid, 0)
            seqs[pid] = base_seq + len(recs)
        first, last = log.append(recs, compression=compression, producer_id=pid, producer_epoch=pepoch,
                                 base_sequence=base_seq, transactional=transactional, leader_epoch=epoch)
        assert last - first + 1 == len(recs)
        for i, r in enumerate(recs):
            expected.append({"offset": first + i, "timestamp": r["timestamp"], "key": r["key"],
                             "value": r["value"], "headers": r["headers"], "status": status, "pid": pid})
        return first

    expected_aborted: List[Dict[str, int]] = []

    def marker(pid, commit):
        nonlocal ts
        ts += 5
        off = log.write_txn_marker(pid, 0, commit=commit, coordinator_epoch=7, leader_epoch=epoch, timestamp=ts)
        pending_other = [e["offset"] for e in expected if e["status"] == "pending" and e["pid"] != pid]
        if not commit:
            first = min(e["offset"] for e in expected if e["pid"] == pid and e["status"] == "pending")
            # Kafka's AbortedTxn.lastStableOffset: the first offset still undecided after this marker
            expected_aborted.append({"producer_id": pid, "first_offset": first, "last_offset": off,
                                     "last_stable_offset": min(pending_other) if pending_other else off + 1})
            for e in expected:
                if e["pid"] == pid and e["status"] == "pending":
                    e["status"] = "aborted"
        else:
            for e in expected:
                if e["pid"] == pid and e["status"] == "pending":
                    e["status"] = "committed"
        return off

    for rnd in range(3):
        for codec in CODECS:
            add(msgs(7, f"{codec}{rnd}"), compression=codec)
        add(msgs(6, f"idem{rnd}"), pid=PID_IDEM, pepoch=0, compression="lz4")
    # interleaved transactions: A committed, B aborted, then A aborted, B committed
    add(msgs(5, "txA1"), status="pending", pid=PID_TXN_A, pepoch=0, transactional=True, compression="gzip")
    add(msgs(4, "txB1"), status="pending", pid=PID_TXN_B, pepoch=0, transactional=True, compression="zstd")
    add(msgs(3, "plainT1"), compression="snappy")
    add(msgs(4, "txA1b"), status="pending", pid=PID_TXN_A, pepoch=0, transactional=True)
    marker(PID_TXN_A, True)
    add(msgs(4, "idemT"), pid=PID_IDEM, pepoch=0, compression="lz4")
    marker(PID_TXN_B, False)
    add(msgs(5, "txA2"), status="pending", pid=PID_TXN_A, pepoch=0, transactional=True, compression="zstd")
    add(msgs(5, "txB2"), status="pending", pid=PID_TXN_B, pepoch=0, transactional=True, compression="lz4")
    marker(PID_TXN_A, False)
    add(msgs(3, "plainT2"))
    marker(PID_TXN_B, True)
    for codec in CODECS:
        add(msgs(4, f"tail-{codec}"), compression=codec)
    # a transaction left open: the LSO stays at its first offset
    open_first = add(msgs(3, "txOpen"), status="pending", pid=PID_TXN_OPEN, pepoch=0, transactional=True)
    add(msgs(3, "afterOpen"), compression="zstd")
    leo = log.log_end_offset
    segments_before = log.segments
    log.close()

    # retention: drop the two oldest segments by size, then deleteRecords into the 3rd
    sizes = {b: (pdir / f"{b:020d}.log").stat().st_size for b in segments_before}
    total = sum(sizes.values())
    keep_bytes = total - sizes[segments_before[0]] - sizes[segments_before[1]]
    log = kafkalog.Log(pdir, read_only=False, config=dict(cfg, **{"retention.bytes": keep_bytes}))
    assert log.log_end_offset == leo, (log.log_end_offset, leo)
    deleted = log.delete_old_segments()
    after_retention = log.segments
    base3 = after_retention[0]
    seg3_next = after_retention[1]
    # the middle of a batch of the first remaining segment
    candidates = [e["offset"] for e in expected if base3 < e["offset"] < seg3_next]
    target = candidates[len(candidates) // 2] if candidates else base3 + 1
    lso_ret = log.delete_records(target)
    w = {
        "epoch": epoch, "expected": expected, "leo": leo, "open_first": open_first,
        "segments_before": segments_before, "deleted": deleted, "after_retention": after_retention,
        "delete_records_target": target, "delete_records_returned": lso_ret,
        "log_start": log.log_start_offset, "lso": log.last_stable_offset, "hw": log.high_watermark,
        "segments": log.segments, "seqs": dict(seqs), "expected_aborted": expected_aborted,
    }
    w["kl_uncommitted"] = [_kafkalog_view(r) for r in log.records(isolation="read_uncommitted")]
    w["kl_committed"] = [_kafkalog_view(r) for r in log.records(isolation="read_committed")]
    w["kl_aborted"] = log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset)
    log.close()
    w["snapshots"] = sorted(p.name for p in pdir.glob("*.snapshot"))
    w["files"] = sorted(p.name for p in pdir.iterdir())
    w["epoch_checkpoint"] = _read_leader_epoch_checkpoint(pdir / "leader-epoch-checkpoint")
    w["checkpoints"] = {name: _read_offset_checkpoint(pdir.parent / name).get(f"{T_WRITE}-0")
                        for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                                     "replication-offset-checkpoint")}
    return w


@pytest.fixture(scope="module", params=kh.KAFKA_VERSIONS)
def env(request, tmp_path_factory):
    version = request.param
    rng = random.Random(20240612)
    t0 = time.monotonic()
    broker = kh.Broker(version, properties={"log.retention.check.interval.ms": 500,
                                                   "log.initial.task.delay.ms": 500})
    work = tmp_path_factory.mktemp(f"logkafka-{version}")
    state: Dict[str, Any] = {"version": version, "broker": broker, "work": work}
    try:
        # ------------------------------ session 1 ------------------------------ #
        broker.start()
        bs = broker.bootstrap
        now = int(time.time() * 1000)
        ts_base = now - 600_000
        kh.create_topic(bs, T_READ, config={"segment.bytes": READ_SEGMENT_BYTES, "index.interval.bytes": 1024,
                                            "file.delete.delay.ms": 3_600_000})
        kh.create_topic(bs, T_WRITE)
        kh.produce(bs, T_WRITE, [{"key": b"b%d" % i, "value": b"broker %d" % i} for i in range(3)])
        # a topic compression.type the broker rewrites producers' batches in
        kh.create_topic(bs, T_RECOMPRESS, config={"compression.type": "zstd"})
        for codec, records in RECOMPRESS_SENDS:
            kh.produce(bs, T_RECOMPRESS, records, compression=codec, linger_ms=50)
        for topic, config in T_CONFIGURED.items():
            kh.create_topic(bs, topic, config={**config, "retention.ms": "86400000"})
        state["timestamp_verdicts"] = {}
        for topic, config in T_TIMESTAMP_LIMITS.items():
            if config and kh._major(version) >= 4:
                continue
            kh.create_topic(bs, topic, config=config)
            for delta in TIMESTAMP_OFFSETS_MS:
                try:
                    kh.produce(bs, topic, [{"value": b"v", "timestamp": int(time.time() * 1000) + delta}])
                    state["timestamp_verdicts"][topic, delta] = "taken"
                except kh.KafkaHarnessError as e:
                    assert "INVALID_TIMESTAMP" in str(e) or "Invalid timestamp" in str(e).title(), e
                    state["timestamp_verdicts"][topic, delta] = "refused"
        _alter_topic_configs(bs, "logappendtime", set_={"segment.ms": "3600000"}, delete=["retention.ms"])
        _alter_topic_configs(bs, "logcompacted", set_={"max.message.bytes": "3000000"}, delete=[])
        _produce_read_topic(state, bs, rng, ts_base)

        # deleteRecords into the middle of the 3rd segment (before any transaction): the broker's
        # retention check then deletes two segments, one of them with a producer snapshot
        rdir = broker.partition_dir(T_READ)
        bases = _segment_bases(rdir)
        assert len(bases) >= 5, bases
        target = bases[2] + 3
        assert target < state["first_txn_offset"], (target, state["first_txn_offset"])
        state["delete_records_low_watermark"] = _delete_records(bs, T_READ, target)
        state["delete_records_target"] = target
        deadline = time.monotonic() + 15
        while len(list(rdir.glob("*.log.deleted"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        state["deleted_files_seen"] = sorted(p.name for p in rdir.glob("*.deleted"))

        state["offsets"] = kh.list_offsets(bs, T_READ, 0)
        state["consumed"] = {iso: kh.consume_all(bs, T_READ, iso, timeout=90)
                             for iso in ("read_uncommitted", "read_committed")}
        ts = sorted({r["timestamp"] for r in state["consumed"]["read_uncommitted"]})
        targets = ts[::11] + [ts[0] - 1, ts[-1], ts[-1] + 1, ts[len(ts) // 2] + 1, ts_base - 10**6, now + 3_600_000]
        state["ts_targets"] = sorted(set(targets))
        state["list_offsets_ts"] = _offsets_for_timestamps(bs, T_READ, state["ts_targets"])
        _alter_broker_configs(version, bs, None, BROKER_DEFAULT_CONFIGS)
        _alter_broker_configs(version, bs, broker.node_id, BROKER_OWN_CONFIGS)
        # The configs reach the broker's logs asynchronously, each on its own: the topic runs
        # with both before its record is sent (a 3.9 broker once stored it uncompressed, having
        # applied only the first).
        _wait_for_topic_configs(bs, "logbrokerdefaults", {"compression.type": "gzip", "max.message.bytes": "3500000"})
        # The broker takes a record over the 1 MiB default under them, and stores it in gzip.
        deadline = time.monotonic() + 30
        while True:
            try:
                kh.produce(bs, "logbrokerdefaults", [{"key": b"k", "value": b"x" * 2_000_000}])
                break
            except Exception:  # the configs reach the broker's log manager asynchronously
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        state["session1_s"] = time.monotonic() - t0

        rc = broker.stop()
        assert rc in (0, 143), broker.log_tail()
        assert broker.clean_shutdown_marker()
        clean = _copy_partition(broker.log_dir, T_READ, work / "clean")
        state["recompressed"] = _copy_partition(broker.log_dir, T_RECOMPRESS, work / "recompressed")
        state["configured"] = _copy_topics(broker.log_dir, ["__cluster_metadata", *T_CONFIGURED,
                                                            *{t for t, _ in state["timestamp_verdicts"]}],
                                           work / "configured")
        state["clean"] = clean
        state["clean_snapshot"] = snapshot_files([clean.parent])
        make_read_only([clean.parent])

        # ------------------- kafkalog writes the write topic ------------------- #
        wdir = broker.partition_dir(T_WRITE)
        try:
            state["written"] = _write_with_kafkalog(wdir)
        except Exception:
            state["write_error"] = traceback.format_exc()
        if "written" in state:
            w = state["written"]
            files = [p for b in w["segments"] for p in
                     (wdir / f"{b:020d}.log", wdir / f"{b:020d}.index", wdir / f"{b:020d}.timeindex",
                      wdir / f"{b:020d}.txnindex") if p.exists()]
            files += [wdir / f"{w['leo']:020d}.snapshot"]
            # ... and Kafka's reading of the broker-written read topic's txn indexes / snapshots
            rfiles = [p for p in sorted(clean.iterdir()) if p.suffix in (".txnindex", ".snapshot")]
            dump = kh.dump_log_segments(version, files + rfiles, deep_iteration=True, index_sanity_check=True)
            state["dump_sanity"] = dump
            idx = [p for p in files if p.suffix in (".index", ".timeindex")]
            state["dump_index"] = kh.dump_log_segments(version, idx + [p for p in files if p.suffix in (".txnindex", ".snapshot")])
            state["write_snapshot"] = snapshot_files([wdir])

        # ------------------------------ session 2 ------------------------------ #
        broker.start()
        bs = broker.bootstrap
        if "written" in state:
            w = state["written"]
            state["w_files_after_start"] = snapshot_files([wdir])
            state["w_offsets"] = kh.list_offsets(bs, T_WRITE, 0)
            state["w_consumed"] = {iso: kh.consume_all(bs, T_WRITE, iso, timeout=90)
                                   for iso in ("read_uncommitted", "read_committed")}
            more = [{"key": b"after-%d" % i, "value": b"after restart %d" % i, "headers": [("x", None)]}
                    for i in range(4)]
            state["w_more"] = (more, kh.produce(bs, T_WRITE, more, compression="zstd"))
            state["w_offsets_after"] = kh.list_offsets(bs, T_WRITE, 0)

        # the read topic: finish the open transaction, more records, then SIGKILL
        try:
            state["open_txn_producer"].commit()
            state["open_committed"] = True
        except Exception as e:  # the coordinator aborts it after transaction.timeout.ms instead
            state["open_committed"] = repr(e)
        kh.produce(bs, T_READ, _messages(rng, 20, "before-kill", now - 1000), compression="gzip", batch_size=1024)
        kh.produce(bs, T_READ, _messages(rng, 12, "before-kill-2", now - 500), compression="none", batch_size=1024)
        state["unclean_offsets"] = kh.list_offsets(bs, T_READ, 0)
        state["unclean_consumed"] = kh.consume_all(bs, T_READ, "read_uncommitted", timeout=90)
        state["unclean_consumed_committed"] = kh.consume_all(bs, T_READ, "read_committed", timeout=90)
        # let the periodic high watermark checkpoint (5 s) catch up, so the killed folder's HW is exact
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline and _read_offset_checkpoint(
                broker.log_dir / "replication-offset-checkpoint").get(f"{T_READ}-0") != state["unclean_offsets"]["latest"]:
            time.sleep(0.25)
        broker.kill()
        state["unclean"] = _copy_partition(broker.log_dir, T_READ, work / "unclean")
        state["torn"] = _copy_partition(broker.log_dir, T_READ, work / "torn")
        state["torn_rw"] = _copy_partition(broker.log_dir, T_READ, work / "torn-rw")
        # tear the last batch of both torn copies in the middle
        last = state["torn"] / f"{_segment_bases(state['torn'])[-1]:020d}.log"
        dump = kh.dump_log_segments(version, [last], print_data=False)
        assert dump.errors == [], dump.errors
        batches = dump.file(last).batches
        cut = batches[-1]["position"] + batches[-1]["size"] // 2
        for d in (state["torn"], state["torn_rw"]):
            os.truncate(d / last.name, cut)
        state["tear"] = {"name": last.name, "cut": cut, "batches": batches}
        yield state
    finally:
        for k in ("open_txn_producer", "tb"):
            p = state.pop(k, None)
            if p is not None:
                try:
                    p.p.flush(1)
                except Exception:
                    pass
        print(f"\nKafka {version}: session 1 {state.get('session1_s', -1):.1f}s, "
              f"total {time.monotonic() - t0:.1f}s")
        broker.close()


# --------------------------------------------------------------------------- #
# read direction: a clean broker folder, read-only
# --------------------------------------------------------------------------- #


def _stored_batches(folder: Path) -> List[Any]:
    return [b for seg in sorted(folder.glob("*.log")) for b in kafkalog.decode_batches(seg.read_bytes())]


def test_write_recompresses_to_the_topic_compression_type(env, tmp_path):
    """compression.type=zstd: the broker stored every producer batch (lz4, uncompressed, gzip) as
    zstd, with the same records; kafkalog's leader append rewrites them the same way."""
    broker_batches = _stored_batches(env["recompressed"])
    assert {b.compression for b in broker_batches} == {"zstd"}, [b.compression for b in broker_batches]
    log = kafkalog.Log(tmp_path / "t-0", read_only=False, create=True, config={"compression.type": "zstd"})
    for codec, records in RECOMPRESS_SENDS:
        log.append(records, compression=codec)
    # a producer's raw batch, as append_batches takes it, too
    log.append_batches(kafkalog.encode_batch([{"key": b"k", "value": b"raw", "timestamp": _RECOMPRESS_TS + 100}],
                                             compression="snappy"))
    ours = _stored_batches(tmp_path / "t-0")
    assert {b.compression for b in ours} == {"zstd"}, [b.compression for b in ours]

    def fields(r: Any) -> tuple:
        return (r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers])

    broker_records = [fields(r) for r in kafkalog.Log(env["recompressed"]).records()]
    assert broker_records == [fields(r) for r in log.records()][:len(broker_records)]
    assert len(broker_records) == sum(len(records) for _, records in RECOMPRESS_SENDS)
    log.close()

def test_writes_follow_the_topic_configs_in_the_brokers_metadata(env):
    """Topic configs a broker keeps only in its __cluster_metadata log (set at creation, then
    altered and deleted) are the topic's for kafkalog: `Topic.config` lists them, and a writable
    `Log` or a `Producer` opened in the broker's data dir appends as the broker would under them
    (LogAppendTime stamped, batches rewritten in lz4, keyless records refused on a compacted
    topic, max.message.bytes raised), where before they wrote with Kafka's defaults."""
    data = env["configured"]
    expected = {
        "logappendtime": {"message.timestamp.type": "LogAppendTime", "compression.type": "lz4",
                          "segment.ms": "3600000"},
        "logcompacted": {"cleanup.policy": "compact", "max.message.bytes": "3000000",
                         "retention.ms": "86400000"},
    }
    dd = kafkalog.DataDir(data)
    for topic, configs in expected.items():
        assert dd.topic(topic).config == configs, topic
    log = kafkalog.Log(data / "logappendtime-0", read_only=False)
    log.append([{"key": b"k", "value": b"v", "timestamp": 1000}], compression="gzip")
    [batch] = log.batches()
    assert (batch.compression, batch.timestamp_type) == ("lz4", "log_append_time"), batch
    assert batch.max_timestamp > 1_700_000_000_000
    log.close()
    log = kafkalog.Log(data / "logcompacted-0", read_only=False)
    with pytest.raises(kafkalog.InvalidRecordError, match="Compacted topic cannot accept message without key"):
        log.append([{"value": b"no key"}])
    log.append([{"key": b"k", "value": b"x" * 2_500_000}])
    assert log.log_end_offset == 1
    log.close()
    with pytest.raises(kafkalog.InvalidRecordError, match="without key"):
        with kafkalog.Producer(dd.topic("logcompacted")) as producer:
            producer.send(b"no key").get()
    # An explicit config goes over the topic's.
    log = kafkalog.Log(data / "logappendtime-0", read_only=False, config={"compression.type": "producer"})
    log.append([{"key": b"k", "value": b"v"}], compression="gzip")
    assert [b.compression for b in log.batches()] == ["lz4", "gzip"]
    log.close()


def test_writes_hold_timestamps_to_the_limits_of_the_brokers_release(env):
    """A writer in a broker's dir takes and refuses timestamps as that broker did: Kafka 4.x
    refuses a record an hour or more ahead of its clock by default, 3.x takes it, and 3.x holds
    a topic's records to its message.timestamp.difference.max.ms both ways (a black-box tester's
    3.9.2 broker took a record kafkalog refused, and kafkalog took one 3.9.2 refused)."""
    verdicts = env["timestamp_verdicts"]
    assert verdicts[("logtsdefault", 2 * 3_600_000)] == ("taken" if kh._major(env["version"]) < 4 else "refused")
    for (topic, delta), verdict in verdicts.items():
        log = kafkalog.Log(env["configured"] / f"{topic}-0", read_only=False)
        try:
            log.append([{"value": b"v", "timestamp": int(time.time() * 1000) + delta}])
            ours = "taken"
        except kafkalog.InvalidRecordError as e:
            assert "out of the allowed range" in str(e), e
            ours = "refused"
        finally:
            log.close()
        assert ours == verdict, (env["version"], topic, delta)
    # A topic kafkalog creates follows 4.x, which refuses the removed config.
    with pytest.raises(ValueError, match="Unknown topic config name: message.timestamp.difference.max.ms"):
        kafkalog.Topic.create(env["work"] / "own", "t", 1,
                              config={"message.timestamp.difference.max.ms": "600000"})


def test_writes_follow_the_dynamic_broker_configs_in_the_brokers_metadata(env):
    """Dynamic broker configs (`kafka-configs --entity-type brokers --entity-default`, and the
    broker's own) are in the data dir's metadata log, under their broker names: a topic without
    its own configs runs with them, at the broker (it took a 2 MB record under
    `message.max.bytes=3500000` and stored it in gzip) and in a writable `Log` (it refused the
    record with Kafka's 1 MiB default and kept the producer's codec before). `Topic.config`
    still lists only the topic's own, as `kafka-configs --describe` does."""
    data = env["configured"]
    assert kafkalog.DataDir(data).topic("logbrokerdefaults").config == {"retention.ms": "86400000"}
    log = kafkalog.Log(data / "logbrokerdefaults-0", read_only=False)
    [broker_batch] = log.batches()
    assert broker_batch.compression == "gzip", broker_batch
    log.append([{"key": b"k", "value": b"y" * 2_500_000}])
    assert [b.compression for b in log.batches()] == ["gzip", "gzip"]
    with pytest.raises(kafkalog.KafkaLogError, match="3500000"):
        log.append([{"key": b"k", "value": b"z" * 3_600_000}])
    log.close()


def test_read_scenario_shape(env):
    """The folder really has what the tests below claim to cover."""
    clean = env["clean"]
    assert len(_segment_bases(clean)) >= 5, _segment_bases(clean)
    assert env["deleted_files_seen"], "the broker's retention check left no .deleted segment"
    assert list(clean.glob("*.log.deleted"))
    off = env["offsets"]
    assert off["earliest"] == env["delete_records_target"] == env["delete_records_low_watermark"]
    assert off["earliest"] > _segment_bases(clean)[0] or not (clean / f"{0:020d}.log").exists()
    assert off["last_stable"] == env["read_txn"]["open"][0]["offset"] < off["latest"]
    lso_cp = _read_offset_checkpoint(clean.parent / "log-start-offset-checkpoint")
    assert lso_cp.get(f"{T_READ}-0") == off["earliest"], lso_cp
    assert (clean.parent / ".kafka_cleanshutdown").exists()
    # Kafka deletes the producer snapshots of the segments its retention deleted
    first = _segment_bases(clean)[0]
    assert len(list(clean.glob("*.log.deleted"))) >= 2
    assert [p.name for p in clean.glob("*.snapshot") if int(p.name[:20]) < first] == []
    assert list(clean.glob("*.snapshot.deleted")), sorted(p.name for p in clean.iterdir())


def test_read_offsets_match_list_offsets(env):
    log = kafkalog.Log(env["clean"], read_only=True)
    off = env["offsets"]
    got = {"log_start_offset": log.log_start_offset, "log_end_offset": log.log_end_offset,
           "high_watermark": log.high_watermark, "last_stable_offset": log.last_stable_offset}
    exp = {"log_start_offset": off["earliest"], "log_end_offset": off["latest"],
           "high_watermark": off["latest"], "last_stable_offset": off["last_stable"]}
    assert got == exp
    assert log.first_unstable_offset == off["last_stable"]
    assert log.recovered_bytes_truncated == 0
    assert log.segments == _segment_bases(env["clean"])
    # ListOffsets EARLIEST / LATEST / MAX_TIMESTAMP
    assert log.offset_for_timestamp(kafkalog.EARLIEST_TIMESTAMP)[1] == off["earliest"]
    assert log.offset_for_timestamp(kafkalog.LATEST_TIMESTAMP)[1] == off["latest"]
    mt = log.offset_for_timestamp(kafkalog.MAX_TIMESTAMP)
    assert mt == (off["max_timestamp"], off["max_timestamp_offset"])
    log.close()


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_read_records_match_consumer(env, isolation):
    log = kafkalog.Log(env["clean"], read_only=True)
    got = [_kafkalog_view(r) for r in log.records(isolation=isolation)]
    exp = [_consumer_view(r) for r in env["consumed"][isolation]]
    _assert_same_records(got, exp, isolation)
    log.close()


def test_read_committed_drops_aborted_and_stops_at_lso(env):
    """Cross-check with what the producers were told: aborted and open-transaction records are
    exactly the ones read_committed leaves out."""
    log = kafkalog.Log(env["clean"], read_only=True)
    unc = {r.offset for r in log.records(isolation="read_uncommitted")}
    com = {r.offset for r in log.records(isolation="read_committed")}
    aborted = {d["offset"] for d in env["read_txn"]["aborted"]}
    committed = {d["offset"] for d in env["read_txn"]["committed"]}
    lso = env["offsets"]["last_stable"]
    assert aborted and aborted <= unc and not (aborted & com)
    assert committed <= com
    assert com == {o for o in unc if o not in aborted and o < lso}
    log.close()


def test_read_offset_for_timestamp_matches_broker(env):
    log = kafkalog.Log(env["clean"], read_only=True)
    bad = []
    for target, broker_answer in env["list_offsets_ts"].items():
        r = log.offset_for_timestamp(target)
        got = -1 if r is None else r[1]
        if got != broker_answer:
            bad.append((target, broker_answer, got))
    assert bad == [], f"(timestamp, broker, kafkalog): {bad[:10]}"
    assert len(set(env["list_offsets_ts"].values())) > 5
    log.close()


def test_read_aborted_transactions_match_dump(env):
    """collect_aborted_transactions == the broker's .txnindex entries as Kafka's tool reads them."""
    if "dump_sanity" not in env:
        pytest.fail(f"DumpLogSegments did not run: {env.get('write_error')}")
    clean = env["clean"]
    dump = env["dump_sanity"]
    exp = []
    for f in dump.files:
        if f.kind == "txnindex" and Path(f.path).parent == clean:
            exp += [{"producer_id": e["producerId"], "first_offset": e["firstOffset"],
                     "last_offset": e["lastOffset"], "last_stable_offset": e["lastStableOffset"]}
                    for e in f.aborted_txns]
    assert len(exp) == 2, exp
    log = kafkalog.Log(clean, read_only=True)
    got = log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset)
    assert got == exp
    # the aborted transactions' first offsets are what the producers were told
    assert [e["first_offset"] for e in exp] == [g[0]["offset"] for g in env["read_txn"]["aborted_groups"]]
    log.close()


FETCH_ABORTED_BUG = ("BUG: Log.collect_aborted_transactions(start, upper) / read(isolation='committed') only "
                     "look in the .txnindex of segments below `upper`; Kafka continues into higher segments "
                     "until an entry's lastStableOffset >= upper, so an aborted transaction whose ABORT marker "
                     "is in a later segment than the fetched one is missing from the fetch's aborted list")


def test_read_fetch_reports_aborted_transactions(env):
    """Kafka's fetch (read_committed) from an aborted transaction's first offset lists it."""
    log = kafkalog.Log(env["clean"], read_only=True)
    exp = log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset)
    assert len(exp) == 2
    segs = log.segments
    seg_of = lambda o: max(b for b in segs if b <= o)  # noqa: E731
    # the scenario puts B's ABORT marker in a later segment than its first record
    assert seg_of(exp[0]["first_offset"]) < seg_of(exp[0]["last_offset"]), (exp[0], segs)
    for e in exp:
        rd = log.read(e["first_offset"], 1024 * 1024, isolation="committed")
        fetched = rd["aborted_transactions"]
        assert fetched is not None and e in fetched, (e, fetched)
        assert all(f in exp for f in fetched), fetched
    log.close()


def test_read_left_files_untouched(env):
    """After every read-only open above (files chmod a-w): every file is byte-identical."""
    clean = env["clean"]
    log = kafkalog.Log(clean, read_only=True)
    list(log.records())
    log.close()
    after = snapshot_files([clean.parent])
    assert set(after) == set(env["clean_snapshot"]), "files appeared or vanished"
    assert [p for p in after if after[p] != env["clean_snapshot"][p]] == []


def test_read_writable_open_of_clean_copy(env, tmp_path):
    """A writable open + close of (a writable copy of) the clean folder does what Kafka's load
    does: .deleted files and snapshots at or below the log start go, no data file changes, the
    checkpoints keep log start / recovery point / HW, and the records are the same."""
    root = tmp_path / "rw"
    shutil.copytree(env["clean"].parent, root)
    for dirpath, _, names in os.walk(root):
        for n in names:
            os.chmod(Path(dirpath) / n, 0o644)
    d = root / env["clean"].name
    before = snapshot_files([d])
    off = env["offsets"]
    # A copy of the broker's dir without its __cluster_metadata log: the topic's configs are given
    # (Kafka's defaults, as the topic was created), as a writer there must.
    log = kafkalog.Log(d, read_only=False, config={})
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.last_stable_offset) == \
        (off["earliest"], off["latest"], off["latest"], off["last_stable"])
    got = [_kafkalog_view(r) for r in log.records(isolation="read_committed")]
    _assert_same_records(got, [_consumer_view(r) for r in env["consumed"]["read_committed"]], "read_committed")
    log.close()
    after = snapshot_files([d])
    gone = sorted(Path(p).name for p in set(before) - set(after))
    assert all(n.endswith(".deleted") or (n.endswith(".snapshot") and int(n[:20]) <= off["earliest"])
               for n in gone), gone
    assert not list(d.glob("*.deleted"))
    for p, v in before.items():
        if p in after and p.endswith(".log"):
            assert after[p][0] == v[0], p
    cps = {n: _read_offset_checkpoint(root / n).get(f"{T_READ}-0")
           for n in ("log-start-offset-checkpoint", "recovery-point-offset-checkpoint", "replication-offset-checkpoint")}
    assert cps == {"log-start-offset-checkpoint": off["earliest"], "recovery-point-offset-checkpoint": off["latest"],
                   "replication-offset-checkpoint": off["latest"]}


# --------------------------------------------------------------------------- #
# unclean shutdown (SIGKILL)
# --------------------------------------------------------------------------- #

def test_unclean_read_only_returns_everything(env):
    d = env["unclean"]
    assert not (d.parent / ".kafka_cleanshutdown").exists()
    assert env["open_committed"] is True, env["open_committed"]
    before = snapshot_files([d.parent])
    log = kafkalog.Log(d, read_only=True)
    assert log.recovered_bytes_truncated == 0
    assert log.log_end_offset == env["unclean_offsets"]["latest"]
    assert log.log_start_offset == env["unclean_offsets"]["earliest"]
    assert log.high_watermark == env["unclean_offsets"]["latest"]
    got = [_kafkalog_view(r) for r in log.records(isolation="read_uncommitted")]
    _assert_same_records(got, [_consumer_view(r) for r in env["unclean_consumed"]], "read_uncommitted")
    log.close()
    assert snapshot_files([d.parent]) == before


LSO_BUG = ("BUG: when the loader replays transaction markers (every open without the broker's "
           "clean-shutdown marker in the parent dir: after a crash, or any copied / kafkalog-written "
           "folder), transactions completed during the replay stay 'unreplicated' although the loaded "
           "high watermark is past their markers (Kafka's updateHighWatermark -> onHighWatermarkUpdated "
           "is never applied), so first_unstable_offset/last_stable_offset are stuck at the first such "
           "transaction's first offset and read_committed stops there")


def test_unclean_read_only_read_committed(env):
    d = env["unclean"]
    log = kafkalog.Log(d, read_only=True)
    assert log.last_stable_offset == env["unclean_offsets"]["last_stable"]
    got = [_kafkalog_view(r) for r in log.records(isolation="read_committed")]
    _assert_same_records(got, [_consumer_view(r) for r in env["unclean_consumed_committed"]], "read_committed")
    log.close()


TORN_TAIL_BUG = ("BUG: Log open (read-only and writable) raises CorruptRecordError on a segment whose last batch "
                 "is torn: LogSegment::open eagerly scans the tail (load_largest_timestamp / private index "
                 "rebuild) before the loader can hide or truncate it")


def _torn_expected(env):
    t = env["tear"]
    lastb = t["batches"][-1]
    complete = [_consumer_view(r) for r in env["unclean_consumed"] if r["offset"] < lastb["baseOffset"]]
    assert len(complete) < len(env["unclean_consumed"])
    return t, lastb, complete


def test_unclean_torn_tail_read_only(env):
    """Read-only over a torn tail: every complete record, the torn bytes hidden, nothing written."""
    t, lastb, complete = _torn_expected(env)
    ro = env["torn"]
    before = snapshot_files([ro.parent])
    try:
        log = kafkalog.Log(ro, read_only=True)
        assert log.recovered_bytes_truncated == t["cut"] - lastb["position"]
        assert log.log_end_offset == lastb["baseOffset"]
        got = [_kafkalog_view(r) for r in log.records(isolation="read_uncommitted")]
        _assert_same_records(got, complete, "read-only over a torn tail")
        log.close()
    finally:
        assert snapshot_files([ro.parent]) == before, "a read-only open changed files"


def test_unclean_torn_tail_writable(env):
    """A writable open truncates the torn tail on disk; Kafka's tool accepts the result."""
    t, lastb, complete = _torn_expected(env)
    rw = env["torn_rw"]
    last = rw / t["name"]
    log = kafkalog.Log(rw, read_only=False, config={})  # no cluster metadata in the copy
    assert log.recovered_bytes_truncated == t["cut"] - lastb["position"]
    assert log.log_end_offset == lastb["baseOffset"]
    assert last.stat().st_size == lastb["position"]
    got = [_kafkalog_view(r) for r in log.records(isolation="read_uncommitted")]
    _assert_same_records(got, complete, "writable open over a torn tail")
    log.close()
    base = int(last.stem)
    post = kh.dump_log_segments(env["version"], [last, rw / f"{base:020d}.index", rw / f"{base:020d}.timeindex"],
                                print_data=False, index_sanity_check=True)
    assert post.errors == [], post.errors
    assert [(b["baseOffset"], b["crc"]) for b in post.file(last).batches] == \
        [(b["baseOffset"], b["crc"]) for b in t["batches"][:-1]]
    rp = _read_offset_checkpoint(rw.parent / "recovery-point-offset-checkpoint").get(f"{T_READ}-0")
    assert rp == lastb["baseOffset"]


# --------------------------------------------------------------------------- #
# write direction: kafkalog writes, Kafka verifies and serves
# --------------------------------------------------------------------------- #

def _txn_first(entry) -> Optional[int]:
    """currentTxnFirstOffset of a DumpLogSegments snapshot entry: OptionalLong[N] / OptionalLong.empty."""
    v = entry.get("currentTxnFirstOffset")
    if isinstance(v, int):
        return None if v < 0 else v
    m = re.search(r"(-?\d+)", str(v))
    return int(m.group(1)) if m else None


def _written(env) -> Dict[str, Any]:
    if "written" not in env:
        pytest.fail(f"kafkalog could not write the log:\n{env.get('write_error')}")
    return env["written"]


def test_write_kafkalog_state(env):
    """What kafkalog itself reports about the log it wrote, against what was appended."""
    w = _written(env)
    assert len(w["segments_before"]) >= 6, w["segments_before"]
    assert w["deleted"] == 2 and w["after_retention"] == w["segments_before"][2:]
    assert w["log_start"] == w["delete_records_target"] == w["delete_records_returned"]
    assert w["segments"][0] == w["after_retention"][0] < w["log_start"]
    assert w["hw"] == w["leo"]
    assert w["lso"] == w["open_first"]
    exp = w["expected"]
    unc = [e for e in exp if e["offset"] >= w["log_start"]]
    com = [e for e in unc if e["status"] == "committed" and e["offset"] < w["lso"]]

    def view(e):
        return (e["offset"], e["timestamp"], "CreateTime", e["key"], e["value"], [tuple(h) for h in e["headers"]])
    _assert_same_records(w["kl_uncommitted"], [view(e) for e in unc], "read_uncommitted")
    _assert_same_records(w["kl_committed"], [view(e) for e in com], "read_committed")
    assert w["epoch_checkpoint"] == [(w["epoch"], w["log_start"])]
    assert w["checkpoints"] == {"recovery-point-offset-checkpoint": w["leo"],
                                "log-start-offset-checkpoint": w["log_start"],
                                "replication-offset-checkpoint": w["leo"]}
    assert f"{w['leo']:020d}.snapshot" in w["snapshots"], w["files"]
    assert w["kl_aborted"] == w["expected_aborted"]


SNAPSHOT_BUG = ("BUG: delete_old_segments() deletes a segment's .log/.index/.timeindex/.txnindex but "
                "leaves the producer snapshot at its base offset (Kafka's deleteSegments -> "
                "deleteProducerSnapshots removes it), so stray snapshots below the log start remain")


def test_write_retention_deletes_producer_snapshots(env):
    w = _written(env)
    stray = [n for n in w["snapshots"] if int(n[:20]) < w["segments"][0]]
    assert stray == [], f"snapshots below the first segment {w['segments'][0]}: {stray}"


def test_write_dump_log_segments_accepts(env):
    w = _written(env)
    wdir = env["broker"].partition_dir(T_WRITE)
    dump, idx = env["dump_sanity"], env["dump_index"]
    assert dump.errors == [], dump.errors[:20]
    assert idx.errors == [], idx.errors[:20]
    for b in w["segments"]:
        for s in (".index", ".timeindex"):
            notes = dump.file(wdir / f"{b:020d}{s}").notes
            assert any("passed sanity check" in n for n in notes), (b, s, notes)
    # the same records, in the same place, as kafkalog wrote (from the first remaining segment)
    data = [(r, b) for f in dump.files if f.kind == "log" and Path(f.path).parent == wdir
            for b in f.batches if not b["isControl"] for r in b["records"]]
    exp = [e for e in w["expected"] if e["offset"] >= w["segments"][0]]
    assert len(data) == len(exp)
    for (dr, db), e in zip(data, exp):
        where = f"offset {e['offset']}"
        assert dr["offset"] == e["offset"], where
        assert dr["timestamp"] == e["timestamp"] and dr["timestamp_type"] == "CreateTime", where
        assert dr.get("key") == (None if e["key"] is None else e["key"].decode()), where
        assert dr.get("payload") == (None if e["value"] is None else e["value"].decode()), where
        assert dr["headerKeys"] == [k for k, _ in e["headers"]], where
        assert db["partitionLeaderEpoch"] == w["epoch"] and db["magic"] == 2, where
        assert db["producerId"] == e["pid"], where
        assert db["isTransactional"] == (e["pid"] in (PID_TXN_A, PID_TXN_B, PID_TXN_OPEN)), where
    batches = [b for f in dump.files if f.kind == "log" and Path(f.path).parent == wdir for b in f.batches]
    assert {str(b["compresscodec"]).lower() for b in batches} >= set(CODECS)
    # idempotent sequences continue batch to batch
    idem = [b for b in batches if b["producerId"] == PID_IDEM]
    for a, b in zip(idem, idem[1:]):
        assert b["baseSequence"] == a["lastSequence"] + 1
    markers = [(b["producerId"], r["endTxnMarker"], r["coordinatorEpoch"])
               for b in batches if b["isControl"] for r in b["records"]]
    assert markers == [(PID_TXN_A, "COMMIT", 7), (PID_TXN_B, "ABORT", 7), (PID_TXN_A, "ABORT", 7),
                       (PID_TXN_B, "COMMIT", 7)]
    # .txnindex: the two aborted transactions, as kafkalog reports them
    aborted = [{"producer_id": e["producerId"], "first_offset": e["firstOffset"], "last_offset": e["lastOffset"],
                "last_stable_offset": e["lastStableOffset"]}
               for f in dump.files if f.kind == "txnindex" and Path(f.path).parent == wdir for e in f.aborted_txns]
    assert [a["producer_id"] for a in aborted] == [PID_TXN_B, PID_TXN_A]
    assert aborted == w["kl_aborted"]
    for a in aborted:
        firsts = [e["offset"] for e in w["expected"] if e["pid"] == a["producer_id"] and e["status"] == "aborted"]
        assert a["first_offset"] == min(o for o in firsts if o <= a["last_offset"])
    # producer snapshot: Kafka reads kafkalog's snapshot with every producer
    snap = [f for f in dump.files if f.kind == "snapshot" and Path(f.path).parent == wdir]
    assert len(snap) == 1
    ents = {e["producerId"]: e for e in snap[0].producer_entries}
    assert set(ents) == {PID_IDEM, PID_TXN_A, PID_TXN_B, PID_TXN_OPEN}, ents
    for pid, n in w["seqs"].items():
        assert ents[pid]["lastSequence"] == n - 1, ents[pid]
        assert ents[pid]["producerEpoch"] == 0, ents[pid]
    assert _txn_first(ents[PID_TXN_OPEN]) == w["open_first"], ents[PID_TXN_OPEN]
    assert _txn_first(ents[PID_TXN_A]) is None and _txn_first(ents[PID_IDEM]) is None
    assert ents[PID_TXN_A]["coordinatorEpoch"] == 7


def test_write_broker_loads_without_recovery(env):
    """The broker (clean shutdown marker present) takes kafkalog's folder as it is: no segment,
    index or snapshot rewritten, truncated or deleted; only the active segment's indexes may be
    re-grown for appends."""
    w = _written(env)
    before, after = env["write_snapshot"], env["w_files_after_start"]
    # Kafka's load deletes producer snapshots at or below the log start offset; nothing else
    gone = sorted(Path(p).name for p in set(before) - set(after))
    assert all(n.endswith(".snapshot") and int(n[:20]) <= w["log_start"] for n in gone), gone
    active = env["written"]["segments"][-1]
    for p, (h, size, _) in before.items():
        name = Path(p).name
        if p not in after:
            continue
        if name.startswith(f"{active:020d}") and name.endswith((".index", ".timeindex")):
            assert after[p][1] >= size, name   # re-grown for appends, never shrunk
            continue
        if name in ("leader-epoch-checkpoint", "partition.metadata"):
            continue  # the broker rewrites these on becoming leader
        assert after[p][0] == h, f"the broker changed {name}"


def test_write_broker_list_offsets(env):
    w = _written(env)
    off = env["w_offsets"]
    assert (off["earliest"], off["latest"], off["last_stable"]) == (w["log_start"], w["leo"], w["lso"])


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_write_broker_serves_kafkalog_records(env, isolation):
    w = _written(env)
    got = [_consumer_view(r) for r in env["w_consumed"][isolation]]
    exp = w["kl_uncommitted" if isolation == "read_uncommitted" else "kl_committed"]
    _assert_same_records(exp, got, isolation)
    assert exp


def test_write_broker_appends_after_leo(env):
    w = _written(env)
    more, dels = env["w_more"]
    assert [d["offset"] for d in dels] == list(range(w["leo"], w["leo"] + len(more)))
    assert env["w_offsets_after"]["latest"] == w["leo"] + len(more)
    assert env["w_offsets_after"]["earliest"] == w["log_start"]
    # the transaction kafkalog left open still pins the broker's LSO
    assert env["w_offsets_after"]["last_stable"] == w["lso"]


# --------------------------------------------------------------------------- #
# minimal reproductions of the bugs above (no broker)
# --------------------------------------------------------------------------- #

def test_repro_lso_stuck_after_replayed_marker(tmp_path):
    d = tmp_path / "t-0"
    log = kafkalog.Log(d, read_only=False, create=True)
    log.append([{"value": b"a"}])
    log.append([{"value": b"x"}] * 3, producer_id=5, producer_epoch=0, base_sequence=0, transactional=True)
    log.write_txn_marker(5, 0, commit=True)
    log.append([{"value": b"b"}])
    assert log.last_stable_offset == 6
    log.close()
    # reopened (no .kafka_cleanshutdown next to it, so the loader recovers and replays)
    log = kafkalog.Log(d, read_only=True)
    assert (log.log_end_offset, log.high_watermark) == (6, 6)
    assert log.first_unstable_offset is None
    assert log.last_stable_offset == 6   # kafkalog: 1
    assert [r.offset for r in log.records(isolation="read_committed")] == [0, 1, 2, 3, 5]   # kafkalog: [0]
    log.close()


@pytest.mark.parametrize("read_only", [True, False])
def test_repro_torn_tail_open(tmp_path, read_only):
    d = tmp_path / "t-0"
    log = kafkalog.Log(d, read_only=False, create=True)
    for i in range(5):
        log.append([{"value": b"v%d" % i * 50}])
    log.close()
    seg = d / f"{0:020d}.log"
    size = seg.stat().st_size            # 5 batches of 170 bytes
    os.truncate(seg, size - 20)          # the last batch torn
    log = kafkalog.Log(d, read_only=read_only)   # kafkalog: CorruptRecordError
    assert log.log_end_offset == 4
    assert log.recovered_bytes_truncated == 150
    assert [r.offset for r in log.records()] == [0, 1, 2, 3]
    log.close()
    assert seg.stat().st_size == (size - 20 if read_only else size - 170)


def test_repro_retention_leaves_snapshots(tmp_path):
    d = tmp_path / "t-0"
    cfg = {"segment.bytes": 4096, "file.delete.delay.ms": 0}
    log = kafkalog.Log(d, read_only=False, create=True, config=cfg)
    for i in range(60):
        log.append([{"value": bytes(300)}], producer_id=7, producer_epoch=0, base_sequence=i)
    assert log.segments == [0, 11, 22, 33, 44, 55]
    log.close()
    log = kafkalog.Log(d, read_only=False, config=dict(cfg, **{"retention.bytes": 3 * 4070 + 1850}))
    assert log.delete_old_segments() == 2
    log.close()
    assert sorted(p.name for p in d.glob("*.snapshot")) == [f"{b:020d}.snapshot" for b in (22, 33, 44, 55, 60)]


def test_repro_aborted_marker_in_later_segment(tmp_path):
    log = kafkalog.Log(tmp_path / "t-0", read_only=False, create=True)
    log.append([{"value": b"x"}] * 3, producer_id=5, producer_epoch=0, base_sequence=0, transactional=True)
    log.roll()                                          # segment 3 starts
    log.append([{"value": b"plain"}])                   # offset 3
    assert log.write_txn_marker(5, 0, commit=False) == 4
    entry = {"producer_id": 5, "first_offset": 0, "last_offset": 4, "last_stable_offset": 5}
    assert log.collect_aborted_transactions(0, 5) == [entry]
    # Kafka: a fetch of segment 0 (upper bound 3) looks on into segment 3's .txnindex
    assert log.collect_aborted_transactions(0, 3) == [entry]      # kafkalog: []
    rd = log.read(0, 1 << 20, isolation="committed")
    assert [b.base_offset for b in rd["batches"]] == [0]
    assert rd["aborted_transactions"] == [entry]                  # kafkalog: []
    log.close()


def test_a_transaction_left_open_below_the_log_start_as_a_broker_answers(tmp_path):
    """A transaction left open whose records DeleteRecords then removed: Kafka raises the first
    unstable offset to the log start and turns it into offset metadata by a read, which lands on
    the base offset of the batch holding the log start: a last stable offset of 5 where the log
    start 5 begins a batch, 3 where it lies in a batch of offsets 3..12. kafkalog gave the open
    transaction's first offset 0, below the log start, and its CLI and Spark source then failed
    a read_committed read a consumer ends empty (a black-box tester's case)."""
    with kh.Broker(kh.KAFKA_VERSIONS[0]) as broker:
        broker.start()
        bs = broker.bootstrap
        kh.create_topic(bs, "hung", partitions=2)
        producer = _TxnProducer(bs, "hung", "none")
        producer.begin()
        producer.send("hung", [{"value": b"open %d" % i, "partition": p} for p in (0, 1) for i in range(3)])
        for i in range(10):  # partition 0: a batch a record
            kh.produce(bs, "hung", [{"value": b"plain %d" % i, "partition": 0}])
        kh.produce(bs, "hung", [{"value": b"plain %d" % i, "partition": 1} for i in range(10)],
                   linger_ms=200)  # partition 1: one batch
        from confluent_kafka import TopicPartition
        admin = kh._admin(bs)
        cut = [TopicPartition("hung", p, 5) for p in (0, 1)]
        for future in admin.delete_records(cut, request_timeout=30, operation_timeout=30).values():
            future.result(timeout=30)
        broker.restart()  # the answers of a broker that loaded the log, as kafkalog does
        answered = {p: kh.list_offsets(bs, "hung", p) for p in (0, 1)}
        broker.stop()
        data = _copy_topics(broker.log_dir, ["hung"], tmp_path / "data")
        shutil.copytree(broker.log_dir / "hung-1", data / "hung-1")
    assert [answered[p]["last_stable"] for p in (0, 1)] == [5, 3], answered
    for p in (0, 1):
        log = kafkalog.Log(data / f"hung-{p}")
        assert log.log_start_offset == answered[p]["earliest"] == 5
        assert log.last_stable_offset == answered[p]["last_stable"]
        assert log.latest_offset("read_committed") == answered[p]["last_stable"]
        assert list(log.records(isolation="read_committed")) == []
        assert log.to_arrow(isolation="read_committed").read_all().num_rows == 0
        run = subprocess.run([sys.executable, "-m", "kafkalog", "records", str(data / f"hung-{p}"),
                              "--isolation", "read_committed"], capture_output=True, text=True)
        assert run.returncode == 0 and run.stdout == "", run.stdout + run.stderr
