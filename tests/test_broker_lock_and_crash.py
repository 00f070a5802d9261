"""Against a real Kafka 4.4.0 broker on 127.0.0.1: a running broker's data dir can be read but not
written (its `.lock`), and a broker killed with SIGKILL after its last high-watermark checkpoint
is read, read-only, as the restarted broker serves it: every acknowledged record."""

import re
import time

import pytest

import kafka_harness as kh
import kafkalog

VERSION = "4.4.0"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = kh.Broker(VERSION, properties={"replica.high.watermark.checkpoint.interval.ms": 2000})
    b.start()
    try:
        yield b
    finally:
        b.close()


def test_writing_beside_a_running_broker_is_refused_and_reading_is_not(broker):
    kh.create_topic(broker.bootstrap, "locked", partitions=1)
    kh.produce(broker.bootstrap, "locked", [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(20)])
    folder = broker.partition_dir("locked", 0)
    with pytest.raises(kafkalog.KafkaLogError, match="running Kafka broker"):
        kafkalog.Log(folder, read_only=False)
    # Through a symlink to the folder too (a tester's writer got through one and appended).
    link = broker.work_dir / "elsewhere" / "locked-0"
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(folder)
    with pytest.raises(kafkalog.ConcurrentWriterError, match="running Kafka broker"):
        kafkalog.Log(link, read_only=False)
    log = kafkalog.Log(folder)  # reading stays allowed
    assert log.to_arrow().read_all().num_rows == 20


def test_sigkilled_broker_is_read_as_the_restarted_broker_serves_it(broker):
    kh.create_topic(broker.bootstrap, "crashed", partitions=1)
    values = [b"%06d" % i for i in range(3000)]
    produce = lambda vs: kh.produce(broker.bootstrap, "crashed", [{"value": v} for v in vs], config={"acks": "all"})
    assert len(produce(values[:1000])) == 1000
    checkpoint = broker.log_dir / "replication-offset-checkpoint"
    deadline = time.monotonic() + 30
    while "crashed 0 1000" not in (checkpoint.read_text() if checkpoint.exists() else ""):
        assert time.monotonic() < deadline, "the broker never checkpointed its high watermark"
        time.sleep(0.2)
    assert len(produce(values[1000:])) == 2000  # acks=all: acknowledged, committed
    broker.kill()  # SIGKILL: no clean shutdown, no fresh checkpoint
    # A checkpoint may have landed between the last ack and the kill; put back the one a broker
    # killed a little later would have left, so the case is always the one users meet.
    text = checkpoint.read_text()
    if "crashed 0 1000" not in text:
        checkpoint.write_text(re.sub(r"crashed 0 \d+", "crashed 0 1000", text))
    folder = broker.partition_dir("crashed", 0)
    log = kafkalog.Log(folder)
    assert log.checkpointed_high_watermark == 1000
    assert log.high_watermark == 3000
    table = log.to_arrow().read_all()
    assert table.column("value").to_pylist() == values
    del log
    # The restarted broker serves the same records: kafkalog answered what it would.
    broker.restart()
    served = kh.consume_all(broker.bootstrap, "crashed")
    assert [m["value"] for m in served] == table.column("value").to_pylist()
    broker.stop()
    # Once the broker is gone, the folder is free to write.
    with kafkalog.Log(folder, read_only=False) as writable:
        assert writable.log_end_offset == 3000


