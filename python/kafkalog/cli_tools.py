"""The operator commands of ``kafkalog``: verify, stats, cat, export (and the offset range rule
that ``records`` shares). The checks and sums are the crate's (``tools::verify``,
``tools::stats``); this module finds the partition folders, resolves options and prints."""

from __future__ import annotations

import argparse
import base64
import csv
import datetime as _dt
import io
import json
import os
import re
import stat
import sys
from typing import Any, Tuple
from pathlib import Path

import kafkalog
from kafkalog import _kafkalog


class UsageError(Exception):
    """A command line that cannot run (exit code 2)."""


class DataError(Exception):
    """The data cannot be read as asked (exit code 1)."""


RANGE_RULE = """\
offset ranges (the same for cat and records):
  --from A --to B reads offsets A <= offset < B of each partition.
  A negative value counts back from each partition's end (the end the isolation level allows),
  as kcat's -o -N does: --from -10 is each partition's last 10 offsets.
  Each end is then clamped to what the partition holds, so --from 1000 past the end reads
  nothing: exit 0, with a one-line note on stderr saying where the partitions end.
  A range empty whatever the data (--to at or before --from, both of the same sign) is a
  wrong command line: exit 2.
  --from-time/--to-time T take ms since the epoch or an ISO 8601 time (2025-01-31T12:00:00Z):
  the first offset whose timestamp is >= T, as Kafka's ListOffsets (offsetsForTimes)."""


def in_flags(message: str) -> str:
    """A library message's advice (``on_corruption='skip'``, ``cleanup.policy=compact in
    config``) in the command line's words."""
    message = re.sub(r"open it( read-only)? with on_corruption='(\w+)'", r"give --on-corruption \2", message)
    message = re.sub(r"on_corruption='(\w+)'", r"--on-corruption \1", message)
    return message.replace("pass cleanup.policy=compact in config", "give --compacted")


# ----- finding partition folders -----

def _is_segment_name(name: str) -> bool:
    return re.fullmatch(r"\d{20}\.(log|index|timeindex|txnindex)", name) is not None


def _check_readable_folder(folder: Path) -> None:
    """A FIFO or device under a segment's name would block a reader: refused up front."""
    for p in folder.iterdir():
        if _is_segment_name(p.name) or p.name.endswith(".snapshot"):
            try:
                mode = p.stat().st_mode
            except FileNotFoundError:
                continue  # removed since it was listed: a running broker's retention or cleaner
            if not stat.S_ISREG(mode):
                kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
                raise DataError(f"{p}: {kind} where a segment file is expected")


def _has_segments(folder: Path) -> bool:
    return any(p.name.endswith(".log") and _is_segment_name(p.name) for p in folder.iterdir())


def partition_dirs(paths: list[str], topic: str | None = None, partition: int | None = None,
                   precheck: bool = True, internal: bool = True,
                   cmd: str = "") -> list[tuple[str, int | None, Path]]:
    """(topic, partition, folder) for each partition folder named or inside a data dir named.
    ``internal=False`` leaves a data dir's internal ``__`` topics out unless ``topic`` names one,
    as a consumer's subscription leaves them out (``exclude.internal.topics``); a folder named
    itself is always in."""
    out: list[tuple[str, int | None, Path]] = []
    left_out: set[str] = set()
    for arg in paths:
        p = Path(arg)
        if not p.exists():
            raise DataError(f"{arg}: no such file or folder")
        if not p.is_dir():
            raise DataError(f"{arg}: a file, not a partition folder or a data dir")
        if _has_segments(p):
            m = re.fullmatch(r"(.+)-(\d+)", p.name)
            out.append((m.group(1), int(m.group(2))) + (p,) if m else (p.name, None, p))
            continue
        found, strays = _kafkalog.live_and_stray_partition_folders(str(p))
        for t, n, d, why in strays:
            if topic is None or t == topic:
                print(f"kafkalog {cmd}: left out {d}: {why}; its broker sets it aside (renamed "
                      "-stray) when it starts; name the folder itself to read it", file=sys.stderr)
        if not found:
            raise DataError(f"{arg}: neither a partition folder (no .log segment files) nor a data dir "
                            "(no <topic>-<partition> folders)")
        for t, n, d in found:
            if not internal and topic is None and t.startswith("__"):
                left_out.add(t)
            else:
                out.append((t, n, Path(d)))
    if left_out:
        print(f"kafkalog {cmd}: internal topics left out ({', '.join(sorted(left_out))}); "
              "name one with --topic to read it", file=sys.stderr)
    if topic is not None:
        out = [x for x in out if x[0] == topic]
        if not out:
            raise DataError(f"no partition of topic '{topic}' in {', '.join(paths)}")
    if partition is not None:
        out = [x for x in out if x[1] == partition]
        if not out:
            raise DataError(f"no partition {partition} in {', '.join(paths)}")
    # A folder named twice (or named and inside a data dir named) is read once.
    seen: set[Path] = set()
    unique = []
    for x in out:
        if x[2].resolve() not in seen:
            seen.add(x[2].resolve())
            unique.append(x)
    out = unique
    if precheck:  # verify reports such files as problems itself
        for _, _, d in out:
            _check_readable_folder(d)
    note_tiered_topics(cmd, out)
    return out


