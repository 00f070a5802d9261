"""Log.to_arrow / Log.append_arrow: Spark's Kafka source schema, rows equal to the record iterator
at every isolation level, streaming with flat memory, and Spark's Kafka sink columns back in."""

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

import kafkalog

SPARK_KAFKA_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
)
HEADERS_FIELD = pa.field(
    "headers",
    pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))),
)


def make_log(path, **config):
    return kafkalog.Log(str(path), read_only=False, create=True, config=config or None)


@pytest.fixture
def txn_log(tmp_path):
    """A log with plain records, a committed and an aborted transaction, headers and nulls."""
    path = tmp_path / "payments-2"
    with make_log(path, **{"segment.bytes": 4096}) as log:
        for i in range(40):
            headers = [("i", str(i).encode()), ("nil", None)] if i % 3 == 0 else []
            log.append(
                [{"key": None if i % 5 == 0 else b"k%d" % i, "value": b"v%d" % i, "headers": headers,
                  "timestamp": 1_700_000_000_000 + i}],
                compression=["none", "gzip", "snappy", "lz4", "zstd"][i % 5],
            )
        log.append([{"value": b"committed-%d" % i, "timestamp": 1_700_000_001_000} for i in range(3)],
                   producer_id=11, producer_epoch=0, base_sequence=0, transactional=True)
        log.append([{"value": b"aborted-%d" % i, "timestamp": 1_700_000_002_000} for i in range(3)],
                   producer_id=12, producer_epoch=0, base_sequence=0, transactional=True)
        log.write_txn_marker(11, 0, commit=True)
        log.write_txn_marker(12, 0, commit=False)
        log.append([{"key": b"tail", "value": None, "timestamp": 1_700_000_003_000}])
    return path


def rows_from_records(log, isolation, **kw):
    return [
        {
            "key": r.key,
            "value": r.value,
            "offset": r.offset,
            "timestamp_ms": r.timestamp,
            "headers": [{"key": k, "value": v} for k, v in r.headers] or None,
        }
        for r in log.records(isolation=isolation, **kw)
    ]


def rows_from_arrow(table):
    out = []
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    for row, micros in zip(table.to_pylist(), ts):
        out.append(
            {
                "key": row["key"],
                "value": row["value"],
                "offset": row["offset"],
                "timestamp_ms": micros // 1000,
                "headers": row.get("headers"),
            }
        )
    return out


def test_schema_is_sparks_kafka_source_schema(txn_log):
    log = kafkalog.Log(str(txn_log))
    assert log.to_arrow().schema == SPARK_KAFKA_SCHEMA
    assert log.to_arrow(include_headers=True).schema == SPARK_KAFKA_SCHEMA.append(HEADERS_FIELD)
    assert kafkalog._kafkalog.kafka_source_schema_arrow(True) == SPARK_KAFKA_SCHEMA.append(HEADERS_FIELD)


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_rows_equal_the_record_iterator(txn_log, isolation):
    log = kafkalog.Log(str(txn_log))
    table = log.to_arrow(isolation=isolation, include_headers=True, batch_rows=7).read_all()
    assert rows_from_arrow(table) == rows_from_records(log, isolation)
    assert set(table.column("topic").to_pylist()) == {"payments"}
    assert set(table.column("partition").to_pylist()) == {2}
    assert set(table.column("timestampType").to_pylist()) == {0}
    values = table.column("value").to_pylist()
    assert (b"aborted-0" in values) == (isolation == "read_uncommitted")
    assert b"committed-0" in values


def test_end_defaults_to_what_a_consumer_can_read(tmp_path):
    with make_log(tmp_path / "t-0") as log:
        log.append([{"value": b"a"}, {"value": b"b"}])
        log.append([{"value": b"open txn"}], producer_id=5, producer_epoch=0, base_sequence=0, transactional=True)
        log.append([{"value": b"after"}])
        assert log.last_stable_offset == 2 and log.high_watermark == 4
        assert log.latest_offset("read_committed") == 2
        assert log.latest_offset("read_uncommitted") == 4
        committed = log.to_arrow(isolation="read_committed").read_all()
        assert committed.column("offset").to_pylist() == [0, 1]
        uncommitted = log.to_arrow().read_all()
        assert uncommitted.column("offset").to_pylist() == [0, 1, 2, 3]
        assert log.to_arrow(isolation="log_end").read_all().num_rows == 4
        # An explicit end past the bound is cut to it; start/end select a range.
        assert log.to_arrow(start=1, end=100, isolation="read_committed").read_all().column("offset").to_pylist() == [1]


