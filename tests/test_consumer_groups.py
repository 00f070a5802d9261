"""Consumer groups: committed offsets (atomic under SIGKILL), Kafka's assignors checked against
Kafka's own RangeAssignor/RoundRobinAssignor/StickyAssignor/CooperativeStickyAssignor from the
kafka-clients jar, the sticky assignors' properties, and consumers (poll, Arrow, seek, commit, resume; several sharing a group in one
process and in two processes)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import kafkalog
from kafkalog import Consumer, ConsumerGroup, Producer, Topic

import jvm_referee
from kafka_harness import KAFKA_VERSIONS


def _topic(data_dir, name="t", partitions=3, records=300, key=True):
    t = Topic.create(data_dir, name, partitions)
    with Producer(t, partitioner="round_robin" if not key else "default", linger_ms=60000, batch_size=2000) as p:
        for i in range(records):
            p.send(b"value-%d" % i, key=(b"key-%d" % i) if key else None)
    return t


def _all_offsets(t):
    return {(t.name, p, o) for p, end in t.end_offsets().items() for o in range(end)}


# -- committed offsets --------------------------------------------------------------------------


def test_commits_merge_and_survive_a_new_handle(tmp_path):
    g = ConsumerGroup(tmp_path, "daily-job")
    assert not g.exists and g.committed() == {}
    # A partition the data dir does not hold is refused, as Kafka's OffsetCommit answers
    # UNKNOWN_TOPIC_OR_PARTITION (a black-box tester's commit to one was taken).
    with pytest.raises(kafkalog.UnknownTopicOrPartitionError, match="UnknownTopicOrPartition"):
        g.commit({("t", 0): 10})
    Topic.create(tmp_path, "t", 2)
    with pytest.raises(ValueError, match="UnknownTopicOrPartition"):  # also a ValueError
        g.commit({("t", 0): 10, ("t", 7): 1})
    assert g.committed() == {}
    g.commit({("t", 0): 10, ("t", 1): (20, "meta")})
    g.commit({("t", 0): 11})
    again = ConsumerGroup(tmp_path, "daily-job")
    assert again.committed() == {("t", 0): 11, ("t", 1): 20}
    assert again.committed_metadata()[("t", 1)][1] == "meta"
    assert kafkalog.DataDir(tmp_path).groups() == ["daily-job"]
    with pytest.raises(ValueError, match="offset -1"):
        g.commit({("t", 0): -1})
    with pytest.raises(ValueError, match="group id cannot be empty"):
        ConsumerGroup(tmp_path, "")
    odd = ConsumerGroup(tmp_path, "a/b ü")
    odd.commit({("t", 0): 1})
    assert sorted(kafkalog.DataDir(tmp_path).groups()) == ["a/b ü", "daily-job"]


COMMITTER = textwrap.dedent(
    """
    import sys, kafkalog
    g = kafkalog.ConsumerGroup(sys.argv[1], "g")
    i = 0
    while True:
        i += 1
        g.commit({("t", p): i for p in range(50)})
        print(i, flush=True)
    """
)


def test_a_commit_killed_midway_leaves_the_previous_one(tmp_path):
    Topic.create(tmp_path, "t", 50)
    for round_ in range(3):
        child = subprocess.Popen([sys.executable, "-c", COMMITTER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        acknowledged = 0
        for line in child.stdout:
            acknowledged = int(line)
            if acknowledged >= 20 + 17 * round_:
                break
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        committed = ConsumerGroup(tmp_path, "g").committed()
        values = set(committed.values())
        assert len(committed) == 50 and len(values) == 1, "one whole commit, never a mix or a torn file"
        assert values.pop() >= acknowledged, "an acknowledged commit is never lost"


# -- assignors against Kafka's own -------------------------------------------------------------


def _random_cases(rng, n):
    cases = []
    for _ in range(n):
        topics = {f"topic{chr(97 + i)}": rng.randint(1, 12) for i in range(rng.randint(1, 4))}
        members = {}
        for _ in range(rng.randint(1, 7)):
            mid = "consumer-" + "".join(rng.choice("abcdefXYZ0123456789-_") for _ in range(rng.randint(1, 10)))
            if rng.random() < 0.5:
                subs = sorted(topics)
            else:
                subs = sorted(rng.sample(sorted(topics), rng.randint(1, len(topics))))
            members[mid] = subs
        # A topic nobody subscribes to, and one subscribed topic that does not exist.
        topics["unsubscribed"] = 3
        next(iter(members.values())).append("missing")
        cases.append((members, topics))
    return cases


def _case_line(strategy, members, topics):
    subs = ";".join(f"{m}:{','.join(ts)}" for m, ts in members.items())
    return f"{strategy} {subs} {','.join(f'{t}={n}' for t, n in topics.items())}"


def _parse_answer(line):
    out = {}
    for part in line.split(";"):
        member, tps = part.split(":", 1)
        out[member] = sorted((tp.rsplit("/", 1)[0], int(tp.rsplit("/", 1)[1])) for tp in tps.split(",") if tp)
    return out


@pytest.mark.parametrize("version", KAFKA_VERSIONS)
def test_range_and_roundrobin_equal_kafkas_assignors(tmp_path, version):
    rng = random.Random(2024 + len(version))
    cases = _random_cases(rng, 250)
    g = ConsumerGroup(tmp_path, "g")
    for strategy in ("range", "roundrobin"):
        answers = jvm_referee.run("AssignorReferee", [_case_line(strategy, m, t) for m, t in cases], version)
        for (members, topics), answer in zip(cases, answers):
            ours = g.assign(members, topics, strategy=strategy)
            assert {m: sorted(tps) for m, tps in ours.items()} == _parse_answer(answer), (strategy, members, topics)


def test_cooperative_sticky_is_balanced_and_sticky(tmp_path):
    rng = random.Random(7)
    g = ConsumerGroup(tmp_path, "g")
    for _ in range(200):
        topics = {f"t{i}": rng.randint(1, 10) for i in range(rng.randint(1, 3))}
        all_tps = sorted((t, p) for t, n in topics.items() for p in range(n))
        members = [f"m{i}" for i in range(rng.randint(1, 6))]
        first = g.assign(members, topics, strategy="sticky")
        # Members leave and join; the survivors' previous partitions are given back.
        survivors = [m for m in members if rng.random() < 0.7] or members[:1]
        now = survivors + [f"new{i}" for i in range(rng.randint(0, 3))]
        previous = {m: first[m] for m in survivors}
        second = g.assign(now, topics, strategy="sticky", previous=previous)
        # One cooperative rebalance: the same choice, less what changes owner.
        coop = g.assign(now, topics, strategy="cooperative-sticky", previous=previous)
        assert coop == {m: [tp for tp in second[m] if not any(tp in previous.get(o, []) for o in now if o != m)]
                        for m in now}
        for result, group in ((first, members), (second, now)):
            got = sorted(tp for tps in result.values() for tp in tps)
            assert got == all_tps, "every partition exactly once"
            sizes = [len(result[m]) for m in group]
            assert max(sizes) - min(sizes) <= 1, sizes
        quota = len(all_tps) // len(now)
        for m in survivors:
            kept = set(second[m]) & set(first[m])
            assert len(kept) >= min(len(first[m]), quota), (m, first[m], second[m])
    # Different subscriptions: each partition goes to a subscriber, counts as even as they allow.
    result = g.assign({"a": ["x"], "b": ["x", "y"], "c": ["y"]}, {"x": 4, "y": 2}, strategy="cooperative-sticky")
    assert sorted(len(v) for v in result.values()) == [2, 2, 2]
    assert all(t == "x" for t, _ in result["a"]) and all(t == "y" for t, _ in result["c"])
    with pytest.raises(ValueError, match="assignment strategy 'sticky-ish'"):
        g.assign(["a"], {"x": 1}, strategy="sticky-ish")


# -- consumers ---------------------------------------------------------------------------------


def test_poll_commit_and_resume_after_a_restart(tmp_path):
    t = _topic(tmp_path)
    seen = []
    with Consumer(tmp_path, "g", ["t"]) as c:
        assert sorted(c.assignment()) == [("t", 0), ("t", 1), ("t", 2)]
        while len(seen) < 120:
            batch = c.poll(50)
            assert 0 < len(batch) <= 50
            seen.extend((r.topic, r.partition, r.offset) for r in batch)
        c.commit()
        positions = {tp: c.position(*tp) for tp in c.assignment()}
        assert sum(positions.values()) == len(seen)
    # close() committed; a new consumer of the group resumes there.
    with Consumer(tmp_path, "g", "t") as c:
        while batch := c.poll(1000):
            seen.extend((r.topic, r.partition, r.offset) for r in batch)
        assert c.poll() == []
    assert len(seen) == len(set(seen)) == 300 and set(seen) == _all_offsets(t)
    assert ConsumerGroup(tmp_path, "g").committed() == {("t", p): end for p, end in t.end_offsets().items()}
    # New records are seen by a consumer that is already open.
    with Consumer(tmp_path, "g", "t") as c:
        assert c.poll() == []
        with Producer(t) as p:
            p.send(b"late", partition=2)
        (late,) = c.poll()
        assert (late.value, late.partition, late.key) == (b"late", 2, None)


def test_records_seek_and_arrow(tmp_path):
    t = _topic(tmp_path, partitions=2, records=40)
    with Consumer(tmp_path, "g", ["t"], auto_offset_reset="latest") as c:
        assert c.poll() == [] and c.position("t", 0) == t.end_offsets()[0]
        c.seek_to_beginning()
        first = c.poll(1)[0]
        assert first.offset == 0 and first.value.startswith(b"value-") and first.key.startswith(b"key-")
        c.seek("t", 1, 3)
        assert c.position("t", 1) == 3
        c.seek_to_end([("t", 0)])
        rest = c.poll(1000)
        assert {r.partition for r in rest} == {1} and rest[0].offset == 3
        c.seek_to_beginning()
        batch = c.poll_arrow(max_records=5)
        assert batch.schema.names == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
        part = batch.column("partition")[0].as_py()
        # At most max_records, as Kafka's max.poll.records, though the Kafka batch holds more.
        assert batch.column("offset").to_pylist() == [0, 1, 2, 3, 4]
        assert c.position("t", part) == 5
        assert c.poll_arrow(max_records=0) is None and c.position("t", part) == 5
        seen = [0, 1, 2, 3, 4]
        while (b := c.poll_arrow(max_records=3)) is not None:
            assert b.num_rows <= 3
            if b.column("partition")[0].as_py() == part:
                seen += b.column("offset").to_pylist()
        assert seen == list(range(t.end_offsets()[part]))
        with pytest.raises(kafkalog.KafkaLogError, match="not assigned"):
            c.seek("t", 7, 0)
        with pytest.raises(ValueError, match=">= 0"):
            c.seek("t", 0, -1)
    ConsumerGroup(tmp_path, "strict").commit({("t", 0): 2})
    with Consumer(tmp_path, "strict", ["t"], auto_offset_reset="none") as c:
        assert c.position("t", 0) == 2
        with pytest.raises(kafkalog.NoOffsetForPartitionError, match="NoOffsetForPartition: .* t-1"):
            c.poll()


def test_read_committed_consumer_skips_aborted_transactions(tmp_path):
    t = Topic.create(tmp_path, "t", 2)
    with Producer(t, transactional_id="tx") as p:
        p.begin_transaction()
        p.send(b"keep-0", partition=0)
        p.send(b"keep-1", partition=1)
        p.commit_transaction()
        p.begin_transaction()
        p.send(b"drop-0", partition=0)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send(b"open", partition=1)
        p.flush()
        with Consumer(tmp_path, "rc", ["t"], isolation="read_committed") as c:
            assert sorted(r.value for r in c.poll()) == [b"keep-0", b"keep-1"]
            assert c.poll() == []
        with Consumer(tmp_path, "ru", ["t"]) as c:
            assert sorted(r.value for r in c.poll()) == [b"drop-0", b"keep-0", b"keep-1", b"open"]
        p.commit_transaction()
    # A consumer's isolation.level has two values; reading to the log end is a replica's.
    with pytest.raises(kafkalog.InvalidArgumentError, match="read_uncommitted or read_committed"):
        Consumer(tmp_path, "le", ["t"], isolation="log_end")


def test_consumers_of_one_group_in_one_process_share_partitions(tmp_path):
    t = _topic(tmp_path, partitions=6, records=600)
    a = Consumer(tmp_path, "g", ["t"], sync_interval_ms=0)
    first = a.poll(100)
    b = Consumer(tmp_path, "g", ["t"], sync_interval_ms=0, strategy="range")
    seen = [(r.topic, r.partition, r.offset) for r in first]
    owners = {}
    for _ in range(200):
        for c in (a, b):
            for r in c.poll(13):
                seen.append((r.topic, r.partition, r.offset))
                owners.setdefault(c.member_id, set()).add(r.partition)
    assert len(a.assignment()) == len(b.assignment()) == 3
    assert not set(a.assignment()) & set(b.assignment())
    assert len(seen) == len(set(seen)) and set(seen) == _all_offsets(t)
    assert len(owners) == 2, "both members read"
    described = ConsumerGroup(tmp_path, "g").describe()
    assert len(described["members"]) == 2 and described["protocol"] == "range"
    with pytest.raises(kafkalog.KafkaLogError, match="InconsistentGroupProtocol"):
        Consumer(tmp_path, "g", ["t"], strategy="roundrobin")
    a.close()
    b.close()
    assert ConsumerGroup(tmp_path, "g").describe()["members"] == {}


WORKER = textwrap.dedent(
    """
    import json, sys, time, kafkalog
    data_dir, out = sys.argv[1], sys.argv[2]
    group = kafkalog.ConsumerGroup(data_dir, "shared")
    ends = kafkalog.Topic.open(data_dir, "t").end_offsets()
    c = kafkalog.Consumer(data_dir, "shared", ["t"], sync_interval_ms=20, strategy="cooperative-sticky")
    deadline = time.time() + 60
    while len(group.describe()["members"]) < 2 and time.time() < deadline:
        time.sleep(0.02)
    read = []
    while time.time() < deadline:
        batch = c.poll(7)
        read.extend([r.partition, r.offset] for r in batch)
        c.commit()
        if not batch:
            done = group.committed()
            if all(done.get(("t", p)) == end for p, end in ends.items()):
                break
            time.sleep(0.01)
    c.close()
    json.dump(read, open(out, "w"))
    """
)


def test_two_processes_consume_a_topic_together(tmp_path):
    data = tmp_path / "data"
    t = _topic(data, partitions=6, records=900)
    outs = [tmp_path / f"read{i}.json" for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(data), str(o)], stderr=subprocess.PIPE, text=True)
             for o in outs]
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err[-3000:]
    reads = [[("t", p, o) for p, o in json.loads(o.read_text())] for o in outs]
    assert all(reads), "both processes read records"
    every = reads[0] + reads[1]
    assert len(every) == len(set(every)), "no record read twice"
    assert set(every) == _all_offsets(t), "no record missed"


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "sticky"])
@pytest.mark.parametrize("version", KAFKA_VERSIONS)
def test_sticky_keeps_as_much_as_kafkas(tmp_path, version, strategy):
    """Kafka's CooperativeStickyAssignor, run as a group runs it (a first rebalance revokes what
    moves, a second gives it out), and its eager StickyAssignor (one rebalance, the previous
    assignment in each member's user data): Kafka's final assignment and ours are both balanced,
    and ours keeps at least as many partitions with their previous owners as Kafka's."""
    rng = random.Random(99)
    g = ConsumerGroup(tmp_path, "g")
    cases = []
    for _ in range(60):
        topics = {f"t{i}": rng.randint(1, 9) for i in range(rng.randint(1, 3))}
        members = [f"m{i}" for i in range(rng.randint(1, 5))]
        previous = g.assign(members, topics, strategy="roundrobin")
        survivors = [m for m in members if rng.random() < 0.7] or members[:1]
        now = survivors + [f"new{i}" for i in range(rng.randint(0, 2))]
        cases.append((topics, now, {m: previous[m] for m in survivors}))
    lines = []
    for topics, now, previous in cases:
        subs = ";".join(
            f"{m}:{','.join(topics)}:{','.join(f'{t}/{p}' for t, p in previous.get(m, []))}" for m in now
        )
        lines.append(f"{strategy} {subs} {','.join(f'{t}={n}' for t, n in topics.items())}")
    answers = jvm_referee.run("AssignorReferee", lines, version)
    for (topics, now, previous), answer in zip(cases, answers):
        kafkas = _parse_answer(answer)
        ours = g.assign(now, topics, strategy=strategy, previous=previous)
        if strategy == "cooperative-sticky":
            # The second rebalance, as Kafka's answer: members own what the first gave them.
            ours = g.assign(now, topics, strategy=strategy, previous=ours)
        sizes = lambda a: sorted(len(v) for v in a.values())  # noqa: E731
        assert sizes(ours) == sizes(kafkas), (topics, now, previous, ours, kafkas)

        def kept(a):
            return sum(len(set(a[m]) & set(previous.get(m, []))) for m in now)

        assert kept(ours) >= kept(kafkas), (topics, now, previous, ours, kafkas)


@pytest.mark.parametrize("version", KAFKA_VERSIONS)
def test_sticky_equals_kafkas_when_members_subscribe_alike(tmp_path, version):
    """With one subscription for every member (Kafka's constrained sticky algorithm), the choice is
    Kafka's own: its StickyAssignor's, and for cooperative-sticky what CooperativeStickyAssignor
    answers in one rebalance (partitions changing owner held back) and in the next. Previous
    partitions come in any order, some of them claimed by two members."""
    rng = random.Random(4242)
    g = ConsumerGroup(tmp_path, "g")
    cases = []
    for _ in range(150):
        topics = {f"t{i}": rng.randint(1, 9) for i in range(rng.randint(1, 3))}
        all_tps = [(t, p) for t, n in topics.items() for p in range(n)]
        members = [rng.choice(["m", "consumer-", "c"]) + str(i) for i in range(rng.randint(1, 7))]
        previous = {}
        for m in members:
            if rng.random() < 0.8:
                owned = rng.sample(all_tps, rng.randint(0, min(len(all_tps), 6)))
                previous[m] = owned
        cases.append((topics, members, previous))

    def line(strategy, topics, members, previous):
        subs = ";".join(f"{m}:{','.join(topics)}:{','.join(f'{t}/{p}' for t, p in previous.get(m, []))}"
                        for m in members)
        return f"{strategy} {subs} {','.join(f'{t}={n}' for t, n in topics.items())}"

    for strategy, referee in (("sticky", "sticky"), ("cooperative-sticky", "cooperative-sticky-once"),
                              ("cooperative-sticky", "cooperative-sticky")):
        answers = jvm_referee.run("AssignorReferee", [line(referee, *c) for c in cases], version)
        for (topics, members, previous), answer in zip(cases, answers):
            ours = g.assign(members, topics, strategy=strategy, previous=previous)
            if referee == "cooperative-sticky":
                ours = g.assign(members, topics, strategy=strategy, previous=ours)
            assert {m: sorted(tps) for m, tps in ours.items()} == _parse_answer(answer), \
                (referee, topics, members, previous)


def test_assign_with_partition_counts_reads_nothing_from_disk(tmp_path):
    group = ConsumerGroup(tmp_path / "no-such-data-dir", "g")
    got = group.assign(["a", "b"], {"t": 4}, strategy="roundrobin")
    assert got == {"a": [("t", 0), ("t", 2)], "b": [("t", 1), ("t", 3)]}


def test_consumer_records_compare_repr_and_pickle(tmp_path):
    """A ConsumerRecord is a value like aiokafka's: two polls of the same record compare equal
    (topic and partition included), it pickles, and its repr shows where it is and what it
    holds."""
    import pickle

    _topic(tmp_path, partitions=1, records=3)
    polls = []
    for group in ("a", "b"):
        with Consumer(tmp_path, group, ["t"]) as c:
            polls.append(c.poll(10))
    assert polls[0] == polls[1] and len(polls[0]) == 3
    assert polls[0][0] != polls[0][1]
    r = polls[0][0]
    back = pickle.loads(pickle.dumps(r))
    assert back == r and (back.topic, back.partition, back.offset) == ("t", 0, 0)
    assert repr(r).startswith("ConsumerRecord(topic='t', partition=0, offset=0, timestamp=")
    assert f"key={r.key!r}, value={r.value!r}" in repr(r)


def test_commit_and_assign_argument_mistakes(tmp_path):
    """Offsets given as a list are refused with a TypeError naming the form wanted; the previous
    assignment may list members that have left (their partitions are free again); a negative
    partition count is refused."""
    _topic(tmp_path, partitions=2, records=4)
    with Consumer(tmp_path, "g", ["t"]) as c:
        c.poll()
        with pytest.raises(TypeError, match=r"mapping \{\(topic, partition\): offset\}"):
            c.commit([("t", 1, 0)])
    group = ConsumerGroup(tmp_path, "g")
    with pytest.raises(TypeError, match="mapping"):
        group.commit([("t", 1, 0)])
    previous = {"m1": [("t", 0)], "m2": [("t", 1)]}
    for strategy in ("sticky", "cooperative-sticky"):
        got = group.assign(["m1"], {"t": 2}, strategy, previous=previous)
        assert ("t", 0) in got["m1"], (strategy, got)
    assert group.assign(["m1"], {"t": 2}, "sticky", previous=previous) == {"m1": [("t", 0), ("t", 1)]}
    with pytest.raises(kafkalog.InvalidArgumentError, match="-1 partitions"):
        group.assign(["m1"], {"t": -1}, "range")