def tiered_topics(parts: list[tuple[str, int | None, Path]]) -> list[str]:
    """The topics among ``parts`` that keep segments in tiered storage (``remote.storage.enable``
    in their data dir's configs): their folders hold the local log only."""
    found: set[str] = set()
    for data_dir in {folder.parent for _, partition, folder in parts if partition is not None}:
        try:
            tiered = _kafkalog.remote_storage_topics(str(data_dir))
        except (kafkalog.KafkaLogError, OSError):
            continue  # configs unreadable: the read says what it can
        found |= {t for t, partition, folder in parts if folder.parent == data_dir and t in tiered}
    return sorted(found)


def note_tiered_topics(cmd: str, parts: list[tuple[str, int | None, Path]]) -> None:
    for topic in tiered_topics(parts):
        print(f"kafkalog {cmd}: note: topic '{topic}' keeps segments in tiered storage "
              "(remote.storage.enable=true): only its local segments are read, from each "
              "partition's local log start (Kafka's earliest-local offset); the offsets before it are "
              "in remote storage, which kafkalog does not reach", file=sys.stderr)


def _name(topic: str, partition: int | None) -> str:
    return topic if partition is None else f"{topic}-{partition}"


def report_damage(cmd: str, log, on_corruption: str) -> int:
    """One stderr line per damaged range the open skipped or removed; exit 1 unless told to skip."""
    damaged = log.damaged_ranges
    if damaged or log.tail_loss:
        sys.stdout.flush()
    for d in damaged:
        print(f"kafkalog {cmd}: damaged ({d['action']}): {d['description']}", file=sys.stderr)
    if log.tail_loss:
        # Kafka serves such a log silently; not refused (a follower's truncation can leave it).
        print(f"kafkalog {cmd}: note: {log.path}: {log.tail_loss}; `kafkalog verify` checks the "
              "folder", file=sys.stderr)
    return 1 if damaged and on_corruption != "skip" else 0


def open_log(folder: Path, args) -> "kafkalog.Log":
    """A partition folder read-only, as --on-corruption and --compacted ask."""
    config = {"cleanup.policy": "compact"} if getattr(args, "compacted", False) else None
    return kafkalog.Log(str(folder), config=config, on_corruption=getattr(args, "on_corruption", "error"))


def add_damage_options(p: argparse.ArgumentParser) -> None:
    """--on-corruption and --compacted, as records, cat and export take them."""
    p.add_argument("--on-corruption", default="error", choices=["error", "skip", "truncate"],
                   help="damage beyond a torn tail: error (exit 1, the default); skip (read every "
                        "valid batch around it, damaged ranges on stderr, exit 0); truncate (stop "
                        "where Kafka's recovery would, exit 1)")
    p.add_argument("--compacted", action="store_true",
                   help="the topic is compacted: offset gaps are not damage (a partition folder "
                        "copied without its data dir's cleaner-offset-checkpoint may need it)")


# ----- progress -----

