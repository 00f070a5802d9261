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

import compat_util
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
    # kafkalog dump prints the same lines (wrappers, inner messages with their CRCs, v0's
    # NoTimestampType), byte for byte.
    for options in ([], ["--deep-iteration"], ["--print-data-log"], ["--verify-index-only"]):
        compat_util.assert_same_dump(version, files, options)
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


@pytest.mark.parametrize("version", kh.KAFKA_VERSIONS)
def test_dump_prints_any_bytes_as_dump_log_segments(version, tmp_path):
    """Payloads and keys that are not ASCII: UTF-8 text, invalid UTF-8 (each bad sequence a U+FFFD,
    as Java's decoder replaces it), random binary, empty and null; header keys in UTF-8 and not; a
    LogAppendTime batch, an idempotent producer's sequences wrapping past 2^31-1."""
    import random

    rng = random.Random(7)
    values = [b"", "caf\u00e9 \u00fc\u00df \u4e2d\u6587 \U0001F600".encode(), b"\xff\xfe", b"\xe2\x82",
              b"\xed\xa0\x80", b"\xf0\x9f\x98", b"ok\xc3(", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\x00\x01\x7f",
              None] + [bytes(rng.randrange(256) for _ in range(rng.randint(1, 40))) for _ in range(40)]
    # Mostly lead and continuation bytes: every way a sequence can be cut short or overlong.
    alphabet = list(range(0x80, 0x100)) * 3 + [0x41, 0x0a]
    values += [bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(2000)]
    recs = [{"key": None if i % 5 == 0 else values[(i * 7) % len(values)],
             "value": v, "timestamp": 1_700_000_000_000 + i,
             "headers": [("cl\u00e9", b"v"), ("\u4e2d", None)] if i % 3 == 0 else []}
            for i, v in enumerate(values)]
    d = tmp_path / "t-0"
    d.mkdir()
    seg = kafkalog.Segment(str(d), 0, writable=True, config={"index.interval.bytes": 200})
    off = 0
    for i in range(0, len(recs), 50):
        chunk = recs[i:i + 50]
        codec = ["none", "gzip", "snappy", "lz4", "zstd"][(i // 50) % 5]
        extra = {"timestamp_type": "log_append_time", "log_append_time": 1_700_000_999_000} if i == 100 else {}
        seg.append(kafkalog.encode_batch(chunk, base_offset=off, compression=codec, producer_id=7,
                                         producer_epoch=0, base_sequence=(2**31 - 15 + off) % 2**31, **extra))
        off += len(chunk)
    # Header keys that are not UTF-8 (no broker checks them): Java's decoder puts U+FFFD for each
    # bad sequence, and so must kafkalog, rather than refusing the record.
    for raw_key in (b"\xff\xfe", b"a\xe2\x82", b"\xed\xa0\x80z"):
        placeholder = "K" * len(raw_key)
        batch = kafkalog.encode_batch([{"value": b"v", "timestamp": 1_700_000_000_000,
                                        "headers": [(placeholder, b"h"), ("ok", None)]}], base_offset=off)
        seg.append(compat_util.with_header_key_bytes(batch, placeholder, raw_key))
        off += 1
    seg.close()
    files = [d / f"{0:020d}{s}" for s in (".log", ".index", ".timeindex")]
    for options in (["--print-data-log"], ["--skip-record-metadata", "--print-data-log"]):
        java = compat_util.assert_same_dump(version, files, options)
    assert "\ufffd" in java.stdout and "\u4e2d" in java.stdout


def _odd_segment(d: Path) -> Path:
    """Three batches of four records: 12 records with keys and headers."""
    d.mkdir(parents=True)
    seg = kafkalog.Segment(str(d), 0, writable=True, config={})
    for b in range(3):
        seg.append(kafkalog.encode_batch(
            [{"key": b"k%d" % i, "value": b"value %d" % i, "timestamp": 1_700_000_000_000 + i,
              "headers": [("h", b"%d" % i)]} for i in range(b * 4, b * 4 + 4)], base_offset=b * 4))
    seg.close()
    return d / f"{0:020d}.log"


def _batch_positions(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(data):
        out.append(pos)
        pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
    return out


@pytest.mark.parametrize("version", kh.KAFKA_VERSIONS)
def test_dump_of_odd_batches_as_dump_log_segments(version, tmp_path):
    """A batch whose magic byte (outside the CRC) reads 7: Kafka's FileRecords lay it out as a v2
    batch and print it, and so does kafkalog. A batch declaring one record fewer than it holds
    (its CRC made good): both stop as they read its last declared record, without printing it.
    Records with a null and an empty value under the cluster metadata decoder."""
    from kafka.record.util import calc_crc32c

    log = _odd_segment(tmp_path / "magic")
    data = bytearray(log.read_bytes())
    second = _batch_positions(bytes(data))[1]
    data[second + 16] = 7
    log.write_bytes(bytes(data))
    for options in ([], ["--deep-iteration", "--print-data-log"]):
        java = compat_util.assert_same_dump(version, [log], options)
    assert "magic: 7" in java.stdout

    log = _odd_segment(tmp_path / "count")
    data = bytearray(log.read_bytes())
    first = _batch_positions(bytes(data))[1]
    size = 12 + int.from_bytes(data[first + 8:first + 12], "big")
    data[first + 57:first + 61] = (3).to_bytes(4, "big")
    data[first + 17:first + 21] = calc_crc32c(bytes(data[first + 21:first + size])).to_bytes(4, "big")
    log.write_bytes(bytes(data))
    java = compat_util.assert_same_dump(version, [log], ["--deep-iteration"],
                                        fails_with="ncorrect declared batch size")
    assert "offset: 5 " in java.stdout and "offset: 6 " not in java.stdout

    d = tmp_path / "meta"
    d.mkdir()
    seg = kafkalog.Segment(str(d), 0, writable=True, config={})
    seg.append(kafkalog.encode_batch([{"value": None, "timestamp": 1_700_000_000_000},
                                      {"value": b"", "timestamp": 1_700_000_000_001},
                                      # Frame versions past a short, and one past 2^31.
                                      {"value": b"\x80\x80\x62", "timestamp": 1_700_000_000_002},
                                      {"value": b"\xfb\xff\xff\xff\x0f", "timestamp": 1_700_000_000_003}]))
    seg.close()
    java = compat_util.assert_same_dump(version, [d / f"{0:020d}.log"], ["--cluster-metadata-decoder"])
    assert java.stdout.count("Error while reading frame version") == 2
    assert java.stdout.count("Value for frame version was too large.") == 1


def test_dump_3x_notes_old_decoder_classes_as_its_tool(tmp_path):
    """Kafka 3.x's tool prints a deprecation note for each kafka.serializer decoder class, after
    each log file's `Dumping` line; `--kafka-version 3` prints them there too."""
    version = next(v for v in kh.KAFKA_VERSIONS if kh.kafka_tools_version(v).startswith("3."))
    log = _odd_segment(tmp_path / "t-0")
    options = ["--print-data-log", "--key-decoder-class", "kafka.serializer.StringDecoder",
               "--value-decoder-class", "kafka.serializer.StringDecoder"]
    java = compat_util.assert_same_dump(version, [log, log], options)
    assert java.stdout.count("kafka.serializer.StringDecoder is deprecated") == 4
    # Two classes: the tool makes the value's decoder first, so its note comes first (kafkalog
    # printed the key's first; a black-box tester).
    options = ["--print-data-log", "--key-decoder-class", "kafka.serializer.StringDecoder",
               "--value-decoder-class", "kafka.serializer.IntegerDecoder"]
    java = compat_util.assert_same_dump(version, [log], options)
    assert java.stdout.index("IntegerDecoder is deprecated") < java.stdout.index("StringDecoder is deprecated")


@pytest.mark.parametrize("version", kh.KAFKA_VERSIONS)
def test_dump_stops_before_the_key_of_a_value_its_decoder_refuses(version, tmp_path):
    """Kafka's DecoderMessageParser decodes key and value before printing either: a 7-byte value
    under LongDecoder ends the line at its metadata, without the key (kafkalog printed the key
    first; a black-box tester). Both tools stop there."""
    log = _odd_segment(tmp_path / "t-0")
    decoder = ("org.apache.kafka.tools.api.LongDecoder" if kh.kafka_tools_version(version).startswith("4.")
               else "kafka.serializer.LongDecoder")
    options = ["--print-data-log", "--value-decoder-class", decoder]
    java = kh.dump_log_segments(version, [log], deep_iteration=False, print_data=False, extra_args=options)
    ours = compat_util.kafkalog_dump([log], options, int(kh.kafka_tools_version(version).split(".")[0]))
    assert java.returncode != 0 and ours.returncode == 1, (java.stderr[-2000:], ours.stderr)
    assert ours.stdout == java.stdout
    assert java.stdout.rstrip("\n").endswith("headerKeys: [h]"), java.stdout[-300:]


@pytest.mark.parametrize("version", kh.KAFKA_VERSIONS)
def test_dump_of_a_corrupt_producer_snapshot_as_dump_log_segments(version, tmp_path):
    """A producer snapshot whose CRC no longer holds: the same stdout, Kafka's words on stderr,
    and the dump goes on to the next file; a snapshot that is missing ends it with exit code 1."""
    d = tmp_path / "t-0"
    log = kafkalog.Log(d, read_only=False, create=True)
    log.append([{"value": b"v"}], producer_id=1000, producer_epoch=0, base_sequence=0)
    log.close()
    snapshot = next(d.glob("*.snapshot"))
    data = bytearray(snapshot.read_bytes())
    data[-1] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    files = [snapshot, d / f"{0:020d}.log"]
    java = kh.dump_log_segments(version, files, deep_iteration=False, print_data=False)
    ours = compat_util.kafkalog_dump(files, (), int(kh.kafka_tools_version(version).split(".")[0]))
    assert (ours.returncode, ours.stdout) == (java.returncode, java.stdout)
    kafka_line = next(line for line in java.stderr.splitlines() if "Snapshot is corrupt" in line)
    assert kafka_line.endswith(ours.stderr.strip()), (java.stderr[-2000:], ours.stderr)
    missing = compat_util.kafkalog_dump([d / f"{5:020d}.snapshot"])
    assert missing.returncode == 1 and missing.stderr.startswith("kafkalog dump: "), missing.stderr
    assert len(missing.stderr.splitlines()) == 1


def _v1_message(offset: int, key: bytes | None, value: bytes | None, attributes: int = 0,
                timestamp: int = 1_700_000_000_000, bad_crc: bool = False) -> bytes:
    """One magic v1 message with its offset and size, as Kafka's LegacyRecord lays it out."""
    import zlib

    def sized(b):
        return (-1).to_bytes(4, "big", signed=True) if b is None else len(b).to_bytes(4, "big") + b
    body = bytes([1, attributes]) + timestamp.to_bytes(8, "big") + sized(key) + sized(value)
    crc = zlib.crc32(body) ^ (0xFFFF if bad_crc else 0)
    message = crc.to_bytes(4, "big") + body
    return offset.to_bytes(8, "big") + len(message).to_bytes(4, "big") + message


@pytest.mark.parametrize("version", kh.KAFKA_VERSIONS)
def test_dump_reads_a_wrappers_inner_messages_as_kafkas_deep_iterator(version, tmp_path):
    """Inside a gzip v1 wrapper, an inner message whose CRC fails is printed `isValid: false` and
    the dump goes on, and an inner message cut short ends the inner set (Kafka's reader meets EOF
    there), the offsets then reported non-consecutive: as Kafka's tool does. kafkalog stopped at
    both with an error (a black-box tester); its readers still refuse them as damage."""
    import gzip

    d = tmp_path / "t-0"
    d.mkdir()
    first = _v1_message(0, b"a", b"0")
    bad_crc = _v1_message(1, None, gzip.compress(b"".join(
        _v1_message(i, b"k", b"v%d" % i, bad_crc=(i == 1)) for i in range(3))), attributes=1)
    whole = _v1_message(0, b"k", b"x")
    cut = _v1_message(1, b"k", b"cut short")[:-4]
    truncated = _v1_message(5, None, gzip.compress(whole + cut), attributes=1)
    # The wrappers' own offsets: the last inner offset, relative offsets under it.
    bad_crc = (3).to_bytes(8, "big") + bad_crc[8:]
    last = _v1_message(6, b"z", b"6")
    log = d / f"{0:020d}.log"
    log.write_bytes(first + bad_crc + truncated + last)
    java = compat_util.assert_same_dump(version, [log], ["--deep-iteration", "--print-data-log"])
    assert "isValid: false" in java.stdout and "offset: 6 " in java.stdout
    with pytest.raises(kafkalog.KafkaLogError):
        list(kafkalog.Log(str(d)).records())


@pytest.mark.parametrize("version", kh.KAFKA_VERSIONS)
def test_a_v0_message_inside_a_v1_wrapper_takes_the_wrappers_timestamp_type(version, tmp_path):
    """A consumer takes a record's timestamp type from its batch, the wrapper: a v0 message
    inside a CreateTime v1 wrapper reads as CreateTime with no timestamp (-1); kafkalog gave it
    NO_TIMESTAMP_TYPE (a black-box tester). The dump prints it as Kafka's tool does."""
    import gzip
    import zlib

    body = bytes([0, 0]) + (-1).to_bytes(4, "big", signed=True) + (1).to_bytes(4, "big") + b"x"
    v0 = (0).to_bytes(8, "big") + (4 + len(body)).to_bytes(4, "big") + zlib.crc32(body).to_bytes(4, "big") + body
    d = tmp_path / "t-0"
    d.mkdir()
    log = d / f"{0:020d}.log"
    log.write_bytes(_v1_message(0, None, gzip.compress(v0), attributes=1))
    compat_util.assert_same_dump(version, [log], ["--deep-iteration", "--print-data-log"])
    [record] = kafkalog.Log(str(d)).records()
    assert (record.offset, record.timestamp, record.timestamp_type, record.value) == (0, -1, "create_time", b"x")
    table = kafkalog.Log(str(d)).to_arrow().read_all()
    assert table.column("timestampType").to_pylist() == [0]