def test_a_broker_cannot_start_on_a_log_kafkalog_is_writing(broker):
    """A writable `Log` in a broker's data dir holds a share of the dir's `.lock`: a broker
    started meanwhile fails its own lock, as a second Kafka on the dir does, instead of appending
    beside kafkalog (a black-box tester's broker started, took offset 2 again, and a record
    kafkalog had acknowledged was gone). Writers of the dir's partitions share it; closed, the
    broker starts and serves what kafkalog wrote."""
    if not broker.running():
        broker.start()
    kh.create_topic(broker.bootstrap, "guarded", partitions=2)
    kh.produce(broker.bootstrap, "guarded", [{"value": b"broker", "partition": 0}])
    broker.stop()
    with kafkalog.Log(broker.partition_dir("guarded", 0), read_only=False) as log, \
            kafkalog.Log(broker.partition_dir("guarded", 1), read_only=False) as other:
        log.append([{"value": b"kafkalog"}])
        with pytest.raises(kh.KafkaHarnessError, match="Failed to acquire lock"):
            broker.start()
        log.append([{"value": b"still the only writer"}])
        other.append([{"value": b"beside it"}])
    broker.start()
    served = kh.consume_all(broker.bootstrap, "guarded")
    assert sorted(m["value"] for m in served) == \
        sorted([b"broker", b"kafkalog", b"still the only writer", b"beside it"])
    broker.stop()


def test_a_time_index_the_broker_keeps_empty_is_a_problem_and_the_advice_works(broker):
    """After a clean shutdown a broker rebuilds a segment's indexes only when its `.index` is
    missing: a lone missing `.timeindex` is created empty for good, and ListOffsets then finds
    nothing for that segment's timestamps (a black-box tester: verify said "a broker rebuilds
    it"). verify reports it and says to delete the `.index` too; done, the broker answers as
    kafkalog does."""
    if not broker.running():
        broker.start()
    kh.create_topic(broker.bootstrap, "timeless", partitions=1, config={"segment.bytes": "600"})
    base = int(time.time() * 1000) - 3_600_000
    for i in range(8):  # one batch each, several segments
        kh.produce(broker.bootstrap, "timeless", [{"value": b"v%d" % j, "timestamp": base + 1000 * i + j}
                                                   for j in range(5)])
    # In the second segment: the first one, its empty index standing for its mtime (now), is
    # where the broker looks for it, and finds nothing.
    target = base + 6002
    assert kh.offset_for_timestamp(broker.bootstrap, "timeless", 0, target) == 32
    broker.stop()
    folder = broker.partition_dir("timeless", 0)
    first = sorted(folder.glob("*.log"))[0]
    assert len(sorted(folder.glob("*.log"))) >= 2  # the first one closed
    first.with_suffix(".timeindex").unlink()

    def time_index_problems():
        problems = kafkalog._kafkalog.verify_partition(folder)[4]
        return [m for f, _, m in problems if f.endswith(".timeindex")]

    assert time_index_problems()[0].startswith("missing, though the segment's batches have timestamps")
    assert kafkalog.Log(folder).offset_for_timestamp(target).offset == 32
    broker.start()  # the quirk itself: the empty index stays, the broker finds nothing
    assert kh.offset_for_timestamp(broker.bootstrap, "timeless", 0, target) == -1
    broker.stop()
    assert first.with_suffix(".timeindex").stat().st_size == 0
    assert "delete the segment's .index too" in time_index_problems()[0]
    first.with_suffix(".index").unlink()  # verify's advice
    assert time_index_problems() == []
    broker.start()
    assert kh.offset_for_timestamp(broker.bootstrap, "timeless", 0, target) == 32
    broker.stop()