class _Progress:
    """A byte or record bar on stderr when it is a terminal (tqdm); silent when piped. A context
    manager: the bar goes away at the end of the ``with`` block, whatever ends it."""

    @classmethod
    def over_segments(cls, parts: list, desc: str) -> "_Progress":
        """A byte bar over the ``.log`` files of the partition folders ``parts``."""
        return cls(sum(_segment_bytes(d) for _, _, d in parts), "B", desc)

    def __init__(self, total: int, unit: str, desc: str):
        self.bar = None
        if sys.stderr.isatty() and total > 0:
            import shutil

            from tqdm import tqdm

            # A terminal that reports no size (0 x 0) would get no bar at all from tqdm.
            size = shutil.get_terminal_size((80, 24))
            self.bar = tqdm(total=total, unit=unit, unit_scale=True, desc=desc, leave=False,
                            file=sys.stderr, ncols=size.columns or 80, nrows=size.lines or 24)

    def update(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> "_Progress":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _segment_bytes(folder: Path) -> int:
    def size(p: Path) -> int:
        try:
            st = p.stat()
        except FileNotFoundError:
            return 0  # removed since it was listed: a running broker's retention or cleaner
        return st.st_size if stat.S_ISREG(st.st_mode) else 0

    return sum(size(p) for p in folder.iterdir() if p.name.endswith(".log") and _is_segment_name(p.name))


# ----- verify -----

def cmd_verify(args) -> int:
    parts = partition_dirs(args.paths, args.topic, precheck=False, cmd="verify")
    problems = damaged = segments = batches = size = notes = 0
    try:
        with _Progress.over_segments(parts, "verify") as progress:
            for topic, partition, folder in parts:
                s, b, n, _compacted, found, noted = _kafkalog.verify_partition(
                    str(folder), compacted=args.compacted, progress=progress.update)
                segments, batches, size = segments + s, batches + b, size + n
                if found:
                    damaged += 1
                for kind, listed in (("", found), ("note: ", noted)):
                    for file, position, message in listed:
                        where = f"{file} at byte {position}" if position is not None else file
                        print(f"{where}: {kind}{message}", flush=False)
                problems, notes = problems + len(found), notes + len(noted)
    finally:
        sys.stdout.flush()
    summary = (f"{len(parts)} partition(s), {segments} segment(s), {batches} batches, "
               f"{size} bytes checked" + (f", {notes} note(s)" if notes else ""))
    if problems:
        print(f"kafkalog verify: {problems} problem(s) in {damaged} partition(s); {summary}",
              file=sys.stderr)
        return 1
    print(f"kafkalog verify: sound; {summary}", file=sys.stderr)
    return 0


# ----- stats -----

def _iso(ms: int | None) -> str:
    if ms is None:
        return "-"
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def cmd_stats(args) -> int:
    parts = partition_dirs(args.paths, args.topic, cmd="stats")
    rows: list[dict[str, Any]] = []
    # Partitions that could not be opened at all (too few descriptors, a file not readable):
    # reported after the others' figures, which an operator still wants.
    failed: list[dict[str, Any]] = []
    with _Progress.over_segments(parts, "stats") as progress:
        for topic, partition, folder in parts:
            # A damaged partition is summed around its damage and reported, not the end of
            # the table: an operator wants every partition's figures.
            try:
                s = _kafkalog.partition_stats(str(folder), on_corruption="skip", progress=progress.update)
            except (kafkalog.KafkaLogError, OSError) as e:
                if len(parts) == 1:
                    raise  # one partition asked for: its error is the answer
                failed.append({"topic": topic, "partition": partition, "path": str(folder), "error": str(e)})
                continue
            rows.append({"topic": topic, "partition": partition, "path": str(folder), **s,
                         "transactional_share": s["transactional_records"] / s["records"] if s["records"] else 0.0})
    damaged = [r for r in rows if r["damage"]]
    status = 1 if damaged or failed else 0
    if args.json:
        json.dump({"partitions": rows, "errors": failed}, sys.stdout, indent=2)
        print()
        _report_stats_damage(rows, failed)
        return status
    headers = ["partition", "start", "end", "HW", "LSO", "segs", "bytes", "records", "first timestamp",
               "last timestamp", "codecs", "txn", "producers"]
    table = [[_name(r["topic"], r["partition"]), r["log_start_offset"], r["log_end_offset"],
              r["high_watermark"], r["last_stable_offset"], r["segments"], r["bytes"], r["records"],
              _iso(r["first_timestamp"]), _iso(r["last_timestamp"]),
              ",".join(r["codecs"]) or "-", f"{100 * r['transactional_share']:.0f}%", r["producers"]]
             for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *table)]
    for line in [headers] + table:
        print("  ".join(str(x).rjust(w) if isinstance(x, int) else str(x).ljust(w)
                        for x, w in zip(line, widths)).rstrip())
    print("start/end: log start and end offsets; HW: high watermark (read_uncommitted reads up to it); "
          "LSO: last stable offset (read_committed); txn: share of records in transactions; "
          "records and timestamps from the log start on; timestamps are batch-level (each batch's first "
          "record and largest; a record written out of order can be earlier), UTC.", file=sys.stderr)
    _report_stats_damage(rows, failed)
    return status