def test_timestamps_survive_in_milliseconds(tmp_path):
    stamps = [0, 1, 999, 1_700_000_000_123, 253_402_300_799_999]
    with make_log(tmp_path / "t-0", **{"message.timestamp.after.max.ms": 2**62}) as log:
        log.append([{"value": b"x", "timestamp": t} for t in stamps])
        table = log.to_arrow().read_all()
    assert [m // 1000 for m in table.column("timestamp").cast(pa.int64()).to_pylist()] == stamps


def test_header_keys_that_are_not_utf8_read_as_java_decodes_them(tmp_path):
    """A client that does not check header keys can leave bytes that are not UTF-8 there; Kafka
    stores and serves them, and its Java code decodes each bad sequence as U+FFFD. kafkalog reads
    them the same way on every path, rather than refusing the partition."""
    import compat_util

    batch = kafkalog.encode_batch([{"value": b"v", "headers": [("KK", b"h"), ("ok", None)]}])
    with make_log(tmp_path / "t-0") as log:
        log.append([{"value": b"before"}])
        log.append_batches(compat_util.with_header_key_bytes(batch, "KK", b"\xff\xfe"), as_follower=False)
        log.append([{"value": b"after"}])
    expected = [[], [("\ufffd\ufffd", b"h"), ("ok", None)], []]
    log = kafkalog.Log(tmp_path / "t-0")
    assert [r.headers for r in log.records()] == expected
    for zero_copy in (False, True):
        table = log.to_arrow(include_headers=True, zero_copy=zero_copy).read_all()
        assert [[(h["key"], h["value"]) for h in hs or []] for hs in table.column("headers").to_pylist()] == expected
        assert log.to_arrow(zero_copy=zero_copy).read_all().num_rows == 3


def test_errors_are_kafkalog_errors(tmp_path):
    # Python's own kinds too, for code that catches those.
    with pytest.raises(kafkalog.PathNotFoundError) as missing:
        kafkalog.Log(tmp_path / "nowhere-0")
    assert isinstance(missing.value, (kafkalog.KafkaLogError, FileNotFoundError, OSError))
    assert isinstance(missing.value, kafkalog.KafkaStorageError)
    (tmp_path / "empty-0").mkdir()
    for not_a_log in (tmp_path / "empty-0", tmp_path):
        with pytest.raises(kafkalog.InvalidArgumentError) as bad:
            kafkalog.Log(not_a_log)
        assert isinstance(bad.value, kafkalog.KafkaLogError) and isinstance(bad.value, ValueError)
    with make_log(tmp_path / "t-0") as log:
        log.append([{"value": b"x"}])
        with pytest.raises(kafkalog.OffsetOutOfRangeError):
            log.to_arrow(start=5)
        with pytest.raises(ValueError):
            log.to_arrow(isolation="nope")
        with pytest.raises(ValueError):
            log.to_arrow(batch_rows=0)
        with pytest.raises(ValueError, match="batch_bytes"):
            log.to_arrow(batch_bytes=0)
        # Bad arguments the conversions of other libraries met first (a black-box tester's).
        with pytest.raises(kafkalog.InvalidArgumentError, match="must be Arrow data"):
            log.append_arrow([{"value": b"x"}])
    with pytest.raises(kafkalog.InvalidArgumentError, match="num_partitions"):
        kafkalog.partition_for_key(b"x", 0)


def test_large_records_cut_arrow_batches_by_bytes(tmp_path):
    """Rows of 200 KiB values: Arrow batches end near batch_bytes, whatever batch_rows allows,
    never inside a Kafka batch, and every row arrives once, in order."""
    value = bytes(range(256)) * 800  # 204,800 bytes
    with make_log(tmp_path / "big-0") as log:
        for i in range(12):  # Kafka batches of 2 records, about 400 KiB each
            log.append([{"key": b"k%d" % (2 * i), "value": value}, {"key": b"k%d" % (2 * i + 1), "value": value}])
        batches = list(log.to_arrow(batch_bytes=1 << 20, threads=1))
        # On threads, chunks of about a mebibyte also end batches: never more rows, nor half
        # a Kafka batch.
        on_threads = list(log.to_arrow(batch_bytes=1 << 20, threads=2))
    assert [b.num_rows for b in batches] == [4] * 6  # two Kafka batches (~800 KiB) each
    assert len(on_threads) > 6 and all(b.num_rows in (2, 4) for b in on_threads)
    for read in (batches, on_threads):
        table = pa.Table.from_batches(read)
        assert table.column("offset").to_pylist() == list(range(24))
        assert all(v == value for v in table.column("value").to_pylist())


def test_corruption_inside_the_stream_raises_a_kafkalog_error(tmp_path):
    path = tmp_path / "t-0"
    with make_log(path) as log:
        for i in range(10):
            log.append([{"value": b"record-%d" % i}])
    reader = kafkalog.Log(str(path)).to_arrow(batch_rows=1)
    assert reader.read_next_batch().num_rows == 1
    segment = path / ("0" * 20 + ".log")
    data = bytearray(segment.read_bytes())
    data[data.index(b"record-5")] ^= 0xFF  # a record in the middle, read after the stream started
    segment.write_bytes(bytes(data))
    with pytest.raises(kafkalog.CorruptRecordError, match=r"\.log"):
        reader.read_all()


def test_polars_consumes_the_stream(txn_log):
    import polars as pl
    frame = pl.from_arrow(kafkalog.Log(str(txn_log)).to_arrow(include_headers=True))
    assert frame.height == len(list(kafkalog.Log(str(txn_log)).records()))
    assert frame.schema["offset"] == pl.Int64


def test_duckdb_queries_the_stream(txn_log):
    import duckdb

    reader = kafkalog.Log(str(txn_log)).to_arrow(isolation="read_committed")
    con = duckdb.connect()
    con.register("orders", reader)
    count, max_offset = con.execute("select count(*), max(\"offset\") from orders").fetchone()
    committed = list(kafkalog.Log(str(txn_log)).records(isolation="read_committed"))
    assert (count, max_offset) == (len(committed), committed[-1].offset)


@pytest.mark.parametrize("threads", [1, None])
def test_streaming_memory_stays_flat(tmp_path, threads):
    """Peak RSS while streaming a log 40x larger than one Arrow batch stays near one batch on one
    thread, and on the default threads does not grow with the log: streaming a quarter of the
    log and all of it peak alike (each thread holds a few chunks of at most 4 MiB ahead).

    The peak of a longer read is the worst moment of more hand-offs between threads, and the
    allocator's per-thread arenas keep freed batches for reuse: a run in CI peaked 30 MiB above
    its quarter read (about 55 MiB above in both, here). The margin is a quarter of the log, so
    a read that kept what it passed (150 MB more over the last three quarters) still fails."""
    path = tmp_path / "big-0"
    value = b"x" * 1000
    with make_log(path, **{"segment.bytes": 16 << 20}) as log:
        for _ in range(200):
            log.append([{"value": value} for _ in range(1000)], compression="none")
    size = sum(f.stat().st_size for f in path.glob("*.log"))

    def growth(end: int) -> int:
        script = textwrap.dedent(
            f"""
            import json, kafkalog, pyarrow
            def hwm():  # peak RSS of this process image, in KiB (ru_maxrss would include pytest's)
                with open("/proc/self/status") as f:
                    return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
            imports = hwm()
            log = kafkalog.Log({str(path)!r})
            base = hwm()
            rows = 0
            for batch in log.to_arrow(batch_rows=5000, end={end}, threads={threads}):
                rows += batch.num_rows
            peak = hwm()
            print(json.dumps({{"rows": rows, "imports_kib": imports, "base_kib": base, "peak_kib": peak}}))
            """
        )
        out = json.loads(subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                                        text=True).stdout)
        assert out["rows"] == end
        print(f"\nstreamed {end} rows of {size / 1e6:.0f} MB in 5000-row batches, threads={threads}: RSS after "
              f"imports {out['imports_kib'] / 1024:.0f} MiB, after open {out['base_kib'] / 1024:.0f} MiB, "
              f"peak {out['peak_kib'] / 1024:.0f} MiB")
        return (out["peak_kib"] - out["base_kib"]) * 1024

    whole = growth(200_000)
    if threads == 1:
        # One Arrow batch is ~5 MB; growth of a quarter of the log would mean it is being held.
        assert whole < size / 4, (whole, size)
    else:
        quarter = growth(50_000)
        assert whole < quarter + size / 4, (whole, quarter, size)


