"""Property tests (hypothesis) over the public Python API with bad input: wrong types, negative,
huge and overflowing offsets and sizes, closed logs, a log closed while other threads use it,
folders that are not Kafka partitions, symlinks, and corrupt batch headers claiming huge record
counts. Every call either succeeds or raises a `KafkaLogError` subclass, `TypeError`,
`ValueError` or `OverflowError` with a message (an `OSError` where the file system itself
refuses, e.g. a missing path or a symlink loop), never a panic (pyo3's `PanicException`, a
`BaseException`), a crash or a hang."""

import os
import struct
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkalog

ALLOWED = (kafkalog.KafkaLogError, TypeError, ValueError, OverflowError)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))

# Offsets and sizes around every boundary a Java long/int or a Rust usize/i64 has.
BIG = st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64, -(2**63), -(2**63) - 1, 10**30])
OFFSETS = st.one_of(st.integers(min_value=-5, max_value=120), BIG, st.integers())
WRONG = st.one_of(st.text(max_size=5), st.binary(max_size=5), st.floats(), st.lists(st.integers(), max_size=2),
                  st.dictionaries(st.text(max_size=2), st.integers(), max_size=1))
ISOLATIONS = ["read_uncommitted", "read_committed", "log_end", "high_watermark", "committed"]


def outcome(fn, *args, allowed=ALLOWED, **kwargs):
    """Calls fn; returns its result, or the exception if it is one the API may raise. Anything
    else (a PanicException above all) fails the test with what was called."""
    try:
        return fn(*args, **kwargs)
    except BaseException as e:  # noqa: BLE001 - PanicException is a BaseException
        if isinstance(e, allowed):
            assert str(e).strip(), f"{type(e).__name__} without a message from {fn.__name__}{args}{kwargs}"
            return e
        raise AssertionError(f"{fn.__name__}{args}{kwargs} raised {type(e).__module__}.{type(e).__name__}: {e}") from e