def _report_stats_damage(rows: list[dict[str, Any]], failed: list[dict[str, Any]]) -> None:
    sys.stdout.flush()
    for f in failed:
        print(f"kafkalog stats: {_name(f['topic'], f['partition'])} could not be read, left out of "
              f"the figures: {in_flags(f['error'])}", file=sys.stderr)
    for r in rows:
        for d in r["damage"]:
            print(f"kafkalog stats: {_name(r['topic'], r['partition'])} is damaged (figures are of "
                  f"the batches around it): {d}", file=sys.stderr)
        if r["tail_loss"]:
            print(f"kafkalog stats: note: {_name(r['topic'], r['partition'])}: {r['tail_loss']}",
                  file=sys.stderr)


# ----- offset ranges -----

# ListOffsets' special timestamps a log answers: LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL.
_SPECIAL_TIMESTAMPS = (-1, -2, -3, -4)


def _time_ms(text: str) -> int:
    if re.fullmatch(r"-?\d+", text):
        ms = int(text)
        if ms < 0 and ms not in _SPECIAL_TIMESTAMPS:
            raise argparse.ArgumentTypeError(
                f"{text}: a time is ms since the epoch, an ISO 8601 time, or one of ListOffsets' "
                "-1 (latest), -2 (earliest), -3 (max timestamp), -4 (earliest local)")
        return ms
    try:
        t = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text}: not ms since the epoch nor an ISO 8601 time "
                                         "(2025-01-31T12:00:00Z)") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return int(t.timestamp() * 1000)


def check_range(first: int | None, last: int | None, first_flag: str, last_flag: str) -> None:
    """The range rule's command-line half: a range empty whatever the data is refused."""
    if first is not None and last is not None and (first < 0) == (last < 0) and last <= first:
        raise UsageError(f"{last_flag} {last} is at or before {first_flag} {first}: the range "
                         f"[{first}, {last}) is empty")


def readable_end(log, isolation: str) -> int:
    """Where a read of `isolation` ends, never below the log start: a transaction left open
    below the log start gives a last stable offset there (Kafka's answer too), an empty read."""
    return max(log.latest_offset(isolation), log.log_start_offset)


def resolve_range(log, first: int | None, last: int | None, isolation: str,
                  from_time: int | None = None, to_time: int | None = None) -> tuple[int, int]:
    """[start, end) of one partition under the range rule (RANGE_RULE)."""
    log_start, upper = log.log_start_offset, readable_end(log, isolation)

    def at_time(t: int) -> int:
        found = log.offset_for_timestamp(t)
        return upper if found is None or found.offset < 0 else found.offset

    def offset(v: int | None, default: int) -> int:
        if v is None:
            return default
        return upper + v if v < 0 else v

    start = at_time(from_time) if from_time is not None else offset(first, log_start)
    end = at_time(to_time) if to_time is not None else offset(last, upper)
    start = min(max(start, log_start), upper)
    end = min(max(end, log_start), upper)
    return start, max(start, end)


# ----- cat -----

class _Utf8:
    """Bytes as UTF-8 text, each malformed sequence as U+FFFD (as kafka-console-consumer's
    StringDeserializer prints it), counting the fields it changed so that `cat` says so."""

    def __init__(self) -> None:
        self.replaced = 0

    def __call__(self, b: bytes) -> str:
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            self.replaced += 1
            return b.decode("utf-8", errors="replace")


def _decoder(name: str):
    if name == "utf8":
        return _Utf8()
    if name == "base64":
        return lambda b: base64.b64encode(b).decode()
    if name == "hex":
        return bytes.hex

    def as_json(b: bytes):
        # UTF-8 first, as JSON is: json.loads on bytes guesses an encoding from the first bytes
        # (a NUL reads as UTF-16) and reports that guess's error.
        try:
            text = b.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"not UTF-8 text: {e}") from None
        return json.loads(text)
    return as_json