def test_append_arrow_round_trips_spark_sink_columns(tmp_path):
    headers_type = HEADERS_FIELD.type
    table = pa.table(
        {
            "key": pa.array(["a", None, "c"], pa.string()),
            "value": pa.array([b"1", b"2", None], pa.binary()),
            "headers": pa.array([[{"key": "h", "value": b"x"}, {"key": "n", "value": None}], None, []], headers_type),
            "timestamp": pa.array([1_700_000_000_001_000, 1_700_000_000_002_000, None], pa.timestamp("us", tz="UTC")),
        }
    )
    with make_log(tmp_path / "sink-0") as log:
        assert log.append_arrow(table, compression="lz4") == (0, 2)
        assert log.append_arrow(table.to_batches()[0]) == (3, 5)  # a RecordBatch too
        assert log.append_arrow(pa.RecordBatchReader.from_batches(table.schema, table.to_batches())) == (6, 8)
        assert log.append_arrow(table.slice(0, 0)) is None
        records = list(log.records())
    assert [r.key for r in records[:3]] == [b"a", None, b"c"]
    assert [r.value for r in records[:3]] == [b"1", b"2", None]
    assert records[0].headers == [("h", b"x"), ("n", None)]
    assert records[1].headers == [] and records[2].headers == []
    assert [r.timestamp for r in records[:2]] == [1_700_000_000_001, 1_700_000_000_002]
    assert records[2].timestamp > 1_700_000_000_002  # stamped now when null
    assert [r.offset for r in records] == list(range(9))
    # Before 1970: Kafka's producer (and so Spark's Kafka sink) refuses it; nothing is written.
    early = pa.table({"value": [b"a", b"b"], "timestamp": pa.array([5, -5], pa.int64())})
    with make_log(tmp_path / "sink-0") as log:
        with pytest.raises(kafkalog.InvalidArgumentError, match="row 1 has timestamp -5"):
            log.append_arrow(early)
        assert log.log_end_offset == 9
        # Rows are numbered across the input's batches; each batch is one append.
        two = pa.Table.from_batches([early.slice(0, 1).to_batches()[0], early.slice(1, 1).to_batches()[0]])
        with pytest.raises(kafkalog.InvalidArgumentError, match="row 1 has timestamp -5"):
            log.append_arrow(two)
        assert log.log_end_offset == 10
        # Never a changed value or a dropped header: seconds past Kafka's milliseconds, null headers.
        far = pa.table({"value": [b"a"], "timestamp": pa.array([2**62], pa.timestamp("s"))})
        with pytest.raises(kafkalog.InvalidArgumentError, match="past what Kafka's millisecond"):
            log.append_arrow(far)
        header = pa.struct([("key", pa.string()), ("value", pa.binary())])
        holed = pa.table({"value": [b"a"], "headers": pa.array([[{"key": "a", "value": b"1"}, None]],
                                                                  pa.list_(header))})
        with pytest.raises(kafkalog.InvalidArgumentError, match="row 0 has a null header"):
            log.append_arrow(holed)
        assert log.log_end_offset == 10


def test_append_arrow_takes_dictionary_encoded_keys_and_values(tmp_path):
    """pandas categoricals and Parquet columns read with their dictionaries arrive
    dictionary-encoded: written as their values, nulls in the keys or the dictionary kept."""
    import pandas as pd

    keys = pa.DictionaryArray.from_arrays(pa.array([1, None, 0, 1], pa.int8()), pa.array(["k0", "k1"]))
    values = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2, 0], pa.uint16()), pa.array([b"v0", None, b"v2"]))
    categorical = pa.Table.from_pandas(pd.DataFrame({"value": pd.Categorical(["x", "y", "x"])}))
    assert pa.types.is_dictionary(categorical.schema.field("value").type)
    with make_log(tmp_path / "sink-0") as log:
        assert log.append_arrow(pa.table({"key": keys, "value": values})) == (0, 3)
        assert log.append_arrow(categorical) == (4, 6)
        empty = pa.DictionaryArray.from_arrays(pa.array([None, None], pa.int32()), pa.array([], pa.binary()))
        assert log.append_arrow(pa.table({"value": empty})) == (7, 8)
        records = list(log.records())
    assert [r.key for r in records[:4]] == [b"k1", None, b"k0", b"k1"]
    assert [r.value for r in records] == [b"v0", None, b"v2", b"v0", b"x", b"y", b"x", None, None]
    numbers = pa.table({"value": pa.array([1, 2]).dictionary_encode()})
    with make_log(tmp_path / "sink-1") as log:
        with pytest.raises(kafkalog.InvalidArgumentError, match=r"column 'value' has type dictionary<int64>; Kafka's sink takes"):
            log.append_arrow(numbers)


