"""The main job on the embedded example: a partition folder a real Kafka 4.4 broker wrote (topic
``demo``: 300 orders, one committed and one aborted transaction), read as Kafka's consumers see it,
then as a Spark DataFrame, aggregated, written back as a new topic and read again."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TextIO

import kafkalog


def example_dir() -> Path:
    return Path(__file__).with_name("examples")


def _say(out: TextIO, text: str = "") -> None:
    print(text, file=out, flush=True)


def run(spark_enabled: bool = True, out: TextIO = sys.stdout) -> int:
    src = example_dir() / "demo-0"
    if not src.is_dir():
        _say(sys.stderr, "kafkalog demo: the embedded example is missing from the package")
        return 1
    with tempfile.TemporaryDirectory(prefix="kafkalog-demo-") as tmp:
        # A data dir of our own: the package's copy stays untouched, and Spark writes beside it.
        data_dir = Path(tmp) / "data"
        shutil.copytree(src, data_dir / "demo-0")
        log = kafkalog.Log(data_dir / "demo-0")  # read-only: nothing on disk changes
        _say(out, "kafkalog demo: reads the Kafka partition folder that ships with kafkalog (topic 'demo':")
        _say(out, "300 orders, one committed and one aborted transaction) from a temporary copy, as Kafka's")
        _say(out, "consumers would" + (", then with Spark, writing a topic back; the copy is removed at the end."
                                       if spark_enabled else "; the copy is removed at the end."))
        _say(out)
        _say(out, "1. The partition folder demo-0 (written by a Kafka 4.4.0 broker), opened read-only:")
        _say(out, f"   segments (base offsets)   {log.segments}, {log.size_in_bytes} bytes"
                  "   (each segment file is named by its first offset)")
        _say(out, f"   log start / end offset    {log.log_start_offset} / {log.log_end_offset}"
                  "   (the end counts 2 transaction markers)")
        _say(out, f"   high watermark            {log.high_watermark}   (what read_uncommitted consumers may read)")
        _say(out, f"   last stable offset        {log.last_stable_offset}   (what read_committed consumers may read)")
        uncommitted = log.to_arrow(isolation="read_uncommitted").read_all()
        committed = log.to_arrow(isolation="read_committed").read_all()
        _say(out, f"   {uncommitted.num_rows} records read_uncommitted, {committed.num_rows} read_committed"
                  f" ({uncommitted.num_rows - committed.num_rows} belong to the aborted transaction)")
        _say(out)
        if not spark_enabled:
            _say(out, "2. Arrow (pyarrow) schema, Spark's Kafka source schema:")
            _say(out, "   " + str(committed.schema).replace("\n", "\n   "))
            return 0
        return _spark_part(data_dir, out)


def _spark_part(data_dir: Path, out: TextIO) -> int:
    try:
        from pyspark.sql import SparkSession, functions as F
    except ImportError:
        _say(sys.stderr, "kafkalog demo: the Spark part needs PySpark: pip install 'kafkalog[spark]' "
                         "(or run 'kafkalog demo --no-spark')")
        return 1
    import kafkalog.spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    _say(out, "2. Spark (local[2]) reads the data dir with format('kafkalog'), read_committed:")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kafkalog demo")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        kafkalog.spark.register(spark)
        orders = (
            spark.read.format("kafkalog")
            .option("path", str(data_dir))
            .option("subscribe", "demo")
            .option("kafka.isolation.level", "read_committed")
            .option("includeHeaders", "true")
            .load()
        )
        shown = orders.select(
            F.col("offset"), F.col("timestamp"), F.col("key").cast("string").alias("key"),
            F.col("value").cast("string").alias("value"),
        )
        shown.show(5, truncate=60)
        parsed = orders.select(
            F.col("key").cast("string").alias("customer"),
            F.get_json_object(F.col("value").cast("string"), "$.qty").cast("int").alias("qty"),
        )
        per_customer = parsed.groupBy("customer").agg(F.count("*").alias("orders"), F.sum("qty").alias("items"))
        _say(out, "   One aggregate: orders and items per customer key")
        per_customer.orderBy("customer").show(10, truncate=30)
        _say(out)

        _say(out, "3. Spark writes the big orders (qty >= 4) back as topic 'big-orders' (3 partitions, zstd),")
        _say(out, "   keyed by customer, so each customer lands where Kafka's producer would put it (murmur2):")
        big = orders.where(
            F.get_json_object(F.col("value").cast("string"), "$.qty").cast("int") >= 4
        ).select("key", "value", "headers")
        (
            big.write.format("kafkalog")
            .option("path", str(data_dir))
            .option("topic", "big-orders")
            .option("partitions", "3")
            .option("kafka.compression.type", "zstd")
            .mode("append")
            .save()
        )
        again = spark.read.format("kafkalog").option("path", str(data_dir)).option("subscribe", "big-orders").load()
        counts = again.groupBy("partition").agg(F.count("*").alias("records"),
                                                F.countDistinct("key").alias("customers"))
        counts.orderBy("partition").show(10, truncate=30)
        written, read_back = big.count(), again.count()
        _say(out, f"   wrote {written} records, read back {read_back}: "
                  + ("the same" if written == read_back else "DIFFERENT"))
        folders = sorted(p.name for p in data_dir.iterdir() if p.is_dir())
        _say(out, f"   the data dir now holds {folders}: folders a Kafka broker serves")
        return 0 if written == read_back else 1
    finally:
        spark.stop()