def cmd_cat(args) -> int:
    check_range(args.from_offset, args.to_offset, "--from", "--to")
    parts = partition_dirs(args.paths, args.topic, args.partition, internal=False, cmd="cat")
    key_of, value_of = _decoder(args.key_decoder), _decoder(args.value_decoder)
    header_of = _decoder(args.value_decoder if args.value_decoder != "json" else "utf8")
    out = sys.stdout
    writer = _CsvRows(out) if args.format == "csv" else None
    if writer:
        writer.writerow(["topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value",
                         "headers"])
    elif args.format == "json":
        out.write("[")
    count, ends, status = 0, [], 0
    for topic, partition, folder in parts:
        log = open_log(folder, args)
        status = max(status, report_damage("cat", log, args.on_corruption))
        start, end = resolve_range(log, args.from_offset, args.to_offset, args.isolation,
                                   args.from_time, args.to_time)
        ends.append(f"{_name(topic, partition)} holds [{log.log_start_offset}, "
                    f"{readable_end(log, args.isolation)})")
        if start >= end:
            continue
        for r in log.records(start=start, end=end, isolation=args.isolation):
            try:
                key = None if r.key is None else key_of(r.key)
            except ValueError as e:
                raise DataError(f"{_name(topic, partition)} offset {r.offset}: the key is not "
                                f"{args.key_decoder} ({e})") from None
            try:
                value = None if r.value is None else value_of(r.value)
            except ValueError as e:
                raise DataError(f"{_name(topic, partition)} offset {r.offset}: the value is not "
                                f"{args.value_decoder} ({e})") from None
            headers = [[k, None if v is None else header_of(v)] for k, v in r.headers]
            if writer:
                writer.writerow([topic, partition, r.offset, r.timestamp, r.timestamp_type,
                                 None if key is None else _csv_text(key),
                                 None if value is None else _csv_text(value),
                                 json.dumps(headers) if headers else None])
            else:
                obj = {"topic": topic, "partition": partition, "offset": r.offset,
                       "timestamp": r.timestamp, "timestamp_type": r.timestamp_type,
                       "key": key, "value": value, "headers": headers}
                text = json.dumps(obj, ensure_ascii=False)
                if args.format == "json":
                    out.write(("\n" if count == 0 else ",\n") + text)
                else:
                    out.write(text + "\n")
            count += 1
    if args.format == "json":
        out.write("\n]\n" if count else "]\n")
    out.flush()
    if count == 0:
        print(f"kafkalog cat: no records in the range asked; {'; '.join(ends)}", file=sys.stderr)
    replaced = sum(d.replaced for d in (key_of, value_of, header_of) if isinstance(d, _Utf8))
    if replaced:
        # Not damage (the bytes are as written), but what was printed is not what is stored.
        print(f"kafkalog cat: {replaced} keys, values or header values were not UTF-8 and were "
              f"printed with U+FFFD in place of bytes; --key-decoder/--value-decoder base64 or hex "
              f"print them exactly", file=sys.stderr)
    return status


def _csv_text(v) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


class _CsvRows:
    """CSV rows as the csv module writes them (quoted only where needed), except that an empty
    text is written `""` and a null (None) as nothing, as PostgreSQL's COPY does: a tombstone
    (null value) is then told from an empty value. Python's csv writes both as nothing, and
    quotes None as well under its quoting modes (before 3.12's QUOTE_NOTNULL)."""

    def __init__(self, out) -> None:
        self._out = out
        self._line = io.StringIO()
        # The terminator's characters are what make the writer quote a field holding them.
        self._writer = csv.writer(self._line, lineterminator="\r\n")

    def writerow(self, fields) -> None:
        cells = []
        for v in fields:
            if v is None:
                cells.append("")
            elif v == "":
                cells.append('""')
            else:
                self._line.seek(0)
                self._line.truncate()
                self._writer.writerow([v])
                cells.append(self._line.getvalue()[:-2])
        self._out.write(",".join(cells) + "\n")


# ----- export -----