def test_a_timestamp_past_microseconds_fails_the_read(tmp_path):
    # Spark's Kafka source fails converting it (Math.multiplyExact); never a clamped value.
    with kafkalog.Log(tmp_path / "t-0", read_only=False, create=True,
                      config={"message.timestamp.after.max.ms": 2**63 - 1}) as log:
        log.append([{"value": b"ok", "timestamp": 1_700_000_000_000}])
        log.append([{"value": b"far", "timestamp": 2**62}])
        for zero_copy in (False, True):
            with pytest.raises(kafkalog.InvalidRecordError, match=f"offset 1 has timestamp {2**62} ms"):
                log.to_arrow(zero_copy=zero_copy).read_all()
        assert log.to_arrow(end=1).read_all().num_rows == 1
        assert [r.timestamp for r in log.records()] == [1_700_000_000_000, 2**62]


@pytest.mark.parametrize(
    "table, column",
    [
        (pa.table({"value": pa.array([1, 2])}), "value"),
        (pa.table({"value": [b"v"], "key": pa.array([1.5])}), "key"),
        (pa.table({"value": [b"v"], "headers": pa.array([["a"]])}), "headers"),
        (pa.table({"value": [b"v"], "timestamp": pa.array(["now"])}), "timestamp"),
        (pa.table({"key": [b"k"]}), "value"),
    ],
)
def test_append_arrow_names_the_wrong_column(tmp_path, table, column):
    with make_log(tmp_path / "sink-0") as log:
        with pytest.raises(ValueError, match=f"'{column}'"):
            log.append_arrow(table)
        assert log.log_end_offset == 0


def test_append_arrow_names_a_nested_type_as_the_wanted_one(tmp_path):
    """A headers struct with its fields the other way round: both types in one notation, not
    arrow's field-by-field dump of every nested field's metadata."""
    swapped = pa.ListArray.from_arrays(pa.array([0, 1], pa.int32()), pa.StructArray.from_arrays(
        [pa.array([b"v"]), pa.array(["k"])], names=["value", "key"]))
    with make_log(tmp_path / "sink-0") as log:
        with pytest.raises(ValueError) as e:
            log.append_arrow(pa.table({"value": [b"x"], "headers": swapped}))
    assert str(e.value) == ("column 'headers' has type array<struct<value: binary, key: string>>; "
                            "Kafka's sink takes array<struct<key: string, value: binary>>")


def test_append_arrow_refuses_string_columns_that_are_not_utf8(tmp_path):
    """pyarrow builds a string array over any bytes unchecked (`.view(pa.string())`): the sink
    refuses it as invalid input naming the column, never a panic, and writes nothing."""
    bad = pa.array([b"\xff"], pa.binary()).view(pa.string())
    headers = pa.ListArray.from_arrays(
        pa.array([0, 1], pa.int32()),
        pa.StructArray.from_arrays([bad, pa.array([b"v"])], names=["key", "value"]))
    tables = {
        "headers": pa.table({"value": [b"x"], "headers": headers}),
        "topic": pa.table({"value": [b"x"], "topic": bad}),
        "value": pa.table({"value": bad}),
        "key": pa.table({"value": [b"x"], "key": pa.DictionaryArray.from_arrays(pa.array([0], pa.int8()), bad)}),
    }
    with make_log(tmp_path / "sink-0") as log:
        for column, table in tables.items():
            with pytest.raises(kafkalog.InvalidArgumentError, match=f"column '{column}' is not valid Arrow data.*UTF-8"):
                log.append_arrow(table)
        assert log.log_end_offset == 0
        ok = pa.array(["é"]).view(pa.binary()).view(pa.string())
        assert log.append_arrow(pa.table({"value": ok, "key": ok})) == (0, 0)
        assert [(r.key, r.value) for r in log.records()] == [("é".encode(), "é".encode())]


def test_batches_report_their_file_positions(tmp_path):
    with make_log(tmp_path / "t-0") as log:
        for i in range(5):
            log.append([{"value": b"v" * (i + 1)}])
        positions = [b.position for b in log.batches()]
        segment = kafkalog.Segment(str(tmp_path / "t-0"), 0)
        assert positions == [b.position for b in segment.batches()]
        assert positions[0] == 0 and positions == sorted(set(positions))
        assert all(b.records_count == 1 and b.is_valid for b in log.batches())


def test_read_only_open_of_a_lone_replica_reads_to_the_log_end(tmp_path):
    """A broker killed after its last HW checkpoint: the read-only view serves what the restarted
    broker would, and keeps the checkpointed value under its own name."""
    data_dir = tmp_path / "data"
    with make_log(data_dir / "t-0") as log:
        log.append([{"value": b"%d" % i} for i in range(10)])
    # The checkpoint a broker wrote seconds before it died.
    (data_dir / "replication-offset-checkpoint").write_text("0\n1\nt 0 4\n")
    log = kafkalog.Log(str(data_dir / "t-0"))
    assert log.checkpointed_high_watermark == 4
    assert log.high_watermark == 10
    assert log.to_arrow().read_all().num_rows == 10
    pinned = kafkalog.Log(str(data_dir / "t-0"), single_replica=False)
    assert pinned.high_watermark == 4
    assert pinned.to_arrow().read_all().num_rows == 4


