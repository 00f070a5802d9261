"""Smoke test of the Kafka referee harness, once per pinned Kafka version.

Starts one real KRaft broker per version (module-scoped fixture), produces
across every codec with headers, null keys/values, an idempotent producer and
transactions (one aborted), consumes with both isolation levels, stops the
broker, checks Kafka's own DumpLogSegments against what was produced, then
restarts over the same log dir and consumes again.

Nothing here skips: if Kafka cannot be fetched or started, the tests fail.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

import kafka_harness as kh

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
TOPIC = "smoke"
LAT_TOPIC = "smoke-logappendtime"
SEGMENT_BYTES = 16 * 1024


def _messages(rng: random.Random, n: int, tag: str, ts_base: int):
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else f"{tag}-key-{i}".encode()
        value = None if i % 11 == 5 else (f"{tag}-value-{i}-" + "".join(
            rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(rng.randint(80, 300)))).encode()
        headers = []
        if i % 3 == 0:
            headers = [("h-str", f"{tag}-{i}".encode()), ("h-null", None)]
        elif i % 3 == 1:
            headers = [("only", b"\x00\x01\xff")]
        out.append({"key": key, "value": value, "headers": headers, "timestamp": ts_base + i})
    return out


@pytest.fixture(scope="module", params=kh.KAFKA_VERSIONS)
def scenario(request):
    version = request.param
    rng = random.Random(1234)
    t0 = time.monotonic()
    broker = kh.Broker(version)
    try:
        broker.start()
        ts_base = int(time.time() * 1000) - 60_000
        kh.create_topic(broker.bootstrap, TOPIC, config={
            "segment.bytes": SEGMENT_BYTES,
            "index.interval.bytes": 1024,
            "max.message.bytes": 2 * 1024 * 1024,
        })
        kh.create_topic(broker.bootstrap, LAT_TOPIC, config={"message.timestamp.type": "LogAppendTime"})

        produced = []  # (message, delivery, kind, committed)
        for ci, codec in enumerate(CODECS):
            msgs = _messages(rng, 60, codec, ts_base + ci * 1000)
            dels = kh.produce(broker.bootstrap, TOPIC, msgs, compression=codec, linger_ms=2, batch_size=4096)
            produced += [(m, d, "plain-" + codec, True) for m, d in zip(msgs, dels)]
        msgs = _messages(rng, 50, "idem", ts_base + 10_000)
        dels = kh.produce(broker.bootstrap, TOPIC, msgs, compression="lz4", idempotent=True, batch_size=4096)
        produced += [(m, d, "idempotent", True) for m, d in zip(msgs, dels)]

        txn_msgs = [
            (_messages(rng, 20, "txn-a", ts_base + 20_000), True),
            (_messages(rng, 15, "txn-b", ts_base + 21_000), False),
            (_messages(rng, 5, "txn-c", ts_base + 22_000), True),
        ]
        txn_dels = kh.produce_transactions(broker.bootstrap, TOPIC, txn_msgs, compression="gzip")
        for (msgs, commit), dels in zip(txn_msgs, txn_dels):
            produced += [(m, d, "txn", commit) for m, d in zip(msgs, dels)]

        lat = kh.produce(broker.bootstrap, LAT_TOPIC,
                         [{"key": b"k", "value": b"v%d" % i, "timestamp": 1000 + i} for i in range(10)])
        yield {
            "version": version, "broker": broker, "produced": produced, "txn_dels": txn_dels,
            "lat": lat, "setup_s": time.monotonic() - t0,
        }
    finally:
        broker.close()


def _expected(produced, committed_only=False):
    return [(d["offset"], m) for m, d, kind, committed in produced if committed or not committed_only]


def _check_consumed(records, produced, committed_only):
    exp = _expected(produced, committed_only)
    assert [r["offset"] for r in records] == [o for o, _ in exp]
    for r, (off, m) in zip(records, exp):
        assert r["partition"] == 0
        assert r["key"] == m["key"], off
        assert r["value"] == m["value"], off
        assert r["headers"] == m["headers"], off
        assert r["timestamp"] == m["timestamp"], off
        assert r["timestamp_type"] == "CreateTime"


def test_consume_both_isolation_levels(scenario):
    bs = scenario["broker"].bootstrap
    produced = scenario["produced"]
    unc = kh.consume_all(bs, TOPIC, "read_uncommitted")
    com = kh.consume_all(bs, TOPIC, "read_committed")
    _check_consumed(unc, produced, committed_only=False)
    _check_consumed(com, produced, committed_only=True)
    aborted = {d["offset"] for d in scenario["txn_dels"][1]}
    assert len(aborted) == 15
    assert aborted <= {r["offset"] for r in unc}
    assert not aborted & {r["offset"] for r in com}
    scenario["consumed"] = (unc, com)

    lat = kh.consume_all(bs, LAT_TOPIC)
    assert [r["value"] for r in lat] == [b"v%d" % i for i in range(10)]
    assert all(r["timestamp_type"] == "LogAppendTime" and r["timestamp"] > 1_000_000 for r in lat)


def test_list_offsets(scenario):
    bs = scenario["broker"].bootstrap
    n_data = len(scenario["produced"])
    offs = kh.list_offsets(bs, TOPIC, 0)
    # 3 transaction markers (control records) take offsets too
    assert offs["earliest"] == 0
    assert offs["latest"] == offs["high_watermark"] == n_data + 3
    assert offs["last_stable"] == offs["latest"]
    last_data = max(d["offset"] for _, d, _, _ in scenario["produced"])
    assert offs["latest"] == last_data + 2  # the final COMMIT marker follows
    scenario["offsets"] = offs


def test_dump_log_segments_matches(scenario):
    version = scenario["version"]
    broker = scenario["broker"]
    produced = scenario["produced"]
    rc = broker.stop()
    assert rc in (0, 143), broker.log_tail()
    assert broker.clean_shutdown_marker()

    pdir = broker.partition_dir(TOPIC, 0)
    files = kh.segment_files(pdir, (".log", ".index", ".timeindex", ".txnindex"))
    logs = [f for f in files if f.suffix == ".log"]
    assert len(logs) >= 3, f"expected several segments, got {[f.name for f in files]}"

    dump = kh.dump_log_segments(version, files)
    assert dump.errors == [], dump.errors[:20]
    assert dump.returncode == 0
    assert {Path(f.path).name for f in dump.files} == {f.name for f in files}

    # ---- batches ----
    batches = dump.batches
    assert {b["compresscodec"] for b in batches} >= set(CODECS)
    for f in dump.files:
        if f.kind == "log":
            assert f.starting_offset == int(Path(f.path).stem)
            assert f.unparsed == [], f.unparsed[:5]
    pos_by_file = {}
    for f in dump.files:
        if f.kind == "log":
            pos_by_file[Path(f.path).stem] = {b["position"]: b for b in f.batches}
    for b in batches:
        assert b["isvalid"] is True and b["magic"] == 2
        assert b["count"] == b["lastOffset"] - b["baseOffset"] + 1 == len(b["records"])
        assert [r["offset"] for r in b["records"]] == list(range(b["baseOffset"], b["lastOffset"] + 1))
        assert b["maxTimestamp"] == max(r["timestamp"] for r in b["records"])
    data_batches = [b for b in batches if not b["isControl"]]
    idem = [b for b in data_batches if b["producerId"] >= 0 and not b["isTransactional"]]
    txn = [b for b in data_batches if b["isTransactional"]]
    assert idem and all(b["baseSequence"] >= 0 for b in idem)
    assert txn and all(b["producerId"] >= 0 for b in txn)
    assert len({b["producerId"] for b in idem}) == 1
    assert sum(len(b["records"]) for b in idem) == 50
    assert sum(len(b["records"]) for b in txn) == 40

    # ---- control records: COMMIT, ABORT, COMMIT ----
    control = [b for b in batches if b["isControl"]]
    assert [r["endTxnMarker"] for b in control for r in b["records"]] == ["COMMIT", "ABORT", "COMMIT"]

    # ---- records vs what was produced ----
    recs = [r for b in data_batches for r in b["records"]]
    exp = _expected(produced)
    assert [r["offset"] for r in recs] == [o for o, _ in exp]
    for r, (off, m) in zip(recs, exp):
        assert r["timestamp"] == m["timestamp"] and r["timestamp_type"] == "CreateTime", off
        assert r["keySize"] == (-1 if m["key"] is None else len(m["key"])), off
        assert r["valueSize"] == (-1 if m["value"] is None else len(m["value"])), off
        assert r.get("key") == (None if m["key"] is None else m["key"].decode()), off
        assert r.get("payload") == (None if m["value"] is None else m["value"].decode()), off
        assert r["headerKeys"] == [k for k, _ in m["headers"]], off

    # ---- offset index / time index ----
    assert dump.index_entries, "no offset index entries"
    for f in dump.files:
        stem = Path(f.path).stem
        if f.kind == "index":
            for e in f.index_entries:
                b = pos_by_file[stem].get(e["position"])
                assert b is not None and b["lastOffset"] == e["offset"], e
        if f.kind == "timeindex":
            ts = [e["timestamp"] for e in f.time_index_entries]
            assert ts == sorted(ts)
            last_offsets = {b["lastOffset"] for b in pos_by_file[stem].values()}
            assert all(e["offset"] in last_offsets for e in f.time_index_entries), f.time_index_entries

    # ---- transaction index: the aborted transaction ----
    aborted = scenario["txn_dels"][1]
    assert len(dump.aborted_txns) == 1, dump.aborted_txns
    at = dump.aborted_txns[0]
    assert at["firstOffset"] == aborted[0]["offset"]
    assert at["lastOffset"] == aborted[-1]["offset"] + 1  # the ABORT marker
    assert at["producerId"] == txn[0]["producerId"]


def test_restart_and_consume_again(scenario):
    broker = scenario["broker"]
    broker.start()  # stopped by the previous test
    bs = broker.bootstrap
    unc, com = scenario["consumed"]
    assert kh.consume_all(bs, TOPIC, "read_uncommitted") == unc
    assert kh.consume_all(bs, TOPIC, "read_committed") == com
    assert kh.list_offsets(bs, TOPIC, 0) == scenario["offsets"]
    # and the restart() path
    broker.restart()
    assert kh.consume_all(broker.bootstrap, TOPIC, "read_committed") == com
    print(f"\nKafka {scenario['version']}: scenario setup {scenario['setup_s']:.1f}s, "
          f"last broker start {broker.last_start_seconds:.1f}s")


def test_dump_parser_tolerates_variants():
    """Parser unit test on hand-written lines (no JVM): older formats without
    deleteHorizonMs, keys/payloads with spaces, control and legacy records."""
    out = "\n".join([
        "Dumping /x/00000000000000000000.log",
        "Log starting offset: 0",
        "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false position: 0 "
        "CreateTime: 5 size: 100 magic: 2 compresscodec: NONE crc: 1 isvalid: true",
        "| offset: 0 CreateTime: 4 keySize: 12 valueSize: 1 sequence: -1 headerKeys: [] key: a payload: b payload: x",
        "| offset: 1 CreateTime: 5 keySize: -1 valueSize: 5 sequence: -1 headerKeys: [a,b] payload: hello",
        "baseOffset: 2 lastOffset: 2 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7 producerEpoch: 0 "
        "partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong[9] "
        "position: 100 CreateTime: 6 size: 78 magic: 2 compresscodec: none crc: 2 isvalid: true",
        "| offset: 2 CreateTime: 6 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: ABORT "
        "coordinatorEpoch: 0",
        "Dumping /x/00000000000000000000.index",
        "offset: 1 position: 0",
        "Dumping /x/00000000000000000000.txnindex",
        "version: 0 producerId: 7 firstOffset: 0 lastOffset: 2 lastStableOffset: 0",
    ])
    files, errors = kh.parse_dump_output(out, "Mismatches in :/x/00000000000000000000.index\n")
    assert errors == ["Mismatches in :/x/00000000000000000000.index"]
    log = files[0]
    assert log.batches[0]["compresscodec"] == "NONE" and "deleteHorizonMs" not in log.batches[0]
    r0, r1 = log.batches[0]["records"]
    assert r0["key"] == "a payload: b" and r0["payload"] == "x"
    assert "key" not in r1 and r1["payload"] == "hello" and r1["headerKeys"] == ["a", "b"]
    assert log.batches[1]["deleteHorizonMs"] == 9
    assert log.batches[1]["records"][0]["endTxnMarker"] == "ABORT"
    assert files[1].index_entries == [{"offset": 1, "position": 0}]
    assert files[2].aborted_txns[0]["lastOffset"] == 2