STATE_FILE = "_kafkalog_export.json"
_PART = re.compile(r"part-(\d{20})-(\d{20})\.parquet")


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _check_export_outside_log_dirs(out: Path, paths: list[str], parts) -> None:
    """Refuses an output folder inside a partition folder or a log dir. A broker refuses to
    start on a log dir holding any folder but its topics' ("Found directory ..., 'out' is not in
    the form of topic-partition"), and files in a partition folder are the log's, so Parquet
    written there breaks what the export reads."""
    target = out.resolve()
    inside = [target, *target.parents]
    folders = {folder.resolve() for *_, folder in parts}
    # The data dirs named, and a named partition folder's parent where it is a log dir: a
    # broker's (meta.properties) or one a writer kept checkpoints in (Kafka's and kafkalog's
    # writers write them there); a lone partition folder's parent may be any folder (a home
    # directory).
    log_dirs = {Path(p).resolve() for p in paths} - folders
    log_dirs |= {f.parent for f in folders
                 if any((f.parent / name).is_file() for name in ("meta.properties", "recovery-point-offset-checkpoint"))}
    log_dirs |= {d for d in inside if (d / "meta.properties").is_file()}
    for d in inside:
        if d in folders:
            raise UsageError(f"--to {out} is inside the partition folder {d}, which holds the log "
                             "being exported: name a folder outside it")
        if d in log_dirs:
            raise UsageError(f"--to {out} is inside the log dir {d}: a Kafka broker refuses to "
                             "start on a log dir holding folders other than its topics' partitions "
                             "(and kafkalog keeps its own files outside it too): name a folder "
                             "outside it")


def cmd_export(args) -> int:
    import pyarrow.parquet as pq

    parts = partition_dirs(args.paths, args.topic, internal=False, cmd="export")
    out = Path(args.to)
    if out.exists() and not out.is_dir():
        raise DataError(f"--to {out}: a file, not a folder")
    _check_export_outside_log_dirs(out, args.paths, parts)
    out.mkdir(parents=True, exist_ok=True)
    state_path = out / STATE_FILE
    state = {"version": 1, "isolation": args.isolation, "offsets": {}}
    if state_path.exists():
        try:
            state = json.loads(state_path.read_text())
            state["offsets"]
        except (ValueError, KeyError, TypeError):
            raise DataError(f"{state_path}: not a kafkalog export state file") from None
        if state.get("isolation") != args.isolation:
            raise UsageError(f"{out} was exported with --isolation {state.get('isolation')}; "
                             f"an export appending to it must use the same")
    plans, losses, status = [], [], 0
    for topic, partition, folder in parts:
        if partition is None:
            raise DataError(f"{folder}: not named <topic>-<partition>, so it has no partition to "
                            "export it under")
        log = open_log(folder, args)
        status = max(status, report_damage("export", log, args.on_corruption))
        target = out / f"topic={topic}" / f"partition={partition}"
        exported_before = str(partition) in state["offsets"].get(topic, {})
        reached = state["offsets"].get(topic, {}).get(str(partition), 0)
        # The part files are the truth if the state file lags behind them (a crash in between).
        if target.is_dir():
            for p in target.iterdir():
                m = _PART.fullmatch(p.name)
                if m:
                    exported_before = True
                    reached = max(reached, int(m.group(2)))
        log_start, log_end = log.log_start_offset, log.log_end_offset
        # What Spark's Kafka source calls data loss (failOnDataLoss), between two exports.
        if exported_before and reached < log_start:
            losses.append(f"{_name(topic, partition)}: offsets {reached} to {log_start - 1} were "
                          f"deleted (retention or delete_records) before an export reached them")
        elif exported_before and reached > log_end:
            losses.append(f"{_name(topic, partition)}: exported up to offset {reached}, but the log "
                          f"now ends at {log_end} (truncated or recreated since): the records "
                          f"exported from offset {log_end} on may no longer be in the log, and "
                          f"records written again at offsets below {reached} are not exported")
        start = max(reached, log_start)
        end = readable_end(log, args.isolation)
        # Closed until its turn: a data dir may hold more segments than the open-file limit.
        log.close()
        plans.append((topic, partition, folder, target, start, end))
    if losses and args.on_data_loss == "fail":
        raise DataError("; ".join(losses) + ". Nothing was exported: --on-data-loss warn exports "
                        "what the logs hold now and goes on")
    for loss in losses:
        print(f"kafkalog export: warning: {loss}", file=sys.stderr)
    saved = json.dumps(state, indent=1, sort_keys=True) + "\n"
    try:
        with _Progress(sum(max(0, e - s) for *_, s, e in plans), "rec", "export") as progress:
            exported, files = _export_plans(plans, args, state, progress, pq)
    finally:
        # Once, not per partition (a no-op export of 2,000 partitions wrote and fsynced the whole
        # file 2,000 times). Progress a crash keeps from it is in the part files' names, which
        # the next export reads first.
        text = json.dumps(state, indent=1, sort_keys=True) + "\n"
        if text != saved or not state_path.exists():
            _write_atomically(state_path, text)
    print(f"kafkalog export: {exported} records in {files} new file(s) under {out}", file=sys.stderr)
    return status


