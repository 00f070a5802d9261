"""Kafka log folders as PySpark DataFrames, without a broker.

``register(spark)`` adds the Python data source ``kafkalog``; its options are those of Spark's
own Kafka source (``subscribe``, ``startingOffsets``, ``kafka.isolation.level``, ...) plus
``path`` (a broker's data dir). ``spark.readStream.format("kafkalog")`` reads on in
micro-batches as Spark's Kafka source cuts them. ``read_logs(spark, folders, **options)`` builds
the batch DataFrame with ``mapInArrow``. Writing (``df.write.format("kafkalog")``) takes Spark's
Kafka sink columns. This module plans and parses options only: every Arrow batch is built in Rust.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Collection, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, cast

from . import _kafkalog
from ._kafkalog import KafkaLogError, OffsetOutOfRangeError
from ._kafkalog import Log
from .java_regex import JavaRegexError, compile_java
from .results import Compression, Isolation

try:  # pyspark is an extra: `pip install kafkalog[spark]`
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        DataSourceStreamReader,
        InputPartition,
        WriterCommitMessage,
    )
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )
except ImportError as e:  # pragma: no cover - exercised only without pyspark
    raise ImportError(
        "kafkalog.spark needs PySpark 4.0 or later: pip install 'kafkalog[spark]'"
    ) from e
try:  # Arrow batches to a streaming Python sink came with PySpark 4.1.
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover - PySpark 4.0
    DataSourceStreamArrowWriter = None  # type: ignore[assignment,misc]
try:  # Read limits and Trigger.AvailableNow for Python sources came with PySpark 4.2.
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        ReadMinRows,
        SupportsTriggerAvailableNow,
    )
    _STREAM_LIMITS = True
except ImportError:  # pragma: no cover - exercised only with PySpark 4.0 and 4.1
    _STREAM_LIMITS = False
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

__all__ = ["register", "read_logs", "kafka_schema", "KafkaLogDataSource", "READ_OPTIONS", "STREAM_OPTIONS", "WRITE_OPTIONS"]

EARLIEST = -2
LATEST = -1

#: Options of the read side (Spark's Kafka source names), lower-cased as Spark passes them.
READ_OPTIONS = {
    "path": "a Kafka data dir (folders <topic>-<partition>) or a partition folder; several comma-separated",
    "paths": "(set by Spark for load([...]))",
    "subscribe": "comma-separated topics",
    "subscribepattern": "a Java regex found in topic names (as Spark matches it)",
    "assign": 'JSON {"topic":[partitions]}',
    "startingoffsets": 'earliest (default) or JSON {"topic":{"0":offset}} with -2 for earliest',
    "endingoffsets": 'latest (default) or JSON {"topic":{"0":offset}} with -1 for latest',
    "startingtimestamp": "ms since the epoch, for every partition",
    "endingtimestamp": "ms since the epoch, for every partition",
    "startingoffsetsbytimestamp": 'JSON {"topic":{"0":ts}}',
    "endingoffsetsbytimestamp": 'JSON {"topic":{"0":ts}}',
    "startingoffsetsbytimestampstrategy": "error (default) or latest: when no offset has the timestamp",
    "includeheaders": "true/false (default false)",
    "kafka.isolation.level": "read_uncommitted (default) or read_committed",
    "failondataloss": "true (default) fails when a requested offset is gone; false skips",
    "minpartitions": "at least this many Spark partitions",
    "maxrecordsperpartition": "split partitions into ranges of at most this many offsets",
    "startingoffsetsfromgroup": "a consumer group of the data dir: start at its committed offsets "
    "(partitions it has none for start at startingOffsets)",
    "committogroup": "a kafkalog consumer group: each read partition's end offset is committed to it "
    "once the tasks reading it finished",
}

#: Options of a stream read (``spark.readStream``): the read options but the ending ones (a stream
#: reads on) and the group ones (a stream keeps its offsets in its checkpoint), with Spark's Kafka
#: source's limits per micro-batch.
STREAM_OPTIONS = {
    **{k: v for k, v in READ_OPTIONS.items()
       if not k.startswith("ending") and k not in ("startingoffsetsfromgroup", "committogroup")},
    "startingoffsets": 'latest (default for a stream), earliest, or JSON {"topic":{"0":offset}} with '
    "-2 for earliest, -1 for latest",
    "maxoffsetspertrigger": "at most this many offsets per micro-batch, shared by the partitions in "
    "proportion to their backlog",
    "minoffsetspertrigger": "wait for this many new offsets before a micro-batch, at most maxTriggerDelay",
    "maxtriggerdelay": "the longest wait for minOffsetsPerTrigger (default 15m)",
}
# Spark's Kafka source refuses endingOffsets and endingOffsetsByTimestamp in a stream, and
# ignores endingTimestamp.
_IGNORED_STREAM_OPTIONS = {"endingtimestamp": "streaming queries read on: Spark ignores it in them too"}
_BATCH_ONLY_OPTIONS = {
    "startingoffsetsfromgroup": "a stream keeps its offsets in its checkpointLocation",
    "committogroup": "a stream keeps its offsets in its checkpointLocation",
}

#: Option names as Spark's documentation spells them, for messages (Spark passes them lower-cased).
_SPELLING = {n.lower(): n for n in (
    "subscribePattern", "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "includeHeaders", "failOnDataLoss", "minPartitions", "maxRecordsPerPartition",
    "startingOffsetsFromGroup", "commitToGroup", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
    "maxTriggerDelay", "stagingDir")}


def _spelt(name: str) -> str:
    return _SPELLING.get(name, name)


#: Readers of a broker's own committed offsets (``__consumer_offsets``), tried for
#: ``startingOffsetsFromGroup`` after kafkalog's groups: callables ``(data_dir, group_id)`` returning
#: ``{(topic, partition): offset}``, or None when the group is not theirs.
GROUP_OFFSET_READERS: List[Callable[[str, str], Optional[Dict[Tuple[str, int], int]]]] = []


def group_offsets(data_dir: str, group_id: str) -> Dict[Tuple[str, int], int]:
    """The committed offsets of ``group_id``: a kafkalog group of ``data_dir``, else a group one of
    ``GROUP_OFFSET_READERS`` knows."""
    if _kafkalog.group_exists(data_dir, group_id):
        return {tp: v[0] for tp, v in _kafkalog.group_committed(data_dir, group_id).items()}
    for reader in GROUP_OFFSET_READERS:
        found = reader(data_dir, group_id)
        if found is not None:
            return dict(found)
    raise KafkaLogOptionError(
        f"startingOffsetsFromGroup: '{group_id}' is not a kafkalog group of {data_dir}, nor a group "
        "with offsets in its __consumer_offsets partitions"
    )


def _broker_group_offsets(data_dir: str, group_id: str) -> Optional[Dict[Tuple[str, int], int]]:
    """A broker's group, as its ``__consumer_offsets`` partitions in ``data_dir`` record it."""
    if not any(name.startswith("__consumer_offsets-") for name in os.listdir(data_dir)):
        return None
    found = _kafkalog.broker_committed_offsets(data_dir, group_id).get(group_id)
    return {tp: o["offset"] for tp, o in found.items()} if found else None


GROUP_OFFSET_READERS.append(_broker_group_offsets)

#: Options of the write side.
WRITE_OPTIONS = {
    "path": "the Kafka data dir to write topics into",
    "topic": "the topic of every row (overrides a topic column)",
    "kafka.compression.type": "none (default), gzip, snappy, lz4 or zstd",
    "kafka.batch.size": "bytes of records per Kafka batch before it is closed",
    "partitions": "partition count of a topic the write creates (default 1)",
    "stagingdir": "where tasks stage batches before the commit (default: beside the data dir)",
}

