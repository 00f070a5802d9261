"""Topics, producers and consumer groups over a local Kafka data dir.

``Topic`` and ``DataDir`` (Kafka's CreateTopics/CreatePartitions/Metadata on a data dir),
``Producer`` (Kafka's ``KafkaProducer``), ``ConsumerGroup`` and ``Consumer`` (Kafka's group
coordinator and ``KafkaConsumer``). Every rule lives in Rust (``kafkalog._kafkalog``): partitioning,
batching, sequences and transactions, the assignors, the group files and the fetch loop. This
module translates arguments and adds the Python conveniences (context managers, callables).
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union, cast

from . import _kafkalog
from ._kafkalog import Log, RecordMetadata
from .results import Acks, AssignmentStrategy, CommittedOffset, Compression, Isolation, OffsetReset, PartitionerName

__all__ = ["Topic", "DataDir", "Producer", "ConsumerGroup", "Consumer", "INTERNAL_TOPICS"]

#: Kafka's internal topics (a broker's data dir has their folders).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state", "__cluster_metadata"})

TopicPartition = Tuple[str, int]
Partitioner = Union[PartitionerName, Callable[[Optional[bytes], Optional[bytes], int], int]]


def _internal(topic: str) -> bool:
    return topic in INTERNAL_TOPICS or topic.startswith("__")


class Topic:
    """A topic of a data dir: ``<topic>-<n>`` partition folders. ``Topic(data_dir, name)`` is a
    handle that checks nothing (a topic not there yet has 0 partitions); ``Topic.open`` raises
    for a topic that is not in the data dir, ``Topic.create`` makes one."""

    def __init__(self, data_dir: Union[str, bytes, os.PathLike], name: str) -> None:
        self.data_dir = os.fsdecode(data_dir)
        self.name = name

    @classmethod
    def create(cls, data_dir: Union[str, bytes, os.PathLike], name: str, partitions: int = 1,
               config: Optional[Mapping[str, Any]] = None) -> "Topic":
        """Kafka's CreateTopics: the name is validated as Kafka's ``Topic.validate`` does, a name
        that collides with an existing topic once '.' and '_' are made equal is refused, and a
        name with '.' or '_' gets Kafka's warning. ``config`` takes topic configs by Kafka name
        (``segment.bytes``, ``retention.ms``, ...), kept for the topic's writers: its producers,
        Spark writes, and ``Log(..., read_only=False)`` opens of its partitions."""
        data_dir = os.fsdecode(data_dir)
        _kafkalog.validate_topic_name(name)
        has_chars, _ = _kafkalog.topic_collision(data_dir, name)
        configs = {str(k): str(v) for k, v in (config or {}).items()}
        _kafkalog.create_topic_with_config(data_dir, name, partitions, configs)
        if has_chars:
            warnings.warn(
                "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
                "could collide. To avoid issues it is best to use either, but not both.",
                stacklevel=2,
            )
        return cls(data_dir, name)

    @classmethod
    def open(cls, data_dir: Union[str, bytes, os.PathLike], name: str) -> "Topic":
        """An existing topic (its folders must be in ``data_dir``)."""
        data_dir = os.fsdecode(data_dir)
        _kafkalog.validate_topic_name(name)
        if name not in _kafkalog.topic_partition_counts(data_dir):
            raise _kafkalog.UnknownTopicOrPartitionError(
                f"UnknownTopicOrPartition: topic '{name}' is not in {data_dir}"
            )
        return cls(data_dir, name)

    @property
    def partitions(self) -> int:
        """Partition count (the highest partition folder + 1)."""
        return _kafkalog.topic_partition_counts(self.data_dir).get(self.name, 0)

    @property
    def config(self) -> Dict[str, str]:
        """The topic's own configs (Kafka names): those a broker keeps for it in its data dir's
        `__cluster_metadata` log, and those given to `Topic.create`."""
        return _kafkalog.topic_config(self.data_dir, self.name)

    def set_config(self, config: Mapping[str, Any]) -> None:
        """Stores the topic's configs (Kafka names) for kafkalog's writers (``Log(...,
        read_only=False)``, ``Producer``, Spark writes), replacing those stored before, checked as
        ``Topic.create`` checks them. For a topic kafkalog created, and in a broker's log dir that
        does not hold its topics' configs: a ZooKeeper-mode broker's (they live in ZooKeeper) or
        one of a KRaft broker's several ``log.dirs`` without ``__cluster_metadata-0``, where
        writers refuse to append until they are given (what ``kafka-configs.sh --describe
        --entity-type topics --entity-name T`` lists; ``{}`` for Kafka's defaults). Refused where
        the dir holds the broker's cluster metadata: alter them through the broker."""
        _kafkalog.set_topic_config(self.data_dir, self.name, {str(k): str(v) for k, v in config.items()})

    def add_partitions(self, total: int) -> int:
        """Kafka's CreatePartitions: grows the topic to ``total`` partitions (never fewer)."""
        return _kafkalog.add_partitions(self.data_dir, self.name, total)

    def partition_path(self, partition: int) -> str:
        """The folder of ``partition`` (``<data dir>/<topic>-<partition>``)."""
        return os.path.join(self.data_dir, f"{self.name}-{partition}")

    def log(self, partition: int, read_only: bool = True) -> Log:
        """The partition's log (read-only unless asked)."""
        return Log(self.partition_path(partition), read_only=read_only)

    def end_offsets(self, isolation: Isolation = "read_uncommitted") -> Dict[int, int]:
        """{partition: the end offset a consumer with ``isolation`` sees}"""
        out = {}
        for p in range(self.partitions):
            with Log(self.partition_path(p)) as log:
                out[p] = log.latest_offset(isolation)
        return out

    def beginning_offsets(self) -> Dict[int, int]:
        """Kafka's ``beginningOffsets``: {partition: log start offset}."""
        out = {}
        for p in range(self.partitions):
            with Log(self.partition_path(p)) as log:
                out[p] = log.log_start_offset
        return out

    def __repr__(self) -> str:
        return f"Topic({self.name!r}, partitions={self.partitions}, data_dir={self.data_dir!r})"


class DataDir:
    """A Kafka data dir, kafkalog's or a broker's, read only: its topics, partitions and
    kafkalog groups. Internal topics (``__consumer_offsets``, ...) are left out unless asked."""

    def __init__(self, path: Union[str, bytes, os.PathLike]) -> None:
        self.path = os.fsdecode(path)
        if not os.path.exists(self.path):
            raise _kafkalog.PathNotFoundError(f"{self.path}: no such data dir")
        if not os.path.isdir(self.path):
            raise _kafkalog.KafkaStorageError(f"{self.path}: a file, not a data dir")
        _kafkalog.check_not_a_partition_folder(self.path)

    def topics(self, include_internal: bool = False) -> Dict[str, int]:
        """{topic: partition count}; Kafka's internal topics (``__consumer_offsets``, ...) only
        with ``include_internal=True``."""
        counts = _kafkalog.topic_partition_counts(self.path)
        return {t: n for t, n in counts.items() if include_internal or not _internal(t)}

    def partitions(self, topic: Optional[str] = None, include_internal: bool = False) -> List[TopicPartition]:
        """The (topic, partition) folders present, of one topic or all (internal topics with
        ``include_internal=True``, or when ``topic`` names one)."""
        return [
            (t, p)
            for t, p, _ in _kafkalog.partition_folders(self.path)
            if (topic is None or t == topic) and (include_internal or topic == t or not _internal(t))
        ]

    def topic(self, name: str) -> Topic:
        """The existing topic ``name``."""
        return Topic.open(self.path, name)

    def groups(self) -> List[str]:
        """kafkalog's consumer groups of this data dir."""
        return _kafkalog.list_groups(self.path)

    def group(self, group_id: str) -> "ConsumerGroup":
        """The kafkalog consumer group ``group_id`` (it need not exist yet)."""
        return ConsumerGroup(self.path, group_id)

    def committed_offsets(self, group_id: Optional[str] = None) -> Dict[str, Dict[TopicPartition, CommittedOffset]]:
        """A broker's committed offsets, read from its ``__consumer_offsets`` partitions: what the
        broker answers to ListConsumerGroupOffsets (``{group: {(topic, partition): {"offset",
        "leader_epoch", "metadata", "commit_timestamp"}}}``), of one group or all."""
        return _kafkalog.broker_committed_offsets(self.path, group_id)

    def __repr__(self) -> str:
        return f"DataDir({self.path!r}, topics={len(self.topics())})"


class Producer:
    """Kafka's producer for one topic of a local data dir.

    ``send`` partitions the record and adds it to its partition's open batch; it returns a
    ``RecordMetadata`` at once (Kafka's ``Future<RecordMetadata>``): ``.partition`` is known,
    ``.get()`` returns ``(partition, offset)`` once the record's batch is in the log (appending
    that batch first if it is still open). A batch is appended when it is full (``batch_size``
    bytes, as Kafka's ``batch.size``; 0 turns batching off), when its first record waited
    ``linger_ms`` (checked on each ``send`` and ``poll()``), on ``flush()`` and on ``close()``.

    A batch whose append fails reports it on its records' ``RecordMetadata`` (``get()`` raises
    it, typed), never on a later ``send``; ``flush()`` and ``close()`` raise the first failure
    too. A batch over the topic's ``max.message.bytes`` is split, as Kafka's producer splits one
    the broker refused, so only a record too large alone fails (``RecordTooLargeError``); the
    records after it go in. An uncompressed record too large alone is refused by its own ``send``
    (as kafka-python's and confluent-kafka's ``send``/``produce`` refuse one over their request
    size). In a transaction, a failed record leaves it only to abort.

    ``acks``: ``0`` and ``1`` leave appended bytes to the page cache; ``"all"`` (the default, as
    in Kafka) fsyncs every batch before the call that appended it returns.
    ``partitioner``: ``"default"`` (Kafka's built-in: murmur2 of the key, sticky without a key),
    ``"murmur2"`` (murmur2 of the key, round robin without one), ``"round_robin"`` (Kafka's
    ``RoundRobinPartitioner``), ``"random"``, or a callable ``(key, value, partition_count) -> int``.
    ``idempotent=True`` stamps a producer id and sequences (a retried batch is a duplicate to the
    log); ``transactional_id`` makes it transactional (``begin_transaction``/``commit_transaction``/
    ``abort_transaction``) and implies idempotence; both need ``acks="all"``, as in Kafka. One
    producer writes a partition at a time (Kafka's one writer per log): the partitions stay open
    for writing until ``close``.
    ``config``: topic configs by their Kafka names over the topic's own, as ``Log(config=...)``
    takes them: the broker's ``server.properties`` defaults that differ from Kafka's (not in the
    data dir), or, in a ZooKeeper-mode broker's dir, the topic's configs for this producer alone.
    """

    def __init__(self, topic: Topic, partitioner: Partitioner = "default", compression: Compression = "none",
                 linger_ms: int = 5, batch_size: int = 16384, acks: Union[int, Acks] = "all",
                 idempotent: bool = False, transactional_id: Optional[str] = None,
                 config: Optional[Mapping[str, Any]] = None) -> None:
        if not isinstance(topic, Topic):
            raise TypeError(f"Producer takes a kafkalog.Topic (Topic.open(data_dir, name)), not {type(topic).__name__}")
        self.topic = topic
        self._callable = partitioner if callable(partitioner) else None
        if self._callable is None and not isinstance(partitioner, str):
            raise TypeError("partitioner must be a name (default, murmur2, round_robin, random) or a callable")
        self._inner = _kafkalog._Producer(
            topic.data_dir, topic.name,
            partitioner="default" if self._callable else cast(PartitionerName, partitioner),
            compression=compression, linger_ms=linger_ms, batch_size=batch_size, acks=cast(Acks, str(acks)),
            idempotent=idempotent, transactional_id=transactional_id,
            config=None if config is None else dict(config),
        )
        self.partition_count = self._inner.num_partitions
        if _kafkalog.broker_dir_without_metadata(topic.data_dir):
            warnings.warn(
                f"{topic.data_dir} is a Kafka broker's log dir without its cluster metadata (a "
                "ZooKeeper-mode broker's, or one of several log.dirs): topic "
                f"'{topic.name}' has {self.partition_count} partition(s) here, and records are "
                "partitioned over those; if the broker's other log dirs hold more, keys go to other "
                "partitions than Kafka's producer sends them to",
                stacklevel=2,
            )

    @property
    def producer_id(self) -> int:
        """The producer id (-1 unless idempotent or transactional)."""
        return self._inner.producer_id

    @property
    def producer_epoch(self) -> int:
        """The producer epoch (-1 unless idempotent or transactional)."""
        return self._inner.producer_epoch

    def _custom_partition(self, key: Any, value: Any) -> int:
        assert self._callable is not None
        as_bytes = lambda v: v.encode() if isinstance(v, str) else v  # noqa: E731
        n = self.partition_count
        chosen = self._callable(as_bytes(key), as_bytes(value), n)
        if isinstance(chosen, bool) or not isinstance(chosen, int) or not 0 <= chosen < n:
            raise _kafkalog.InvalidArgumentError(
                f"the partitioner {getattr(self._callable, '__name__', self._callable)!r} returned {chosen!r}; "
                f"it must return an int in [0, {n}) for topic '{self.topic.name}' ({n} partitions)"
            )
        return chosen

    def send(self, value: Any, key: Any = None, headers: Any = None, partition: Optional[int] = None,
             timestamp: Optional[int] = None) -> RecordMetadata:
        """Adds a record (value/key: bytes, str or None; headers: [(str, bytes)] or a dict;
        timestamp: ms, now by default). Returns its ``RecordMetadata`` (see the class doc)."""
        if partition is None and self._callable is not None:
            partition = self._custom_partition(key, value)
        return self._inner.send(value, key, headers, partition, timestamp)

    def poll(self) -> None:
        """Appends batches that waited ``linger_ms``."""
        self._inner.poll()

    def flush(self) -> None:
        """Appends every buffered batch (fsynced with acks='all')."""
        self._inner.flush()

    def begin_transaction(self) -> None:
        """Kafka's ``beginTransaction`` (needs ``transactional_id``)."""
        self._inner.begin_transaction()

    def commit_transaction(self) -> None:
        """Appends the transaction's batches, then a COMMIT marker in every partition it wrote."""
        self._inner.commit_transaction()

    def abort_transaction(self) -> None:
        """Drops its unwritten batches and writes an ABORT marker where it wrote."""
        self._inner.abort_transaction()

    def close(self) -> None:
        """Flushes (an open transaction is aborted) and releases the partitions."""
        self._inner.close()

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None and self._inner.in_transaction:
            self._inner.abort_transaction()
        self.close()


def _offsets_map(offsets: Any) -> Mapping[TopicPartition, Any]:
    if not isinstance(offsets, Mapping):
        raise TypeError(f"offsets must be a mapping {{(topic, partition): offset}}, not {type(offsets).__name__}")
    return cast(Mapping[TopicPartition, Any], offsets)


class ConsumerGroup:
    """A kafkalog consumer group of a data dir: committed offsets in
    ``.<data dir name>.kafkalog/groups/<group>/offsets.json`` beside the data dir (a broker refuses
    unknown folders inside it), replaced atomically (temp file, fsync, rename); its members and the
    partition assignors."""

    def __init__(self, data_dir: Union[str, bytes, os.PathLike], group_id: str) -> None:
        self.data_dir = os.fsdecode(data_dir)
        self.group_id = group_id
        _kafkalog.group_exists(self.data_dir, group_id)  # validates the id

    @property
    def exists(self) -> bool:
        """Whether the group has a folder in the data dir."""
        return _kafkalog.group_exists(self.data_dir, self.group_id)

    def committed(self) -> Dict[TopicPartition, int]:
        """{(topic, partition): committed offset}"""
        return {tp: v[0] for tp, v in _kafkalog.group_committed(self.data_dir, self.group_id).items()}

    def committed_metadata(self) -> Dict[TopicPartition, Tuple[int, str, int]]:
        """{(topic, partition): (offset, metadata, commit timestamp ms)}"""
        return _kafkalog.group_committed(self.data_dir, self.group_id)

    def commit(self, offsets: Mapping[TopicPartition, Union[int, Tuple[int, str]]]) -> None:
        """Commits {(topic, partition): offset or (offset, metadata)}, all at once."""
        rows = []
        for (topic, partition), v in _offsets_map(offsets).items():
            offset, metadata = (v, "") if isinstance(v, int) else (v[0], v[1])
            rows.append((topic, partition, offset, metadata))
        _kafkalog.group_commit(self.data_dir, self.group_id, rows)

    def assign(self, members: Union[Sequence[str], Mapping[str, Sequence[str]]],
               topics: Union[Sequence[str], Mapping[str, int], None] = None, strategy: AssignmentStrategy = "range",
               previous: Optional[Mapping[str, Sequence[TopicPartition]]] = None) -> Dict[str, List[TopicPartition]]:
        """Kafka's assignors (``range``, ``roundrobin``, ``sticky``, ``cooperative-sticky``). ``members``:
        member ids all subscribed to ``topics``, or {member: [topics]}. ``topics``: names (their
        partition counts are read from the data dir) or {topic: partition count}. ``previous``:
        {member: [(topic, partition)]} it owned, members that have left included, whose partitions
        are free again (the sticky assignors keep what they can;
        ``cooperative-sticky`` answers as Kafka's ``CooperativeStickyAssignor`` does in one
        rebalance: a partition changing owner is left out until its previous owner revoked it, in
        the next rebalance, as ``Consumer`` members do it)."""
        if isinstance(members, Mapping):
            subscriptions = {m: list(ts) for m, ts in members.items()}
        else:
            if topics is None:
                raise ValueError("give topics, or members as {member: [topics]}")
            subscriptions = {m: list(topics) for m in members}
        if isinstance(topics, Mapping):
            counts = dict(topics)
        else:
            wanted = {t for ts in subscriptions.values() for t in ts}
            counts = {t: n for t, n in _kafkalog.topic_partition_counts(self.data_dir).items() if t in wanted}
        owned = {m: [(tp[0], tp[1]) for tp in tps] for m, tps in (previous or {}).items()}
        return _kafkalog.assign_partitions(subscriptions, counts, strategy, owned)

    def describe(self) -> Dict[str, Any]:
        """The membership file: generation, protocol, members, assignment, owners."""
        import json

        return json.loads(_kafkalog.group_describe(self.data_dir, self.group_id))

    def __repr__(self) -> str:
        return f"ConsumerGroup({self.group_id!r}, data_dir={self.data_dir!r})"


class Consumer:
    """Kafka's consumer, a member of a kafkalog group: ``poll`` reads the partitions the group
    gives this member (threads and processes sharing a group share the partitions; see the
    README for the protocol), from the group's committed offsets (else ``auto_offset_reset``).
    ``isolation``: ``read_uncommitted`` or ``read_committed``. ``close()`` commits the positions
    and leaves the group (``close(commit=False)`` leaves without committing)."""

    def __init__(self, data_dir: Union[str, bytes, os.PathLike], group_id: str, topics: Union[str, Sequence[str]],
                 isolation: Isolation = "read_uncommitted", strategy: AssignmentStrategy = "range",
                 auto_offset_reset: OffsetReset = "earliest",
                 session_timeout_ms: int = 45000, sync_interval_ms: int = 100) -> None:
        if isinstance(topics, str):
            topics = [topics]
        self.data_dir = os.fsdecode(data_dir)
        self.group_id = group_id
        self.topics = list(topics)
        self._inner = _kafkalog._Consumer(
            self.data_dir, group_id, self.topics, isolation=isolation, strategy=strategy,
            auto_offset_reset=auto_offset_reset, session_timeout_ms=session_timeout_ms,
            sync_interval_ms=sync_interval_ms,
        )

    @property
    def member_id(self) -> str:
        """The member id the group gave this consumer."""
        return self._inner.member_id

    @property
    def generation(self) -> int:
        """The group generation of the current assignment."""
        return self._inner.generation

    def assignment(self) -> List[TopicPartition]:
        """Kafka's ``assignment``: the (topic, partition)s this member owns."""
        return self._inner.assignment()

    def poll(self, max_records: int = 500) -> List[Any]:
        """Up to ``max_records`` ``ConsumerRecord``s (topic, partition, offset, timestamp, key,
        value, headers); an empty list when nothing new is there."""
        return self._inner.poll(max_records)

    def poll_arrow(self, max_records: int = 10000, include_headers: bool = False) -> Any:
        """Up to ``max_records`` records of one partition as a ``pyarrow.RecordBatch`` with Spark's
        Kafka source schema, or None; the next poll goes on after the last of them."""
        return self._inner.poll_arrow(max_records, include_headers)

    def commit(self, offsets: Optional[Mapping[TopicPartition, int]] = None) -> None:
        """Commits the positions of the assigned partitions, or the given offsets."""
        rows = None if offsets is None else [(t, p, o) for (t, p), o in _offsets_map(offsets).items()]
        self._inner.commit(rows)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Kafka's ``seek``: the next poll of (topic, partition) starts at ``offset``."""
        self._inner.seek(topic, partition, offset)

    def seek_to_beginning(self, partitions: Optional[Iterable[TopicPartition]] = None) -> None:
        """Kafka's ``seekToBeginning`` of ``partitions`` (default: the assignment)."""
        self._inner.seek_to_beginning(list(partitions) if partitions is not None else self.assignment())

    def seek_to_end(self, partitions: Optional[Iterable[TopicPartition]] = None) -> None:
        """Kafka's ``seekToEnd`` of ``partitions`` (default: the assignment), per isolation."""
        self._inner.seek_to_end(list(partitions) if partitions is not None else self.assignment())

    def position(self, topic: str, partition: int) -> int:
        """Kafka's ``position``: the offset the next poll of (topic, partition) starts at."""
        return self._inner.position(topic, partition)

    def close(self, commit: bool = True) -> None:
        """Kafka's ``close``: commits positions when ``commit``, then leaves the group."""
        self._inner.close(commit)

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close(commit=exc_type is None)
