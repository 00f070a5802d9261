"""Byte compatibility of kafkalog with a real Apache Kafka broker, in both directions.

One KRaft broker session per pinned Kafka version (module-scoped fixture):

Read direction (the broker writes, kafkalog reads)
  The broker gets every codec, headers (with None values), null keys/values,
  ~1 MiB records, small segments (many per partition), an idempotent producer,
  transactions (committed and aborted) and a LogAppendTime topic. It is then
  stopped cleanly, every file of the partition dirs is hashed (sha256, size,
  mtime) and made read-only, and kafkalog must agree with the consumer (records),
  DumpLogSegments (batch headers, indexes, txn index, positions) and ListOffsets
  (timestamp lookups) -- and leave every file byte-identical. kafkalog then
  re-appends the broker's batches into fresh segments: the .log/.index/.timeindex
  files must be byte-identical to the broker's own.

Corruption
  Copies of a broker segment with a flipped byte / a torn tail: kafkalog raises
  CorruptRecordError naming file and position; recover() truncates at the batch
  boundary DumpLogSegments reports and Kafka's tool accepts the result.

Write direction (kafkalog writes, Kafka verifies and serves)
  A broker-created topic is extended (broker stopped) with segments kafkalog
  writes: every codec, headers, null keys/values, an idempotent producer's
  batches, a committed and an aborted transaction with their markers (and the
  .txnindex entry), a LogAppendTime batch, the broker's leader epoch.
  DumpLogSegments (deep iteration, index sanity check, index dumps) accepts them;
  the restarted broker serves them unchanged to read_uncommitted/read_committed
  consumers, reports kafkalog's log end offset, and appends after it.

Nothing skips: if Kafka cannot be fetched or run, these tests fail.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

import kafka_harness as kh
import kafkalog
import compat_util
from compat_util import TS_TYPE_KAFKA, control_batch, make_read_only, snapshot_files

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
T_MAIN = "compat-main"
T_LAT = "compat-lat"
T_BIG = "compat-big"
T_WRITE = "compat-write"
READ_TOPICS = [T_MAIN, T_LAT, T_BIG]
SEGMENT_BYTES = 8 * 1024
INDEX_INTERVAL = 1024
BIG = 1024 * 1024 - 2048  # record values near 1 MiB
WRITE_INDEX_INTERVAL = 512
WRITE_ROLL_BYTES = 6 * 1024


# --------------------------------------------------------------------------- #
# data
# --------------------------------------------------------------------------- #

def _messages(rng, n, tag, ts_base, ooo=False):
    return compat_util.messages(rng, n, tag, ts_base, ooo)
def _consumer_view(rec: Dict[str, Any]):
    return (rec["offset"], rec["timestamp"], rec["timestamp_type"], rec["key"], rec["value"],
            [tuple(h) for h in rec["headers"]])


def _kafkalog_view(r) -> tuple:
    return (r.offset, r.timestamp, TS_TYPE_KAFKA[r.timestamp_type], r.key, r.value, [tuple(h) for h in r.headers])


def _bases(pdir: Path) -> List[int]:
    return sorted(int(p.stem) for p in pdir.glob("*.log") if p.stem.isdigit())


def _kl_segments(pdir: Path) -> List["kafkalog.Segment"]:
    return [kafkalog.Segment(str(pdir), b) for b in _bases(pdir)]


def _offsets_for_timestamps(bootstrap: str, topic: str, targets: List[int]) -> Dict[int, int]:
    """ListOffsets(timestamp) for each target with one AdminClient."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": kh._NullLogger()})
    tp = TopicPartition(topic, 0)
    out = {}
    for t in targets:
        res = admin.list_offsets({tp: OffsetSpec.for_timestamp(t)}, request_timeout=30)
        out[t] = res[tp].result(timeout=30).offset
    return out


def _read_leader_epoch_checkpoint(path: Path) -> List[tuple]:
    lines = path.read_text().split("\n")
    assert lines[0].strip() == "0", f"unknown leader-epoch-checkpoint version: {lines[0]!r}"
    n = int(lines[1])
    return [tuple(int(x) for x in lines[2 + i].split()) for i in range(n)]


# --------------------------------------------------------------------------- #
# one broker session per version
# --------------------------------------------------------------------------- #

