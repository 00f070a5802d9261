"""Legacy message sets (magic 0 and 1) written by kafkalog, read by Kafka's own
DumpLogSegments (the brokers of 4.x no longer write v0/v1, but Kafka's record
classes and tool still read them; 4.4.0 uses the nearest published tool, see
kafka_harness.kafka_tools_version).

kafkalog writes segments of v0 and of v1 message sets (every legacy codec:
none, gzip, snappy, lz4; null keys and values) with small index intervals; the
tool must report no error, verify kafkalog's offset/time index entries against
the log, and print the records (offsets, keys, payloads, timestamps) kafkalog
was given; kafkalog's batch positions/CRCs equal the tool's. No broker needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import kafka_harness as kh
import kafkalog

LEGACY_CODECS = ["none", "gzip", "snappy", "lz4"]
TS_TYPE = {0: "NoTimestampType", 1: "CreateTime"}


def _write(d: Path, magic: int):
    d.mkdir()
    seg = kafkalog.Segment(str(d), 0, writable=True, config={"index.interval.bytes": 100})
    expected = []
    off = 0
    for ci, codec in enumerate(LEGACY_CODECS * 2):
        recs = []
        for i in range(6):
            recs.append({"key": None if i % 3 == 1 else f"m{magic}-{codec}-k{i}".encode(),
                         "value": None if i == 4 else f"magic {magic} {codec} value {ci}/{i} ".encode() * (1 + i),
                         "timestamp": 1_700_000_000_000 + off + i})
        seg.append(kafkalog.encode_batch(recs, base_offset=off, compression=codec, magic=magic))
        for i, r in enumerate(recs):
            expected.append(dict(r, offset=off + i, codec=codec))
        off += len(recs)
    batches = [(b.position, b.size_in_bytes, b.crc, b.last_offset, b.compression, b.magic) for b in seg.batches()]
    idx = seg.offset_index_entries()
    tix = seg.time_index_entries()
    seg.close()
    return expected, batches, idx, tix


@pytest.mark.parametrize("version", kh.KAFKA_VERSIONS)
def test_legacy_message_sets_accepted_by_dump_log_segments(version, tmp_path):
    written = {m: _write(tmp_path / f"magic{m}", m) for m in (0, 1)}
    files = [tmp_path / f"magic{m}" / f"{0:020d}{s}" for m in (0, 1) for s in (".log", ".index", ".timeindex")]
    dump = kh.dump_log_segments(version, files)
    assert dump.errors == [], dump.errors[:20]
    for m, (expected, batches, idx, tix) in written.items():
        d = tmp_path / f"magic{m}"
        f = dump.file(d / f"{0:020d}.log")
        assert f.unparsed == [], f.unparsed[:5]
        # shallow entries: positions, sizes, CRCs, wrapper offsets, magic, codec
        assert [(b["position"], b["size"], b["crc"], b["offset"], str(b["compresscodec"]).lower(), b["magic"])
                for b in f.batches] == batches
        assert all(b["isvalid"] is True for b in f.batches)
        recs = f.records
        assert len(recs) == len(expected)
        for r, e in zip(recs, expected):
            where = f"magic {m} offset {e['offset']}"
            assert r["offset"] == e["offset"], where
            assert r["isValid"] is True, where
            assert r["timestamp_type"] == TS_TYPE[m], where
            assert r["timestamp"] == (e["timestamp"] if m == 1 else -1), where
            assert r.get("key") == (None if e["key"] is None else e["key"].decode()), where
            assert r.get("payload") == (None if e["value"] is None else e["value"].decode()), where
        # the index entries kafkalog wrote are the ones the tool read (and verified against the log)
        assert [(e["offset"], e["position"]) for e in dump.file(d / f"{0:020d}.index").index_entries] == idx
        assert idx, "no offset index entries"
        assert [(e["timestamp"], e["offset"]) for e in dump.file(d / f"{0:020d}.timeindex").time_index_entries] == tix
        if m == 1:
            assert tix, "no time index entries for v1"