def test_a_folder_without_segments_is_not_a_log(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="not a Kafka partition folder: no Kafka segment files"):
        kafkalog.Log(str(empty))
    data_dir = tmp_path / "data"
    for p in range(3):
        make_log(data_dir / f"orders-{p}").close()
    with pytest.raises(ValueError, match=r"data dir holding 3 partition folders \(orders-0, orders-1, orders-2\)"):
        kafkalog.Log(str(data_dir))
    # Writable opens start a log in an empty folder only when asked to (create=True).
    with pytest.raises(ValueError, match="no Kafka segment files.*read_only=False, create=True"):
        kafkalog.Log(str(empty), read_only=False)
    # create=True alone (read-only by default) says what is missing, for a new folder and an
    # empty one, and creates nothing; on a folder that holds a log it has nothing to do.
    for where in (tmp_path / "new-0", empty):
        with pytest.raises(ValueError, match="holds no log yet, and create=True starts one only "
                                             "in a writable open: pass read_only=False"):
            kafkalog.Log(str(where), create=True)
    assert not (tmp_path / "new-0").exists() and not any(empty.iterdir())
    with kafkalog.Log(str(data_dir / "orders-0"), create=True) as log:
        assert log.read_only
    with pytest.raises(ValueError, match="data dir holding 3 partition folders"):
        kafkalog.Log(str(data_dir), create=True)
    with kafkalog.Log(str(empty), read_only=False, create=True) as log:
        assert log.log_end_offset == 0


@pytest.fixture
def mixed_log(tmp_path):
    """Values inline in a view (<= 12 bytes), longer ones, nulls, every codec, several read
    windows (over 1 MiB) and Arrow batches that end inside a window."""
    path = tmp_path / "views-0"
    with make_log(path, **{"segment.bytes": 1 << 20}) as log:
        for b in range(60):
            log.append([{"key": None if i % 7 == 0 else b"key-%d-%d" % (b, i),
                         "value": None if i % 11 == 0 else (b"%d:" % i) * (i % 40),
                         "headers": [("h", b"x")] if i % 9 == 0 else []}
                        for i in range(200)],
                       compression=["none", "none", "gzip", "lz4", "zstd", "snappy"][b % 6])
    return path


@pytest.mark.parametrize("batch_rows", [333, 65536])
def test_zero_copy_reads_the_same_rows_as_binary_views(mixed_log, batch_rows):
    log = kafkalog.Log(str(mixed_log))
    copied = log.to_arrow(include_headers=True, batch_rows=batch_rows).read_all()
    views = log.to_arrow(include_headers=True, batch_rows=batch_rows, zero_copy=True).read_all()
    assert views.schema.field("key").type == pa.binary_view()
    assert views.schema.field("value").type == pa.binary_view()
    assert views.schema.remove(0).remove(0) == copied.schema.remove(0).remove(0)
    assert views.num_rows == copied.num_rows == 60 * 200
    for name in ("key", "value"):
        assert views.column(name).cast(pa.binary()).equals(copied.column(name))
    assert views.drop_columns(["key", "value"]).equals(copied.drop_columns(["key", "value"]))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_zero_copy_copies_the_values_of_small_compressed_batches(tmp_path, codec):
    """A producer sending one record at a time writes a batch per record. Zero-copy views
    into each inflated batch kept a buffer per batch (with lz4, 64 KiB each: 50,000 such
    batches held 2.8 GB); their values are copied into blocks of the column's own instead,
    while a large inflated batch is still viewed where it was inflated."""
    path = tmp_path / "small-0"
    with make_log(path) as log:
        for i in range(3000):
            log.append([{"key": b"k%d" % i, "value": b"%06d" % i * 20}], compression=codec)
        for b in range(3):  # a few batches of over 16 KiB inflated
            log.append([{"key": None, "value": b"%06d-%d" % (i, b) * 10} for i in range(500)],
                       compression=codec)
    copied = kafkalog.Log(str(path)).to_arrow().read_all()
    views = kafkalog.Log(str(path)).to_arrow(zero_copy=True).read_all()
    assert views.num_rows == copied.num_rows == 3000 + 1500
    for name in ("key", "value"):
        assert views.column(name).cast(pa.binary()).equals(copied.column(name))
    # A binary_view chunk's buffers: validity, views, then the data buffers.
    data_buffers = sum(len(chunk.buffers()) - 2 for chunk in views.column("value").chunks)
    assert 3 <= data_buffers <= 10, data_buffers


def test_zero_copy_views_outlive_the_reader_and_the_log(mixed_log):
    reader = kafkalog.Log(str(mixed_log)).to_arrow(zero_copy=True, batch_rows=500)
    batches = list(reader)
    del reader
    import gc
    gc.collect()
    expected = [r.value for r in kafkalog.Log(str(mixed_log)).records()]
    assert [v for b in batches for v in b.column("value").to_pylist()] == expected


def test_polars_and_duckdb_consume_zero_copy_columns(mixed_log):
    import duckdb
    import polars as pl

    frame = pl.from_arrow(kafkalog.Log(str(mixed_log)).to_arrow(zero_copy=True))
    assert frame.schema["value"] == pl.Binary
    lengths = [len(r.value) for r in kafkalog.Log(str(mixed_log)).records() if r.value is not None]
    assert frame["value"].bin.size().sum() == sum(lengths)
    con = duckdb.connect()
    con.register("t", kafkalog.Log(str(mixed_log)).to_arrow(zero_copy=True))
    assert con.execute("select sum(octet_length(value)) from t").fetchone()[0] == sum(lengths)