# Options of Spark's Kafka source that change nothing a batch read of files returns: Spark's own
# source ignores the stream-only ones in a batch query too, and the rest tune its consumer. They
# are accepted with a warning, so a job moves over by changing the format and adding `path`.
_IGNORED_OPTIONS = {
    "topic": "a write option: Spark's Kafka source ignores it on a read too",
    "maxoffsetspertrigger": "streaming only: Spark ignores it in batch queries too",
    "minoffsetspertrigger": "streaming only: Spark ignores it in batch queries too",
    "maxtriggerdelay": "streaming only: Spark ignores it in batch queries too",
    "groupidprefix": "no consumer group is joined to read files",
    "kafkaconsumer.polltimeoutms": "there is no consumer to poll",
    "fetchoffset.numretries": "offsets come from the files, not a broker",
    "fetchoffset.retryintervalms": "offsets come from the files, not a broker",
}
# Client configs (`kafka.*`) Spark's own source (validateGeneralOptions) and sink
# (kafkaParamsForProducer) refuse, with their reasons; every other `kafka.*` config but those
# kafkalog uses only configures a client, and is ignored with a warning.
_REFUSED_READ_CONFIGS = {
    "kafka.auto.offset.reset": "set startingOffsets to earliest or a JSON of offsets instead",
    "kafka.key.deserializer": "keys are bytes (as ByteArrayDeserializer gives them); deserialize with DataFrame operations",
    "kafka.value.deserializer": "values are bytes (as ByteArrayDeserializer gives them); deserialize with DataFrame operations",
    "kafka.enable.auto.commit": "commit with commitToGroup instead",
    "kafka.interceptor.classes": "interceptors could change the records",
}
_REFUSED_WRITE_CONFIGS = {
    "kafka.key.serializer": "keys are written as the bytes (or strings) of the key column",
    "kafka.value.serializer": "values are written as the bytes (or strings) of the value column",
}

_INTERNAL_TOPICS = {"__consumer_offsets", "__transaction_state", "__share_group_state", "__cluster_metadata"}


class KafkaLogOptionError(KafkaLogError, ValueError):
    """An option kafkalog's Spark source does not take, or a value it cannot use."""


def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise KafkaLogOptionError(f"option {_spelt(name)} must be true or false, not {raw!r}")
    return value == "true"


def _int(options: Mapping[str, str], name: str) -> Optional[int]:
    raw = options.get(name)
    if raw is None:
        return None
    try:
        return int(str(raw).strip())
    except ValueError:
        raise KafkaLogOptionError(f"option {_spelt(name)} must be an integer, not {raw!r}") from None


def _json(options: Mapping[str, str], name: str) -> Any:
    try:
        return json.loads(options[name])
    except json.JSONDecodeError as e:
        raise KafkaLogOptionError(f"option {_spelt(name)} is not valid JSON: {e}") from None


def _is_json_int(v: Any) -> bool:
    """A JSON number with an integer value, as Spark's source reads offsets and partitions (json4s
    into Long/Int, which takes 1.0 too): not a string, a boolean or a fraction."""
    if isinstance(v, float):
        return v.is_integer()
    return isinstance(v, int) and not isinstance(v, bool)


def _is_partition_key(p: str) -> bool:
    return re.fullmatch(r"-?\d+", p) is not None


def _lower(options: Mapping[str, Any]) -> Dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _path_required(options: Mapping[str, str], what: str) -> KafkaLogOptionError:
    hint = (" (kafkalog reads and writes the broker's files: kafka.bootstrap.servers is not used)"
            if "kafka.bootstrap.servers" in options else "")
    return KafkaLogOptionError(f"option path is required: {what}{hint}")


def _check_names(options: Mapping[str, str], allowed: Mapping[str, str], warn: bool = True,
                 refused: Mapping[str, str] = _REFUSED_READ_CONFIGS) -> None:
    """Refuses unknown options (a misspelt one would otherwise change the read silently) and the
    client configs Spark refuses (`refused`: a read's or a write's); warns once about those that
    change nothing here."""
    ignored = []
    for name in options:
        if name in allowed:
            continue
        if name in refused:
            raise KafkaLogOptionError(f"option {name} is not supported: {refused[name]}")
        if name in _IGNORED_OPTIONS:
            ignored.append(f"{name} ({_IGNORED_OPTIONS[name]})")
        elif name.startswith("kafka."):
            ignored.append(name)
        else:
            valid = ", ".join(sorted(map(_spelt, allowed)))
            raise KafkaLogOptionError(f"unknown option {name!r}; kafkalog takes: {valid}")
    if ignored and warn:
        warnings.warn("kafkalog reads files, with no broker or consumer: ignored " + ", ".join(ignored),
                      stacklevel=3)


def _paths(options: Mapping[str, str]) -> List[str]:
    paths: List[str] = []
    if "paths" in options:
        raw = options["paths"]
        # Spark sets it to a JSON list for load([...]); given by hand, it reads as `path` does.
        try:
            listed = json.loads(raw)
        except json.JSONDecodeError:
            listed = raw.split(",")
        if not isinstance(listed, list):
            listed = [listed]
        paths.extend(str(p).strip() for p in listed if str(p).strip())
    if "path" in options:
        paths.extend(p.strip() for p in options["path"].split(",") if p.strip())
    if not paths:
        raise _path_required(options, "a Kafka data dir or partition folder")
    return paths


@dataclass(frozen=True)
class TopicPartitionFolder:
    topic: str
    partition: int
    path: str
    named: bool = False  # the path named this partition folder itself, not a data dir holding it


def discover(paths: Sequence[str]) -> List[TopicPartitionFolder]:
    """The partition folders under each path (a data dir, or a partition folder itself)."""
    found: Dict[Tuple[str, int], TopicPartitionFolder] = {}
    for raw in paths:
        path = os.path.abspath(os.path.expanduser(raw))
        if not os.path.exists(path):
            raise FileNotFoundError(f"{raw}: no such file or directory")
        if not os.path.isdir(path):
            raise KafkaLogOptionError(f"{raw} is a file; path takes a Kafka data dir or partition folder")
        folders = _kafkalog.partition_folders(path)
        if folders:
            for topic, partition, folder in folders:
                found[(topic, partition)] = TopicPartitionFolder(topic, partition, str(folder))
            continue
        name = os.path.basename(path.rstrip(os.sep))
        match = re.fullmatch(r"(.+)-(\d+)", name)
        if match and any(f.endswith(".log") for f in os.listdir(path)):
            key = (match.group(1), int(match.group(2)))
            found[key] = TopicPartitionFolder(key[0], key[1], path, named=True)
            continue
        raise KafkaLogOptionError(
            f"{raw} is neither a Kafka data dir (no <topic>-<partition> folders in it) nor a "
            "partition folder (no .log segments)"
        )
    return sorted(found.values(), key=lambda f: (f.topic, f.partition))


def _subscribe_pattern(options: Mapping[str, str]) -> str:
    """subscribePattern as Spark's Kafka source compiles it: trimmed."""
    return options["subscribepattern"].strip()


def _strategy(options: Mapping[str, str], required: bool) -> Optional[str]:
    """The option choosing topics (subscribe, subscribePattern or assign), its value checked."""
    strategies = [s for s in ("subscribe", "subscribepattern", "assign") if s in options]
    if len(strategies) > 1:
        raise KafkaLogOptionError(f"give exactly one of subscribe, subscribePattern, assign; got {strategies}")
    if not strategies:
        if required:
            raise KafkaLogOptionError("give one of the options subscribe, subscribePattern or assign")
        return None
    strategy = strategies[0]
    if strategy == "subscribe" and not options["subscribe"].replace(",", "").strip():
        raise KafkaLogOptionError("option subscribe lists no topic")
    if strategy == "subscribepattern":
        if not _subscribe_pattern(options):
            # An empty pattern would match every topic; Spark's source refuses it.
            raise KafkaLogOptionError(
                "Pattern to subscribe is empty as specified value for option 'subscribePattern' is "
                f"'{options['subscribepattern']}'")
        try:
            compile_java(_subscribe_pattern(options))
        except JavaRegexError as e:
            raise KafkaLogOptionError(f"option subscribePattern is not a valid Java pattern: {e}") from None
    if strategy == "assign":
        assigned = _json(options, "assign")
        if not isinstance(assigned, dict) or not all(
                isinstance(v, list) and all(_is_json_int(p) for p in v) for v in assigned.values()):
            raise KafkaLogOptionError('option assign must be JSON like {"topicA":[0,1],"topicB":[2,4]}')
    return strategy


