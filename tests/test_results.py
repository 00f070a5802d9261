"""The typed results of kafkalog.results: Kafka's TimestampAndOffset, OffsetPosition,
TimestampOffset, LogOffsetPosition, LogOffsetMetadata and ProducerStateEntry come back as named
tuples with their fields, still equal to the plain tuples earlier versions returned; and the
aliases kept for renamed methods and arguments answer as the new names do."""

import pickle

import pytest

import kafkalog
from kafkalog.results import (
    LogOffsetMetadata,
    LogOffsetPosition,
    OffsetPosition,
    ProducerStateEntry,
    TimestampAndOffset,
    TimestampOffset,
)


@pytest.fixture
def log(tmp_path):
    log = kafkalog.Log(tmp_path / "t-0", read_only=False, create=True,
                       config={"index.interval.bytes": 1})
    for i in range(4):
        log.append([{"value": b"v%d" % i, "timestamp": 1000 * (i + 1)}])
    log.append([{"value": b"txn", "timestamp": 9000}], producer_id=7, producer_epoch=2,
               base_sequence=0, transactional=True)
    yield log
    log.close()


def test_offset_for_timestamp_is_kafkas_timestamp_and_offset(log):
    found = log.offset_for_timestamp(2500)
    assert type(found) is TimestampAndOffset
    assert (found.timestamp, found.offset) == (3000, 2) == found
    assert found.leader_epoch == 0
    ts, offset = found = log.offset_for_timestamp(kafkalog.MAX_TIMESTAMP)
    assert (ts, offset, found.leader_epoch) == (9000, 4, 0)
    assert log.offset_for_timestamp(kafkalog.LATEST_TIMESTAMP) == TimestampAndOffset(-1, 5)

    # The leader epoch as Kafka's ListOffsets answers it, and no tiered storage: offset -1.
    def answer(timestamp):
        t = log.offset_for_timestamp(timestamp)
        return (t.timestamp, t.offset, t.leader_epoch)

    assert answer(kafkalog.LATEST_TIMESTAMP) == (-1, 5, 0)
    assert answer(kafkalog.EARLIEST_TIMESTAMP) == answer(kafkalog.EARLIEST_LOCAL_TIMESTAMP) == (-1, 0, 0)
    for nothing_tiered in (kafkalog.LATEST_TIERED_TIMESTAMP, kafkalog.EARLIEST_PENDING_UPLOAD_TIMESTAMP):
        assert answer(nothing_tiered) == (-1, -1, -1)
    assert repr(found) == "TimestampAndOffset(timestamp=9000, offset=4, leader_epoch=0)"
    assert pickle.loads(pickle.dumps(found)).leader_epoch == 0
    with pytest.raises(kafkalog.InvalidArgumentError, match="unknown special timestamp -7"):
        log.offset_for_timestamp(-7)


def test_index_entries_and_segment_lookups(log, tmp_path):
    log.close()  # trims the active segment's indexes to their entries
    seg = kafkalog.Segment(tmp_path / "t-0", 0)
    entries = seg.offset_index_entries()
    assert entries and all(type(e) is OffsetPosition for e in entries)
    # Kafka indexes a batch once index.interval.bytes were written since the last entry: not the first.
    assert [e.offset for e in entries] == [1, 2, 3, 4]
    assert entries[0].position > 0
    times = seg.time_index_entries()
    assert all(type(t) is TimestampOffset for t in times)
    assert times[-1] == TimestampOffset(timestamp=9000, offset=4)
    assert seg.find_offset_by_timestamp(2001) == TimestampAndOffset(3000, 2)
    pos = seg.translate_offset(3)
    assert type(pos) is LogOffsetPosition and pos.offset == 3 and pos.position == entries[2].position
    assert seg.max_timestamp_so_far == seg.max_timestamp == 9000
    seg.close()


def test_log_end_offset_metadata(log):
    m = log.log_end_offset_metadata
    assert type(m) is LogOffsetMetadata
    assert (m.message_offset, m.segment_base_offset) == (5, 0)
    assert m.relative_position_in_segment == log.size_in_bytes


def test_active_producers_are_producer_state_entries(log):
    entry = log.active_producers[7]
    assert type(entry) is ProducerStateEntry
    assert (entry.producer_id, entry.producer_epoch, entry.last_seq, entry.last_data_offset) == (7, 2, 0, 4)
    assert entry.current_txn_first_offset == 4 and entry.last_timestamp == 9000
    # The dict keys of earlier versions still answer.
    assert (entry["epoch"], entry["last_sequence"], entry["last_offset"], entry["txn_first_offset"]) == (2, 0, 4, 4)
    with pytest.raises(KeyError):
        entry["nope"]
    log.append_txn_marker(7, 2, commit=True)
    assert log.active_producers[7].current_txn_first_offset is None


def test_renamed_names_keep_their_aliases(log):
    assert log.read(0, max_bytes=1)["records"] == log.read(0, max_length=1)["records"]
    assert len(log.read(0, 1)["batches"]) == 1
    with pytest.raises(TypeError, match="not both"):
        log.read(0, 10, max_bytes=10)
    # write_txn_marker is append_txn_marker.
    log.append([{"value": b"t2"}], producer_id=8, producer_epoch=0, base_sequence=0, transactional=True)
    offset = log.write_txn_marker(8, 0, commit=False)
    assert offset == log.log_end_offset - 1
    assert log.batches(offset)[0].control_type == "ABORT"
