"""kafka-python as a second, independent implementation of Kafka's record formats
(no broker needed):

* kafkalog.encode_batch (magic 2, every codec, both timestamp types, producer
  fields, transactional) -> kafka-python's MemoryRecords/DefaultRecordBatch parser:
  CRC valid and every header field and record equal to what was encoded.
* kafka-python's MemoryRecordsBuilder (magic 0, 1, 2; every codec kafka-python
  has: none/gzip/snappy/lz4, plus zstd for v2) -> kafkalog.decode_batches: every
  field equal to kafka-python's own reading and to the input.
* kafkalog.encode_batch(magic=0/1) -> kafka-python's LegacyRecordBatch parser.

snappy for kafka-python comes from a python-snappy shim over cramjam
(compat_util.install_snappy_shim); the test fails if neither is available.
"""

from __future__ import annotations

import random

import pytest

import kafkalog
from compat_util import install_snappy_shim

HAS_SNAPPY = install_snappy_shim()

from kafka.record.default_records import DefaultRecordBatch  # noqa: E402
from kafka.record.legacy_records import LegacyRecordBatch  # noqa: E402
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder  # noqa: E402

CODEC_ID = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
V2_CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
LEGACY_CODECS = ["none", "gzip", "snappy", "lz4"]
TS_NAME = {0: "create_time", 1: "log_append_time", None: "no_timestamp", -1: "no_timestamp"}


def test_snappy_available_for_kafka_python():
    assert HAS_SNAPPY, "kafka-python has no snappy (install python-snappy or cramjam)"


def _records(n, seed, headers=True):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        out.append({
            "key": None if i % 4 == 1 else b"key-%d" % i,
            # compressible (kafka-python sends a batch uncompressed when compression does not pay
            # off), with some binary bytes
            "value": None if i % 6 == 3 else (b"value-%d-" % i + bytes([rng.getrandbits(8) for _ in range(8)])
                                              + b"abcabcabc" * rng.randint(0, 40)),
            "headers": ([("h%d" % i, b"v%d" % i), ("null", None), ("empty", b"")] if headers and i % 2 == 0 else []),
            "timestamp": 1_700_000_000_000 + i * 13 - (500 if i == 5 else 0),
        })
    return out


def _kp_batches(data):
    mr = MemoryRecords(bytes(data))
    out = []
    while mr.has_next():
        out.append(mr.next_batch())
    assert mr.valid_bytes() == len(data)
    return out


@pytest.mark.parametrize("codec", V2_CODECS)
@pytest.mark.parametrize("ts_type", ["create_time", "log_append_time"])
@pytest.mark.parametrize("producer", ["none", "idempotent", "transactional"])
def test_kafkalog_v2_read_by_kafka_python(codec, ts_type, producer):
    recs = _records(23, hash((codec, ts_type)) & 0xFFFF)
    kw = {}
    if producer != "none":
        kw = dict(producer_id=4242, producer_epoch=3, base_sequence=100, transactional=producer == "transactional")
    lat = 1_700_000_999_999
    data = kafkalog.encode_batch(recs, base_offset=5000, compression=codec, timestamp_type=ts_type,
                                 partition_leader_epoch=17, log_append_time=lat if ts_type == "log_append_time" else None,
                                 **kw)
    (b,) = _kp_batches(data)
    assert isinstance(b, DefaultRecordBatch)
    assert b.validate_crc()
    assert b.magic == 2
    assert b.base_offset == 5000 and b.last_offset == 5000 + len(recs) - 1
    assert b.size_in_bytes == len(data)
    assert b.leader_epoch == 17
    assert b.compression_type == CODEC_ID[codec]
    assert b.timestamp_type == (1 if ts_type == "log_append_time" else 0)
    assert b.is_control_batch is False
    assert b.records_count == len(recs)
    assert b.producer_id == kw.get("producer_id", -1)
    assert b.producer_epoch == kw.get("producer_epoch", -1)
    assert b.base_sequence == kw.get("base_sequence", -1)
    assert b.is_transactional == (producer == "transactional")
    assert b.first_timestamp == recs[0]["timestamp"]
    exp_max = lat if ts_type == "log_append_time" else max(r["timestamp"] for r in recs)
    assert b.max_timestamp == exp_max
    got = list(b)
    assert len(got) == len(recs)
    for i, (r, e) in enumerate(zip(got, recs)):
        assert r.offset == 5000 + i
        assert r.timestamp == (lat if ts_type == "log_append_time" else e["timestamp"])
        assert r.key == e["key"] and r.value == e["value"]
        assert [(k, v) for k, v in r.headers] == e["headers"]
        assert r.validate_crc()
    # kafkalog's own header decode agrees with kafka-python's
    (kb,) = kafkalog.decode_batches(data)
    assert kb.crc == b.crc and kb.attributes == b.attributes and kb.last_sequence == b.last_sequence


def _build_kp(magic, codec, recs, base_offset, **kw):
    b = MemoryRecordsBuilder(magic=magic, compression_type=CODEC_ID[codec], batch_size=1 << 22,
                             offset=base_offset, **kw)
    for r in recs:
        assert b.append(timestamp=r["timestamp"], key=r["key"], value=r["value"],
                        headers=r["headers"] if magic == 2 else None) is not None
    b.close()
    return bytes(b.buffer())