def _refuse_metadata_log(topics: Collection[str]) -> None:
    if "__cluster_metadata" in topics:
        # Spark's Kafka source fails on it (UnknownTopicOrPartitionException): no consumer reads it.
        raise KafkaLogOptionError("__cluster_metadata is KRaft's metadata log, not a topic a consumer reads "
                                  "(Spark's Kafka source fails on it too); see its records with kafkalog dump")


def _known_partitions(folders: List[TopicPartitionFolder]) -> Dict[str, Set[int]]:
    """The partitions each topic of ``folders`` has, as far as the path tells: 0 up to the highest
    folder's number (a topic's partitions are 0..N-1), and those a KRaft data dir's metadata log
    lists. Topics whose partition folders were named one by one count as asked: only those."""
    found: Dict[str, Set[int]] = {}
    for f in folders:
        found.setdefault(f.topic, set()).add(f.partition)
    chosen = {f.topic for f in folders if f.named}
    known = {t: (set(ps) if t in chosen else set(range(max(ps) + 1))) for t, ps in found.items()}
    for data_dir in sorted({os.path.dirname(f.path) for f in folders if not f.named}):
        try:
            listed_by_topic = _kafkalog.metadata_topic_partitions(data_dir) or {}
        except KafkaLogError as e:
            # A check on top of the read: a metadata log it cannot read does not stop the read.
            warnings.warn(f"{data_dir}: its __cluster_metadata log could not be read ({e}); partitions "
                          "are checked by their numbers only", stacklevel=4)
            listed_by_topic = {}
        for topic, listed in listed_by_topic.items():
            if topic in known and topic not in chosen:
                known[topic].update(listed)
    return known


def _refuse_missing(missing: Dict[str, List[int]], options: Mapping[str, str], what: str) -> None:
    """Partitions the path should hold and does not: another log dir of a JBOD broker, or another
    broker, holds them, and reading on would leave their records out unsaid."""
    if not missing:
        return
    gaps = "; ".join(f"{t}: partitions {m} are missing" for t, m in sorted(missing.items()))
    message = (f"the path holds only some partitions of {what} ({gaps}); a broker with "
               "several log.dirs spreads partitions over them, a cluster over its brokers: pass every "
               "dir that holds them, comma-separated (path=/data/d1,/data/d2)")
    if _bool(options, "failondataloss", True):
        raise KafkaLogOptionError(message + ", or set failOnDataLoss=false to read the partitions found")
    warnings.warn(message + "; failOnDataLoss=false: reading the partitions found", stacklevel=4)


def _whole_topics(folders: List[TopicPartitionFolder], options: Mapping[str, str]) -> List[TopicPartitionFolder]:
    """The folders of subscribed topics, refused when partitions of a topic are not under the path
    (see ``_known_partitions``)."""
    known = _known_partitions(folders)
    have: Dict[str, Set[int]] = {}
    for f in folders:
        have.setdefault(f.topic, set()).add(f.partition)
    _refuse_missing({t: sorted(known[t] - ps) for t, ps in have.items() if known[t] - ps}, options,
                    "a subscribed topic")
    return folders


def _warn_tiered(folders: List[TopicPartitionFolder]) -> None:
    """Spark's Kafka source reads a tiered topic's remote segments through the broker; the
    folders hold its local log only: said, not left unsaid."""
    tiered: Set[str] = set()
    for data_dir in sorted({os.path.dirname(f.path) for f in folders}):
        try:
            in_dir = _kafkalog.remote_storage_topics(data_dir)
        except KafkaLogError:
            continue  # configs unreadable: the read says what it can
        tiered |= {f.topic for f in folders if os.path.dirname(f.path) == data_dir and f.topic in in_dir}
    if tiered:
        warnings.warn(f"topics {sorted(tiered)} keep segments in tiered storage (remote.storage.enable=true): "
                      "only their local segments are read, from each partition's local log start (Kafka's "
                      "earliest-local offset); 'earliest' and offsets or timestamps before it are in remote "
                      "storage, which kafkalog does not reach", stacklevel=3)


def _select(folders: List[TopicPartitionFolder], options: Mapping[str, str], required: bool) -> List[TopicPartitionFolder]:
    strategy = _strategy(options, required)
    if strategy is None:
        return folders
    if strategy == "subscribe":
        topics = [t.strip() for t in options["subscribe"].split(",") if t.strip()]
        _refuse_metadata_log(topics)
        missing = sorted(set(topics) - {f.topic for f in folders})
        if missing:
            raise KafkaLogOptionError(f"topics {missing} have no partition folders under the path")
        return _whole_topics([f for f in folders if f.topic in topics], options)
    if strategy == "subscribepattern":
        pattern = compile_java(_subscribe_pattern(options))
        # As Spark's Kafka source picks topics (Regex.findFirstIn): the pattern anywhere in the name.
        return _whole_topics([f for f in folders if f.topic not in _INTERNAL_TOPICS and pattern.search(f.topic)],
                             options)
    assigned = _json(options, "assign")
    _refuse_metadata_log(assigned)
    wanted = {(t, int(p)) for t, ps in assigned.items() for p in ps}
    have = {(f.topic, f.partition): f for f in folders}
    missing_topics = sorted({t for t, _ in wanted} - {f.topic for f in folders})
    if missing_topics:
        raise KafkaLogOptionError(f"assigned topics {missing_topics} have no partition folders under the path")
    missing_partitions = sorted(wanted - set(have))
    # A partition the topic has (below its highest folder's number, or listed by the metadata log)
    # with no folder is data the path lacks, as for a subscribed topic.
    known = _known_partitions([f for f in folders if f.topic in assigned])
    lost: Dict[str, List[int]] = {}
    for t, p in missing_partitions:
        if p in known.get(t, set()):
            lost.setdefault(t, []).append(p)
    _refuse_missing(lost, options, "an assigned topic")
    beyond = [tp for tp in missing_partitions if tp[1] not in lost.get(tp[0], [])]
    if beyond:
        # As Spark's Kafka source: partitions a topic does not have are read as empty.
        warnings.warn(f"assigned partitions {beyond} have no folders under the path: nothing read "
                      "from them",
                      stacklevel=2)
    return [have[k] for k in sorted(wanted) if k in have]


class OffsetRange(InputPartition):
    """One Spark partition: offsets [start, end) of one Kafka partition folder (a piece of the
    partition's whole read range ``whole``, when it was split)."""

    def __init__(self, path: str, topic: str, partition: int, start: int, end: int,
                 whole: Optional[Tuple[int, int]] = None) -> None:
        super().__init__((topic, partition, start, end))
        self.path, self.topic, self.partition, self.start, self.end = path, topic, partition, start, end
        self.whole = whole if whole is not None else (start, end)

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def _per_partition(options: Mapping[str, str], name: str, folders: List[TopicPartitionFolder]) -> Dict[Tuple[str, int], int]:
    spec = _json(options, name)
    if not isinstance(spec, dict) or not all(
            isinstance(v, dict) and all(_is_partition_key(p) and _is_json_int(o) for p, o in v.items())
            for v in spec.values()):
        raise KafkaLogOptionError(f'option {_spelt(name)} must be JSON like {{"topicA":{{"0":23,"1":-2}}}}')
    out = {(t, int(p)): int(v) for t, parts in spec.items() for p, v in parts.items()}
    selected = {(f.topic, f.partition) for f in folders}
    if set(out) != selected:
        raise KafkaLogOptionError(
            f"If {_spelt(name)} contains specific offsets, you must specify all TopicPartitions.\n"
            f"Specified: {sorted(out)} Assigned: {sorted(selected)}"
        )
    return out