@pytest.fixture(scope="module", params=kh.KAFKA_VERSIONS)
def env(request):
    version = request.param
    rng = random.Random(20240611)
    t0 = time.monotonic()
    broker = kh.Broker(version)
    state: Dict[str, Any] = {"version": version, "broker": broker, "t0": t0}
    try:
        broker.start()
        bs = broker.bootstrap
        now = int(time.time() * 1000)
        ts_base = now - 300_000
        kh.create_topic(bs, T_MAIN, config={
            "segment.bytes": SEGMENT_BYTES, "index.interval.bytes": INDEX_INTERVAL,
            "max.message.bytes": 2 * 1024 * 1024,
        })
        kh.create_topic(bs, T_LAT, config={
            "segment.bytes": SEGMENT_BYTES, "index.interval.bytes": INDEX_INTERVAL,
            "message.timestamp.type": "LogAppendTime",
        })
        kh.create_topic(bs, T_BIG, config={"segment.bytes": 1024 * 1024, "max.message.bytes": 2 * 1024 * 1024})
        kh.create_topic(bs, T_WRITE, config={"max.message.bytes": 2 * 1024 * 1024})

        # ---- main topic: codecs, big records, idempotent, transactions ----
        produced: List[tuple] = []  # (message, delivery)
        for ci, codec in enumerate(CODECS):
            msgs = _messages(rng, 45, codec, ts_base + ci * 1000, ooo=(codec == "snappy"))
            # The uncompressed records in flushes of 5: the first segment then holds four batches
            # or more whatever the producer's timing (the damage tests need its third and a
            # fourth; on a busy machine one linger once took them all in two).
            chunk = 5 if codec == "none" else len(msgs)
            dels = [d for i in range(0, len(msgs), chunk)
                    for d in kh.produce(bs, T_MAIN, msgs[i:i + chunk], compression=codec, linger_ms=2,
                                        batch_size=4096)]
            produced += list(zip(msgs, dels))
        for bi, codec in enumerate(["none", "zstd", "lz4"]):
            big = {"key": f"big-{codec}".encode(), "value": "".join(rng.choices("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", k=BIG)).encode(),
                   "headers": [("size", str(BIG).encode())], "timestamp": ts_base + 8000 + bi}
            kh.produce(bs, T_BIG, [big], compression=codec, linger_ms=0,
                       config={"message.max.bytes": 2 * 1024 * 1024})
            # something small behind it, in the same segment
            kh.produce(bs, T_BIG, _messages(rng, 3, f"after-big-{codec}", ts_base + 8100 + bi * 10), compression=codec)
        msgs = _messages(rng, 40, "idem", ts_base + 10_000)
        dels = kh.produce(bs, T_MAIN, msgs, compression="lz4", idempotent=True, batch_size=4096)
        produced += list(zip(msgs, dels))
        txns = [
            (_messages(rng, 20, "txn-a", ts_base + 20_000), True),
            (_messages(rng, 15, "txn-b", ts_base + 21_000), False),
            (_messages(rng, 6, "txn-c", ts_base + 22_000), True),
            (_messages(rng, 4, "txn-d", ts_base + 23_000), False),
        ]
        txn_dels = kh.produce_transactions(bs, T_MAIN, txns, compression="zstd", batch_size=4096)
        for (msgs, _), dels in zip(txns, txn_dels):
            produced += list(zip(msgs, dels))
        state["produced"] = produced
        state["txn_dels"] = txn_dels

        # ---- LogAppendTime topic ----
        lat_dels = []
        for codec in ("none", "zstd", "gzip"):
            lat_dels += kh.produce(bs, T_LAT, _messages(rng, 60, "lat-" + codec, 1000), compression=codec,
                                   linger_ms=2, batch_size=2048)
        assert all(d["timestamp_type"] == "LogAppendTime" for d in lat_dels)

        # ---- write topic: a few broker records, so it has a leader epoch entry ----
        state["write_broker_msgs"] = [{"key": b"broker-%d" % i, "value": b"written by the broker %d" % i,
                                       "headers": [], "timestamp": now - 120_000 + i} for i in range(5)]
        kh.produce(bs, T_WRITE, state["write_broker_msgs"])

        # ---- what the broker serves ----
        state["consumed"] = {t: kh.consume_all(bs, t, "read_uncommitted", timeout=120) for t in READ_TOPICS}
        state["offsets"] = {t: kh.list_offsets(bs, t, 0) for t in READ_TOPICS + [T_WRITE]}
        targets: Dict[str, List[int]] = {}
        for t in READ_TOPICS:
            ts = sorted({r["timestamp"] for r in state["consumed"][t]})
            pick = ts[::9] + [ts[0] - 1, ts[-1], ts[-1] + 1, ts[len(ts) // 2] + 1, now + 3_600_000]
            pick += [x - 1 for x in ts[3::17]] + [x + 1 for x in ts[5::17]]
            targets[t] = sorted(set(pick))
        state["ts_targets"] = targets
        state["list_offsets_ts"] = {t: _offsets_for_timestamps(bs, t, targets[t]) for t in READ_TOPICS}
        state["produce_s"] = time.monotonic() - t0

        # ---- clean stop, snapshot, DumpLogSegments, read-only ----
        rc = broker.stop()
        assert rc in (0, 143), broker.log_tail()
        assert broker.clean_shutdown_marker()
        state["pdirs"] = {t: broker.partition_dir(t, 0) for t in READ_TOPICS + [T_WRITE]}
        read_dirs = [state["pdirs"][t] for t in READ_TOPICS]
        state["snapshot"] = snapshot_files(read_dirs)
        files = [f for d in read_dirs for f in kh.segment_files(d, (".log", ".index", ".timeindex", ".txnindex"))]
        dump = kh.dump_log_segments(version, files)
        assert dump.errors == [], dump.errors[:20]
        state["dump"] = dump
        assert snapshot_files(read_dirs) == state["snapshot"], "DumpLogSegments changed a file"
        make_read_only(read_dirs)
        yield state
    finally:
        print(f"\nKafka {version}: produce/consume {state.get('produce_s', -1):.1f}s, "
              f"session total {time.monotonic() - t0:.1f}s")
        broker.close()


def _dump_log(env, topic: str, base: int):
    return env["dump"].file(env["pdirs"][topic] / f"{base:020d}.log")


# --------------------------------------------------------------------------- #
# read direction
# --------------------------------------------------------------------------- #

def test_read_records_match_consumer(env):
    for topic in READ_TOPICS:
        pdir = env["pdirs"][topic]
        segs = _kl_segments(pdir)
        assert len(segs) >= {T_MAIN: 6, T_LAT: 3, T_BIG: 3}[topic], f"{topic}: only {len(segs)} segments"
        got = []
        for seg in segs:
            for b in seg.batches():
                if not b.is_control:
                    assert len(b.records) == b.records_count
                    got += [_kafkalog_view(r) for r in b.records]
            seg.close()
        exp = [_consumer_view(r) for r in env["consumed"][topic]]
        assert len(got) == len(exp), topic
        for g, e in zip(got, exp):
            assert g == e, f"{topic} offset {e[0]}"
    # the produced data really covers what the scenario claims
    main = env["consumed"][T_MAIN]
    assert any(r["key"] is None for r in main) and any(r["value"] is None for r in main)
    assert any(v is None for r in main for _, v in r["headers"])
    assert sum(1 for r in env["consumed"][T_BIG] if r["value"] is not None and len(r["value"]) == BIG) == 3
    assert {r["timestamp_type"] for r in env["consumed"][T_LAT]} == {"LogAppendTime"}


def test_read_control_batches_and_aborted_txns(env):
    pdir = env["pdirs"][T_MAIN]
    dump_markers = []
    for f in env["dump"].files:
        if f.kind == "log" and Path(f.path).parent == pdir:
            for b in f.batches:
                if b["isControl"]:
                    for r in b["records"]:
                        dump_markers.append((r["offset"], r["endTxnMarker"], r["coordinatorEpoch"], b["producerId"]))
    assert [m[1] for m in dump_markers] == ["COMMIT", "ABORT", "COMMIT", "ABORT"]
    kl_markers, kl_aborted = [], []
    for seg in _kl_segments(pdir):
        for b in seg.batches():
            if b.is_control:
                assert b.is_transactional and len(b.records) == 1
                kl_markers.append((b.records[0].offset, b.control_type, b.coordinator_epoch, b.producer_id))
        kl_aborted += [(seg.base_offset, a) for a in seg.aborted_txns()]
        seg.close()
    assert kl_markers == dump_markers

    # every aborted transaction of the txn index, per segment, as DumpLogSegments reads them
    dump_aborted = []
    for f in env["dump"].files:
        if f.kind == "txnindex" and Path(f.path).parent == pdir:
            dump_aborted += [(int(Path(f.path).stem), {"producer_id": e["producerId"], "first_offset": e["firstOffset"],
                                                       "last_offset": e["lastOffset"],
                                                       "last_stable_offset": e["lastStableOffset"]})
                             for e in f.aborted_txns]
    assert len(dump_aborted) == 2
    assert kl_aborted == dump_aborted
    # and they are the aborted transactions the producer ran
    aborted_txns = [env["txn_dels"][1], env["txn_dels"][3]]
    assert [a["first_offset"] for _, a in kl_aborted] == [d[0]["offset"] for d in aborted_txns]
    abort_marker_offsets = [m[0] for m in dump_markers if m[1] == "ABORT"]
    assert [a["last_offset"] for _, a in kl_aborted] == abort_marker_offsets

    # TransactionIndex directly, and collect_aborted_txns over the whole range
    for base, a in kl_aborted:
        ti = kafkalog.TransactionIndex(str(pdir / f"{base:020d}.txnindex"), base)
        assert a in ti.all_aborted_txns()
        found, _complete = ti.collect_aborted_txns(a["first_offset"], a["last_offset"] + 1)
        assert a in found
        ti.close()


def _cmp_batch(kb, db, where: str):
    assert kb.base_offset == db["baseOffset"], where
    assert kb.last_offset == db["lastOffset"], where
    assert kb.position == db["position"], where
    assert kb.size_in_bytes == db["size"], where
    assert kb.crc == db["crc"], where
    assert kb.magic == db["magic"], where
    assert kb.records_count == db["count"], where
    assert kb.producer_id == db["producerId"], where
    assert kb.producer_epoch == db["producerEpoch"], where
    assert kb.base_sequence == db["baseSequence"], where
    assert kb.last_sequence == db["lastSequence"], where
    assert kb.partition_leader_epoch == db["partitionLeaderEpoch"], where
    assert kb.is_transactional == db["isTransactional"], where
    assert kb.is_control == db["isControl"], where
    assert kb.compression.lower() == str(db["compresscodec"]).lower(), where
    assert kb.max_timestamp == db["maxTimestamp"], where
    assert TS_TYPE_KAFKA[kb.timestamp_type] == db["timestamp_type"], where
    if "deleteHorizonMs" in db:
        assert kb.delete_horizon_ms == db["deleteHorizonMs"], where
    assert db["isvalid"] is True and kb.is_valid, where
    # record level: offsets, timestamps, key/value sizes, header keys
    assert len(kb.records) == len(db["records"]), where
    for kr, dr in zip(kb.records, db["records"]):
        assert kr.offset == dr["offset"], where
        assert kr.timestamp == dr["timestamp"], where
        assert TS_TYPE_KAFKA[kr.timestamp_type] == dr["timestamp_type"], where
        assert (-1 if kr.key is None else len(kr.key)) == dr["keySize"], where
        assert (-1 if kr.value is None else len(kr.value)) == dr["valueSize"], where
        if not kb.is_control:
            assert [k for k, _ in kr.headers] == dr["headerKeys"], where


def test_read_batch_headers_match_dump(env):
    n = 0
    codecs = set()
    for topic in READ_TOPICS:
        pdir = env["pdirs"][topic]
        for seg in _kl_segments(pdir):
            df = _dump_log(env, topic, seg.base_offset)
            kbs = seg.batches()
            assert len(kbs) == len(df.batches), f"{topic}/{seg.base_offset}"
            for kb, db in zip(kbs, df.batches):
                _cmp_batch(kb, db, f"{topic} segment {seg.base_offset} batch at {db['position']}")
                codecs.add(kb.compression)
                n += 1
            assert seg.size == Path(df.path).stat().st_size
            seg.close()
    assert codecs >= set(CODECS)
    assert n > 50


def test_read_indexes_match_dump(env):
    checked = 0
    for topic in READ_TOPICS:
        pdir = env["pdirs"][topic]
        for base in _bases(pdir):
            seg = kafkalog.Segment(str(pdir), base)
            d_idx = env["dump"].file(pdir / f"{base:020d}.index").index_entries
            d_tix = env["dump"].file(pdir / f"{base:020d}.timeindex").time_index_entries
            exp_idx = [(e["offset"], e["position"]) for e in d_idx]
            exp_tix = [(e["timestamp"], e["offset"]) for e in d_tix]
            assert seg.offset_index_entries() == exp_idx, f"{topic}/{base}"
            assert seg.time_index_entries() == exp_tix, f"{topic}/{base}"
            oi = kafkalog.OffsetIndex(str(pdir / f"{base:020d}.index"), base)
            ti = kafkalog.TimeIndex(str(pdir / f"{base:020d}.timeindex"), base)
            assert oi.entries_list() == exp_idx and oi.entries == len(exp_idx)
            assert ti.entries_list() == exp_tix
            # floor lookups against the dumped entries
            for off in range(base, seg.next_offset + 1):
                floor = [e for e in exp_idx if e[0] <= off]
                assert oi.lookup(off) == (floor[-1] if floor else (base, 0)), f"{topic}/{base} lookup {off}"
            for ts, _ in exp_tix:
                for t in (ts - 1, ts, ts + 1):
                    floor = [e for e in exp_tix if e[0] <= t]
                    assert ti.lookup(t) == (floor[-1] if floor else (-1, base)), f"{topic}/{base} ts {t}"
            checked += len(exp_idx)
            seg.sanity_check()
            oi.close()
            ti.close()
            seg.close()
    assert checked > 10, "too few index entries to prove anything"
    print(f"\n{checked} offset index entries compared")


def test_read_offset_and_timestamp_lookups(env):
    for topic in READ_TOPICS:
        pdir = env["pdirs"][topic]
        segs = _kl_segments(pdir)
        all_records = []  # (offset, ts) including control records, in offset order
        for seg in segs:
            df = _dump_log(env, topic, seg.base_offset)
            batches = df.batches
            recs = [(r["offset"], r["timestamp"]) for b in batches for r in b["records"]]
            all_records += recs
            last = batches[-1]["lastOffset"]
            assert seg.next_offset == last + 1
            # translate_offset: first batch whose last offset >= target
            for off in range(seg.base_offset, last + 2):
                exp = next(((b["lastOffset"], b["position"], b["size"]) for b in batches if b["lastOffset"] >= off), None)
                assert seg.translate_offset(off) == exp, f"{topic}/{seg.base_offset} translate {off}"
                if exp is not None:
                    rd = seg.read(off, 1)
                    assert rd["position"] == exp[1]
                    got = kafkalog.decode_batches(rd["records"])
                    assert len(got) == 1 and got[0].last_offset == exp[0]  # min_one_message: one whole batch
            # find_offset_by_timestamp: first record (offset order) with timestamp >= target
            tss = sorted({t for _, t in recs})
            for target in sorted({tss[0] - 1, tss[-1] + 1} | {t + d for t in tss for d in (-1, 0, 1)}):
                exp = next(((t, o) for o, t in recs if t >= target), None)
                assert seg.find_offset_by_timestamp(target) == exp, f"{topic}/{seg.base_offset} ts {target}"
            assert seg.max_timestamp == max(b["maxTimestamp"] for b in batches)
        assert segs[-1].next_offset == env["offsets"][topic]["latest"]

        # partition level, as Kafka's fetchOffsetByTimestamp does, against the broker's ListOffsets
        for target, broker_answer in env["list_offsets_ts"][topic].items():
            got = -1
            for seg in segs:
                if seg.max_timestamp >= target:
                    r = seg.find_offset_by_timestamp(target)
                    got = -1 if r is None else r[1]
                    break
            assert got == broker_answer, f"{topic}: ListOffsets({target}) broker {broker_answer} kafkalog {got}"
            exp = next((o for o, t in all_records if t >= target), -1)
            assert broker_answer == exp
        answers = list(env["list_offsets_ts"][topic].values())
        print(f"\n{topic}: {len(segs)} segments, {len(answers)} ListOffsets(ts) targets, "
              f"{answers.count(-1)} answered -1, {len(set(answers))} distinct offsets")
        for seg in segs:
            seg.close()


def test_reappended_broker_batches_are_byte_identical(env, tmp_path):
    """kafkalog appending the broker's own batches, batch by batch, with the topic's
    index.interval.bytes, writes the same .log, .index and .timeindex bytes."""
    for topic in READ_TOPICS:
        pdir = env["pdirs"][topic]
        out = tmp_path / topic
        out.mkdir()
        for base in _bases(pdir):
            df = _dump_log(env, topic, base)
            raw = (pdir / f"{base:020d}.log").read_bytes()
            seg = kafkalog.Segment(str(out), base, writable=True, config={"index.interval.bytes": INDEX_INTERVAL})
            for b in df.batches:
                seg.append(raw[b["position"]:b["position"] + b["size"]])
            seg.close()
            for suffix in (".log", ".index", ".timeindex"):
                name = f"{base:020d}{suffix}"
                mine, theirs = (out / name).read_bytes(), (pdir / name).read_bytes()
                assert mine == theirs, f"{topic}/{name}: kafkalog {len(mine)} bytes, broker {len(theirs)} bytes"


def _first_uncompressed_segment(env):
    pdir = env["pdirs"][T_MAIN]
    for base in _bases(pdir):
        df = _dump_log(env, T_MAIN, base)
        if len(df.batches) >= 4 and str(df.batches[2]["compresscodec"]).lower() == "none":
            return pdir, base, df
    raise AssertionError("no broker segment with >= 4 batches, the 3rd uncompressed")


def test_corrupted_copies(env, tmp_path):
    version = env["version"]
    pdir, base, df = _first_uncompressed_segment(env)
    name = f"{base:020d}"
    k = 2
    bad = df.batches[k]
    pos, size = bad["position"], bad["size"]
    total = (pdir / f"{name}.log").stat().st_size

    def copy(tag):
        d = tmp_path / tag
        d.mkdir()
        for suffix in (".log", ".index", ".timeindex"):
            shutil.copyfile(pdir / f"{name}{suffix}", d / f"{name}{suffix}")
            os.chmod(d / f"{name}{suffix}", 0o644)
        return d

    flip_ro, flip_rw, cut_ro, cut_rw = (copy(t) for t in ("flip-ro", "flip-rw", "cut-ro", "cut-rw"))
    # The low byte of batch k's max timestamp: covered by its CRC, so the batch is invalid, while
    # its records still decode (a flip inside them can hit a length varint, and Kafka's tool
    # then stops at an exception instead of reporting the batch).
    flip_at = pos + 42
    for d in (flip_ro, flip_rw):
        with open(d / f"{name}.log", "r+b") as f:
            f.seek(flip_at)
            byte = f.read(1)
            f.seek(flip_at)
            f.write(bytes([byte[0] ^ 0x5A]))
    cut = pos + size // 2
    for d in (cut_ro, cut_rw):
        os.truncate(d / f"{name}.log", cut)

    # Kafka's own tool on the damaged copies: batch k invalid / a torn tail at pos
    pre = kh.dump_log_segments(version, [flip_ro / f"{name}.log", cut_ro / f"{name}.log"])
    fb = pre.file(flip_ro / f"{name}.log").batches
    assert [b["position"] for b in fb] == [b["position"] for b in df.batches]
    assert [b["isvalid"] for b in fb] == [i != k for i in range(len(fb))]
    assert [b["position"] for b in pre.file(cut_ro / f"{name}.log").batches] == [b["position"] for b in df.batches[:k]]
    assert any(f"Found {cut - pos} invalid bytes" in e for e in pre.errors), pre.errors

    # read-only kafkalog: a CorruptRecordError naming file and position
    for d in (flip_ro, cut_ro):
        seg = kafkalog.Segment(str(d), base)
        with pytest.raises(kafkalog.CorruptRecordError) as ei:
            seg.batches()
        msg = str(ei.value)
        assert f"{name}.log" in msg and str(pos) in msg, f"{d.name}: {msg}"
        seg.close()
        assert (d / f"{name}.log").stat().st_size == (total if d == flip_ro else cut), "read-only open changed the file"

    # writable recover(): truncates exactly at batch k's position, reports the bytes dropped
    for d, size_before in ((flip_rw, total), (cut_rw, cut)):
        seg = kafkalog.Segment(str(d), base, writable=True, config={"index.interval.bytes": INDEX_INTERVAL})
        truncated = seg.recover()
        assert truncated == size_before - pos, d.name
        assert seg.size == pos
        assert [(b.base_offset, b.position, b.crc) for b in seg.batches()] == \
            [(b["baseOffset"], b["position"], b["crc"]) for b in df.batches[:k]]
        assert seg.next_offset == df.batches[k - 1]["lastOffset"] + 1
        seg.close()
        assert (d / f"{name}.log").stat().st_size == pos

    post = kh.dump_log_segments(version, [p for d in (flip_rw, cut_rw)
                                          for p in (d / f"{name}.log", d / f"{name}.index", d / f"{name}.timeindex")])
    assert post.errors == [], post.errors
    orig_idx = [e for e in env["dump"].file(pdir / f"{name}.index").index_entries if e["position"] < pos]
    for d in (flip_rw, cut_rw):
        assert [(b["baseOffset"], b["position"], b["crc"]) for b in post.file(d / f"{name}.log").batches] == \
            [(b["baseOffset"], b["position"], b["crc"]) for b in df.batches[:k]]
        # recovery rebuilds the offset index as the broker built it, minus what was cut
        assert post.file(d / f"{name}.index").index_entries == orig_idx


# --------------------------------------------------------------------------- #
# kafkalog dump: DumpLogSegments' output, byte for byte
# --------------------------------------------------------------------------- #

DUMP_OPTION_SETS = [
    [],
    ["--deep-iteration"],
    ["--print-data-log"],
    ["--skip-record-metadata", "--print-data-log"],
    ["--skip-record-metadata", "--deep-iteration"],
    ["--verify-index-only"],
    ["--index-sanity-check"],
    ["--max-bytes", "3000", "--print-data-log"],
    ["--max-message-size", "100000", "--verify-index-only"],
]


def _dump_targets(env) -> List[Path]:
    """Every file DumpLogSegments reads in the read topics' folders and in the KRaft metadata log
    (leader-change, voters and kraft-version control records, binary metadata payloads)."""
    dirs = [env["pdirs"][t] for t in READ_TOPICS]
    dirs.append(env["pdirs"][T_MAIN].parent / "__cluster_metadata-0")
    files = [f for d in dirs for f in kh.segment_files(d, (".log", ".index", ".timeindex", ".txnindex", ".snapshot"))]
    files += sorted(dirs[-1].glob("*.checkpoint"))
    # Files the tool does not know are reported as such, by both (the 3.x tool crashes on a name
    # without a dot).
    files.append(dirs[0] / "partition.metadata")
    if kh.kafka_tools_version(env["version"]).startswith("4."):
        files.append(dirs[0] / "leader-epoch-checkpoint")
    return files


@pytest.mark.parametrize("options", DUMP_OPTION_SETS, ids=lambda o: " ".join(o) or "plain")
def test_dump_prints_what_dump_log_segments_prints(env, options):
    files = _dump_targets(env)
    assert any(f.suffix == ".snapshot" for f in files) and any(f.suffix == ".txnindex" for f in files)
    if "--index-sanity-check" in options:
        # The KRaft log's active time index keeps its zero-filled tail after a clean stop, which
        # fails the sanity check in both tools (checked below); the partitions' indexes pass.
        files = [f for f in files if "__cluster_metadata" not in str(f)]
    java = compat_util.assert_same_dump(env["version"], files, options)
    if options == ["--print-data-log"]:
        assert "endTxnMarker: ABORT" in java.stdout and "payload: " in java.stdout


def test_dump_stops_where_dump_log_segments_stops(env, tmp_path):
    """A check that fails stops both tools at the same point: the same stdout before it, then
    Kafka's exception, and kafkalog's one line with exit code 1 (a time index with a zero-filled
    tail, as a crashed broker leaves its active segment's, fails the sanity check)."""
    pdir = env["pdirs"][T_MAIN]
    name = f"{_bases(pdir)[0]:020d}"
    for suffix in (".log", ".index", ".timeindex"):
        shutil.copyfile(pdir / f"{name}{suffix}", tmp_path / f"{name}{suffix}")
    with open(tmp_path / f"{name}.timeindex", "ab") as f:
        f.write(bytes(12))
    good = kh.segment_files(pdir, (".index", ".timeindex"))[2:6]
    files = good + [tmp_path / f"{name}.timeindex"] + good[:1]
    compat_util.assert_same_dump(env["version"], files, ["--index-sanity-check"],
                                 fails_with="has non-zero size but the last timestamp is 0")


def test_dump_reports_damage_as_dump_log_segments(env, tmp_path):
    """A flipped byte (CRC), a torn tail, an index entry pointing at the wrong batch and a time
    index timestamp that disagrees with the log: the same lines, the same reports."""
    pdir, base, df = _first_uncompressed_segment(env)
    name = f"{base:020d}"
    d = tmp_path / "damaged"
    d.mkdir()
    for suffix in (".log", ".index", ".timeindex"):
        shutil.copyfile(pdir / f"{name}{suffix}", d / f"{name}{suffix}")
        os.chmod(d / f"{name}{suffix}", 0o644)
    bad = df.batches[2]
    with open(d / f"{name}.log", "r+b") as f:
        f.seek(bad["position"] + 30)  # the batch's max timestamp: covered by the CRC, decodes fine
        byte = f.read(1)
        f.seek(bad["position"] + 30)
        f.write(bytes([byte[0] ^ 0x01]))
    torn = tmp_path / "torn"
    torn.mkdir()
    shutil.copyfile(pdir / f"{name}.log", torn / f"{name}.log")
    os.truncate(torn / f"{name}.log", df.batches[-1]["position"] + 40)
    index = bytearray((d / f"{name}.index").read_bytes())
    assert len(index) >= 16, "the segment needs two offset index entries"
    index[12:16] = (0).to_bytes(4, "big")  # entry 1 now points at the first batch
    (d / f"{name}.index").write_bytes(bytes(index))
    tindex = bytearray((d / f"{name}.timeindex").read_bytes())
    assert len(tindex) >= 24, "the segment needs two time index entries"
    ts = int.from_bytes(tindex[12:20], "big", signed=True)
    tindex[12:20] = (ts + 1).to_bytes(8, "big", signed=True)
    (d / f"{name}.timeindex").write_bytes(bytes(tindex))
    files = [d / f"{name}.log", d / f"{name}.index", d / f"{name}.timeindex", torn / f"{name}.log"]
    for options in ([], ["--deep-iteration"], ["--verify-index-only"]):
        java = compat_util.assert_same_dump(env["version"], files, options)
    assert "isvalid: false" in java.stdout and "invalid bytes at the end" in java.stdout
    assert "Mismatches in :" in java.stderr and "Found timestamp mismatch" in java.stderr


def test_dump_of_a_damaged_compressed_batch_prints_none_of_its_records(env, tmp_path):
    """Kafka's `DefaultRecordBatch.iterator()` reads a compressed batch's records whole into a
    list before it hands out one, so a batch whose record count is one short (each record
    inflates, then bytes are left) prints its batch line and none of its records before the
    error; kafkalog printed them all first (a black-box tester's zstd and gzip cases)."""
    pdir = env["pdirs"][T_MAIN]
    for base in _bases(pdir):
        df = _dump_log(env, T_MAIN, base)
        hits = [b for b in df.batches if str(b["compresscodec"]).lower() != "none"
                and int(b["count"]) > 2]
        if hits:
            break
    else:
        raise AssertionError("no compressed broker batch of more than two records")
    name = f"{base:020d}"
    shutil.copyfile(pdir / f"{name}.log", tmp_path / f"{name}.log")
    os.chmod(tmp_path / f"{name}.log", 0o644)
    count_at = hits[0]["position"] + 57  # recordsCount, the batch header's last field
    with open(tmp_path / f"{name}.log", "r+b") as f:
        f.seek(count_at)
        count = int.from_bytes(f.read(4), "big")
        f.seek(count_at)
        f.write((count - 1).to_bytes(4, "big"))
    for options in (["--deep-iteration"], ["--print-data-log"], ["--skip-record-metadata", "--deep-iteration"]):
        java = compat_util.assert_same_dump(env["version"], [tmp_path / f"{name}.log"], options,
                                            fails_with="declared batch size")
    assert "isvalid: false" in java.stdout


def test_verify_and_stats_on_the_broker_folders(env):
    """kafkalog verify finds a broker's cleanly stopped folders sound (segments, indexes, txn
    index, checkpoints of its log dir, leader epochs, producer snapshots), and kafkalog stats
    gives the offsets the broker served through ListOffsets and the records consumers read."""
    from kafkalog import _kafkalog

    for topic in READ_TOPICS:
        pdir = env["pdirs"][topic]
        segments, batches, _, compacted, problems, notes = _kafkalog.verify_partition(str(pdir))
        assert problems == [] and notes == [] and segments >= 1 and batches > 0 and not compacted, (topic, problems[:5])
        s = _kafkalog.partition_stats(str(pdir))
        served = env["offsets"][topic]
        assert (s["log_start_offset"], s["high_watermark"], s["last_stable_offset"]) == (
            served["earliest"], served["high_watermark"], served["last_stable"]), topic
        assert s["records"] == len(env["consumed"][topic]), topic
    main = _kafkalog.partition_stats(str(env["pdirs"][T_MAIN]))
    assert (main["committed_transactions"], main["aborted_transactions"]) == (2, 2)
    assert set(main["codecs"]) >= {"gzip", "snappy", "lz4", "zstd"}


def test_read_left_files_untouched(env):
    """After everything above (read-only opens of every segment and index, with files
    chmod a-w): every file in the partition dirs is byte-identical, same size and mtime."""
    read_dirs = [env["pdirs"][t] for t in READ_TOPICS]
    after = snapshot_files(read_dirs)
    assert set(after) == set(env["snapshot"]), "files appeared or vanished"
    changed = [p for p in after if after[p] != env["snapshot"][p]]
    assert changed == []


# --------------------------------------------------------------------------- #
# write direction
# --------------------------------------------------------------------------- #

def _write_with_kafkalog(env) -> Dict[str, Any]:
    """Extend the (stopped) broker's compat-write partition with kafkalog segments. Memoized."""
    if "written" in env:
        return env["written"]
    pdir: Path = env["pdirs"][T_WRITE]
    epochs = _read_leader_epoch_checkpoint(pdir / "leader-epoch-checkpoint")
    assert epochs, "the broker recorded no leader epoch"
    epoch = epochs[-1][0]
    start = env["offsets"][T_WRITE]["latest"]
    assert start == len(env["write_broker_msgs"])
    before = snapshot_files([pdir])
    rng = random.Random(7)
    now = int(time.time() * 1000)
    ts = now - 60_000

    records: List[Dict[str, Any]] = []  # expected, one per data record
    markers: List[Dict[str, Any]] = []
    aborted_entries: List[tuple] = []   # (segment base, producer_id, first, last, lso)
    state = {"seg": None, "base": start, "next": start, "segments": []}

    def roll_if_needed():
        seg = state["seg"]
        if seg is None or seg.size > WRITE_ROLL_BYTES:
            if seg is not None:
                seg.close()
            state["seg"] = kafkalog.Segment(str(pdir), state["next"], writable=True,
                                            config={"index.interval.bytes": WRITE_INDEX_INTERVAL})
            state["base"] = state["next"]
            state["segments"].append(state["next"])

    def add(msgs, *, aborted=False, **kw):
        nonlocal ts
        roll_if_needed()
        recs = []
        for m in msgs:
            ts += 7
            recs.append(dict(m, timestamp=ts))
        data = kafkalog.encode_batch(recs, base_offset=state["next"], partition_leader_epoch=epoch, **kw)
        state["seg"].append(data)
        b = kafkalog.decode_batches(data)[0]
        for i, r in enumerate(recs):
            lat = kw.get("timestamp_type") == "log_append_time"
            records.append({"offset": state["next"] + i, "key": r.get("key"), "value": r["value"],
                            "headers": list(r.get("headers", [])),
                            "timestamp": b.max_timestamp if lat else r["timestamp"],
                            "timestamp_type": "LogAppendTime" if lat else "CreateTime", "aborted": aborted})
        state["next"] += len(recs)

    def marker(kind, pid, pepoch):
        nonlocal ts
        roll_if_needed()
        ts += 7
        state["seg"].append(control_batch(kind, base_offset=state["next"], producer_id=pid, producer_epoch=pepoch,
                                          coordinator_epoch=3, timestamp=ts, partition_leader_epoch=epoch))
        markers.append({"offset": state["next"], "kind": kind, "producer_id": pid})
        state["next"] += 1

    def msgs(n, tag):
        out = []
        for i in range(n):
            out.append({
                "key": None if i % 5 == 2 else f"{tag}-k{i}".encode(),
                "value": None if i % 7 == 4 else (f"{tag}-v{i}-" + "x" * rng.randint(20, 200)).encode(),
                "headers": [("a", f"{tag}{i}".encode()), ("n", None)] if i % 2 == 0 else [],
            })
        return out

    for round_ in range(3):
        for codec in CODECS:
            add(msgs(9, f"{codec}{round_}"), compression=codec)
    add(msgs(6, "lat"), timestamp_type="log_append_time", log_append_time=now - 30_000)
    add([{"key": b"big", "value": b"B" * (512 * 1024), "headers": [("big", b"1")]}], compression="none")
    pid_idem, pid_commit, pid_abort = 900_001, 900_002, 900_003
    add(msgs(8, "idem0"), producer_id=pid_idem, producer_epoch=0, base_sequence=0, compression="lz4")
    add(msgs(8, "idem1"), producer_id=pid_idem, producer_epoch=0, base_sequence=8, compression="lz4")
    add(msgs(5, "txc0"), producer_id=pid_commit, producer_epoch=2, base_sequence=0, transactional=True,
        compression="gzip")
    add(msgs(4, "txc1"), producer_id=pid_commit, producer_epoch=2, base_sequence=5, transactional=True)
    marker("COMMIT", pid_commit, 2)
    first_aborted = state["next"]
    add(msgs(6, "txa"), aborted=True, producer_id=pid_abort, producer_epoch=1, base_sequence=0,
        transactional=True, compression="zstd")
    marker("ABORT", pid_abort, 1)
    # Kafka's AbortedTxn: lastOffset = the marker, lastStableOffset = marker + 1 (no other open txn)
    aborted_entries.append((state["base"], pid_abort, first_aborted, state["next"] - 1, state["next"]))
    for codec in CODECS:
        add(msgs(4, f"tail-{codec}"), compression=codec)
    state["seg"].close()
    for base, pid, first, last, lso in aborted_entries:
        ti = kafkalog.TransactionIndex(str(pdir / f"{base:020d}.txnindex"), base, writable=True)
        ti.append(pid, first, last, lso)
        ti.close()

    written = {
        "epoch": epoch, "start": start, "end": state["next"], "segments": state["segments"],
        "records": records, "markers": markers, "aborted": aborted_entries,
        "snapshot": snapshot_files([pdir]), "before": before,
    }
    env["written"] = written
    return written


def test_write_dump_log_segments_accepts(env):
    version = env["version"]
    w = _write_with_kafkalog(env)
    pdir = env["pdirs"][T_WRITE]
    assert len(w["segments"]) >= 3, w["segments"]
    # the broker's own files were not touched
    for p, v in w["before"].items():
        assert w["snapshot"][p] == v, f"kafkalog changed the broker's {p}"

    logs = [pdir / f"{b:020d}.log" for b in w["segments"]]
    idx = [pdir / f"{b:020d}{s}" for b in w["segments"] for s in (".index", ".timeindex")]
    txn = [pdir / f"{b:020d}.txnindex" for b in w["segments"] if (pdir / f"{b:020d}.txnindex").exists()]
    deep = kh.dump_log_segments(version, logs + idx + txn, deep_iteration=True, index_sanity_check=True)
    assert deep.errors == [], deep.errors[:20]
    for p in idx:
        assert any("passed sanity check" in n for n in deep.file(p).notes), deep.file(p).notes
    plain = kh.dump_log_segments(version, idx)  # entries, each verified against the log by the tool
    assert plain.errors == [], plain.errors[:20]

    # the same records as kafkalog wrote
    data = [(r, b) for b in deep.batches if not b["isControl"] for r in b["records"]]
    assert len(data) == len(w["records"])
    for (dr, db), exp in zip(data, w["records"]):
        where = f"offset {exp['offset']}"
        assert dr["offset"] == exp["offset"], where
        assert dr["timestamp"] == exp["timestamp"] and dr["timestamp_type"] == exp["timestamp_type"], where
        assert dr.get("key") == (None if exp["key"] is None else exp["key"].decode()), where
        assert dr.get("payload") == (None if exp["value"] is None else exp["value"].decode()), where
        assert dr["headerKeys"] == [k for k, _ in exp["headers"]], where
    for b in deep.batches:
        assert b["partitionLeaderEpoch"] == w["epoch"] and b["magic"] == 2 and b["isvalid"] is True
    ctrl = [(r["offset"], r["endTxnMarker"], r["coordinatorEpoch"], b["producerId"])
            for b in deep.batches if b["isControl"] for r in b["records"]]
    assert ctrl == [(m["offset"], m["kind"], 3, m["producer_id"]) for m in w["markers"]]
    assert {str(b["compresscodec"]).lower() for b in deep.batches} >= set(CODECS)
    assert [(int(Path(f.path).stem), e["producerId"], e["firstOffset"], e["lastOffset"], e["lastStableOffset"])
            for f in deep.files if f.kind == "txnindex" for e in f.aborted_txns] == w["aborted"]

    # index entries are where Kafka's LogSegment.append puts them (index.interval.bytes rule)
    for b in w["segments"]:
        f = deep.file(pdir / f"{b:020d}.log")
        exp, since = [], 0
        for bt in f.batches:
            if since > WRITE_INDEX_INTERVAL:
                exp.append({"offset": bt["lastOffset"], "position": bt["position"]})
                since = 0
            since += bt["size"]
        assert plain.file(pdir / f"{b:020d}.index").index_entries == exp, b
        assert exp, f"segment {b} has no index entries"
        tix = plain.file(pdir / f"{b:020d}.timeindex").time_index_entries
        assert tix and tix[-1] == {"timestamp": max(x["maxTimestamp"] for x in f.batches),
                                   "offset": max(f.batches, key=lambda x: x["maxTimestamp"])["lastOffset"]}


def test_write_broker_serves_kafkalog_segments(env):
    w = _write_with_kafkalog(env)
    broker = env["broker"]
    pdir = env["pdirs"][T_WRITE]
    broker.start()
    bs = broker.bootstrap
    # nothing kafkalog wrote was recovered/truncated/rebuilt by the broker; only the
    # active segment's indexes are re-grown (zero-filled) to segment.index.bytes
    active = w["segments"][-1]
    now_files = snapshot_files([pdir])
    for p, (h, size, _) in w["snapshot"].items():
        name = Path(p).name
        if not name[:20].isdigit() or int(name[:20]) < w["start"]:
            continue
        cur = Path(p).read_bytes()
        if name.startswith(f"{active:020d}") and name.endswith((".index", ".timeindex")):
            assert len(cur) >= size, f"broker shrank {name}"
            assert hashlib.sha256(cur[:size]).hexdigest() == h, f"broker rewrote the entries of {name}"
            assert not any(cur[size:]), f"broker added entries to {name}"
        else:
            assert now_files[p][0] == h, f"broker changed {name}"

    offs = kh.list_offsets(bs, T_WRITE, 0)
    assert offs["latest"] == w["end"], offs
    assert offs["last_stable"] == w["end"], offs
    assert offs["earliest"] == 0

    def expected(committed_only):
        out = [{"offset": i, **m} for i, m in enumerate(env["write_broker_msgs"])]
        out = [(o["offset"], o["timestamp"], "CreateTime", o["key"], o["value"], []) for o in out]
        for r in w["records"]:
            if committed_only and r["aborted"]:
                continue
            out.append((r["offset"], r["timestamp"], r["timestamp_type"], r["key"], r["value"],
                        [tuple(h) for h in r["headers"]]))
        return out

    unc = kh.consume_all(bs, T_WRITE, "read_uncommitted", timeout=120)
    assert [_consumer_view(r) for r in unc] == expected(False)
    com = kh.consume_all(bs, T_WRITE, "read_committed", timeout=120)
    assert [_consumer_view(r) for r in com] == expected(True)

    # the broker appends after kafkalog's last offset
    more = [{"key": b"after-%d" % i, "value": b"after restart %d" % i, "headers": [("x", None)],
             "timestamp": int(time.time() * 1000)} for i in range(5)]
    dels = kh.produce(bs, T_WRITE, more, compression="zstd")
    assert [d["offset"] for d in dels] == list(range(w["end"], w["end"] + 5))
    unc2 = kh.consume_all(bs, T_WRITE, "read_uncommitted", timeout=120)
    assert [_consumer_view(r) for r in unc2[:len(unc)]] == [_consumer_view(r) for r in unc]
    assert [(r["offset"], r["value"]) for r in unc2[len(unc):]] == [(d["offset"], m["value"]) for m, d in zip(more, dels)]
    # kafkalog reads the broker's appended batch in the segment it wrote
    broker.stop()
    seg = kafkalog.Segment(str(pdir), active)
    tail = [r for b in seg.batches() for r in b.records if r.offset >= w["end"]]
    assert [(r.offset, r.value) for r in tail] == [(d["offset"], m["value"]) for m, d in zip(more, dels)]
    seg.close()