def test_a_deleted_topics_folder_restored_beside_its_successor_is_a_stray(broker, tmp_path):
    """A partition folder of a topic since deleted and made again (a backup put back, a broker
    down through the change) is no partition of the new topic: its broker sets it aside as a
    stray and serves none of it. kafkalog listed it, and read the old records as the new
    topic's partition 1 (a black-box tester), and took writes to it."""
    import shutil
    import subprocess
    import sys

    if not broker.running():
        broker.start()
    kh.create_topic(broker.bootstrap, "reborn", partitions=2)
    kh.produce(broker.bootstrap, "reborn", [{"value": b"OLD-%d" % i, "partition": i % 2} for i in range(6)])
    broker.stop()
    backup = tmp_path / "reborn-1"
    shutil.copytree(broker.partition_dir("reborn", 1), backup)
    broker.start()
    admin = kh._admin(broker.bootstrap)  # held: a collected client never answers
    admin.delete_topics(["reborn"])["reborn"].result(30)
    deadline = time.monotonic() + 60
    while True:  # the new topic once the old one is gone from the metadata
        try:
            kh.create_topic(broker.bootstrap, "reborn", partitions=1)
            break
        except Exception:
            assert time.monotonic() < deadline, "the deleted topic never went"
            time.sleep(0.5)
    kh.produce(broker.bootstrap, "reborn", [{"value": b"NEW-%d" % i} for i in range(4)])
    broker.stop()
    data = broker.log_dir
    shutil.rmtree(data / "reborn-1", ignore_errors=True)
    shutil.copytree(backup, data / "reborn-1")

    assert kafkalog.DataDir(data).topics()["reborn"] == 1
    assert kafkalog.DataDir(data).partitions("reborn") == [("reborn", 0)]
    cat = subprocess.run([sys.executable, "-m", "kafkalog", "cat", str(data), "--topic", "reborn"],
                         capture_output=True, text=True)
    assert cat.returncode == 0, cat.stderr
    assert "OLD" not in cat.stdout and cat.stdout.count("NEW-") == 4, cat.stdout
    assert "left out" in cat.stderr and "has no partition 1" in cat.stderr, cat.stderr
    with pytest.raises(kafkalog.InvalidArgumentError, match="not a partition its broker serves"):
        kafkalog.Log(data / "reborn-1", read_only=False)
    assert [r.value for r in kafkalog.Log(data / "reborn-1").records()] == [b"OLD-1", b"OLD-3", b"OLD-5"]
    # The broker agrees: the folder is set aside, the new topic's four records are all it serves.
    broker.start()
    assert sorted(m["value"] for m in kh.consume_all(broker.bootstrap, "reborn")) == \
        [b"NEW-%d" % i for i in range(4)]
    broker.stop()
    assert not (data / "reborn-1").exists()


def test_verify_finds_a_running_brokers_busy_partition_sound(broker):
    """A broker appends a batch to the `.log` before its `.index`, `.timeindex` and `.txnindex`
    entries, and rolls segments meanwhile: verify read the log first and the indexes later,
    and called a live, healthy partition damaged in 11 of 15 runs (a black-box tester). Now every
    run while plain and transactional producers write (aborts included) finds it sound, as it
    does once they stop."""
    import threading

    from confluent_kafka import Producer

    if not broker.running():
        broker.start()
    kh.create_topic(broker.bootstrap, "busy", partitions=1,
                    config={"segment.bytes": str(64 << 10), "index.interval.bytes": "512"})
    stop = threading.Event()
    failures: list = []

    def plain():
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2, "logger": kh._NullLogger()})
        while not stop.is_set():
            for i in range(20):
                p.produce("busy", key=b"k%d" % i, value=b"x" * 200)
            p.poll(0)
            time.sleep(0.01)
        p.flush(30)

    def transactional():
        n = 0
        while not stop.is_set():
            kh.produce_transactions(broker.bootstrap, "busy", [
                ([{"value": b"t%d-%d" % (n, i)} for i in range(5)], n % 2 == 0),
            ], transactional_id="busy-txn")
            n += 1

    def run(fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(e)

    threads = [threading.Thread(target=run, args=(fn,)) for fn in (plain, transactional)]
    for t in threads:
        t.start()
    folder = broker.partition_dir("busy", 0)
    try:
        deadline = time.monotonic() + 60
        while not list(folder.glob("*.txnindex")) or len(list(folder.glob("*.log"))) < 2:
            assert time.monotonic() < deadline and not failures, failures
            time.sleep(0.2)
        problems = []
        for _ in range(15):
            found = kafkalog._kafkalog.verify_partition(folder)[4]
            problems += found
        assert problems == []
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not failures, failures
    assert kafkalog._kafkalog.verify_partition(folder)[4] == []
    broker.stop()
    assert kafkalog._kafkalog.verify_partition(folder)[4] == []
