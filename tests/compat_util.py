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

import hashlib
import os
import struct
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


