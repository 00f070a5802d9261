"""Reading one segment into Python, side by side in one run: kafkalog's `Log.to_arrow` (a pyarrow
table built in Rust) and `Log.records` against aiokafka's compiled decoder and kafka-python's,
each touching every record's key and value. Checks each produced the same records (count and a
checksum of keys and values), then prints records/s and ratios against aiokafka.

    .venv/bin/python benches/python_decoders.py [--records 200000] [--value-bytes 100]
        [--compression none] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import kafkalog


def build_segment(directory: Path, records: int, value_bytes: int, compression: str) -> Path:
    path = directory / "bench-0"
    with kafkalog.Log(path, read_only=False, create=True, config={"segment.bytes": 1 << 30}) as log:
        per_batch = 500  # what a busy producer sends per batch
        for start in range(0, records, per_batch):
            log.append(
                [
                    {"key": b"key-%08d" % i, "value": (b"%08d" % i) * (value_bytes // 8 + 1)}
                    for i in range(start, min(records, start + per_batch))
                ],
                compression=compression,
            )
    return path


def checksum_pairs(pairs) -> tuple[int, int]:
    crc, n = 0, 0
    for key, value in pairs:
        crc = zlib.crc32(value, zlib.crc32(key, crc))
        n += 1
    return n, crc


def kafkalog_arrow(path: Path):
    table = kafkalog.Log(path).to_arrow(batch_rows=65536).read_all()
    # Touch every key and value as the others do: sum their lengths in Arrow.
    total = pc.sum(pc.binary_length(table.column("value"))).as_py() + pc.sum(pc.binary_length(table.column("key"))).as_py()
    return table, total


def kafkalog_records(path: Path):
    n = 0
    for r in kafkalog.Log(path).records():
        n += len(r.key) + len(r.value)
    return n


def python_peer(memory_records_cls, data: bytes):
    n = 0
    records = memory_records_cls(data)
    while records.has_next():
        for r in records.next_batch():
            n += len(r.key) + len(r.value)
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--compression", default="none")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
    from kafka.record.memory_records import MemoryRecords as KafkaPythonMemoryRecords

    with tempfile.TemporaryDirectory() as tmp:
        path = build_segment(Path(tmp), args.records, args.value_bytes, args.compression)
        data = b"".join(p.read_bytes() for p in sorted(path.glob("*.log")))

        # Same records everywhere: count and checksum of keys and values.
        table, _ = kafkalog_arrow(path)
        expected = checksum_pairs(zip(table.column("key").to_pylist(), table.column("value").to_pylist()))
        for name, cls in (("aiokafka", AioMemoryRecords), ("kafka-python", KafkaPythonMemoryRecords)):
            recs = cls(data)
            pairs = []
            while recs.has_next():
                pairs.extend((r.key, r.value) for r in recs.next_batch())
            got = checksum_pairs(pairs)
            assert got == expected, f"{name} decoded {got}, kafkalog {expected}"
        assert checksum_pairs((r.key, r.value) for r in kafkalog.Log(path).records()) == expected

        contenders = {
            "kafkalog Log.to_arrow -> pyarrow": lambda: kafkalog_arrow(path),
            "kafkalog Log.records (Python objects)": lambda: kafkalog_records(path),
            "aiokafka (compiled decoder)": lambda: python_peer(AioMemoryRecords, data),
            "kafka-python": lambda: python_peer(KafkaPythonMemoryRecords, data),
        }
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(args.repeat):  # interleaved, so drift on a shared machine hits all alike
            for name, fn in contenders.items():
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)

    n = expected[0]
    base = statistics.median(times["aiokafka (compiled decoder)"])
    print(f"{n} records, {args.value_bytes}-byte values, compression {args.compression}, "
          f"{len(data) / 1e6:.1f} MB of batches, median of {args.repeat} interleaved runs; same records checked")
    print(f"{'reader':40} {'records/s':>14} {'vs aiokafka':>12}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:40} {n / med:14,.0f} {base / med:11.2f}x")


if __name__ == "__main__":
    main()
