"""Where a Spark query over the kafkalog source spends its time: the same query over a Python data
source that yields the very same Arrow batches from memory-mapped Arrow IPC files (no Kafka
decoding at all), interleaved in one Spark JVM. The gap is kafkalog's own share; the rest is
Spark's (a Python worker per task, Arrow to the JVM, rows, the aggregation).

    python benches/spark_overhead.py [--records-per-partition N] [--cores C] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import pyarrow as pa  # noqa: E402
import pyarrow.ipc as ipc  # noqa: E402

import kafkalog  # noqa: E402

PARTITIONS = 2


def build(root: Path, records: int) -> None:
    for p in range(PARTITIONS):
        log = kafkalog.Log(root / f"bench-{p}", read_only=False, create=True)
        for start in range(0, records, 500):
            log.append([{"key": b"key-%08d" % i, "value": (b"%08d" % i) * 12 + b"abcd",
                         "timestamp": 1_700_000_000_000 + i} for i in range(start, min(records, start + 500))])
        log.close()
        table = kafkalog.Log(root / f"bench-{p}").to_arrow().read_all()
        with ipc.new_file(root / f"bench-{p}.arrow", table.schema) as writer:
            writer.write_table(table)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records-per-partition", type=int, default=1_000_000)
    ap.add_argument("--cores", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    import kafkalog.spark as ks

    root = Path(tempfile.mkdtemp(prefix="kafkalog-spark-overhead-"))
    build(root, args.records_per_partition)

    class IpcReader(DataSourceReader):
        def partitions(self):
            return [InputPartition(str(root / f"bench-{p}.arrow")) for p in range(PARTITIONS)]

        def read(self, partition):
            source = ipc.open_file(pa.memory_map(partition.value))
            for i in range(source.num_record_batches):
                yield source.get_batch(i)

    class IpcSource(DataSource):
        @classmethod
        def name(cls):
            return "kafkalog_bench_ipc"

        def schema(self):
            return ks.kafka_schema(False)

        def reader(self, schema):
            return IpcReader()

    spark = (SparkSession.builder.master(f"local[{args.cores}]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(args.cores))
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    ks.register(spark)
    spark.dataSource.register(IpcSource)

    def query(fmt: str):
        reader = spark.read.format(fmt)
        if fmt == "kafkalog":
            reader = reader.option("path", str(root)).option("subscribe", "bench")
        agg = reader.load().groupBy("partition").agg(F.count(F.lit(1)), F.sum(F.length("value")), F.max("offset"))
        return sorted(tuple(row) for row in agg.collect())

    contenders = {"kafkalog source": lambda: query("kafkalog"),
                  "Arrow IPC source (no decoding)": lambda: query("kafkalog_bench_ipc")}
    rows = {name: fn() for name, fn in contenders.items()}  # also the warm-up
    if len(set(map(str, rows.values()))) != 1:
        raise SystemExit(f"the two sources gave different rows: {rows}")
    times = {name: [] for name in contenders}
    for _ in range(args.repeat):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    spark.stop()
    shutil.rmtree(root, ignore_errors=True)
    total = PARTITIONS * args.records_per_partition
    med = {name: statistics.median(ts) for name, ts in times.items()}
    for name, m in med.items():
        print(f"local[{args.cores}] {name}: {m:.3f} s ({total / m / 1e6:.2f} M rows/s)")
    k, i = med["kafkalog source"], med["Arrow IPC source (no decoding)"]
    print(f"RATIO spark_overhead local[{args.cores}]: kafkalog source / no-decoding source {k / i:.2f}x "
          f"(kafkalog's own share of the query about {max(0.0, (k - i) / k):.0%})")


if __name__ == "__main__":
    main()