def write_log(path, n=100, **config):
    log = kafkalog.Log(path, read_only=False, create=True,
                       config={"segment.bytes": 2000, **config})
    for i in range(0, n, 10):
        log.append([{"key": b"k", "value": b"v%d" % (i + j), "timestamp": 1_700_000_000_000 + i + j}
                    for j in range(10)], compression=["none", "gzip", "zstd", "lz4", "snappy"][i // 10 % 5])
    log.append([{"value": b"t"}], producer_id=9, producer_epoch=0, base_sequence=0, transactional=True)
    log.write_txn_marker(9, 0, commit=False)
    return log


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("props") / "props-0"
    write_log(path).close()
    return path


@pytest.fixture(scope="module")
def ro_log(folder):
    log = kafkalog.Log(folder)
    yield log
    log.close()


@SETTINGS
@given(start=OFFSETS, end=st.one_of(st.none(), OFFSETS), max_bytes=OFFSETS, isolation=st.sampled_from(ISOLATIONS + ["x"]),
       rows=OFFSETS)
def test_reads_with_any_offsets_and_sizes(ro_log, start, end, max_bytes, isolation, rows):
    # No unbounded allocation from a size: max_bytes of 2**63 reads what there is.
    r = outcome(ro_log.read, start, max_bytes, isolation)
    if isinstance(r, dict) and 0 <= start < ro_log.log_end_offset:
        assert all(b.base_offset <= start <= b.last_offset or b.base_offset >= start for b in r["batches"][:1])
    recs = outcome(lambda: [x.offset for x in ro_log.records(start, end, isolation)])
    if isinstance(recs, list):
        assert recs == sorted(recs) and all(start <= o < ro_log.log_end_offset for o in recs)
    outcome(ro_log.batches, start, end, isolation)
    outcome(lambda: ro_log.to_arrow(start, end, isolation, batch_rows=rows).read_all())
    outcome(ro_log.offset_for_timestamp, start)
    outcome(ro_log.collect_aborted_transactions, start, max_bytes)
    outcome(ro_log.latest_offset, isolation)


def test_max_bytes_extremes(ro_log):
    # A fetch reads from one segment (as Kafka's does): all of the first one, nothing allocated
    # from the size asked for.
    whole = ro_log.read(0, 2**63 - 1, "log_end")
    offsets = [r.offset for b in whole["batches"] for r in b.records]
    assert offsets == list(range(len(offsets))) and len(offsets) >= 10
    # 0 bytes still returns the first batch (min_one_message), and nothing without it.
    assert len(ro_log.read(0, 0, "log_end")["batches"]) == 1
    assert ro_log.read(0, 0, "log_end", min_one_message=False)["batches"] == []
    for too_big in (2**63, 2**64, 10**30):
        e = outcome(ro_log.read, 0, too_big)
        assert isinstance(e, (dict, OverflowError)), e


def test_negative_sizes_counts_and_times_are_value_errors_naming_the_argument(ro_log, tmp_path):
    # Python's int to an unsigned parameter raises OverflowError; a negative size is a bad value.
    topic = kafkalog.Topic.create(tmp_path, "t", 1)
    calls = {
        "max_length": lambda: ro_log.read(0, -1),
        "max_bytes": lambda: ro_log.read(0, max_bytes=-5),
        "linger_ms": lambda: kafkalog.Producer(topic, linger_ms=-1),
        "batch_size": lambda: kafkalog.Producer(topic, batch_size=-1),
        "sync_interval_ms": lambda: kafkalog.Consumer(tmp_path, "g", "t", sync_interval_ms=-1),
    }
    for name, call in calls.items():
        with pytest.raises(kafkalog.InvalidArgumentError, match=f"{name} must be 0 or more, got -"):
            call()
    for name in ("batch_rows", "batch_bytes"):  # sizes of at least one, 0 and -1 said alike
        for bad in (0, -1):
            with pytest.raises(kafkalog.InvalidArgumentError, match=f"{name} must be at least 1, got {bad}"):
                ro_log.to_arrow(**{name: bad})
    with kafkalog.Consumer(tmp_path, "g", "t") as consumer:
        for poll in (consumer.poll, consumer.poll_arrow):
            with pytest.raises(ValueError, match="max_records must be 0 or more, got -1"):
                poll(-1)


def test_bad_values_to_writes_are_invalid_argument_errors_and_change_nothing(tmp_path):
    """What a black-box tester passed: each one a KafkaLogError naming what is wrong, never
    Python's ValueError or OverflowError alone, and the log as it was."""
    log = kafkalog.Log(tmp_path / "t-0", read_only=False, create=True)
    log.append([{"value": b"first"}])
    calls = {
        "no records to append": lambda: log.append([]),
        "unknown record field 'extra'": lambda: log.append([{"value": b"a", "extra": 1}]),
        "a header is a \\(key, value\\) pair": lambda: log.append([{"value": b"a", "headers": [("h",)]}]),
        "timestamp 9223372036854775808 is out of range": lambda: log.append([{"value": b"a", "timestamp": 2**63}]),
        "producer_epoch 40000 does not fit": lambda: log.append([{"value": b"a"}], producer_id=1,
                                                                 producer_epoch=40000, base_sequence=0),
        "base_sequence 2147483648 does not fit": lambda: log.append([{"value": b"a"}], base_sequence=2**31),
        "leader_epoch 2147483648 does not fit": lambda: log.append([{"value": b"a"}], leader_epoch=2**31),
        # Kafka's epochs are 0 and up, -1 for none; -5 was stamped into the batch (a user tester).
        "leader epoch -5: a leader epoch is 0 or more": lambda: log.append([{"value": b"a"}], leader_epoch=-5),
        "leader epoch -2: a leader epoch is 0 or more": lambda: log.append_txn_marker(
            1, 0, commit=True, leader_epoch=-2),
        "coordinator_epoch -2147483649 does not fit": lambda: log.append_txn_marker(
            1, 0, commit=True, coordinator_epoch=-2**31 - 1),
        "header key '\\\\ud800' is not valid UTF-8": lambda: log.append([{"value": b"a", "headers": [("\ud800", b"")]}]),
        "value '\\\\udc80' is not valid UTF-8": lambda: log.append([{"value": "\udc80"}]),
        "negative offset": lambda: log.truncate_fully_and_start_at(-3),
        "Not a number of type INT": lambda: kafkalog.Log(tmp_path / "u-0", read_only=False, create=True,
                                                         config={"segment.bytes": str(2**40)}),
        "partition_leader_epoch 2147483648 does not fit": lambda: kafkalog.encode_batch(
            [{"value": b"a"}], partition_leader_epoch=2**31),
    }
    for message, call in calls.items():
        with pytest.raises(kafkalog.InvalidArgumentError, match=message):
            call()
    # Kafka's LogValidator: an idempotent batch without a sequence is refused, not written.
    with pytest.raises(kafkalog.InvalidRecordError, match="Invalid sequence number -1"):
        log.append([{"value": b"a"}], producer_id=1, producer_epoch=0, base_sequence=-1)
    assert [r.value for r in log.records()] == [b"first"]
    assert (log.log_start_offset, log.log_end_offset) == (0, 1)
    assert not (tmp_path / "u-0").exists()
    log.close()


@SETTINGS
@given(bad=WRONG)
def test_wrong_types_are_type_errors(ro_log, folder, bad):
    # Offsets, sizes and raw bytes: no value of another type is taken.
    for call in [
        lambda: ro_log.read(bad),
        lambda: ro_log.read(0, bad),
        lambda: ro_log.records(bad),
        lambda: ro_log.batches(0, bad),
        lambda: ro_log.to_arrow(bad),
        lambda: ro_log.offset_for_timestamp(bad),
        lambda: kafkalog.encode_batch(bad),
    ] + ([] if isinstance(bad, bytes) else [lambda: kafkalog.decode_batches(bad)]):
        r = outcome(call)
        assert isinstance(r, BaseException), f"{bad!r} was taken: {r!r}"
    # Where text, bytes or a mapping may be valid, a wrong one is still a clear error.
    for call in [
        lambda: kafkalog.Log(folder, config=bad),
        lambda: kafkalog.encode_batch([{"value": bad}]),
        lambda: kafkalog.encode_batch([{"value": b"v"}], compression=bad),
        lambda: ro_log.records(0, None, bad),
    ]:
        r = outcome(call)
        if isinstance(r, kafkalog.Log):
            r.close()


@SETTINGS
@given(offset=OFFSETS, n=st.integers(min_value=-3, max_value=3), compression=st.sampled_from(["none", "zstd", "nope", ""]))
def test_writes_with_any_offsets(tmp_path_factory, offset, n, compression):
    path = tmp_path_factory.mktemp("w") / "w-0"
    log = write_log(path, n=20)
    try:
        outcome(log.append, [{"value": b"x"}] * max(n, 0), compression=compression)
        outcome(log.append, [{"value": b"x"}], producer_id=offset, producer_epoch=n, base_sequence=offset)
        outcome(log.append_batches, kafkalog.encode_batch([{"value": b"y"}], base_offset=0) if n > 0 else b"\0" * max(n, 0),
                as_follower=n > 1)
        outcome(log.update_high_watermark, offset)
        outcome(log.delete_records, offset)
        outcome(log.truncate_to, offset)
        outcome(log.truncate_fully_and_start_at, offset if n == 3 else 0)
        outcome(log.write_txn_marker, offset, n, commit=True)
        assert [r.offset for r in log.records()] == sorted(r.offset for r in log.records())
    finally:
        log.close()


def every_call(log):
    """(name, call) for each method; reads and writes of a closed log must raise."""
    return [
        ("read", lambda: log.read(0)),
        ("records", lambda: list(log.records())),
        ("batches", lambda: log.batches()),
        ("to_arrow", lambda: log.to_arrow().read_all()),
        ("append", lambda: log.append([{"value": b"after close"}])),
        ("append_batches", lambda: log.append_batches(kafkalog.encode_batch([{"value": b"v"}]))),
        ("offset_for_timestamp", lambda: log.offset_for_timestamp(0)),
        ("roll", lambda: log.roll()),
        ("flush", lambda: log.flush()),
        ("truncate_to", lambda: log.truncate_to(5)),
        ("delete_old_segments", lambda: log.delete_old_segments()),
        ("collect_aborted_transactions", lambda: log.collect_aborted_transactions(0, 100)),
        ("write_txn_marker", lambda: log.write_txn_marker(9, 0, commit=True)),
    ]


@pytest.mark.parametrize("read_only", [True, False])
def test_closed_log(tmp_path, read_only):
    path = tmp_path / "closed-0"
    write_log(path, n=30).close()
    log = kafkalog.Log(path, read_only=read_only)
    it = log.records()
    next(it)
    log.close()
    for name, call in every_call(log) + [("an open records iterator", lambda: list(it))]:
        r = outcome(call)
        assert isinstance(r, kafkalog.KafkaLogError), f"{name} on a closed log answered {r!r}"
        if not isinstance(r, kafkalog.ReadOnlyError):
            assert "closed" in str(r), r
    # Offsets stay readable; closing twice is fine.
    assert log.log_end_offset == 32 and log.latest_offset() == 32
    assert log.close() is None


@pytest.mark.parametrize("read_only", [True, False])
def test_close_while_other_threads_use_the_log(tmp_path, read_only):
    path = tmp_path / "threads-0"
    write_log(path, n=200).close()
    log = kafkalog.Log(path, read_only=read_only, config={"segment.bytes": 2000})
    started, failures = threading.Barrier(7), []

    def worker(k):
        started.wait()
        try:
            for _ in range(200):
                for name, call in every_call(log):
                    if k % 2 == 0 or name in ("append", "roll", "read", "to_arrow"):
                        outcome(call)
        except BaseException as e:  # noqa: BLE001
            failures.append(e)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(6)]
    for t in threads:
        t.start()
    started.wait()
    log.close()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive(), "a thread using a closed log hangs"
    assert not failures, failures[0]
    # What was acknowledged before the close is on disk and reads back.
    again = kafkalog.Log(path)
    offsets = [r.offset for r in again.records(isolation="read_committed")]
    assert offsets == sorted(set(offsets))
    again.close()


def test_folders_that_are_not_partitions(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_bytes(b"not a folder")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "readme.txt").write_text("hello")
    (tmp_path / "junk" / "abc.log").write_bytes(b"\0" * 100)
    (tmp_path / "garbage-0").mkdir()
    (tmp_path / "garbage-0" / "00000000000000000000.log").write_bytes(os.urandom(3000))
    write_log(tmp_path / "datadir" / "t-0", n=10).close()
    for name in ["empty", "file", "junk", "datadir", "garbage-0", "missing"]:
        for read_only in (True, False):
            r = outcome(kafkalog.Log, tmp_path / name, read_only=read_only,
                        allowed=ALLOWED + (OSError,))
            if isinstance(r, kafkalog.Log):
                # Only a writable open may take an empty or junk folder as a new (empty) log.
                assert not read_only or name == "garbage-0", f"read-only open of {name} gave a log"
                if name == "garbage-0":
                    outcome(lambda: list(r.records()))
                r.close()
            else:
                assert isinstance(r, BaseException), r
    # The read-only opens left the garbage as it was.
    assert os.path.getsize(tmp_path / "garbage-0" / "00000000000000000000.log") in (0, 3000)


def test_symlinks(tmp_path):
    real = tmp_path / "real-0"
    write_log(real, n=40).close()
    link = tmp_path / "link-0"
    link.symlink_to(real, target_is_directory=True)
    log = kafkalog.Log(link)
    assert [r.offset for r in log.records(isolation="read_committed")] == list(range(40))
    log.close()
    with kafkalog.Log(link, read_only=False) as log:
        log.append([{"value": b"through the link"}])
    assert kafkalog.Log(real).log_end_offset == 43
    loop = tmp_path / "loop-0"
    loop.symlink_to(tmp_path / "loop-1")
    (tmp_path / "loop-1").symlink_to(loop)
    for read_only in (True, False):
        r = outcome(kafkalog.Log, loop, read_only=read_only, create=True, allowed=ALLOWED + (OSError,))
        assert isinstance(r, BaseException), "a symlink loop opened as a log"
    # A segment file that is a dangling symlink inside a real folder.
    (real / "00000000000000009999.log").symlink_to(tmp_path / "nowhere.log")
    for read_only in (True, False):
        r = outcome(kafkalog.Log, real, read_only=read_only, allowed=ALLOWED + (OSError,))
        if isinstance(r, kafkalog.Log):
            r.close()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def with_header(batch, *, records_count=None, last_offset_delta=None, length=None):
    b = bytearray(batch)
    if records_count is not None:
        struct.pack_into(">i", b, 57, records_count)
    if last_offset_delta is not None:
        struct.pack_into(">i", b, 23, last_offset_delta)
    struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
    if length is not None:
        struct.pack_into(">i", b, 8, length)
    return bytes(b)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(count=st.one_of(BIG.filter(lambda v: -(2**31) <= v < 2**31), st.integers(min_value=-(2**31), max_value=2**31 - 1)),
       delta=st.integers(min_value=-(2**31), max_value=2**31 - 1),
       compression=st.sampled_from(["none", "gzip", "zstd", "lz4", "snappy"]))
def test_huge_record_counts_in_a_corrupt_header(tmp_path_factory, count, delta, compression):
    batch = kafkalog.encode_batch([{"value": b"v%d" % i} for i in range(3)], compression=compression)
    bad = with_header(batch, records_count=count, last_offset_delta=delta if count != 3 else None)
    r = outcome(kafkalog.decode_batches, bad)
    if count != 3:
        assert isinstance(r, kafkalog.CorruptRecordError), f"records_count {count} decoded as {r!r}"
    d = tmp_path_factory.mktemp("seg")
    (d / "00000000000000000000.log").write_bytes(batch + bad)
    seg = outcome(kafkalog.Segment, d, 0)
    if isinstance(seg, kafkalog.Segment):
        outcome(seg.batches)
        outcome(seg.read, 0, 2**31)
        seg.close()
    part = d / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(batch + bad + batch)
    log = outcome(kafkalog.Log, part)
    if isinstance(log, kafkalog.Log):
        outcome(lambda: list(log.records()))
        outcome(lambda: log.to_arrow().read_all())
        log.close()


@SETTINGS
@given(data=st.binary(max_size=300), length=st.one_of(st.none(), BIG.filter(lambda v: -(2**31) <= v < 2**31)))
def test_decode_batches_of_anything(data, length):
    batch = kafkalog.encode_batch([{"value": b"abc"}], compression="gzip")
    for blob in (data, batch[:61] + data, with_header(batch, length=length) if length is not None else batch + data):
        outcome(kafkalog.decode_batches, blob)
        outcome(kafkalog.decode_batches, blob, max_decompressed_bytes=0)
        outcome(kafkalog.decode_batches, blob, max_decompressed_bytes=2**64 - 1)


def test_paths_are_taken_as_os_takes_them(tmp_path):
    """str, bytes and os.PathLike, as Python's `os` functions take paths (a user tester's
    `Log(b"/path")` was refused with pyo3's "cannot be converted to 'PyString'")."""
    kafkalog.Topic.create(os.fsencode(tmp_path), "t", 1)
    with kafkalog.Log(os.fsencode(tmp_path / "t-0"), read_only=False) as log:
        log.append([{"value": b"v"}])
    assert [r.value for r in kafkalog.Log(os.fsencode(tmp_path / "t-0")).records()] == [b"v"]
    assert kafkalog.DataDir(os.fsencode(tmp_path)).topics() == {"t": 1}
    assert kafkalog.Topic.open(os.fsencode(tmp_path), "t").partitions == 1
    with pytest.raises(TypeError, match="expected str, bytes or os.PathLike object, not int"):
        kafkalog.Log(5)
