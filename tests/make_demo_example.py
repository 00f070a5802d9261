#!/usr/bin/env python3
"""Regenerate the embedded example partition ``python/kafkalog/examples/demo-0/``.

A real Apache Kafka 4.4.0 broker (tests/kafka_harness.py, KRaft, single node) writes a
topic ``demo`` with small segments: ~300 small human-readable records (JSON order
values, keys, some headers) produced with three codecs, an idempotent producer, one
committed and one aborted transaction. The broker is stopped cleanly and the partition
folder (every file: .log/.index/.timeindex/.txnindex/.snapshot, leader-epoch-checkpoint,
partition.metadata) is copied into the package, together with a README.md describing it.

    .venv/bin/python tests/make_demo_example.py [--version 4.4.0] [--out python/kafkalog/examples]

The record contents are deterministic (fixed timestamps, fixed random seed); batch
boundaries, producer ids and transaction marker timestamps come from the broker.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import kafka_harness as kh  # noqa: E402

TOPIC = "demo"
SEGMENT_BYTES = 6000
TS_BASE = 1_735_689_600_000   # 2025-01-01T00:00:00Z
ITEMS = ["coffee", "tea", "bagel", "croissant", "muffin", "juice", "sandwich", "salad", "cookie", "water"]
CUSTOMERS = ["alice", "bob", "carol", "dave", "erin", "frank"]
STORES = ["berlin", "paris", "lisbon"]

# (phase, count, codec, producer kind, headers?)
PLAN = [
    ("plain-none", 90, "none", "plain"),
    ("plain-gzip", 70, "gzip", "plain"),
    ("idempotent-zstd", 60, "zstd", "idempotent"),
    ("txn-committed", 12, "zstd", "committed"),
    ("txn-aborted", 8, "zstd", "aborted"),
    ("plain-gzip-tail", 60, "gzip", "plain"),
]


def _records(rng: random.Random, start: int, n: int, phase: str):
    out = []
    for i in range(n):
        order = start + i
        customer = rng.choice(CUSTOMERS)
        value = {"order": order, "item": rng.choice(ITEMS), "qty": rng.randint(1, 4), "customer": customer}
        if phase == "txn-aborted":
            value["note"] = "this order was rolled back"
        headers = []
        if order % 3 == 0:
            headers.append(("store", rng.choice(STORES).encode()))
        if phase.startswith("txn"):
            headers.append(("txn", phase[len("txn-"):].encode()))
        if order % 10 == 7:
            headers.append(("priority", b"high"))
        out.append({
            "key": f"customer-{customer}".encode(),
            "value": json.dumps(value, separators=(", ", ": ")).encode(),
            "headers": headers,
            "timestamp": TS_BASE + order * 1000,
        })
    return out


README = """# Embedded example: `demo-0`

A partition folder written by a real Apache Kafka {version} broker (KRaft, single node),
regenerated with `tests/make_demo_example.py`. Topic `demo`, partition 0, small segments
(`segment.bytes` {segment_bytes}).

* {total} records, offsets {first}..{last} (plus {markers} transaction markers); keys like
  `customer-alice`, values like `{{"order": 17, "item": "coffee", "qty": 2, "customer": "bob"}}`,
  timestamps from 2025-01-01T00:00:00Z, one second per order;
  headers `store` (every 3rd order), `priority` (orders ending in 7), `txn` (transactional ones)
* codecs: none, gzip, zstd; an idempotent producer; one committed transaction
  ({committed} records) and one aborted transaction ({aborted} records, value note
  "this order was rolled back"): `read_committed` returns {read_committed} records
* segments: {segments}; files: {files}

```
python -m kafkalog demo
python -m kafkalog records python/kafkalog/examples/demo-0 --isolation read_committed
```
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", default="4.4.0")
    ap.add_argument("--out", default=str(HERE.parent / "python" / "kafkalog" / "examples"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    rng = random.Random(17)

    with kh.Broker(args.version) as broker:
        bs = broker.bootstrap
        kh.create_topic(bs, TOPIC, config={"segment.bytes": SEGMENT_BYTES, "index.interval.bytes": 512,
                                           "retention.ms": -1})
        order = 1
        counts = {}
        for phase, n, codec, kind in PLAN:
            recs = _records(rng, order, n, phase)
            order += n
            counts[phase] = n
            if kind in ("plain", "idempotent"):
                kh.produce(bs, TOPIC, recs, compression=codec, idempotent=(kind == "idempotent"),
                           linger_ms=5, batch_size=700)
            else:
                kh.produce_transactions(bs, TOPIC, [(recs, kind == "committed")], compression=codec,
                                        batch_size=700, transactional_id=f"demo-{kind}")
        offs = kh.list_offsets(bs, TOPIC, 0)
        unc = kh.consume_all(bs, TOPIC, "read_uncommitted")
        com = kh.consume_all(bs, TOPIC, "read_committed")
        rc = broker.stop()
        if rc not in (0, 143) or not broker.clean_shutdown_marker():
            raise SystemExit(f"broker did not stop cleanly (exit {rc})\n{broker.log_tail()}")
        src = broker.partition_dir(TOPIC, 0)
        dest = out / f"{TOPIC}-0"
        if dest.exists():
            shutil.rmtree(dest)
        out.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, dest)
        for p in dest.iterdir():
            p.chmod(0o644)

    files = sorted(p.name for p in dest.iterdir())
    segments = sorted(int(p.stem) for p in dest.glob("*.log"))
    size = sum(p.stat().st_size for p in dest.iterdir())
    total = len(unc)
    (out / "README.md").write_text(README.format(
        version=args.version, segment_bytes=SEGMENT_BYTES, total=total, first=unc[0]["offset"],
        last=unc[-1]["offset"], markers=offs["latest"] - total, committed=counts["txn-committed"],
        aborted=counts["txn-aborted"], read_committed=len(com), segments=segments, files=", ".join(files)))
    print(f"{dest}: {len(segments)} segments {segments}, {len(files)} files, {size} bytes; "
          f"{total} records read_uncommitted, {len(com)} read_committed; offsets {offs}")
    if not 3 <= len(segments) <= 5:
        print(f"warning: {len(segments)} segments (wanted 3-5): adjust SEGMENT_BYTES", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
