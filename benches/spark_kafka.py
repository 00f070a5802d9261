"""One Spark JVM with `local[<cores>]`: Spark's own Kafka source reading a topic from a running
broker against `spark.read.format("kafkalog")` over a copy of that broker's data dir, the same
query (count, sum of value lengths, max offset per partition), rows checked equal, runs
interleaved. Prints one JSON line. benches/run_all.py starts it once per core count.

    python benches/spark_kafka.py --bootstrap HOST:PORT --data-dir DIR --topic T --cores N --repeat R --jars a.jar,b.jar
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--cores", type=int, required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--jars", required=True)
    args = ap.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import kafkalog.spark as ks

    spark = (SparkSession.builder.master(f"local[{args.cores}]")
             .appName("kafkalog-bench-spark")
             .config("spark.jars", args.jars)
             .config("spark.driver.memory", "2g")
             .config("spark.sql.shuffle.partitions", str(args.cores))
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    ks.register(spark)

    def query(fmt: str):
        r = spark.read.format(fmt).option("subscribe", args.topic)
        if fmt == "kafka":
            r = r.option("kafka.bootstrap.servers", args.bootstrap)
        else:
            r = r.option("path", args.data_dir)
        df = r.load()
        agg = df.groupBy("partition").agg(F.count(F.lit(1)).alias("n"),
                                          F.sum(F.length("value")).alias("value_bytes"),
                                          F.max("offset").alias("max_offset"))
        return sorted(tuple(row) for row in agg.collect())

    readers = {"spark-kafka": lambda: query("kafka"), "kafkalog": lambda: query("kafkalog")}
    rows = {name: fn() for name, fn in readers.items()}  # also the warm-up of each
    if rows["spark-kafka"] != rows["kafkalog"]:
        raise SystemExit(f"rows differ: Spark's Kafka source {rows['spark-kafka']}, kafkalog {rows['kafkalog']}")
    times = {name: [] for name in readers}
    for _ in range(args.repeat):
        for name, fn in readers.items():
            t0 = time.perf_counter()
            got = fn()
            times[name].append(time.perf_counter() - t0)
            if got != rows[name]:
                raise SystemExit(f"{name} gave different rows on a second run")
    spark.stop()
    print(json.dumps({"cores": args.cores, "rows": rows["kafkalog"],
                      "median_s": {k: statistics.median(v) for k, v in times.items()},
                      "runs_s": times}))


if __name__ == "__main__":
    main()