class _Limits:
    """What the starting or ending options ask for, before they meet the logs."""

    def __init__(self, options: Mapping[str, str], folders: List[TopicPartitionFolder], starting: bool,
                 stream: bool = False) -> None:
        side = "starting" if starting else "ending"
        self.starting = starting
        self.kind: str
        self.value: Any = None
        if f"{side}timestamp" in options:
            self.kind, self.value = "timestamp", _int(options, f"{side}timestamp")
        elif f"{side}offsetsbytimestamp" in options:
            self.kind = "timestamps"
            self.value = _per_partition(options, f"{side}offsetsbytimestamp", folders)
        elif f"{side}offsets" in options:
            raw = options[f"{side}offsets"].strip()
            if raw.lower() == "earliest":
                self.kind = "earliest"
            elif raw.lower() == "latest":
                self.kind = "latest"
            else:
                self.kind, self.value = "offsets", _per_partition(options, f"{side}offsets", folders)
                bad = {tp: o for tp, o in self.value.items() if o < EARLIEST}
                if bad:
                    raise KafkaLogOptionError(
                        f"option {side}Offsets: {bad} are not offsets (an offset is 0 or more, or -2 for "
                        "earliest, -1 for latest)")
        else:
            # A stream, as Spark's source, starts with what arrives after it started.
            self.kind = "earliest" if starting and not stream else "latest"
        if stream:
            return
        # Spark's batch rules: a batch cannot start at latest or end at earliest.
        # Spark's wording, which names the first partition of a JSON that asks for it.
        refused, side_name, wording = ((LATEST, "startingOffsets", "latest") if starting
                                       else (EARLIEST, "endingOffsets", "earliest"))
        if self.kind == wording:
            raise KafkaLogOptionError(f"{'starting' if starting else 'ending'} offset can't be {wording} "
                                      "for batch queries on Kafka")
        if self.kind == "offsets":
            for (topic, partition), offset in sorted(self.value.items()):
                if offset == refused:
                    raise KafkaLogOptionError(f"{side_name} for {topic}-{partition} can't be {wording} "
                                              "for batch queries on Kafka")


def _resolve(limits: _Limits, log: Log, tp: Tuple[str, int], isolation: Isolation, strategy: str) -> int:
    earliest, latest = log.log_start_offset, log.latest_offset(isolation)
    if limits.kind == "earliest":
        return earliest
    if limits.kind == "latest":
        return latest
    if limits.kind == "offsets":
        offset = limits.value[tp]
        return earliest if offset == EARLIEST else latest if offset == LATEST else offset
    timestamp = limits.value if limits.kind == "timestamp" else limits.value[tp]
    # As the source's consumer asks ListOffsets: with its isolation level, so a record past the
    # last fetchable offset is not found.
    try:
        found = log.offset_for_timestamp(timestamp, isolation)
    except _kafkalog.InvalidArgumentError:
        if timestamp >= 0:
            raise
        found = None  # a negative timestamp Kafka gives no meaning: no record has it, as Spark finds
    # Offset -1 is Kafka's "none" (LATEST_TIERED and EARLIEST_PENDING_UPLOAD on local logs).
    if found is not None and found.offset >= 0:
        return found.offset
    if limits.starting and strategy == "error":
        raise KafkaLogOptionError(
            f"No offset matched from request of topic-partition {tp[0]}-{tp[1]} and timestamp "
            f"{timestamp}. (set startingOffsetsByTimestampStrategy=latest to start at the latest offset)"
        )
    return latest


