"""Helpers shared by the kafkalog <-> Apache Kafka compatibility tests (no broker here).

* file snapshots (sha256, size, mtime) to prove files were left untouched
* a control-batch (COMMIT/ABORT marker) builder on top of ``kafkalog.encode_batch``
  (kafkalog has no Python control-batch encoder yet): the batch is encoded as a
  transactional batch whose single record has the control key/value, then the
  control bit (attributes 0x20) is set and the CRC-32C recomputed with
  kafka-python's independent implementation
* a python-snappy shim over cramjam so kafka-python can use snappy
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import struct
import subprocess
import sys
import types
from pathlib import Path
from typing import Dict, Tuple

import kafkalog

ATTRIBUTES_OFFSET = 21  # baseOffset(8) length(4) partitionLeaderEpoch(4) magic(1) crc(4)
CRC_OFFSET = 17
CONTROL_FLAG = 0x20
CONTROL_TYPES = {"ABORT": 0, "COMMIT": 1}

TS_TYPE_KAFKA = {"create_time": "CreateTime", "log_append_time": "LogAppendTime", "no_timestamp": "NoTimestampType"}


def snapshot_files(dirs) -> Dict[str, Tuple[str, int, int]]:
    """{path: (sha256, size, mtime_ns)} of every file under ``dirs`` (recursively)."""
    out = {}
    for d in dirs:
        for root, _, names in os.walk(d):
            for n in names:
                p = Path(root) / n
                try:
                    st = p.stat()
                    data = p.read_bytes()
                except FileNotFoundError:  # a running broker's temp file (*.tmp) vanished
                    continue
                out[str(p)] = (hashlib.sha256(data).hexdigest(), st.st_size, st.st_mtime_ns)
    return out


def make_read_only(dirs) -> None:
    for d in dirs:
        for root, _, names in os.walk(d):
            for n in names:
                p = Path(root) / n
                os.chmod(p, p.stat().st_mode & ~0o222)


def control_batch(kind: str, *, base_offset: int, producer_id: int, producer_epoch: int,
                  coordinator_epoch: int, timestamp: int, partition_leader_epoch: int) -> bytes:
    """An end-transaction marker batch as a transaction coordinator writes it."""
    from kafka.record.util import calc_crc32c

    key = struct.pack(">hh", 0, CONTROL_TYPES[kind])
    value = struct.pack(">hi", 0, coordinator_epoch)
    raw = bytearray(kafkalog.encode_batch(
        [{"key": key, "value": value, "timestamp": timestamp}], base_offset=base_offset,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1, transactional=True,
        partition_leader_epoch=partition_leader_epoch))
    (attrs,) = struct.unpack_from(">h", raw, ATTRIBUTES_OFFSET)
    struct.pack_into(">h", raw, ATTRIBUTES_OFFSET, attrs | CONTROL_FLAG)
    struct.pack_into(">I", raw, CRC_OFFSET, calc_crc32c(bytes(raw[ATTRIBUTES_OFFSET:])))
    return bytes(raw)


def with_header_key_bytes(batch: bytes, placeholder: str, raw_key: bytes) -> bytes:
    """An uncompressed v2 batch with each header key ``placeholder`` (ASCII) replaced by the same
    number of raw bytes (not UTF-8, say) and its CRC-32C recomputed: what a client that does not
    check header keys writes, which a broker stores as it is."""
    from kafka.record.util import calc_crc32c

    assert len(placeholder.encode()) == len(raw_key)
    raw = bytearray(batch)
    body = bytes(raw[ATTRIBUTES_OFFSET:]).replace(placeholder.encode(), raw_key)
    assert body != bytes(raw[ATTRIBUTES_OFFSET:]), "placeholder not found"
    raw[ATTRIBUTES_OFFSET:] = body
    struct.pack_into(">I", raw, CRC_OFFSET, calc_crc32c(body))
    return bytes(raw)


def garble_payload_keeping_crc(segment: Path, batch_index: int) -> None:
    """Garbles the compressed records of the segment's `batch_index`-th batch and recomputes its
    CRC-32C: a batch that passes every check of framing and CRC (Kafka's recovery's too) but
    does not inflate."""
    from kafka.record.util import calc_crc32c

    data = bytearray(segment.read_bytes())
    pos = 0
    for _ in range(batch_index):
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
    for k in range(pos + 65, end - 2):  # the records section, past the batch header
        data[k] ^= 0x5A
    struct.pack_into(">I", data, pos + CRC_OFFSET, calc_crc32c(bytes(data[pos + ATTRIBUTES_OFFSET:end])))
    segment.write_bytes(bytes(data))


def garble_record_length_keeping_crc(segment: Path, batch_index: int) -> None:
    """Lengthens by one byte the declared size of the first record of the segment's
    `batch_index`-th (uncompressed) batch and recomputes its CRC-32C: a batch that passes every
    check of framing and CRC but whose records do not decode."""
    from kafka.record.util import calc_crc32c

    data = bytearray(segment.read_bytes())
    pos = 0
    for _ in range(batch_index):
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
    first_record = pos + 61  # past the v2 batch header
    assert data[first_record] & 0x7F <= 0x7D, "a length whose first varint byte can take +2"
    data[first_record] += 2  # zig-zag: the length plus one
    struct.pack_into(">I", data, pos + CRC_OFFSET, calc_crc32c(bytes(data[pos + ATTRIBUTES_OFFSET:end])))
    segment.write_bytes(bytes(data))


def install_snappy_shim() -> bool:
    """Give kafka-python a ``snappy`` module (python-snappy API) backed by cramjam's raw
    snappy, unless python-snappy is installed. Returns True if kafka-python has snappy."""
    import kafka.codec as kc

    if kc.has_snappy():
        return True
    try:
        import cramjam
    except ImportError:
        return False
    mod = types.ModuleType("snappy")
    mod.compress = lambda data: bytes(cramjam.snappy.compress_raw(bytes(data)))
    mod.decompress = lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data)))
    sys.modules.setdefault("snappy", mod)
    kc.snappy = mod
    return kc.has_snappy()


def messages(rng, n, tag, ts_base, ooo=False, value_len=(40, 300)):
    """Varied test messages: null keys and values, str/null/empty/binary headers, optional
    out-of-order timestamps."""
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else f"{tag}-key-{i}".encode()
        value = None if i % 11 == 5 else (f"{tag}-value-{i}-" + "".join(
            rng.choice("abcdefghijklmnopqrstuvwxyz0123456789 ") for _ in range(rng.randint(*value_len)))).encode()
        if i % 3 == 0:
            headers = [("h-str", f"{tag}-{i}".encode()), ("h-null", None), ("h-empty", b"")]
        elif i % 3 == 1:
            headers = [("bin", bytes([0, 1, 255, i % 256]))]
        else:
            headers = []
        ts = ts_base + i * 3
        if ooo and i % 9 == 4:
            ts -= 20_000  # out-of-order timestamps: the time index keeps the max so far
        out.append({"key": key, "value": value, "headers": headers, "timestamp": ts})
    return out




# The report lines DumpLogSegments prints on stderr (what kafkalog must print there too); the
# rest of Kafka's stderr is JVM and logging noise.
_DUMP_REPORT = re.compile(
    r"^(Mismatches in :|  Index offset: |Found timestamp mismatch in :|Found out of order timestamp in :"
    r"|  Index timestamp: |The following indexed offsets are not found|Indexed offset: "
    r"|Non-consecutive offsets in |  -?\d+ is followed by |Ignoring unknown file )")


def kafkalog_dump(files, options=(), kafka_major: int = 4, timeout: float = 300.0) -> subprocess.CompletedProcess:
    """``kafkalog dump --files ...`` in a child process, as an operator runs it."""
    cmd = [sys.executable, "-m", "kafkalog", "dump", "--files", ",".join(str(f) for f in files),
           "--kafka-version", str(kafka_major), *options]
    return subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", errors="surrogateescape",
                          timeout=timeout)


def assert_same_dump(version: str, files, options=(), fails_with: str = ""):
    """Kafka ``version``'s DumpLogSegments and ``kafkalog dump`` over the same files and options
    print the same stdout, byte for byte, and the same reports on stderr. Returns Kafka's result.

    With ``fails_with``, both must stop with an error whose message holds that text (Kafka's tool
    with a stack trace, kafkalog with one line and exit code 1) after printing the same stdout."""
    import kafka_harness as kh

    java = kh.dump_log_segments(version, files, deep_iteration=False, print_data=False, extra_args=list(options))
    tool = kh.kafka_tools_version(version)
    where = f"DumpLogSegments {tool} {' '.join(options) or '(no options)'}"
    ours = kafkalog_dump(files, options, int(tool.split(".")[0]))
    if fails_with:
        assert java.returncode != 0 and fails_with in java.stderr, f"{where}: {java.stderr[-3000:]}"
        assert ours.returncode == 1, f"kafkalog dump exited {ours.returncode}: {ours.stderr[-3000:]}"
        lines = ours.stderr.splitlines()
        assert len(lines) == 1 and fails_with in lines[0] and "Traceback" not in ours.stderr, ours.stderr
        assert ours.stdout == java.stdout, f"{where}: stdout before the error differs"
        return java
    assert java.returncode == 0, f"{where} failed: {java.stderr[-3000:]}"
    assert ours.returncode == 0, f"kafkalog dump {' '.join(options)} exited {ours.returncode}: {ours.stderr[-3000:]}"
    if ours.stdout != java.stdout:
        diff = difflib.unified_diff(java.stdout.splitlines(), ours.stdout.splitlines(),
                                    "DumpLogSegments", "kafkalog dump", lineterm="", n=1)
        raise AssertionError(f"{where}: stdout differs\n" + "\n".join(list(diff)[:40]))
    java_reports = [line for line in java.stderr.splitlines() if _DUMP_REPORT.match(line)]
    our_reports = ours.stderr.splitlines()
    if int(tool.split(".")[0]) < 4:
        # The 3.x tool (Scala) prints its reports in a scala.collection.mutable.HashMap's order,
        # which kafkalog does not model: the same lines, in any order.
        our_reports, java_reports = sorted(our_reports), sorted(java_reports)
    if our_reports != java_reports:
        diff = difflib.unified_diff(java_reports, our_reports, "DumpLogSegments", "kafkalog dump",
                                    lineterm="", n=1)
        raise AssertionError(f"{where}: stderr reports differ\n" + "\n".join(list(diff)[:40]))
    return java