def test_zero_copy_maps_segments_only_when_no_writer_holds_the_log(mixed_log):
    """Read-only with no writer: the views point into memory maps of the segments, and they stay
    readable after the log is closed and its files deleted (the mapping keeps the pages). With a
    writer holding the folder the reader uses read windows instead, with the same rows."""
    expected = kafkalog.Log(str(mixed_log)).to_arrow().read_all()
    with kafkalog.Log(str(mixed_log), read_only=False) as writer:
        held = kafkalog.Log(str(mixed_log)).to_arrow(zero_copy=True).read_all()
        assert writer.log_end_offset == expected.num_rows
    mapped = kafkalog.Log(str(mixed_log)).to_arrow(zero_copy=True, batch_rows=777).read_all()
    for name in ("key", "value"):
        assert held.column(name).cast(pa.binary()).equals(expected.column(name))
        assert mapped.column(name).cast(pa.binary()).equals(expected.column(name))
    for f in mixed_log.iterdir():
        f.unlink()
    mixed_log.rmdir()
    import gc
    gc.collect()
    assert mapped.column("value").cast(pa.binary()).equals(expected.column("value"))


def test_zero_copy_maps_are_unmapped_once_their_tables_are_freed(mixed_log):
    """pyarrow frees a zero-copy table holding the GIL; the freeing thread unmaps its segments
    with the GIL released meanwhile, so other threads go on. The maps must still go at once."""
    import gc
    from concurrent.futures import ThreadPoolExecutor

    segments = sorted(str(f) for f in mixed_log.glob("*.log"))

    def mapped():
        with open("/proc/self/maps") as f:
            return {line.split(None, 5)[-1].strip() for line in f if line.rstrip().endswith(".log")} & set(segments)

    def read_and_free(_):
        table = kafkalog.Log(str(mixed_log)).to_arrow(zero_copy=True).read_all()
        rows = table.num_rows
        del table  # freed on this thread, holding the GIL
        return rows

    expected = kafkalog.Log(str(mixed_log)).to_arrow().read_all().num_rows
    with ThreadPoolExecutor(4) as pool:
        assert set(pool.map(read_and_free, range(40))) == {expected}
    table = kafkalog.Log(str(mixed_log)).to_arrow(zero_copy=True).read_all()
    assert mapped() == set(segments)
    del table
    gc.collect()
    assert mapped() == set()


@pytest.mark.parametrize("damaged", [False, True])
def test_crc_checker_and_decoding_threads_give_one_threads_result(tmp_path, damaged):
    """A mapped read of a few MiB of ~100-byte records checks CRCs on a second thread ahead of
    the decoder with threads=1, zero-copy or copying (the copying read then goes through the
    maps, without it through read windows), and is decoded in chunks on several threads by
    default: the same rows every way, the same error for a damaged batch, and the same rows
    around it when on_corruption="skip" steps over it (the checker's own CRC failures are
    covered in the crate: crcs_checked_ahead_read_as_checked_in_line)."""
    path = tmp_path / "big-0"
    with make_log(path) as log:
        for b in range(64):
            log.append([{"key": b"k%d" % i, "value": b"%06d" % (b * 1000 + i) * 16} for i in range(500)])
    if damaged:
        segment = sorted(path.glob("*.log"))[0]
        data = bytearray(segment.read_bytes())
        position = 0
        for _ in range(40):  # the 41st batch
            position += int.from_bytes(data[position + 8:position + 12], "big") + 12
        data[position + 300] ^= 0xFF
        segment.write_bytes(bytes(data))
        for zero_copy in (True, False):
            for ahead in (True, False):
                with pytest.raises(kafkalog.CorruptRecordError, match="batch at offset 20000 is corrupt"):
                    kafkalog.Log(str(path)).to_arrow(zero_copy=zero_copy, check_crcs_ahead=ahead).read_all()
        log = kafkalog.Log(str(path), on_corruption="skip")
    else:
        log = kafkalog.Log(str(path))
    copied = log.to_arrow(threads=1).read_all()
    copied_in_line = log.to_arrow(threads=1, check_crcs_ahead=False).read_all()
    ahead = log.to_arrow(threads=1, zero_copy=True).read_all()
    in_line = log.to_arrow(threads=1, zero_copy=True, check_crcs_ahead=False).read_all()
    assert copied.num_rows == (63 if damaged else 64) * 500
    assert copied_in_line.equals(copied)
    by_default = log.to_arrow().read_all()
    on_threads = log.to_arrow(threads=3).read_all()
    # 3.3 MB in chunks of a mebibyte: several batches, where one thread makes one.
    assert len(copied.to_batches()) == 1 and len(on_threads.to_batches()) > 1
    assert by_default.equals(copied) and on_threads.equals(copied)
    for table in (ahead, in_line, log.to_arrow(zero_copy=True, threads=3).read_all()):
        assert table.column("value").cast(pa.binary()).equals(copied.column("value"))
        assert table.column("offset").equals(copied.column("offset"))
    with pytest.raises(ValueError, match="threads must be at least 1, got 0"):
        log.to_arrow(threads=0)


def test_a_forked_child_reads_on_threads_its_parent_had_started(tmp_path):
    """fork copies only the forking thread: a child of a process whose decoding threads had
    started makes threads of its own instead of waiting forever on its parent's, for a new
    reader and for one its parent had half read (whose chunks out were the parent's)."""
    path = tmp_path / "big-0"
    with make_log(path) as log:
        for b in range(200):  # 10 MB: more chunks than two threads have out at a time
            log.append([{"key": b"k%d" % i, "value": b"%06d" % (b * 1000 + i) * 16} for i in range(500)])
    expected = kafkalog.Log(str(path)).to_arrow(threads=2).read_all()  # the parent's pool starts
    assert len(expected.to_batches()) > 1, "read in chunks on threads"
    half_read = iter(kafkalog.Log(str(path)).to_arrow(threads=2))
    first = next(half_read)
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()

    def child() -> None:
        table = kafkalog.Log(str(path)).to_arrow(threads=2).read_all()
        rest = pa.Table.from_batches([first, *half_read])
        results.put((table.equals(expected), rest.equals(expected)))

    process = ctx.Process(target=child)
    process.start()
    process.join(timeout=60)
    if process.exitcode is None:
        process.kill()
        pytest.fail("the forked child's read never finished")
    assert process.exitcode == 0 and results.get(timeout=5) == (True, True)
    # The parent's half-read reader goes on as before.
    assert pa.Table.from_batches([first, *half_read]).equals(expected)