def _export_plans(plans, args, state, progress, pq) -> Tuple[int, int]:
    """Writes each plan's new records to a part file, noting the offset reached in ``state``;
    returns the records and files written."""
    exported = files = 0
    for topic, partition, folder, target, start, end in plans:
        if start < end:
            log = open_log(folder, args)
            reader = log.to_arrow(start=start, end=end, isolation=args.isolation, include_headers=True)
            keep = [n for n in reader.schema.names if n not in ("topic", "partition")]
            target.mkdir(parents=True, exist_ok=True)
            final = target / f"part-{start:020d}-{end:020d}.parquet"
            tmp = target / f".{final.name}.tmp"
            rows = 0
            try:
                writer = None
                for batch in reader:
                    batch = batch.select(keep)
                    if writer is None:
                        writer = pq.ParquetWriter(tmp, batch.schema)
                    writer.write_batch(batch)
                    rows += batch.num_rows
                    progress.update(batch.num_rows)
                if writer is not None:
                    writer.close()
                    os.replace(tmp, final)
                    files += 1
            finally:
                log.close()
                if tmp.exists():
                    tmp.unlink()
            exported += rows
        state["offsets"].setdefault(topic, {})[str(partition)] = max(start, end)
    return exported, files


# ----- the parsers -----

def _offset(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text} is not an offset (an integer)") from None


def _paths_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="a data dir, topic partition folders, or one partition folder "
                        "(e.g. /var/lib/kafka/data or /var/lib/kafka/data/orders-0)")
    p.add_argument("--topic", metavar="TOPIC",
                   help="only this topic's partitions of a data dir (e.g. --topic orders)")


