"""Kafka's internal topics against the real thing: a 4.4.0 and a 3.9.2 broker (one session each,
module-scoped) get consumer groups that commit offsets (several groups, topics and partitions,
commits with metadata, a deleted group's tombstones, on 4.x a group of the new consumer protocol),
transactions (committed and aborted, one with a transactional offset commit of each kind), and
are stopped. Then

* ``kafkalog dump --offsets-decoder`` / ``--transaction-log-decoder`` /
  ``--cluster-metadata-decoder`` print, line for line, what Kafka's own DumpLogSegments prints
  over the broker's ``__consumer_offsets-0``, ``__transaction_state-0`` and
  ``__cluster_metadata-0`` folders (4.3.1's tool for the 4.4 broker, 3.9.2's for 3.9), with and
  without ``--skip-record-metadata``; their ``--json`` forms carry the same decoded records;
* ``kafkalog.broker_committed_offsets(data_dir)`` equals what the broker's AdminClient answered
  to ListConsumerGroupOffsets for every group, before the broker stopped.

Nothing skips: if Kafka cannot be fetched or run, these tests fail.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List

import pytest

import compat_util
import kafka_harness as kh
import kafkalog

T_ORDERS = "it-orders"
T_EVENTS = "it-events"
GROUPS = ["g-one", "g-two", "g-txn"]


def _share_group_consumes(broker: kh.Broker, group: str, n: int) -> None:
    """Kafka 4's own share consumer (`kafka-console-share-consumer`) in ``group`` reads and
    acknowledges ``n`` records: the share coordinator writes the group's snapshot and its updates
    of delivery states to `__share_group_state`. A share group starts at the latest offset, so
    records go on being produced until it has them."""
    topic = "it-shared"
    kh.create_topic(broker.bootstrap, topic, partitions=1)
    cmd = [kh._java(), "-cp", kh.kafka_classpath(broker.version),
           "org.apache.kafka.tools.consumer.ConsoleShareConsumer", "--bootstrap-server", broker.bootstrap,
           "--topic", topic, "--group", group, "--max-messages", str(n), "--timeout-ms", "60000"]
    consumer = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        i = 0
        while consumer.poll() is None and time.monotonic() < deadline:
            kh.produce(broker.bootstrap, topic, [{"value": b"shared %d" % i}])
            i += 1
            time.sleep(0.3)
        out, err = consumer.communicate(timeout=30)
        assert consumer.returncode == 0 and len(out.splitlines()) == n, err[-3000:]
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()


def _consume_and_commit(bs: str, group: str, topics: List[str], n: int, metadata: str,
                        protocol: str = "classic") -> None:
    """A group member that reads ``n`` records and commits their positions, with metadata."""
    from confluent_kafka import Consumer, TopicPartition

    cfg: Dict[str, Any] = {"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                           "auto.offset.reset": "earliest", "logger": kh._NullLogger()}
    if protocol == "consumer":
        cfg["group.protocol"] = "consumer"
    else:
        cfg["session.timeout.ms"] = 6000
    c = Consumer(cfg)
    try:
        c.subscribe(topics)
        seen: Dict[tuple, Any] = {}
        deadline = time.monotonic() + 60
        got = 0
        while got < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error() is not None:
                continue
            got += 1
            seen[(m.topic(), m.partition())] = m
        assert got == n, f"group {group} read {got} of {n} records"
        offsets = []
        for (t, p), m in sorted(seen.items()):
            epoch = m.leader_epoch()
            offsets.append(TopicPartition(t, p, m.offset() + 1, metadata=f"{metadata}:{t}-{p}",
                                          leader_epoch=epoch))
        c.commit(offsets=offsets, asynchronous=False)
    finally:
        c.close()


def _transactional_offsets(bs: str, group: str, offset: int, commit: bool) -> None:
    """A transaction that produces a record and commits ``group``'s offset of T_ORDERS-0 in it."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": group, "logger": kh._NullLogger()})
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"it-txn-{uuid.uuid4().hex[:8]}",
                  "logger": kh._NullLogger()})
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(T_EVENTS, key=b"txn", value=b"with offsets", partition=0)
        p.flush(30)
        p.send_offsets_to_transaction([TopicPartition(T_ORDERS, 0, offset, metadata="txn")],
                                      c.consumer_group_metadata(), 30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    finally:
        c.close()


def _admin_offsets(bs: str, group: str) -> Dict[tuple, Dict[str, Any]]:
    """ListConsumerGroupOffsets, as the broker answers it."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = kh._admin(bs)
    fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=30)
    res = fut[group].result(timeout=30)
    return {(tp.topic, tp.partition): {"offset": tp.offset, "metadata": tp.metadata,
                                       "leader_epoch": tp.leader_epoch}
            for tp in res.topic_partitions if tp.offset >= 0}


def _metadata_changes(bs: str) -> None:
    """Metadata records beyond a topic's birth: a topic config, added partitions, a deleted topic,
    a SCRAM credential (bytes fields)."""
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                       ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion)

    admin = kh._admin(bs)
    res = ConfigResource(ConfigResource.Type.TOPIC, T_EVENTS, incremental_configs=[
        ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(timeout=30)
    admin.create_partitions([NewPartitions(T_EVENTS, 3)])[T_EVENTS].result(timeout=30)
    kh.create_topic(bs, "it-doomed")
    admin.delete_topics(["it-doomed"], operation_timeout=30)["it-doomed"].result(timeout=30)
    upsert = UserScramCredentialUpsertion("it-user", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          b"secret", b"salt-of-the-earth")
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(timeout=30)


@pytest.fixture(scope="module", params=kh.KAFKA_VERSIONS)
def broker_dir(request):
    version = request.param
    t0 = time.monotonic()
    # A small snapshot threshold: the controller writes KRaft snapshots (.checkpoint files, the
    # whole metadata image as records), which the cluster metadata decoder reads too.
    broker = kh.Broker(version, properties={
        "metadata.snapshot.max.new.record.bytes": 4096, "metadata.log.max.snapshot.interval.ms": 500})
    state: Dict[str, Any] = {"version": version}
    try:
        broker.start()
        bs = broker.bootstrap
        kh.create_topic(bs, T_ORDERS, partitions=3)
        kh.create_topic(bs, T_EVENTS, partitions=2)
        kh.produce(bs, T_ORDERS, [{"key": b"k%d" % i, "value": b"order %d" % i} for i in range(30)])
        kh.produce(bs, T_EVENTS, [{"key": b"e%d" % i, "value": b"event %d" % i} for i in range(12)])
        _consume_and_commit(bs, "g-one", [T_ORDERS], 10, "first")
        _consume_and_commit(bs, "g-one", [T_ORDERS], 5, "second")  # later commits win
        _consume_and_commit(bs, "g-two", [T_ORDERS, T_EVENTS], 42, "both")
        _consume_and_commit(bs, "g-gone", [T_EVENTS], 4, "gone")
        groups = list(GROUPS)
        if version.startswith("4."):
            _consume_and_commit(bs, "g-848", [T_EVENTS], 6, "new protocol", protocol="consumer")
            groups.append("g-848")
            _share_group_consumes(broker, "g-share", 5)
        admin = kh._admin(bs)  # kept alive until its future is done
        admin.delete_consumer_groups(["g-gone"], request_timeout=30)["g-gone"].result(timeout=30)
        _transactional_offsets(bs, "g-txn", 3, commit=True)
        _transactional_offsets(bs, "g-txn", 9, commit=False)  # aborted: stays at 3
        kh.produce_transactions(bs, T_EVENTS, [([{"value": b"a"}], True), ([{"value": b"b"}], False)],
                                transactional_id="it-producer")
        _metadata_changes(bs)
        state["admin"] = {g: _admin_offsets(bs, g) for g in groups + ["g-gone"]}
        assert state["admin"]["g-gone"] == {}, "a deleted group has no offsets"
        assert state["admin"]["g-txn"][(T_ORDERS, 0)]["offset"] == 3
        rc = broker.stop()
        assert rc in (0, 143), broker.log_tail()
        state["data_dir"] = broker.log_dir
        state["setup_s"] = time.monotonic() - t0
        yield state
    finally:
        print(f"\nKafka {version} internal topics: session {time.monotonic() - t0:.1f}s")
        broker.close()


def _log_files(folder: Path) -> List[Path]:
    files = kh.segment_files(folder, (".log",))
    return files + sorted(folder.glob("*.checkpoint"))


DECODERS = {
    "--offsets-decoder": "__consumer_offsets-0",
    "--transaction-log-decoder": "__transaction_state-0",
    "--cluster-metadata-decoder": "__cluster_metadata-0",
    "--share-group-state-decoder": "__share_group_state-*",
}


# An internal topic's decoder wins over the decoder classes, which 3.x's tool then never makes
# (nor warns of: kafkalog printed its deprecation line, a black-box tester found).
@pytest.mark.parametrize("extra", [["--deep-iteration", "--print-data-log"], ["--skip-record-metadata"],
                                   ["--value-decoder-class", "kafka.serializer.StringDecoder"]],
                         ids=["deep-print", "skip-metadata", "old-decoder-class"])
@pytest.mark.parametrize("decoder", list(DECODERS))
def test_decoders_print_what_dump_log_segments_prints(broker_dir, decoder, extra):
    if decoder == "--share-group-state-decoder" and not broker_dir["version"].startswith("4."):
        # 3.x has no share groups; the decoder says so rather than print 4.x's output.
        out = compat_util.kafkalog_dump([], [broker_dir["data_dir"], decoder], kafka_major=3)
        assert out.returncode == 2 and "3.x's tool has no share groups" in out.stderr, out.stderr
        return
    # The share coordinator writes a group's records to one of 50 partitions: those holding any.
    files = [f for folder in sorted(broker_dir["data_dir"].glob(DECODERS[decoder]))
             for f in _log_files(folder) if f.stat().st_size > 0 or "share" not in decoder]
    assert files, f"no log files in {DECODERS[decoder]}"
    if decoder == "--cluster-metadata-decoder":
        assert any(f.suffix == ".checkpoint" for f in files), "the controller wrote no snapshot"
    java = compat_util.assert_same_dump(broker_dir["version"], files, [decoder, *extra])
    # The decoders did decode: no record fell back to an error line.
    assert "payload: " in java.stdout and "skipping." not in java.stdout
    if decoder == "--share-group-state-decoder":
        # The group's snapshot, then an update with the 5 records acknowledged (Acked: 2).
        assert '"groupId":"g-share"' in java.stdout and '"type":"1"' in java.stdout, java.stdout[-3000:]
        assert '"deliveryState":2' in java.stdout, java.stdout[-3000:]
    if decoder == "--offsets-decoder":
        assert '"group":"g-one"' in java.stdout and "<DELETE>" in java.stdout
        assert '"subscription":{' in java.stdout, "consumer protocol subscriptions decoded"
        types = sorted(set(map(int, re.findall(r'key: \{"type":"(\d+)"', java.stdout))))
        print(f"\nKafka {broker_dir['version']} __consumer_offsets record types: {types}")
        # Offset commits, classic group metadata; on 4.x the consumer protocol's group records.
        assert {1, 2} <= set(types)
        if broker_dir["version"].startswith("4."):
            assert {3, 5, 6, 7, 8} <= set(types), types
    elif decoder == "--cluster-metadata-decoder":
        seen = sorted(set(re.findall(r'payload: \{"type":"([A-Z_]+)"', java.stdout)))
        print(f"\nKafka {broker_dir['version']} __cluster_metadata record types: {', '.join(seen)}")
        for record in ("TOPIC_RECORD", "PARTITION_RECORD", "FEATURE_LEVEL_RECORD", "REGISTER_BROKER_RECORD",
                       "CONFIG_RECORD", "REMOVE_TOPIC_RECORD", "USER_SCRAM_CREDENTIAL_RECORD",
                       "PRODUCER_IDS_RECORD"):
            assert record in seen, record


def test_decoders_json_output(broker_dir):
    d = broker_dir["data_dir"]
    out = compat_util.kafkalog_dump(_log_files(d / "__consumer_offsets-0"), ["--offsets-decoder", "--json"])
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out.stdout.splitlines()]
    commits = [r for r in records if r.get("type") == "record" and "key" in r
               and r["key"].get("type") == "1" and r["payload"] is not None]
    assert commits and all(isinstance(r["payload"]["data"]["offset"], int) for r in commits)
    tombstones = [r for r in records if r.get("type") == "record" and "key" in r and r["payload"] is None]
    assert any(r["key"]["data"].get("group") == "g-gone" for r in tombstones)
    out = compat_util.kafkalog_dump(_log_files(d / "__transaction_state-0"), ["--transaction-log-decoder", "--json"],
                                    kafka_major=int(broker_dir["version"][0]))
    assert out.returncode == 0, out.stderr
    states = [r["payload"]["data"]["transactionStatus"] for r in map(json.loads, out.stdout.splitlines())
              if r.get("type") == "record" and "key" in r
              and r["key"]["data"]["transactionalId"] == "it-producer"]
    # CompleteCommit and CompleteAbort: by name as 4.4's tool prints them, ids in 3.x's JSON.
    done = ("CompleteCommit", "CompleteAbort") if broker_dir["version"].startswith("4.") else (4, 5)
    assert all(s in states for s in done), states
    out = compat_util.kafkalog_dump(_log_files(d / "__cluster_metadata-0"), ["--cluster-metadata-decoder", "--json"])
    assert out.returncode == 0, out.stderr
    topics = {r["payload"]["data"]["name"] for r in map(json.loads, out.stdout.splitlines())
              if r.get("type") == "record" and (r.get("payload") or {}).get("type") == "TOPIC_RECORD"}
    assert {T_ORDERS, T_EVENTS} <= topics


def test_broker_committed_offsets_equal_the_brokers_answer(broker_dir):
    ours = kafkalog.broker_committed_offsets(str(broker_dir["data_dir"]))
    for group, admin in broker_dir["admin"].items():
        # librdkafka commits metadata with its C string's terminating NUL (it is on disk and on
        # the wire), and confluent-kafka reads the answer back as a C string, without it.
        got = {tp: {"offset": o["offset"], "metadata": o["metadata"].rstrip("\x00"),
                    "leader_epoch": o["leader_epoch"]}
               for tp, o in ours.get(group, {}).items()}
        assert got == admin, f"group {group}"
        for o in ours.get(group, {}).values():
            assert o["commit_timestamp"] > 1_600_000_000_000
    assert "g-gone" not in ours
    one = kafkalog.broker_committed_offsets(str(broker_dir["data_dir"]), group_id="g-two")
    assert list(one) == ["g-two"] and one["g-two"] == ours["g-two"]
    with pytest.raises(ValueError, match="not a broker's data dir"):
        kafkalog.broker_committed_offsets(str(broker_dir["data_dir"] / f"{T_ORDERS}-0"))


def test_data_dir_and_spark_start_from_a_brokers_group(broker_dir):
    """DataDir.committed_offsets and the Spark source's startingOffsetsFromGroup read a broker's
    own groups through the same __consumer_offsets reader."""
    import kafkalog.spark as ks

    data_dir = str(broker_dir["data_dir"])
    assert kafkalog.DataDir(data_dir).committed_offsets() == kafkalog.broker_committed_offsets(data_dir)
    for group, admin in broker_dir["admin"].items():
        if not admin:
            with pytest.raises(ks.KafkaLogOptionError, match="not a kafkalog group"):
                ks.group_offsets(data_dir, group)
            continue
        assert ks.group_offsets(data_dir, group) == {tp: o["offset"] for tp, o in admin.items()}, group


@pytest.mark.parametrize("decoder", list(DECODERS))
def test_a_decoder_given_a_data_dir_dumps_its_topic_only(broker_dir, decoder, tmp_path):
    """`kafkalog dump <data dir> --offsets-decoder` is what an operator types: the decoder reads
    only its own topic (other topics' records are not its format), segments and KRaft snapshots
    alike, and prints what dumping that partition's files prints."""
    d = broker_dir["data_dir"]
    major = int(broker_dir["version"][0])
    folders = sorted(d.glob(DECODERS[decoder]))  # the share coordinator's topic has 50 partitions
    run = lambda *a: subprocess.run([sys.executable, "-m", "kafkalog", "dump", *a, "--kafka-version", str(major)],
                                    capture_output=True, text=True, timeout=300)
    whole = run(str(d), decoder)
    if decoder == "--share-group-state-decoder" and major < 4:
        assert whole.returncode == 2 and "no share groups" in whole.stderr, whole.stderr
        return
    assert whole.returncode == 0, whole.stderr
    dumped = [line.split(" ", 1)[1] for line in whole.stdout.splitlines() if line.startswith("Dumping ")]
    assert dumped and all(Path(f).parent in folders for f in dumped), dumped
    assert any(f.endswith(".log") for f in dumped)
    if decoder == "--cluster-metadata-decoder":
        assert any(f.endswith(".checkpoint") for f in dumped), "the controller's snapshots are dumped too"
    if len(folders) == 1:
        assert whole.stdout == run(str(folders[0]), decoder).stdout
    assert whole.stdout == run("--files", ",".join(dumped), decoder).stdout
    # A data dir without that topic: a clear one-line error, not a dump of everything else.
    other = tmp_path / "data"
    shutil.copytree(d / f"{T_ORDERS}-0", other / f"{T_ORDERS}-0")
    missing = run(str(other), decoder)
    assert missing.returncode == 1 and DECODERS[decoder][:-2] in missing.stderr, missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1 and "Traceback" not in missing.stderr


def test_metadata_topic_partitions_are_what_the_broker_made(broker_dir, tmp_path):
    """A KRaft data dir's topics and partitions from its metadata log (the latest snapshot, then
    the log): created, grown by CreatePartitions, deleted; the Spark source refuses a copy of the
    dir missing a partition folder the metadata lists (a JBOD broker's other log dir holds it)."""
    import kafkalog.spark as ks

    d = broker_dir["data_dir"]
    assert sorted(Path(d, "__cluster_metadata-0").glob("*.checkpoint")), "the broker wrote no snapshot"
    topics = kafkalog.metadata_topic_partitions(d)
    assert topics is not None
    assert topics[T_ORDERS] == [0, 1, 2]
    assert topics[T_EVENTS] == [0, 1, 2]  # created with 2, one added
    assert "it-doomed" not in topics
    # The snapshot alone (its log's segments gone): the topics it holds.
    only_snapshot = tmp_path / "snap"
    shutil.copytree(Path(d, "__cluster_metadata-0"), only_snapshot / "__cluster_metadata-0",
                    ignore=shutil.ignore_patterns("*.log", "*.index", "*.timeindex", "*.snapshot"))
    assert kafkalog.metadata_topic_partitions(only_snapshot)[T_ORDERS] == [0, 1, 2]
    assert kafkalog.metadata_topic_partitions(tmp_path) is None  # no metadata log here

    assert len(ks.plan_read({"path": str(d), "subscribe": T_ORDERS}).ranges) == 3
    copy = tmp_path / "d1"
    shutil.copytree(d, copy)
    shutil.rmtree(copy / f"{T_ORDERS}-2")
    with pytest.raises(ks.KafkaLogOptionError, match=r"partitions \[2\] are missing"):
        ks.plan_read({"path": str(copy), "subscribe": T_ORDERS})
