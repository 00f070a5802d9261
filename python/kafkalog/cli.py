"""Command line: inspect Kafka partition folders with kafkalog.

    kafkalog dump DIR [--records] [--isolation read_committed]   # segments, offsets, batches
    kafkalog records DIR [--isolation ...] [--start N] [--end N]  # one JSON line per record
    kafkalog demo [--no-spark]                                  # the main job on the embedded example
"""

from __future__ import annotations

import argparse
import base64
import json
import signal
import sys

import kafkalog


def _text(b: bytes | None) -> str | None:
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(b).decode()


def summarize(log: "kafkalog.Log", out=sys.stdout) -> None:
    print(f"log {log.path}", file=out)
    print(
        f"  log start offset {log.log_start_offset}  log end offset {log.log_end_offset}  "
        f"high watermark {log.high_watermark}  last stable offset {log.last_stable_offset}",
        file=out,
    )
    print(f"  segments {log.segments}  ({log.size_in_bytes} bytes)", file=out)


def cmd_dump(args) -> int:
    log = kafkalog.Log(args.dir, read_only=True)
    summarize(log)
    for batch in log.batches():
        kind = f"control {batch.control_type}" if batch.is_control else f"{batch.records_count} records"
        print(
            f"  batch {batch.base_offset}..{batch.last_offset} magic {batch.magic} {batch.compression} {kind}"
            f" producer {batch.producer_id}/{batch.producer_epoch} seq {batch.base_sequence}"
            f" txn {batch.is_transactional} max ts {batch.max_timestamp} crc {batch.crc}"
        )
        if args.records and not batch.is_control:
            for r in batch.records:
                print(f"    offset {r.offset} ts {r.timestamp} key {_text(r.key)!r} value {_text(r.value)!r} headers {len(r.headers)}")
    return 0


def cmd_records(args) -> int:
    log = kafkalog.Log(args.dir, read_only=True)
    for r in log.records(start=args.start, end=args.end, isolation=args.isolation):
        print(json.dumps({
            "offset": r.offset, "timestamp": r.timestamp, "timestamp_type": r.timestamp_type,
            "key": _text(r.key), "value": _text(r.value),
            "headers": [[k, _text(v)] for k, v in r.headers],
        }))
    return 0


def cmd_demo(args) -> int:
    from kafkalog import demo

    return demo.run(spark_enabled=not args.no_spark)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="kafkalog", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="segments, offsets and batches of a partition folder")
    d.add_argument("dir")
    d.add_argument("--records", action="store_true")
    d.set_defaults(func=cmd_dump)
    r = sub.add_parser("records", help="records as JSON lines")
    r.add_argument("dir")
    r.add_argument("--isolation", default="read_uncommitted", choices=["read_uncommitted", "read_committed"])
    r.add_argument("--start", type=int)
    r.add_argument("--end", type=int)
    r.set_defaults(func=cmd_records)
    demo = sub.add_parser(
        "demo",
        help="the main job on the embedded example: offsets, records, a Spark DataFrame, a topic written back",
    )
    demo.add_argument("--no-spark", action="store_true", help="stop after the Arrow part (no Java needed)")
    demo.set_defaults(func=cmd_demo)
    args = p.parse_args(argv)
    if hasattr(signal, "SIGPIPE"):
        # `kafkalog records DIR | head` should end quietly, as other command-line tools do.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        return args.func(args)
    except (kafkalog.KafkaLogError, OSError, ValueError) as e:
        # One line, never a traceback: missing or unreadable paths, files that are not logs.
        print(f"kafkalog: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