def add_parsers(sub, formatter) -> None:
    v = sub.add_parser(
        "verify", formatter_class=formatter,
        help="check segments, indexes and checkpoints against each other; never writes",
        description="Checks every batch's framing and CRC, that its records decode (compressed "
                    "batches inflated), offsets across segments (and gaps, which "
                    "only a compacted log may have), every .index and .timeindex entry against the "
                    "log, .txnindex against the ABORT markers, and the checkpoints (recovery point, "
                    "log start, high watermark, cleaner, leader epochs, producer snapshots) against "
                    "the segments. Files are opened read-only. Prints one line per problem: file, "
                    "byte position, what. Exit 0 when sound, 1 when anything is wrong.",
        epilog="examples:\n"
               "  kafkalog verify /var/lib/kafka/data\n"
               "  kafkalog verify /var/lib/kafka/data --topic orders\n"
               "  kafkalog verify /var/lib/kafka/data/orders-0 --compacted\n")
    _paths_arg(v)
    v.add_argument("--compacted", action="store_true",
                   help="allow offset gaps (a compacted topic); without it only partitions in the "
                        "cleaner-offset-checkpoint and internal __ topics may have them "
                        "(e.g. kafkalog verify data/users-0 --compacted)")
    v.set_defaults(func=cmd_verify)

    s = sub.add_parser(
        "stats", formatter_class=formatter,
        help="per partition: offsets, segments, bytes, records, times, codecs, transactions, producers",
        description="One pass over the batch headers of each partition: log start and end offsets, "
                    "high watermark, last stable offset, segments, bytes, records, the batch-level "
                    "time range, codecs in use, the share of records in transactions, committed and "
                    "aborted transactions, and how many producer ids wrote. A damaged partition "
                    "is summed around the damage, which stderr names (exit 1). Nothing is written.",
        epilog="examples:\n"
               "  kafkalog stats /var/lib/kafka/data\n"
               "  kafkalog stats /var/lib/kafka/data/orders-0 --json | jq '.partitions[0].records'\n")
    _paths_arg(s)
    s.add_argument("--json", action="store_true",
                   help="one JSON document for machines instead of the table "
                        "(e.g. kafkalog stats DATA --json)")
    s.set_defaults(func=cmd_stats)

    c = sub.add_parser(
        "cat", formatter_class=formatter,
        help="records as kcat / kafka-console-consumer print them, across partitions",
        description="Prints records as a consumer with --isolation reads them, partition after "
                    "partition in offset order: JSON lines (topic, partition, offset, timestamp, "
                    "timestamp_type, key, value, headers), a JSON array, or CSV. A data dir's "
                    "internal __ topics are left out unless --topic names one, as a consumer's "
                    "subscription leaves them out.",
        epilog=RANGE_RULE + "\n\nexamples:\n"
               "  kafkalog cat /var/lib/kafka/data --topic orders --from -5\n"
               "  kafkalog cat /var/lib/kafka/data/orders-0 --from 100 --to 200 --value-decoder json\n"
               "  kafkalog cat data --topic orders --from-time 2025-01-31T00:00:00Z --format csv\n")
    _paths_arg(c)
    c.add_argument("--partition", type=int, metavar="N", help="only partition N (e.g. --partition 0)")
    g = c.add_mutually_exclusive_group()
    g.add_argument("--from", dest="from_offset", type=_offset, metavar="OFFSET",
                   help="first offset; negative counts back from the end (e.g. --from 100, --from -10)")
    g.add_argument("--from-time", type=_time_ms, metavar="T",
                   help="from the first record at or after T (e.g. --from-time 1735689600000)")
    g = c.add_mutually_exclusive_group()
    g.add_argument("--to", dest="to_offset", type=_offset, metavar="OFFSET",
                   help="offset to stop before; negative counts back from the end (e.g. --to 200)")
    g.add_argument("--to-time", type=_time_ms, metavar="T",
                   help="stop before the first record at or after T (e.g. --to-time 2025-02-01T00:00:00Z)")
    c.add_argument("--isolation", default="read_uncommitted",
                   choices=["read_uncommitted", "read_committed", "log_end"],
                   help="read_uncommitted (default): up to the high watermark; read_committed: up to "
                        "the last stable offset, aborted records left out; log_end: everything "
                        "(e.g. --isolation read_committed)")
    add_damage_options(c)
    c.add_argument("--format", default="jsonl", choices=["jsonl", "json", "csv"],
                   help="jsonl (default, one object a line), json (one array) or csv (a null key or value is an "
                        "empty field, an empty one \"\"; e.g. --format csv)")
    for which in ("key", "value"):
        c.add_argument(f"--{which}-decoder", default="utf8", choices=["utf8", "base64", "hex", "json"],
                       help=f"how to print the {which} bytes: utf8 (default; bad bytes become U+FFFD), "
                            f"base64, hex, or json (embedded as JSON) (e.g. --{which}-decoder hex)"
                            + ("; header values are printed as the values are, utf8 under json"
                               if which == "value" else ""))
    c.set_defaults(func=cmd_cat)

    e = sub.add_parser(
        "export", formatter_class=formatter,
        help="Parquet files with Spark's Kafka schema, topic=T/partition=P folders, incremental",
        description="Writes each partition's records as Parquet with Spark's Kafka source schema "
                    "(key, value, offset, timestamp, timestampType, headers; topic and partition are "
                    "the Hive-style folders topic=T/partition=P). The offsets reached are kept in "
                    f"OUT/{STATE_FILE}, so exporting the same data dir again appends only what is "
                    "new. Files are written under a temporary name and renamed when whole. A data "
                    "dir's internal __ topics are left out unless --topic names one.",
        epilog="examples:\n"
               "  kafkalog export /var/lib/kafka/data --to /tmp/kafka-parquet\n"
               "  kafkalog export /var/lib/kafka/data --topic orders --to out --isolation read_committed\n"
               "  python -c \"import pyarrow.dataset as d; print(d.dataset('out', partitioning='hive')"
               ".to_table().num_rows)\"\n")
    _paths_arg(e)
    e.add_argument("--to", required=True, metavar="OUT",
                   help="the folder to write (created if missing) (e.g. --to /tmp/kafka-parquet)")
    e.add_argument("--isolation", default="read_uncommitted",
                   choices=["read_uncommitted", "read_committed", "log_end"],
                   help="what to export, as for cat (default read_uncommitted: up to the high watermark)")
    e.add_argument("--on-data-loss", default="fail", choices=["fail", "warn"],
                   help="a partition whose offsets since the last export were deleted before "
                        "being exported, or that now ends below what was exported: fail "
                        "(default, as Spark's Kafka source's failOnDataLoss) or warn and go on")
    add_damage_options(e)
    e.set_defaults(func=cmd_export)