@pytest.mark.parametrize("magic,codec", [(2, c) for c in V2_CODECS] + [(m, c) for m in (0, 1) for c in LEGACY_CODECS])
def test_kafka_python_built_read_by_kafkalog(magic, codec):
    recs = _records(17, magic * 10 + CODEC_ID[codec], headers=magic == 2)
    kw = dict(producer_id=77, producer_epoch=1, base_sequence=9) if magic == 2 else {}
    data = _build_kp(magic, codec, recs, 300, **kw)
    kp = _kp_batches(data)
    kl = kafkalog.decode_batches(data)
    assert len(kl) == len(kp)
    kp_recs, kl_recs = [], []
    for a, b in zip(kl, kp):
        assert a.magic == magic == b.magic
        assert a.base_offset == b.base_offset or magic < 2  # legacy: wrapper offset is the last
        assert a.size_in_bytes == b.size_in_bytes
        assert a.compression == codec
        if magic == 2:
            assert (a.crc, a.attributes, a.last_offset, a.records_count, a.producer_id, a.producer_epoch,
                    a.base_sequence, a.max_timestamp, a.base_timestamp, a.partition_leader_epoch) == \
                (b.crc, b.attributes, b.last_offset, b.records_count, b.producer_id, b.producer_epoch,
                 b.base_sequence, b.max_timestamp, b.first_timestamp, b.leader_epoch)
        else:
            assert a.last_offset == b.base_offset  # the (wrapper) message's offset
        kl_recs += list(a.records)
        kp_recs += list(b)
    assert len(kl_recs) == len(kp_recs) == len(recs)
    for i, (x, y, e) in enumerate(zip(kl_recs, kp_recs, recs)):
        assert x.offset == y.offset == 300 + i
        assert x.key == y.key == e["key"]
        assert x.value == y.value == e["value"]
        if magic == 0:
            assert y.timestamp is None and x.timestamp == -1 and x.timestamp_type == "no_timestamp"
        else:
            assert x.timestamp == y.timestamp == e["timestamp"]
            assert x.timestamp_type == TS_NAME[y.timestamp_type] == "create_time"
        assert [tuple(h) for h in x.headers] == [tuple(h) for h in y.headers] == \
            (e["headers"] if magic == 2 else [])


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_kafkalog_legacy_read_by_kafka_python(magic, codec):
    recs = _records(9, 99 + magic, headers=False)
    data = kafkalog.encode_batch(recs, base_offset=40, compression=codec, magic=magic)
    kp = _kp_batches(data)
    assert all(isinstance(b, LegacyRecordBatch) and b.magic == magic for b in kp)
    assert all(b.compression_type == CODEC_ID[codec] for b in kp)
    got = [r for b in kp for r in b]
    assert len(got) == len(recs)
    for i, (r, e) in enumerate(zip(got, recs)):
        assert r.validate_crc()
        assert r.offset == 40 + i
        assert r.key == e["key"] and r.value == e["value"]
        assert r.timestamp == (None if magic == 0 else e["timestamp"])


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_negative_lengths_are_null_as_kafka_reads_them(magic):
    """Kafka's `Utils.readBytes` (v2) and `Utils.sizeDelimited` (v0/v1) read any negative length
    as null, not only the -1 writers put: a key (and a v2 header value) of length -2 is null to
    kafka-python and to kafkalog alike."""
    import struct
    import zlib

    from kafka.record.util import calc_crc32c

    record = {"key": None, "value": b"VAL", "timestamp": 1_700_000_000_000}
    if magic == 2:
        record["headers"] = [("h", None)]
    data = bytearray(kafkalog.encode_batch([record], magic=magic))
    if magic == 2:
        # The record at 61: length, attributes, timestamp delta, offset delta, then the key's
        # length (zig-zag -1 = 0x01); the header's value length follows its key "h".
        assert data[65] == 0x01 and data[-2:] == b"h\x01"
        data[65] = data[-1] = 0x03  # zig-zag -2
        data[17:21] = struct.pack(">I", calc_crc32c(bytes(data[21:])))
    else:
        key_at = 18 if magic == 0 else 26
        assert data[key_at:key_at + 4] == b"\xff\xff\xff\xff"
        data[key_at:key_at + 4] = struct.pack(">i", -2)
        data[12:16] = struct.pack(">I", zlib.crc32(bytes(data[16:])))
    ours = [r for b in kafkalog.decode_batches(bytes(data)) for r in b.records]
    assert [(r.key, r.value) for r in ours] == [(None, b"VAL")]
    if magic == 2:
        # kafka-python's legacy reader takes only -1 as null (it reads -2 as an empty key and
        # loses the value): Kafka's own rule above is the referee there.
        theirs = list(MemoryRecords(bytes(data)).next_batch())
        assert [(r.key, r.value) for r in theirs] == [(None, b"VAL")]
        assert ours[0].headers == [("h", None)] == list(theirs[0].headers)
    table = kafkalog.records_to_arrow(bytes(data), include_headers=True)
    assert table.column("key").to_pylist() == [None]