def _split(ranges: List[OffsetRange], max_records: Optional[int], min_partitions: Optional[int]) -> List[OffsetRange]:
    """Kafka's offset ranges cut as Spark's KafkaOffsetRangeCalculator cuts them: each range over
    maxRecordsPerPartition into ceil(size / max) pieces; then, while minPartitions is more than
    the non-empty ranges, the ranges that would get more than one piece (Java's Math.round of
    their share of minPartitions) share what the others leave of it. Pieces are as Spark's: the
    later ones take the remainder. Empty ranges stay, as one piece (Spark drops them; here they
    still carry a partition's end to commitToGroup)."""

    def divide(r: OffsetRange, parts: int) -> List[OffsetRange]:
        out, start, remaining = [], r.start, r.size
        for part in range(parts):
            this = remaining // (parts - part)
            remaining -= this
            if this:
                out.append(OffsetRange(r.path, r.topic, r.partition, start, start + this, r.whole))
            start += this
        return out or [r]

    def part_count(size: int, total: int, parts: int) -> int:
        return max(math.floor(size / total * parts + 0.5), 1)  # Java's Math.round

    if max_records is not None:
        if max_records < 1:
            raise KafkaLogOptionError("maxRecordsPerPartition must be positive")
        ranges = [piece for r in ranges for piece in divide(r, -(-r.size // max_records) or 1)]
    if min_partitions is not None:
        if min_partitions < 1:
            raise KafkaLogOptionError("minPartitions must be positive")
        filled = [r for r in ranges if r.size > 0]
        total = sum(r.size for r in filled)
        if min_partitions > len(filled):
            unsplit = [r for r in filled if part_count(r.size, total, min_partitions) == 1]
            unsplit_partitions = {(r.topic, r.partition) for r in unsplit}
            split_total = total - sum(r.size for r in unsplit)
            split_min = max(min_partitions - len(unsplit), 1)
            ranges = [
                piece
                for r in ranges
                for piece in ([r] if r.size == 0 or (r.topic, r.partition) in unsplit_partitions
                              else divide(r, part_count(r.size, split_total, split_min)))
            ]
    return ranges


def _batch_ranges(ranges: List[OffsetRange], max_records: Optional[int],
                  min_partitions: Optional[int]) -> Tuple[List[OffsetRange], bool]:
    """A batch read's ranges as Spark's batch source plans them (KafkaOffsetReader's
    getOffsetRangesFromUnresolvedOffsets), and whether they were divided: one range per
    topic-partition, an empty one included, unless minPartitions is more than the
    topic-partitions read; then `_split` divides them and the empty ones are no partitions.
    maxRecordsPerPartition divides them too, as Spark documents it (Spark 4.2.0's batch source
    applies it only where minPartitions divides)."""
    if min_partitions is not None and min_partitions < 1:
        raise KafkaLogOptionError("minPartitions must be positive")
    if max_records is None and (min_partitions is None or min_partitions <= len(ranges)):
        return ranges, False
    return _split(ranges, max_records, min_partitions), True


@dataclass
class GroupCommit:
    """Where a read commits its end offsets: a kafkalog group of a data dir, per read."""

    data_dir: str
    group_id: str
    read_id: str


@dataclass
class ReadPlan:
    ranges: List[OffsetRange]
    isolation: Isolation
    include_headers: bool
    commit: Optional[GroupCommit] = None
    fail_on_data_loss: bool = True
    # Divided by minPartitions or maxRecordsPerPartition: empty ranges are then no partitions.
    divided: bool = True


def _group_data_dir(opts: Mapping[str, str], found: List[TopicPartitionFolder], folders: Optional[Sequence[str]]) -> str:
    """The data dir a group belongs to: the path option's data dir (a partition folder's parent)."""
    candidates = list(folders) if folders is not None else _paths(opts)
    dirs = set()
    for raw in candidates:
        path = os.path.abspath(os.path.expanduser(str(raw)))
        dirs.add(os.path.dirname(path.rstrip(os.sep)) if _is_partition_folder(path) else path)
    if len(dirs) != 1:
        raise KafkaLogOptionError(
            "startingOffsetsFromGroup and commitToGroup need one data dir (the group's); "
            f"path names {len(dirs)}"
        )
    return dirs.pop()


def _read_settings(opts: Mapping[str, str]) -> Tuple[Isolation, bool, bool, str]:
    """Isolation level, includeHeaders, failOnDataLoss and the timestamp strategy."""
    # Kafka's ConfigDef trims the value and matches it exactly (READ_COMMITTED is refused).
    isolation = opts.get("kafka.isolation.level", "read_uncommitted").strip()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise KafkaLogOptionError(f"kafka.isolation.level must be read_uncommitted or read_committed, not {isolation!r}")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise KafkaLogOptionError(f"startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}")
    level: Isolation = "read_committed" if isolation == "read_committed" else "read_uncommitted"
    return level, _bool(opts, "includeheaders", False), _bool(opts, "failondataloss", True), strategy


def plan_read(options: Mapping[str, Any], folders: Optional[Sequence[str]] = None) -> ReadPlan:
    """Options of Spark's Kafka source into offset ranges over partition folders."""
    opts = _lower(options)
    _check_names(opts, READ_OPTIONS)
    if folders is not None:
        found = discover(folders)
        found = _select(found, opts, required=False)
    else:
        found = _select(discover(_paths(opts)), opts, required=True)
    _warn_tiered(found)
    isolation, include_headers, fail_on_data_loss, strategy = _read_settings(opts)
    starting, ending = _Limits(opts, found, True), _Limits(opts, found, False)
    from_group: Dict[Tuple[str, int], int] = {}
    commit: Optional[GroupCommit] = None
    if "startingoffsetsfromgroup" in opts or "committogroup" in opts:
        data_dir = _group_data_dir(opts, found, folders)
        if "startingoffsetsfromgroup" in opts:
            group_id = opts["startingoffsetsfromgroup"].strip()
            first_run = (opts.get("committogroup", "").strip() == group_id
                         and not _kafkalog.group_exists(data_dir, group_id))
            # A job that commits to the group it starts from: its first run starts at
            # startingOffsets, later runs where the previous one stopped.
            from_group = {} if first_run else group_offsets(data_dir, group_id)
        if "committogroup" in opts:
            group_id = opts["committogroup"].strip()
            _kafkalog.group_exists(data_dir, group_id)  # validates the id
            commit = GroupCommit(data_dir, group_id, uuid.uuid4().hex)
    ranges = []
    for f in found:
        log = Log(f.path)
        try:
            tp = (f.topic, f.partition)
            start = from_group[tp] if tp in from_group else _resolve(starting, log, tp, isolation, strategy)
            end = _resolve(ending, log, tp, isolation, strategy)
            earliest, latest = log.log_start_offset, log.latest_offset(isolation)
        finally:
            log.close()
        # As Spark's KafkaSourceRDD: the offsets asked for must be in order; lost ones are then
        # stepped over at read time (failOnDataLoss=false), which may leave nothing to read.
        if start > end:
            raise KafkaLogOptionError(
                f"Beginning offset {start} is after the ending offset {end} for topic {f.topic} partition "
                f"{f.partition}. You either provided an invalid fromOffset, or the Kafka topic has been damaged"
            )
        if start < earliest:
            if fail_on_data_loss:
                raise KafkaLogOptionError(
                    f"Cannot fetch offset {start} of {f.topic}-{f.partition}: the log starts at {earliest}. "
                    "Some data may have been lost because it is not in the log any more (retention or "
                    'deleteRecords). Set the source option "failOnDataLoss" to "false" to read from the log start.'
                )
            start = earliest
            end = max(end, start)  # a range wholly below the log start: nothing left of it
        if end > latest:
            if fail_on_data_loss:
                raise KafkaLogOptionError(
                    f"Ending offset {end} of {f.topic}-{f.partition} is past the latest offset {latest} "
                    f"({isolation}). Set failOnDataLoss=false to stop at the latest offset."
                )
            end = latest
            start = min(start, end)  # a range wholly past the latest offset: nothing to read yet
        ranges.append(OffsetRange(f.path, f.topic, f.partition, start, end))
    if commit is not None:
        # Nothing to read in a partition: its offset is committed as it is, now.
        empty = [(r.topic, r.partition, r.start, "") for r in ranges if r.size == 0]
        if empty:
            _kafkalog.group_commit(commit.data_dir, commit.group_id, empty)
    ranges, divided = _batch_ranges(ranges, _int(opts, "maxrecordsperpartition"), _int(opts, "minpartitions"))
    return ReadPlan(ranges, isolation, include_headers, commit, fail_on_data_loss, divided)


def read_range(r: OffsetRange, isolation: Isolation, include_headers: bool, fail_on_data_loss: bool = True) -> Iterator[Any]:
    """Arrow batches of one offset range, built in Rust. Offsets planned but gone by the time the
    task reads (retention or deleteRecords moved the log start, or the log was cut) fail the task,
    or with ``failOnDataLoss=false`` are stepped over, as Spark's Kafka source does."""
    if r.size == 0:
        return
    with Log(r.path) as log:
        earliest, latest = log.log_start_offset, log.latest_offset(isolation)  # type: ignore[arg-type]
        start, end = max(r.start, earliest), min(r.end, latest)
        if (start, end) != (r.start, r.end) and fail_on_data_loss:
            raise OffsetOutOfRangeError(
                f"Cannot fetch offsets [{r.start}, {r.end}) of {r.topic}-{r.partition}: the log now holds "
                f"[{earliest}, {latest}) ({isolation}). Some data may have been lost because they are not "
                "in the log any more; either the data was aged out (retention, deleteRecords) or the "
                "partition was cut after the query was planned. If you don't want your query to fail on "
                'such cases, set the source option "failOnDataLoss" to "false".'
            )
        if start < end:
            # threads=1: Spark runs a task per core already.
            yield from log.to_arrow(start=start, end=end, isolation=isolation,  # type: ignore[arg-type]
                                    include_headers=include_headers, threads=1)


class KafkaLogReader(DataSourceReader):
    def __init__(self, plan: ReadPlan) -> None:
        self.plan = plan

    def partitions(self) -> Sequence[InputPartition]:
        # Spark's batch source reads every topic-partition in a partition of its own, an empty one
        # too, unless it divided them. (PySpark makes one partition of none.)
        ranges = [r for r in self.plan.ranges if r.size > 0 or not self.plan.divided]
        return ranges or [OffsetRange("", "", 0, 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[Any]:  # type: ignore[override]
        assert isinstance(partition, OffsetRange)
        yield from read_range(partition, self.plan.isolation, self.plan.include_headers, self.plan.fail_on_data_loss)
        c = self.plan.commit
        if c is not None and partition.size > 0:
            # Every row of the piece went to Spark: the group's offset moves past the pieces of
            # this partition read contiguously from its start (in Rust, under the group's lock).
            _kafkalog.group_read_done(
                c.data_dir, c.group_id, c.read_id, partition.topic, partition.partition,
                partition.whole, (partition.start, partition.end),
            )


#: Spark's ``timeStringAsMs`` units, in milliseconds (a bare number is milliseconds).
_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}

Offsets = Dict[Tuple[str, int], int]


def _positive(options: Mapping[str, str], name: str, least: int = 1) -> Optional[int]:
    value = _int(options, name)
    if value is not None and value < least:
        raise KafkaLogOptionError(f"{_spelt(name)} must be {'positive' if least == 1 else f'at least {least}'}, "
                                  f"not {value}")
    return value


def _min_offsets(options: Mapping[str, str]) -> Optional[int]:
    """minOffsetsPerTrigger: 0 or less waits for nothing, as Spark's source runs with -1."""
    value = _int(options, "minoffsetspertrigger")
    return None if value is None else max(0, value)


def _check_trigger_limits(min_offsets: Optional[int], max_offsets: Optional[int]) -> None:
    if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
        raise KafkaLogOptionError(f"The value of minOffsetsPerTrigger({min_offsets}) is higher than the "
                                  f"maxOffsetsPerTrigger({max_offsets})")


def _check_options(opts: Mapping[str, str]) -> None:
    """What is wrong with the options for a batch and a stream alike, found as the DataFrame is
    defined (``load()``), as Spark's Kafka source finds it, not when a query first runs. (Which of
    the two it is shows only later, so the limits of a stream are checked as it starts.)"""
    _check_names(opts, {**READ_OPTIONS, **STREAM_OPTIONS}, warn=False)
    _paths(opts)
    _strategy(opts, required=True)
    _read_settings(opts)
    for name in ("minpartitions", "maxrecordsperpartition"):
        _positive(opts, name)
    # Spark's Kafka source checks this pair for a batch too; the other limits of a stream only
    # as it starts (KafkaLogStreamReader): a batch query ignores them, whatever their value.
    if "minoffsetspertrigger" in opts and "maxoffsetspertrigger" in opts:
        _check_trigger_limits(_int(opts, "minoffsetspertrigger"), _int(opts, "maxoffsetspertrigger"))


def _duration_ms(options: Mapping[str, str], name: str, default: str) -> int:
    raw = options.get(name, default).strip().lower()
    match = re.fullmatch(r"(\d+)\s*([a-z]*)", raw)
    if not match or (match.group(2) or "ms") not in _TIME_UNITS_MS:
        raise KafkaLogOptionError(f"option {_spelt(name)} must be a duration such as 15m, 30s or 500ms, not {raw!r}")
    return int(int(match.group(1)) * _TIME_UNITS_MS[match.group(2) or "ms"])


def _offsets_json(offsets: Offsets) -> Dict[str, Dict[str, int]]:
    """Offsets as Spark's Kafka source writes them to a query's offset log."""
    out: Dict[str, Dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def _offsets_of(spec: Optional[Mapping[str, Mapping[str, Any]]]) -> Offsets:
    return {(t, int(p)): int(o) for t, parts in (spec or {}).items() for p, o in parts.items()}


def _rate_limit(limit: int, start: Offsets, new_start: Offsets, latest: Offsets) -> Offsets:
    """At most ``limit`` offsets past ``start`` (``new_start`` for partitions new to the stream),
    shared in proportion to each partition's backlog, as Spark's Kafka source shares
    maxOffsetsPerTrigger: a partition with a backlog gets at least one."""
    sizes = {}
    for tp, end in latest.items():
        begin = start.get(tp, new_start.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        if tp not in sizes:
            out[tp] = end
            continue
        prorate = limit * (sizes[tp] / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, start.get(tp, new_start.get(tp, 0)) + share)
    return out


class KafkaLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """``spark.readStream.format("kafkalog")``: micro-batches of what the partition folders gained
    since the last one, planned as Spark's Kafka source plans them: its offsets JSON in the
    query's checkpoint, maxOffsetsPerTrigger shared by backlog, minOffsetsPerTrigger with
    maxTriggerDelay, Trigger.AvailableNow, partitions that appear (read from their start) or go
    (data loss), and failOnDataLoss."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        opts = _lower(options)
        for name in opts:
            if name in ("endingoffsets", "endingoffsetsbytimestamp"):
                raise KafkaLogOptionError(f"option {_spelt(name)} is not valid in streaming queries: a stream reads on "
                                          "as records arrive (read a range with spark.read)")
            if name in _BATCH_ONLY_OPTIONS:
                raise KafkaLogOptionError(f"option {_spelt(name)} is for batch reads: {_BATCH_ONLY_OPTIONS[name]}")
        for name in _IGNORED_STREAM_OPTIONS.keys() & opts.keys():
            warnings.warn(f"ignored {name}: {_IGNORED_STREAM_OPTIONS[name]}", stacklevel=2)
        _check_names({k: v for k, v in opts.items() if k not in _IGNORED_STREAM_OPTIONS}, STREAM_OPTIONS)
        self.opts = opts
        self.paths = _paths(opts)
        self.isolation, self.include_headers, self.fail_on_data_loss, self.strategy = _read_settings(opts)
        self.max_offsets = _positive(opts, "maxoffsetspertrigger")
        self.min_offsets = _min_offsets(opts)
        self.max_trigger_delay_ms = _duration_ms(opts, "maxtriggerdelay", "15m")
        _check_trigger_limits(self.min_offsets, self.max_offsets)
        if (self.max_offsets or self.min_offsets) and not _STREAM_LIMITS:
            raise KafkaLogOptionError("maxOffsetsPerTrigger and minOffsetsPerTrigger need PySpark 4.2 or later")
        self.last_trigger_ms = 0  # as Spark's: the first micro-batch never waits for minOffsetsPerTrigger
        self.available_now = False
        self.available_now_latest: Optional[Offsets] = None
        self.latest: Offsets = {}
        _warn_tiered(list(self._folders().values()))  # a bad path or selection fails the query as it starts

    def _folders(self) -> Dict[Tuple[str, int], TopicPartitionFolder]:
        return {(f.topic, f.partition): f for f in _select(discover(self.paths), self.opts, required=True)}

    def _offsets_now(self, folders: Mapping[Tuple[str, int], TopicPartitionFolder]) -> Tuple[Offsets, Offsets]:
        """Each partition's log start and latest offset (for the isolation level)."""
        earliest, latest = {}, {}
        for tp, f in folders.items():
            with Log(f.path) as log:
                earliest[tp], latest[tp] = log.log_start_offset, log.latest_offset(self.isolation)  # type: ignore[arg-type]
        return earliest, latest

    def _data_loss(self, message: str) -> None:
        """Spark's reportDataLoss: fails the query, or with failOnDataLoss=false warns."""
        if self.fail_on_data_loss:
            raise OffsetOutOfRangeError(
                f"{message}. Some data may have been lost because they are not in the log any more; either "
                "the data was aged out (retention, deleteRecords) or the topic may have been deleted before "
                "all the data in it was processed. If you don't want your streaming query to fail on such "
                'cases, set the source option "failOnDataLoss" to "false".')
        warnings.warn(f"{message}. Some data may have been lost (failOnDataLoss is false: reading on)",
                      stacklevel=2)

    def initialOffset(self) -> dict:
        folders = list(self._folders().values())
        starting = _Limits(self.opts, folders, True, stream=True)
        offsets = {}
        for f in folders:
            with Log(f.path) as log:
                offsets[(f.topic, f.partition)] = _resolve(starting, log, (f.topic, f.partition),
                                                           self.isolation, self.strategy)
        return _offsets_json(offsets)

    def getDefaultReadLimit(self) -> Any:
        # PySpark takes one limit: with both options, minOffsetsPerTrigger is applied here
        # whenever the engine passes a limit other than ReadAllAvailable.
        if self.max_offsets is not None:
            return ReadMaxRows(self.max_offsets)
        if self.min_offsets is not None:
            return ReadMinRows(self.min_offsets)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = True

    def latestOffset(self, start: Optional[dict] = None, limit: Any = None) -> dict:
        begin = _offsets_of(start)
        folders = self._folders()
        earliest, latest = self._offsets_now(folders)
        if self.available_now:
            # What there was when the first micro-batch of Trigger.AvailableNow was planned.
            if self.available_now_latest is None:
                self.available_now_latest = latest
            latest = self.available_now_latest
        self.latest = latest
        if start is None or limit is None or isinstance(limit, ReadAllAvailable):
            return _offsets_json(latest)
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else self.min_offsets
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.max_offsets
        # As Spark's Kafka source, under Trigger.AvailableNow too: a backlog under the minimum
        # within maxTriggerDelay of the last micro-batch is left for a later run (the query ends).
        if min_rows is not None and self._delay(min_rows, begin, latest):
            return _offsets_json(begin)
        if max_rows is not None:
            return _offsets_json(_rate_limit(max_rows, begin, earliest, latest))
        return _offsets_json(latest)

    def _delay(self, min_rows: int, begin: Offsets, latest: Offsets) -> bool:
        """Whether to skip this trigger: fewer than ``min_rows`` new offsets and maxTriggerDelay not
        yet passed since the last micro-batch (Spark counts a new partition's from 0)."""
        now = int(time.time() * 1000)
        if now - self.last_trigger_ms < self.max_trigger_delay_ms and \
                sum(end - begin.get(tp, 0) for tp, end in latest.items()) < min_rows:
            return True
        self.last_trigger_ms = now
        return False

    def reportLatestOffset(self) -> Optional[dict]:
        return _offsets_json(self.latest) if self.latest else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, until = _offsets_of(start), _offsets_of(end)
        folders = {(f.topic, f.partition): f for f in discover(self.paths)}
        new = sorted(set(until) - set(begin))
        missing = [tp for tp in new if tp not in folders]
        if missing:
            self._data_loss(f"Cannot find earliest offsets of {missing}")
        vanished = sorted(tp for tp in set(until) & set(begin) if tp not in folders)
        if vanished:
            self._data_loss(f"{vanished} are gone")
        new_start, _ = self._offsets_now({tp: folders[tp] for tp in new if tp in folders})
        for tp, offset in new_start.items():
            if offset != 0:
                self._data_loss(f"Added partition {tp[0]}-{tp[1]} starts from {offset} instead of 0")
        gone = sorted(set(begin) - set(until))
        if gone:
            self._data_loss(f"{gone} are gone")
        ranges = []
        for tp, stop in sorted(until.items()):
            first = begin.get(tp, new_start.get(tp))
            if first is None or tp not in folders:
                continue
            if stop < first:
                self._data_loss(f"Partition {tp[0]}-{tp[1]}'s offset was changed from {first} to {stop}")
                continue
            ranges.append(OffsetRange(folders[tp].path, tp[0], tp[1], first, stop))
        ranges = _split(ranges, _int(self.opts, "maxrecordsperpartition"), _int(self.opts, "minpartitions"))
        return [r for r in ranges if r.size > 0]

    def read(self, partition: InputPartition) -> Iterator[Any]:  # type: ignore[override]
        assert isinstance(partition, OffsetRange)
        yield from read_range(partition, self.isolation, self.include_headers, self.fail_on_data_loss)

    def commit(self, end: dict) -> None:
        """Nothing to release: the files are read where they lie, and the query's checkpoint
        keeps its offsets."""


class _RefusedStreamReader(DataSourceStreamReader):  # type: ignore[misc]
    """A stream whose options were refused: the error is raised at the query's first call.
    PySpark's stream runner stops the reader in a `finally` around making it, so an error
    raised while making it reached the user as that block's `UnboundLocalError`."""

    def __init__(self, error: KafkaLogError) -> None:
        self.error = error

    def initialOffset(self) -> dict:
        raise self.error

    def latestOffset(self, start: Optional[dict] = None, limit: Any = None) -> dict:
        raise self.error

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        raise self.error

    def read(self, partition: InputPartition) -> Iterator[Any]:  # type: ignore[override]
        raise self.error

    def commit(self, end: dict) -> None:
        """Nothing was read."""

    def stop(self) -> None:
        """Nothing to release."""


@dataclass
class StagedCommit(WriterCommitMessage):
    staged: List[Tuple[str, int, str]]


class KafkaLogWriter(DataSourceArrowWriter):
    """Tasks stage Kafka batches (routed and compressed in Rust) next to the data dir; the driver's
    commit appends them to each log as its one writer, all or nothing; abort leaves logs as they were."""

    def __init__(self, options: Mapping[str, str], schema: Optional[StructType] = None,
                 make_staging: bool = True) -> None:
        opts = _lower(options)
        _check_names(opts, WRITE_OPTIONS, refused=_REFUSED_WRITE_CONFIGS)
        if "path" not in opts:
            raise _path_required(opts, "the Kafka data dir to write into")
        self.data_dir = os.path.abspath(os.path.expanduser(opts["path"]))
        if os.path.isfile(self.data_dir):
            raise KafkaLogOptionError(f"{opts['path']} is a file; path takes a Kafka data dir")
        self.topic = opts.get("topic")
        if self.topic is not None:
            _kafkalog.validate_topic_name(self.topic)
        if schema is not None:
            _check_sink_schema(schema, self.topic, self.data_dir)
        if os.path.isdir(self.data_dir) and _kafkalog.broker_dir_without_metadata(self.data_dir):
            warnings.warn(f"{self.data_dir} is a Kafka broker's log dir without its cluster metadata (a "
                          "ZooKeeper-mode broker's, or one of several log.dirs): rows are partitioned over "
                          "the partitions of this dir; if the broker's other log dirs hold more, keys go to "
                          "other partitions than Kafka's producer sends them to", stacklevel=2)
        compression = opts.get("kafka.compression.type", "none").strip().lower()
        if compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
            raise KafkaLogOptionError(f"kafka.compression.type {compression!r} (none, gzip, snappy, lz4, zstd)")
        self.compression = cast(Compression, compression)
        self.batch_bytes = _int(opts, "kafka.batch.size") or 512 * 1024
        if self.batch_bytes < 1:
            raise KafkaLogOptionError("kafka.batch.size must be positive")
        partitions = _int(opts, "partitions")
        self.partitions = 1 if partitions is None else partitions
        if self.partitions < 1:
            raise KafkaLogOptionError(f"partitions must be at least 1, not {self.partitions}")
        if _is_partition_folder(self.data_dir):
            raise KafkaLogOptionError(
                f"{opts['path']} is a partition folder; path takes the Kafka data dir that holds "
                "<topic>-<partition> folders (its parent), with the topic option or column"
            )
        parent, name = os.path.split(self.data_dir.rstrip(os.sep))
        # Outside the data dir: a broker refuses to start beside folders not named <topic>-<n>.
        root = opts.get("stagingdir") or os.path.join(parent, f".{name}.kafkalog-staging")
        self.staging = os.path.join(os.path.abspath(root), uuid.uuid4().hex)
        # Made here, on the driver, and removed by commit or abort: a task still running after
        # the job aborted finds it gone and fails instead of leaving its files behind.
        if make_staging:
            os.makedirs(self.staging)

    def write(self, iterator: Iterator[Any]) -> StagedCommit:
        return _stage_task(self, iterator)

    def commit(self, messages: List[Optional[WriterCommitMessage]]) -> None:  # type: ignore[override]
        try:
            _commit_staged(self, messages)
        finally:
            self._clean()

    def abort(self, messages: List[Optional[WriterCommitMessage]]) -> None:  # type: ignore[override]
        self._clean()

    def _clean(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        try:
            os.rmdir(os.path.dirname(self.staging))
        except OSError:
            pass  # other jobs' staging, or already gone


def _stage_task(writer: KafkaLogWriter, iterator: Iterator[Any]) -> StagedCommit:
    """A write task: its rows routed, built into Kafka batches and staged (in Rust)."""
    import pyarrow as pa
    from pyspark import TaskContext

    first = next(iterator, None)
    if first is None:
        return StagedCommit([])
    ctx = TaskContext.get()
    prefix = f"task{ctx.partitionId() if ctx else 0}-{uuid.uuid4().hex[:12]}"
    stream = pa.RecordBatchReader.from_batches(first.schema, _chain(first, iterator))
    staged = _kafkalog.stage_arrow(
        stream,
        writer.data_dir,
        writer.staging,
        prefix,
        topic=writer.topic,
        new_topic_partitions=writer.partitions,
        compression=writer.compression,
        batch_bytes=writer.batch_bytes,
    )
    return StagedCommit([(t, p, str(f)) for t, p, f in staged])


def _commit_staged(writer: KafkaLogWriter, messages: List[Optional[WriterCommitMessage]]) -> None:
    """The driver's commit: every task's staged batches appended, all or nothing."""
    staged = [s for m in messages if isinstance(m, StagedCommit) for s in m.staged]
    if staged:
        _kafkalog.commit_staged(writer.data_dir, staged, new_topic_partitions=writer.partitions)


if DataSourceStreamArrowWriter is not None:

    class KafkaLogStreamWriter(DataSourceStreamArrowWriter):  # type: ignore[misc,valid-type]
        """``df.writeStream.format("kafkalog")``: each micro-batch's tasks stage Kafka batches and
        the driver's commit appends them, all or nothing per micro-batch, with the options and
        rules of a batch write. At least once, as Spark's Kafka sink: a micro-batch Spark runs
        again after a failure (its commit not in the checkpoint yet) is appended again.

        The query stages in one folder named after its checkpoint, emptied and removed at each
        micro-batch's commit or abort. Spark commits once every task of the micro-batch ended,
        so what else is there then was left by a task of a failed micro-batch still running
        when it was aborted: a later commit of the query removes it."""

        def __init__(self, options: Mapping[str, str], schema: Optional[StructType] = None) -> None:
            # The query's checkpoint is Spark's (it keeps which micro-batches committed).
            checkpoint = next((v for k, v in options.items() if k.lower() == "checkpointlocation"), None)
            self.batch = KafkaLogWriter({k: v for k, v in options.items() if k.lower() != "checkpointlocation"},
                                        schema, make_staging=False)
            if checkpoint:
                query = hashlib.sha256(os.path.abspath(checkpoint).encode()).hexdigest()[:32]
                self.batch.staging = os.path.join(os.path.dirname(self.batch.staging), f"stream-{query}")

        def write(self, iterator: Iterator[Any]) -> StagedCommit:
            os.makedirs(self.batch.staging, exist_ok=True)
            return _stage_task(self.batch, iterator)

        def commit(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:  # type: ignore[override]
            try:
                _commit_staged(self.batch, messages)
            finally:
                self.batch._clean()

        def abort(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:  # type: ignore[override]
            self.batch._clean()


def _check_sink_schema(schema: StructType, topic: Optional[str], data_dir: str) -> None:
    """The sink's column checks on the driver, before any task runs (as Spark's Kafka sink checks
    them when the write is analysed, an empty DataFrame included), and whether a ``topic`` the
    write would create may be created in ``data_dir``; the tasks check each batch again."""
    try:
        from pyspark.sql.pandas.types import to_arrow_schema

        arrow_schema = to_arrow_schema(schema)
    except Exception:  # a column type Arrow cannot hold: the tasks' check names it
        return
    _kafkalog.check_sink_schema(arrow_schema, topic=topic, data_dir=data_dir)


def _is_partition_folder(path: str) -> bool:
    name = os.path.basename(path.rstrip(os.sep))
    return (
        os.path.isdir(path)
        and re.fullmatch(r".+-\d+", name) is not None
        and any(f.endswith(".log") for f in os.listdir(path))
    )


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


class KafkaLogDataSource(DataSource):
    """``spark.read.format("kafkalog")``, ``spark.readStream.format("kafkalog")``,
    ``df.write.format("kafkalog")`` and ``df.writeStream.format("kafkalog")``."""

    @classmethod
    def name(cls) -> str:
        return "kafkalog"

    def schema(self) -> StructType:
        opts = _lower(self.options)
        _check_options(opts)
        return kafka_schema(_bool(opts, "includeheaders", False))

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaLogReader(plan_read(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        try:
            return KafkaLogStreamReader(self.options)
        except KafkaLogError as e:
            return _RefusedStreamReader(e)

    def writer(self, schema: StructType, overwrite: bool) -> KafkaLogWriter:
        if overwrite:
            raise KafkaLogOptionError("Kafka logs are append-only: use mode('append')")
        return KafkaLogWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        if DataSourceStreamArrowWriter is None:
            raise KafkaLogOptionError("writeStream.format('kafkalog') needs PySpark 4.1 or later")
        if overwrite:
            raise KafkaLogOptionError("Kafka logs are append-only: use outputMode('append')")
        return KafkaLogStreamWriter(self.options, schema)


_IMPORTS_KAFKALOG: Dict[str, bool] = {}


def _python_for_workers(spark: Any) -> Optional[str]:
    """The interpreter kafkalog's Spark functions run in when the one Spark starts its Python
    workers with (``PYSPARK_PYTHON``, else ``python3``) cannot import kafkalog and pyarrow (the
    workers hand Arrow batches), as when a venv's python runs a script without the venv
    activated, or another python finds kafkalog through PYTHONPATH but has no pyarrow; None when
    Spark's choice will do."""
    try:
        configured = spark.sparkContext.pythonExec
    except Exception:  # Spark Connect: the server's workers are not chosen here
        return None
    if not configured or os.path.realpath(shutil.which(configured) or configured) == os.path.realpath(sys.executable):
        return None
    if configured not in _IMPORTS_KAFKALOG:
        try:
            found = subprocess.run([configured, "-c", "import kafkalog, pyarrow"], capture_output=True,
                                   timeout=120).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            found = False
        _IMPORTS_KAFKALOG[configured] = found
        if not found:
            warnings.warn(f"Spark's Python workers run {configured!r}, which cannot import kafkalog and "
                          "pyarrow: "
                          f"kafkalog's reads and writes run theirs on {sys.executable} (set PYSPARK_PYTHON "
                          "before the SparkSession starts to choose)", stacklevel=5)
    return None if _IMPORTS_KAFKALOG[configured] else sys.executable


@contextmanager
def _workers_on(spark: Any) -> Iterator[None]:
    """Spark functions made inside run their workers on an interpreter that imports kafkalog."""
    python = _python_for_workers(spark)
    if python is None:
        yield
        return
    context = spark.sparkContext
    configured, context.pythonExec = context.pythonExec, python
    try:
        yield
    finally:
        context.pythonExec = configured


def register(spark: Any) -> None:
    """Registers the ``kafkalog`` format with a SparkSession."""
    with _workers_on(spark):
        spark.dataSource.register(KafkaLogDataSource)


def read_logs(spark: Any, folders: Sequence[str], **options: Any) -> Any:
    """A DataFrame of partition folders' records through ``mapInArrow``: one Spark partition per
    offset range, batches built in Rust. Options as the ``kafkalog`` format takes them
    (``subscribe`` and the like are optional here: the folders already choose)."""
    if isinstance(folders, (str, os.PathLike)):
        folders = [str(folders)]
    plan = plan_read(options, folders=[str(f) for f in folders])
    ranges = [r for r in plan.ranges if r.size > 0]
    isolation, include_headers, fail_on_data_loss = plan.isolation, plan.include_headers, plan.fail_on_data_loss
    schema = kafka_schema(include_headers)
    plan_schema = "path string, topic string, partition int, start long, end long"
    if not ranges:
        return spark.createDataFrame([], schema)
    rows = [(r.path, r.topic, r.partition, r.start, r.end) for r in ranges]
    frame = spark.createDataFrame(rows, plan_schema).repartition(len(rows))

    def read(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            for path, topic, partition, start, end in zip(*(batch.column(i).to_pylist() for i in range(5))):
                yield from read_range(OffsetRange(path, topic, partition, start, end), isolation, include_headers,
                                      fail_on_data_loss)

    with _workers_on(spark):
        return frame.mapInArrow(read, schema)
