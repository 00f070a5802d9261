"""kafkalog: read Kafka partition folders without a broker or a JVM. Nothing is ever written to
the folders read.

commands:
  kafkalog dump --files 00000000000000000000.log --deep-iteration --print-data-log
      Kafka's kafka-dump-log.sh (DumpLogSegments): same options, same output.
  kafkalog dump /var/lib/kafka/data/orders-0
      the same for every segment file of a partition folder (or of every folder of a data dir).
  kafkalog verify /var/lib/kafka/data
      check batches, indexes and checkpoints against each other; one line per problem.
  kafkalog stats /var/lib/kafka/data --json
      per partition: offsets, segments, bytes, records, times, codecs, transactions, producers.
  kafkalog cat /var/lib/kafka/data --topic orders --from -10 --format jsonl
      records as kcat / kafka-console-consumer print them, across partitions.
  kafkalog export /var/lib/kafka/data --to /tmp/kafka-parquet
      Parquet with Spark's Kafka schema; run again to append only what is new.
  kafkalog records /var/lib/kafka/data/orders-0 --start 100 --end 200
      records of one partition folder as JSON lines, as a consumer reads them.
  kafkalog demo
      the main job on the embedded example, each figure explained.

'kafkalog COMMAND --help' gives each command's options, with examples.

exit codes: 0 done (verify: sound); 1 the data is damaged, a path is missing or a file cannot be
read; 2 a wrong command line; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import signal
import sys
from pathlib import Path

import kafkalog
from kafkalog.results import MessageParser
from kafkalog import _kafkalog, cli_tools
from kafkalog.cli_tools import DataError, UsageError

# Suffix order within one segment, as Kafka lists a segment's files.
_SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")


_BASE64_PREFIX = "base64:"


def _text(b: bytes | None) -> str | None:
    """Bytes as JSON text: UTF-8 as it is, else `base64:` and the bytes in base64. Text that
    itself starts with `base64:` is written in base64 too, so every string reads back one way."""
    if b is None:
        return None
    try:
        text = b.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or text.startswith(_BASE64_PREFIX):
        return _BASE64_PREFIX + base64.b64encode(b).decode()
    return text


def _segment_files(folder: Path) -> list[str]:
    """A partition folder's segment files, and the KRaft snapshots (`<offset>-<epoch>.checkpoint`)
    of `__cluster_metadata-0`, by offset."""
    order = {s: i for i, s in enumerate(_SEGMENT_SUFFIXES + (".checkpoint",))}
    files = []
    for p in folder.iterdir():
        offset = p.stem.split("-")[0] if p.suffix == ".checkpoint" else p.stem
        if p.suffix in order and offset.isdigit() and (p.suffix != ".checkpoint" or
                                                        re.fullmatch(r"\d{20}-\d{10}", p.stem)):
            files.append((int(offset), order[p.suffix], str(p)))
    return [f for _, _, f in sorted(files)]


def _expand_paths(paths: list[str], topic: str | None = None) -> tuple[list[str], list[str]]:
    """Files as they are; a partition folder as its segment files; a data dir as its partitions'
    (only `topic`'s when given: an internal topic's decoder reads nothing else). Returns the
    files, and those of them found by listing a folder."""
    files: list[str] = []
    listed: list[str] = []
    for arg in paths:
        p = Path(arg)
        if not p.exists():
            raise FileNotFoundError(f"{arg}: no such file or folder")
        if not p.is_dir():
            files.append(arg)
            continue
        own = _segment_files(p)
        if own:
            files += own
            listed += own
            continue
        partitions = [(t, Path(d)) for t, _, d in kafkalog.partition_folders(str(p))]
        if not partitions:
            raise ValueError(f"{arg}: neither a partition folder (no segment files) nor a data dir")
        if topic is not None:
            partitions = [(t, d) for t, d in partitions if t == topic]
            if not partitions:
                raise DataError(f"{arg}: the data dir holds no {topic} partition to decode")
        for _, d in partitions:
            own = _segment_files(d)
            files += own
            listed += own
    return files, listed


_UNSUPPORTED_DECODERS = {
    "remote_log_metadata_decoder": "--remote-log-metadata-decoder",
}
# Kafka's internal topic decoders, by the option that picks them; where several are given, the
# first in this order wins, as in Kafka's tool.
# Given a data dir, a decoder dumps only its topic's partitions.
_TOPIC_DECODERS: dict[str, tuple[str, MessageParser, str, str]] = {
    "offsets_decoder": ("--offsets-decoder", "offsets", "__consumer_offsets",
                        "decode __consumer_offsets records: committed offsets and group metadata"),
    "transaction_log_decoder": ("--transaction-log-decoder", "transaction-log", "__transaction_state",
                                "decode __transaction_state records: transaction states"),
    "cluster_metadata_decoder": ("--cluster-metadata-decoder", "cluster-metadata", "__cluster_metadata",
                                 "decode KRaft __cluster_metadata records: topics, partitions, configs, ..."),
    "share_group_state_decoder": ("--share-group-state-decoder", "share-group-state", "__share_group_state",
                                  "decode __share_group_state records: share groups' delivery states (4.x)"),
}


def cmd_dump(args) -> int:
    for attr, flag in _UNSUPPORTED_DECODERS.items():
        if getattr(args, attr):
            raise UsageError(f"{flag} is not supported yet: drop the flag to print the raw records")
    if args.share_group_state_decoder and args.kafka_major < 4:
        raise UsageError("--share-group-state-decoder is Kafka 4's: 3.x's tool has no share groups")
    files: list[str] = []
    if args.files is not None:
        # Java's String.split(","): trailing empty names dropped.
        names = args.files.split(",")
        while names and names[-1] == "":
            names.pop()
        files += names
    parser: MessageParser
    topic: str | None
    parser, topic = next(((name, topic) for attr, (_, name, topic, _) in _TOPIC_DECODERS.items()
                          if getattr(args, attr)), ("decoders", None))
    expanded, listed = _expand_paths(args.paths, topic)
    files += expanded
    if not files:
        raise UsageError("nothing to dump: give --files F[,F...] or a partition folder")
    decoders_given = args.key_decoder_class is not None or args.value_decoder_class is not None
    default_decoder = "org.apache.kafka.tools.api.StringDecoder"
    sys.stdout.flush()
    _, _, _, problems = _kafkalog.dump_log_segments(
        files,
        print_data_log=args.print_data_log or decoders_given,
        deep_iteration=args.deep_iteration,
        skip_record_metadata=args.skip_record_metadata,
        index_sanity_check=args.index_sanity_check,
        verify_index_only=args.verify_index_only,
        max_bytes=args.max_bytes,
        max_message_size=args.max_message_size,
        key_decoder_class=args.key_decoder_class or default_decoder,
        value_decoder_class=args.value_decoder_class or default_decoder,
        json=args.json,
        kafka_major=args.kafka_major,
        message_parser=parser,
        listed_from_folders=listed,
    )
    # Kafka's tool exits 0 whatever it reports; --strict makes problems an error for scripts.
    return 1 if args.strict and problems else 0


def cmd_records(args) -> int:
    # The range rule of `kafkalog cat` (cli_tools.RANGE_RULE).
    cli_tools.check_range(args.start, args.end, "--start", "--end")
    folder = Path(args.dir)
    if not folder.exists():
        raise DataError(f"{args.dir}: no such file or folder")
    if folder.is_dir():
        cli_tools._check_readable_folder(folder)
        if not cli_tools._has_segments(folder):
            # Said for the command line (the library's error suggests its own options).
            folders = kafkalog.partition_folders(str(folder))
            if folders:
                user_topics = [path for topic, _, path in folders if not topic.startswith("__")]
                example = (user_topics or [folders[0][2]])[0]
                raise DataError(f"{args.dir} is a Kafka data dir, not a partition folder: name one "
                                f"of its partition folders (e.g. {example}), or read the whole dir "
                                f"with kafkalog cat")
            raise DataError(f"{args.dir} is not a Kafka partition folder: no segment files "
                            f"(<20-digit base offset>.log) in it")
    log = cli_tools.open_log(folder, args)
    named = re.fullmatch(r"(.+)-(\d+)", folder.resolve().name)
    if named:
        cli_tools.note_tiered_topics(args.cmd, [(named.group(1), int(named.group(2)), folder.resolve())])
    start, end = cli_tools.resolve_range(log, args.start, args.end, args.isolation,
                                         args.start_time, args.end_time)
    count = 0
    for r in log.records(start=start, end=end, isolation=args.isolation):
        count += 1
        print(json.dumps({
            "offset": r.offset, "timestamp": r.timestamp, "timestamp_type": r.timestamp_type,
            "key": _text(r.key), "value": _text(r.value),
            "headers": [[k, _text(v)] for k, v in r.headers],
        }))
    if count == 0:
        print(f"kafkalog records: no records in the range asked; {args.dir} holds "
              f"[{log.log_start_offset}, {cli_tools.readable_end(log, args.isolation)})", file=sys.stderr)
    return cli_tools.report_damage(args.cmd, log, args.on_corruption)


def cmd_demo(args) -> int:
    from kafkalog import demo

    return demo.run(spark_enabled=not args.no_spark)


def _size(text: str) -> int:
    value = int(text)
    if value < 0 or value > 2**31 - 1:
        raise argparse.ArgumentTypeError(f"{text} is not a size between 0 and {2**31 - 1}")
    return value


def _kafka_major(text: str) -> int:
    major = text.split(".")[0]
    if major not in ("3", "4"):
        raise argparse.ArgumentTypeError(f"{text}: the output of Kafka 3.x or 4.x (give 3 or 4)")
    return int(major)


class _Parser(argparse.ArgumentParser):
    """Command-line mistakes as one line (exit 2), pointing at the help, not a usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kafkalog", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"kafkalog {kafkalog.__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    d = sub.add_parser(
        "dump", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="Kafka's kafka-dump-log.sh without a JVM: same options, same output",
        description="Prints what Kafka's DumpLogSegments prints for .log, .index, .timeindex, "
                    ".txnindex, .snapshot and KRaft .checkpoint files: batches, records with "
                    "--deep-iteration, contents with --print-data-log, index entries checked "
                    "against the log (mismatches reported on stderr). Nothing is written.",
        epilog="examples:\n"
               "  kafkalog dump --files /data/orders-0/00000000000000000000.log --print-data-log\n"
               "  kafkalog dump --files 00000000000000000000.index --verify-index-only\n"
               "  kafkalog dump /data/orders-0 --deep-iteration --json | jq .\n"
               "  kafkalog dump /data/__consumer_offsets-0 --offsets-decoder\n")
    d.add_argument("paths", nargs="*", metavar="PATH",
                   help="segment files, partition folders or a data dir (kafkalog's addition)")
    d.add_argument("--files", metavar="FILE1,FILE2,...",
                   help="comma separated data and index files to dump (as Kafka's --files)")
    d.add_argument("--deep-iteration", action="store_true",
                   help="one line per record, not only per batch (implied by --print-data-log)")
    d.add_argument("--print-data-log", action="store_true",
                   help="print each record's key and payload (implies --deep-iteration)")
    d.add_argument("--skip-record-metadata", action="store_true",
                   help="record lines without offsets, sizes and control-record details")
    d.add_argument("--index-sanity-check", action="store_true",
                   help="only the check a broker runs on an index at startup")
    d.add_argument("--verify-index-only", action="store_true",
                   help="check index entries against the log without printing them")
    d.add_argument("--max-bytes", type=_size, default=2**31 - 1, metavar="SIZE",
                   help="read at most SIZE bytes of each .log file (default: all)")
    d.add_argument("--max-message-size", type=_size, default=5 * 1024 * 1024, metavar="SIZE",
                   help="largest batch an index entry may point at (default: 5242880)")
    d.add_argument("--key-decoder-class", nargs="?", const="org.apache.kafka.tools.api.StringDecoder",
                   metavar="CLASS", help="StringDecoder (default), IntegerDecoder or LongDecoder")
    d.add_argument("--value-decoder-class", nargs="?",
                   const="org.apache.kafka.tools.api.StringDecoder", metavar="CLASS",
                   help="StringDecoder (default), IntegerDecoder or LongDecoder")
    for flag, _, topic, text in _TOPIC_DECODERS.values():
        d.add_argument(flag, action="store_true",
                       help=f"{text} (implies --print-data-log; of a data dir, dumps {topic} only)")
    for flag in _UNSUPPORTED_DECODERS.values():
        d.add_argument(flag, action="store_true", help="not supported yet")
    d.add_argument("--json", action="store_true",
                   help="one JSON object per line (file, batch, record, index entry, ...)")
    d.add_argument("--kafka-version", dest="kafka_major", type=_kafka_major, default=4,
                   metavar="MAJOR", help="print as Kafka MAJOR's tool does: 4 (default) or 3")
    d.add_argument("--strict", action="store_true",
                   help="exit 1 when anything is reported wrong (Kafka's tool exits 0)")
    d.set_defaults(func=cmd_dump)

    r = sub.add_parser("records", formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="records of one partition folder as JSON lines",
                       description="Records as a consumer reads them, one JSON object per line "
                                   "(bytes that are not UTF-8, or that start with 'base64:', as "
                                   "'base64:' and their base64).",
                       epilog=cli_tools.RANGE_RULE.replace("--from", "--start").replace("--to", "--end")
                       .replace("cat and records", "records and cat")
                       + "\n\nexamples:\n  kafkalog records /data/orders-0 --start 100 --end 200 "
                         "--isolation read_committed\n  kafkalog records /data/orders-0 --start -5\n")
    r.add_argument("dir", metavar="PARTITION_FOLDER", help="one partition folder (e.g. /data/orders-0)")
    r.add_argument("--isolation", default="read_uncommitted",
                   choices=["read_uncommitted", "read_committed", "log_end"],
                   help="what a consumer may read (default read_uncommitted: up to the high watermark) "
                        "(e.g. --isolation read_committed)")
    g = r.add_mutually_exclusive_group()
    g.add_argument("--start", type=cli_tools._offset, metavar="OFFSET",
                   help="first offset (default: the log start); negative counts back from the end "
                        "(e.g. --start -10)")
    g.add_argument("--start-time", type=cli_tools._time_ms, metavar="T",
                   help="from the first record at or after T (e.g. --start-time 2025-01-31T00:00:00Z)")
    g = r.add_mutually_exclusive_group()
    g.add_argument("--end", type=cli_tools._offset, metavar="OFFSET",
                   help="offset to stop before (default: what the isolation level allows) (e.g. --end 200)")
    g.add_argument("--end-time", type=cli_tools._time_ms, metavar="T",
                   help="stop before the first record at or after T (e.g. --end-time 1735689600000)")
    cli_tools.add_damage_options(r)
    r.set_defaults(func=cmd_records)

    cli_tools.add_parsers(sub, argparse.RawDescriptionHelpFormatter)

    demo = sub.add_parser(
        "demo", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="the main job on the embedded example: offsets, records, a Spark DataFrame, a topic written back",
        description="Reads the partition folder a Kafka 4.4.0 broker wrote that ships with kafkalog "
                    "(topic demo: 300 orders, one committed and one aborted transaction) from a "
                    "temporary copy, explaining each figure; then reads it with Spark, aggregates, "
                    "writes a topic back and reads it again. The copy is removed at the end.",
        epilog="examples:\n  kafkalog demo\n  kafkalog demo --no-spark\n")
    demo.add_argument("--no-spark", action="store_true",
                      help="stop after the Arrow part (no Java needed) (e.g. kafkalog demo --no-spark)")
    demo.set_defaults(func=cmd_demo)
    return p


def _raise_open_file_limit() -> None:
    """An open log holds a descriptor per segment file, as a broker does, and a partition can have
    more segments than the usual soft limit of 1024: a command takes what the hard limit allows,
    as a broker's service settings would."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if hard != resource.RLIM_INFINITY else 1 << 20
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ImportError, ValueError, OSError):
        pass  # the error on a file, with its advice, says what to raise


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    _raise_open_file_limit()
    if hasattr(signal, "SIGPIPE"):
        # `kafkalog records DIR | head` should end quietly, as other command-line tools do.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        return args.func(args)
    except UsageError as e:
        print(f"kafkalog {args.cmd}: {e}", file=sys.stderr)
        return 2
    except DataError as e:
        print(f"kafkalog {args.cmd}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        print(f"kafkalog {args.cmd}: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print(f"kafkalog {args.cmd}: out of memory (a record or batch larger than the memory this "
              "process may use: see ulimit -v)", file=sys.stderr)
        return 1
    except (kafkalog.KafkaLogError, OSError, ValueError) as e:
        # One line, never a traceback: missing or unreadable paths, files that are not logs,
        # damaged data; the way around damage in this command's flags, not the Python API's.
        print(f"kafkalog {args.cmd}: {cli_tools.in_flags(str(e))}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