def test_zero_copy_reads_around_damage_through_maps(tmp_path):
    """A read-only view that skips a damaged batch reads the same rows mapped as copied."""
    path = tmp_path / "damaged-0"
    with make_log(path) as log:
        for b in range(6):
            log.append([{"key": b"k%d" % i, "value": b"value-%d-%d" % (b, i) * 3} for i in range(50)])
    segment = sorted(path.glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    first = int.from_bytes(data[8:12], "big") + 12
    data[first + 200] ^= 0xFF  # inside the second batch: its CRC fails
    segment.write_bytes(bytes(data))
    log = kafkalog.Log(str(path), on_corruption="skip")
    copied = log.to_arrow().read_all()
    views = log.to_arrow(zero_copy=True).read_all()
    assert copied.num_rows == views.num_rows == 250
    assert views.column("value").cast(pa.binary()).equals(copied.column("value"))
    assert views.column("offset").equals(copied.column("offset"))


# ------------------------------------------------------------------ records_to_arrow: bytes in memory


def segment_bytes(path):
    return b"".join(p.read_bytes() for p in sorted(path.glob("*.log")))


@pytest.mark.parametrize("zero_copy", [False, True])
@pytest.mark.parametrize("batch_rows", [7, 65536])
def test_records_in_memory_read_as_the_log_reads_them(txn_log, mixed_log, zero_copy, batch_rows):
    """A segment's bytes decode to the rows `to_arrow` reads from its folder at read_uncommitted
    up to the log end (control batches left out, aborted records in), every codec, headers."""
    for path in (txn_log, mixed_log):
        expected = kafkalog.Log(str(path)).to_arrow(isolation="log_end", include_headers=True,
                                                    zero_copy=zero_copy).read_all()
        topic, _, partition = path.name.rpartition("-")
        got = kafkalog.records_to_arrow(segment_bytes(path), topic=topic, partition=int(partition),
                                        include_headers=True, zero_copy=zero_copy, batch_rows=batch_rows)
        assert got.schema == expected.schema
        assert got.equals(expected)
        # Arrow batches are cut after the Kafka batch that reaches batch_rows, never inside one.
        batches = kafkalog.decode_batches(segment_bytes(path))
        ends = set()
        for b in batches:
            if not b.is_control:
                ends.add(b.last_offset)
        for batch in got.to_batches()[:-1]:
            assert batch.num_rows >= min(batch_rows, 1)
            assert batch.column("offset")[-1].as_py() in ends


def test_records_in_memory_of_every_magic(tmp_path):
    """Legacy v0/v1 message sets and v2 batches back to back, as an old log holds them."""
    records = [{"key": b"k%d" % i, "value": b"v%d" % i, "timestamp": 1_700_000_000_000 + i} for i in range(3)]
    data = (kafkalog.encode_batch(records, base_offset=0, magic=0)
            + kafkalog.encode_batch(records, base_offset=3, magic=1, compression="gzip")
            + kafkalog.encode_batch(records, base_offset=6, magic=2, compression="zstd"))
    table = kafkalog.records_to_arrow(data)
    assert table.column("offset").to_pylist() == list(range(9))
    assert table.column("value").to_pylist() == [b"v0", b"v1", b"v2"] * 3
    assert table.column("timestampType").to_pylist() == [-1] * 3 + [0] * 6
    assert table.column("topic").null_count == table.column("partition").null_count == 9
    assert kafkalog.records_to_arrow(bytearray(data)).equals(table)
    assert kafkalog.records_to_arrow(memoryview(data)).equals(table)
    empty = kafkalog.records_to_arrow(b"")
    assert empty.num_rows == 0 and empty.schema == SPARK_KAFKA_SCHEMA
    # Every offset a batch can hold, the largest included (once left out: an exclusive bound).
    top = kafkalog.encode_batch([{"value": b"a"}, {"value": b"b"}], base_offset=2**63 - 2)
    for zero_copy in (False, True):
        assert kafkalog.records_to_arrow(top, zero_copy=zero_copy).column("offset").to_pylist() == [2**63 - 2, 2**63 - 1]


def test_records_in_memory_damaged_or_cut_short_name_the_position(mixed_log):
    data = segment_bytes(mixed_log)
    batches = kafkalog.decode_batches(data)
    third = batches[2].position
    cut = data[:batches[5].position + 30]
    with pytest.raises(kafkalog.CorruptRecordError, match=f"position {batches[5].position}"):
        kafkalog.records_to_arrow(cut)
    flipped = bytearray(data)
    flipped[third + 100] ^= 0x01
    with pytest.raises(kafkalog.CorruptRecordError, match=f"crc.*position {third}"):
        kafkalog.records_to_arrow(bytes(flipped))
    with pytest.raises(TypeError, match="bytes, bytearray or memoryview"):
        kafkalog.records_to_arrow("not bytes")
    with pytest.raises(ValueError, match="batch_rows"):
        kafkalog.records_to_arrow(data, batch_rows=0)


def test_zero_copy_views_into_bytes_keep_them_alive(mixed_log):
    """Views into a bytes object hold it: dropped by Python, its memory stays until the table
    goes. Over 32 MiB, so the allocator returns freed memory to the OS at once: a view into it
    would crash the process (run in a child, so a crash is a failure here, not pytest's end)."""
    script = textwrap.dedent(f"""
        import gc, pathlib, kafkalog
        one = b"".join(p.read_bytes() for p in sorted(pathlib.Path({str(mixed_log)!r}).glob("*.log")))
        data = one * -(-(34 << 20) // len(one))
        expected = kafkalog.records_to_arrow(data).column("value")
        table = kafkalog.records_to_arrow(data, zero_copy=True)
        del data
        gc.collect()
        junk = [bytes(1 << 20) for _ in range(64)]
        assert table.column("value").cast(expected.type).equals(expected)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr[-2000:]


@pytest.mark.parametrize("compression", ["gzip", "none"])
@pytest.mark.parametrize("kw", [{}, {"threads": 1}, {"zero_copy": True}, {"batch_rows": 700},
                                {"threads": 1, "batch_rows": 700}])
def test_rows_before_a_damaged_batch_come_first(tmp_path, kw, compression):
    """A batch whose CRC holds but whose payload does not inflate (gzip), or whose records do not
    decode (a record's size one byte too long), fails the read that reaches it (as in Kafka);
    the Arrow batches hand out every row before it first, however the rows are cut into Arrow
    batches and on whichever thread they were decoded (a read of 2 MiB or more is decoded in
    chunks ahead). Records that fail to decode do so midway into an Arrow batch, whose earlier
    rows come out all the same (a black-box tester found them dropped with it)."""
    from compat_util import garble_payload_keeping_crc, garble_record_length_keeping_crc

    d = tmp_path / "t-0"
    noise = os.urandom(3 << 20)  # incompressible: a log large enough to be read in chunks
    with kafkalog.Log(d, read_only=False, create=True) as log:
        for i in range(1500):
            log.append([{"value": noise[(i * 10 + j) * 200:(i * 10 + j + 1) * 200]} for j in range(10)],
                       compression=compression)
    garble = garble_payload_keeping_crc if compression == "gzip" else garble_record_length_keeping_crc
    garble(d / ("%020d.log" % 0), 1200)  # offsets 12000-12009
    reader = kafkalog.Log(d).to_arrow(**kw)
    offsets = []
    with pytest.raises(kafkalog.CorruptRecordError):
        for batch in reader:
            offsets += batch.column("offset").to_pylist()
    assert offsets == list(range(12000)), kw


def test_folders_kafka_renamed_keep_their_topic_and_partition(tmp_path):
    """A partition folder Kafka renamed for deletion, a move between log dirs or as stray
    (`<topic>-<p>.<id>-delete`, `-future`, `-stray`) still holds that partition's records: its
    rows carry the topic and partition, as Kafka's `parseTopicPartitionName` reads the name (they
    were null; a black-box tester). A folder not named by Kafka has neither."""
    source = tmp_path / "orders-1"
    with kafkalog.Log(str(source), read_only=False, create=True) as log:
        log.append([{"value": b"v"}])
    for suffix in ("delete", "future", "stray"):
        renamed = tmp_path / f"orders-1.0123456789abcdef0123456789abcdef-{suffix}"
        source.rename(renamed)
        table = kafkalog.Log(str(renamed)).to_arrow().read_all()
        assert table.column("topic").to_pylist() == ["orders"], suffix
        assert table.column("partition").to_pylist() == [1], suffix
        renamed.rename(source)
    source.rename(tmp_path / "copied")
    table = kafkalog.Log(str(tmp_path / "copied")).to_arrow().read_all()
    assert table.column("topic").to_pylist() == [None] and table.column("partition").to_pylist() == [None]


@pytest.mark.parametrize("cut", ["truncate_to", "recovery_truncate"])
def test_zero_copy_arrays_survive_kafkalogs_own_truncation(tmp_path, cut):
    """Zero-copy arrays map the segment file; a writable Log that then truncates it (truncate_to,
    or recovery with on_corruption="truncate") writes what it keeps to a new file instead of
    cutting the mapped one, so the arrays read what they read (cut in place, reading them killed
    the process with SIGBUS; a black-box tester). Run in a child process to see a crash as one."""
    child = textwrap.dedent(f"""
        import os, sys
        import kafkalog
        d = {str(tmp_path / "t-0")!r}
        with kafkalog.Log(d, read_only=False, create=True) as w:
            for s in range(0, 5000, 100):
                w.append([{{"key": b"k%d" % i, "value": b"%08d" % i * 25}} for i in range(s, s + 100)])
        if {cut!r} == "truncate_to":
            table = kafkalog.Log(d).to_arrow(zero_copy=True).read_all()
            expected = [b"%08d" % i * 25 for i in range(5000)]
            with kafkalog.Log(d, read_only=False) as w:
                w.truncate_to(100)
                assert w.log_end_offset == 100
        else:
            # Damaged before the read (bytes changed under a map change what it reads), read
            # around the damage, then recovered by a writer that cuts the log there.
            segment = os.path.join(d, "00000000000000000000.log")
            with open(segment, "r+b") as f:
                f.seek(os.path.getsize(segment) // 2)
                f.write(b"\\xff" * 64)
            table = kafkalog.Log(d, on_corruption="skip").to_arrow(zero_copy=True).read_all()
            expected = table.column("value").to_pylist()
            assert 4800 < len(expected) < 5000
            with kafkalog.Log(d, read_only=False, on_corruption="truncate") as w:
                assert 0 < w.log_end_offset < 5000
        assert table.column("value").to_pylist() == expected
        assert kafkalog.Log(d).log_end_offset < 5000
        assert not [n for n in os.listdir(d) if n.endswith(".cleaned")]
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (proc.returncode, proc.stderr[-2000:])
