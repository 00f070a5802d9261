"""Every side-by-side row of kafkalog's performance table in one run, on the same files: builds
the inputs, runs each row, checks that each pair read the same records (counts and a CRC32 of
keys and values, or equal rows for Spark) and writes benches/RESULTS.md with the date, the
machine and the ratios.

    .venv/bin/python benches/run_all.py            # full size (~10-15 min), writes benches/RESULTS.md
    .venv/bin/python benches/run_all.py --tiny     # seconds-sized smoke run (CI), prints, writes nothing
    .venv/bin/python benches/run_all.py --only python,java   # a subset of the sections

Sections: `python` (Log.to_arrow against aiokafka and kafka-python, every codec, 4 record sizes
and one record a batch),
`java` (Kafka's own FileRecords / OffsetIndex / TimeIndex / MemoryRecordsBuilder under JMH
against kafkalog's Rust in benches/kafka_peer.rs, plus the machine's memcpy and CRC32C),
`spark` (Spark's Kafka source against the kafkalog data source, 1 and 2 cores), `index` (the
criterion bench of warm/cold index lookups) and `rss` (peak memory while streaming).
Full runs measure a release build: `maturin build --release` into target/bench-wheel, installed
in target/bench-py and put first on PYTHONPATH for the Python rows; `--tiny` uses the kafkalog
installed in the venv and cargo's dev profile (the figures of a tiny run mean nothing).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

# pyarrow imports numpy, whose OpenBLAS threads spin for a while after the import on every core:
# on 2 cores the first rows measured ran up to 1.8x slower for every contender. Nothing here
# uses BLAS; one thread keeps it quiet (set before anything imports numpy; children inherit it).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
BENCHES = ROOT / "benches"
sys.path.insert(0, str(ROOT / "tests"))

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
VALUE_SIZES = [10, 100, 1024, 100 * 1024]
# And a log of one record per batch, as a producer sending a record at a time writes (linger.ms=0
# on a quiet topic): each batch's header, CRC and codec frame costs per record there.
ONE_PER_BATCH = (100, 1)
JMH_VERSION = "1.37"
SPARK_KAFKA_VERSION = "4.2.0"
KAFKA_VERSION = "4.4.0"
TS0 = 1_700_000_000_000

SIZES = {
    "full": dict(py_bytes=16 << 20, py_max_records=200_000, repeat=3, java_records=400_000,
                 jmh=["-f", "1", "-wi", "3", "-w", "1s", "-i", "5", "-r", "1s"], rust_secs="2",
                 spark_records=2_000_000, spark_repeat=3, cores=[1, 2], rss_batch_rows=16384,
                 rss_batches=12, scale_partitions=16, scale_bytes=8 << 20, scale_repeat=5,
                 profile="bench"),
    "tiny": dict(py_bytes=64 << 10, py_max_records=600, repeat=1, java_records=3000,
                 jmh=["-f", "0", "-wi", "0", "-i", "1", "-r", "100ms"], rust_secs="0.02",
                 spark_records=2000, spark_repeat=1, cores=[1], rss_batch_rows=256,
                 rss_batches=10, scale_partitions=4, scale_bytes=64 << 10, scale_repeat=1,
                 profile="dev"),
}


def log(msg: str) -> None:
    print(f"[run_all {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))[:300]} exited {proc.returncode}:\n"
                         f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


# --------------------------------------------------------------------------- the machine


def machine() -> dict:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        mem = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1)) * 1024
    except (OSError, AttributeError):
        pass
    try:
        import pyarrow
        arrow = pyarrow.__version__
    except ImportError:
        arrow = "?"
    return {"cores": os.cpu_count(), "cpu": cpu, "memory_gib": mem / 2**30, "pyarrow": arrow,
            "load": os.getloadavg(), "python": platform.python_version(), "kernel": platform.release()}


# --------------------------------------------------------------------------- inputs


def value_pool() -> bytes:
    # Text-like, so each codec compresses as it would real payloads (not a run of one byte).
    words = [b"order", b"coffee", b"customer", b"qty", b"note", b"shipped", b"eu-west", b"ok",
             b"sku", b"price", b"2024-11-23", b"true", b"false", b"null", b"{", b"}", b":", b","]
    out, x = bytearray(), 12345
    while len(out) < 256 * 1024:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out += words[x % len(words)] + (b"%d" % (x % 1000) if x & 1 else b" ")
    return bytes(out)


POOL = value_pool()


def make_value(i: int, size: int) -> bytes:
    start = (i * 7919) % (len(POOL) - size - 1) if size < len(POOL) - 1 else 0
    v = POOL[start:start + size]
    return v if len(v) == size else (v * (size // max(1, len(v)) + 1))[:size]


def build_log(path: Path, records: int, value_bytes: int, compression: str,
              per_batch: int | None = None) -> Path:
    import kafkalog

    # A producer batches up to batch.size (16 KiB by default, larger with linger): 500 small
    # records, or as many large ones as fit in ~256 KiB, at least one.
    per_batch = per_batch or max(1, min(500, (256 << 10) // max(1, value_bytes)))
    with kafkalog.Log(path, read_only=False, create=True, config={"segment.bytes": 1 << 30}) as lg:
        for start in range(0, records, per_batch):
            lg.append([{"key": b"key-%08d" % i, "value": make_value(i, value_bytes), "timestamp": TS0 + i}
                       for i in range(start, min(records, start + per_batch))], compression=compression)
    # The data dir as a cleanly stopped broker leaves it: without the marker, opening the log
    # re-validates its segments from the recovery point (Kafka's recovery after an unclean
    # shutdown), a full CRC + decode pass the peers, handed the bytes, never make.
    (path.parent / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":0}')
    return path


def checksum_pairs(pairs) -> tuple[int, int]:
    crc, n = 0, 0
    for key, value in pairs:
        if key is not None:
            crc = zlib.crc32(key, crc)
        if value is not None:
            crc = zlib.crc32(value, crc)
        n += 1
    return n, crc


def median(xs) -> float:
    return statistics.median(xs)


def interleaved(contenders: dict, repeat: int, warmup: int = 3) -> dict:
    """Median seconds per contender over `repeat` timed rounds, after `warmup` untimed ones: the
    first reads of a process pay for page faults (mimalloc's arenas handing out fresh 2 MiB
    pages for the Arrow buffers, 5-30 ms a read for the first few) and each peer's first calls
    for its own start-up; the rows compare steady states, as JMH does for the Java rows."""
    times = {name: [] for name in contenders}
    names = list(contenders)
    for _ in range(warmup):
        for fn in contenders.values():
            fn()
    for r in range(repeat):  # interleaved, so drift on a shared machine hits all alike
        # Each round starts one contender later: the first read after seconds of a Python peer
        # ran up to 3x slower on this machine (host noise, whatever came first), so no
        # contender always takes that place.
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn = contenders[name]
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {k: median(v) for k, v in times.items()}


# --------------------------------------------------------------------------- python peers


def to_arrow_reader(path: Path, zero_copy: bool, one_thread: bool = False):
    import kafkalog

    def go():
        kw = {"zero_copy": True} if zero_copy else {}
        if one_thread:
            kw.update(one_thread_kw())
        table = kafkalog.Log(path).to_arrow(**kw).read_all()
        # Touch every key and value as the others do: sum their lengths in Arrow.
        return byte_lengths(table.column("value")) + byte_lengths(table.column("key"))
    return go


def records_reader(data: bytes):
    """kafkalog decoding the peers' input: the segment bytes in memory, to a pyarrow table whose
    views point into them (`records_to_arrow(zero_copy=True)`, one thread)."""
    import kafkalog

    def go():
        table = kafkalog.records_to_arrow(data, zero_copy=True)
        return byte_lengths(table.column("value")) + byte_lengths(table.column("key"))
    return go


def has_records_to_arrow() -> bool:
    import kafkalog
    return hasattr(kafkalog, "records_to_arrow")


def byte_lengths(column) -> int:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if column.type != pa.binary_view():
        return pc.sum(pc.binary_length(column)).as_py() or 0
    # pyarrow has no binary_length kernel for views: a view's first 4 bytes are its length (0
    # for nulls, as kafkalog writes them).
    total = 0
    for chunk in column.chunks:
        views = np.frombuffer(chunk.buffers()[1], dtype=np.int32)
        total += int(views[4 * chunk.offset:4 * (chunk.offset + len(chunk)):4].sum(dtype=np.int64))
    return total


def has_zero_copy() -> bool:
    import kafkalog
    import inspect
    try:
        return "zero_copy" in (kafkalog.Log.to_arrow.__text_signature__ or "")
    except AttributeError:
        return False


def one_thread_kw() -> dict:
    """`to_arrow` arguments keeping a read on the calling thread (no CRC checker, no pool)."""
    import kafkalog
    sig = getattr(kafkalog.Log.to_arrow, "__text_signature__", "") or ""
    kw = {"check_crcs_ahead": False} if "check_crcs_ahead" in sig else {}
    if "threads" in sig:
        kw["threads"] = 1
    return kw


def has_crc_thread() -> bool:
    import kafkalog
    return "check_crcs_ahead" in (getattr(kafkalog.Log.to_arrow, "__text_signature__", "") or "")


def python_peer(cls, data: bytes, check_crcs: bool = True):
    """A peer decoding the segment as its consumer does: `check_crcs=True` is both aiokafka's and
    kafka-python's consumer default (each batch's CRC32C checked before its records are read,
    as kafkalog always does); `False` is the bare decoder."""
    def go():
        n = 0
        records = cls(data)
        while records.has_next():
            batch = records.next_batch()
            if check_crcs and not batch.validate_crc():
                raise SystemExit("a peer found a CRC mismatch")
            for r in batch:
                n += len(r.key) + len(r.value)
        return n
    return go


def section_python(size: dict, tmp: Path, codecs: list[str]) -> dict:
    import kafkalog
    from aiokafka.record.memory_records import MemoryRecords as Aio
    from kafka.record.memory_records import MemoryRecords as KafkaPython

    zc = has_zero_copy()
    rows = []
    for codec in codecs:
        for vb, per_batch in [(vb, None) for vb in VALUE_SIZES] + [ONE_PER_BATCH]:
            n = max(2, min(size["py_max_records"], size["py_bytes"] // (vb + 20)))
            if per_batch == 1:
                n = max(2, size["py_max_records"] // 4)
            path = build_log(tmp / f"py-{codec}-{vb}-{per_batch or 'full'}-0", n, vb, codec, per_batch)
            data = b"".join(p.read_bytes() for p in sorted(path.glob("*.log")))
            table = kafkalog.Log(path).to_arrow().read_all()
            expected = checksum_pairs(zip(table.column("key").to_pylist(), table.column("value").to_pylist()))
            del table
            checks = {"aiokafka": Aio, "kafka-python": KafkaPython}
            for name, cls in checks.items():
                recs, pairs = cls(data), []
                while recs.has_next():
                    pairs.extend((r.key, r.value) for r in recs.next_batch())
                got = checksum_pairs(pairs)
                if got != expected:
                    raise SystemExit(f"{codec}/{vb} B: {name} decoded {got}, kafkalog {expected}")
            contenders = {"kafkalog": to_arrow_reader(path, False)}
            if zc:
                contenders["kafkalog zero-copy"] = to_arrow_reader(path, True)
                if has_crc_thread():
                    contenders["kafkalog zero-copy 1 thread"] = to_arrow_reader(path, True, one_thread=True)
                if has_records_to_arrow():
                    contenders["kafkalog bytes"] = records_reader(data)
                    tb = kafkalog.records_to_arrow(data, zero_copy=True)
                    got = checksum_pairs(zip(tb.column("key").to_pylist(), tb.column("value").to_pylist()))
                    if got != expected:
                        raise SystemExit(f"{codec}/{vb} B: records_to_arrow {got}, to_arrow {expected}")
                    del tb
                tz = kafkalog.Log(path).to_arrow(zero_copy=True).read_all()
                got = checksum_pairs(zip(tz.column("key").to_pylist(), tz.column("value").to_pylist()))
                if got != expected:
                    raise SystemExit(f"{codec}/{vb} B: zero-copy read {got}, copying read {expected}")
                del tz
            contenders["aiokafka"] = python_peer(Aio, data)
            contenders["aiokafka no crc"] = python_peer(Aio, data, check_crcs=False)
            contenders["kafka-python"] = python_peer(KafkaPython, data)
            contenders["kafka-python no crc"] = python_peer(KafkaPython, data, check_crcs=False)
            # Uncompressed rows take milliseconds a read, where a shared machine's noise is
            # largest (identical reads differed by 20% in medians of 3): more rounds for them.
            med = interleaved(contenders, size["repeat"] * (3 if codec == "none" else 1))
            rows.append({"codec": codec, "value_bytes": vb, "records": n, "bytes": len(data),
                         "median_s": med, "per_batch": per_batch})
            log(f"python {codec} {vb} B{' one per batch' if per_batch else ''}: " + ", ".join(f"{k} {n / v:,.0f}/s" for k, v in med.items()))
            shutil.rmtree(path)
    return {"rows": rows, "zero_copy": zc}


def records_iterator(path: Path):
    """`Log.records()`: a Python object per record, as the peers' decoders hand them out."""
    import kafkalog

    def go():
        n = 0
        for r in kafkalog.Log(path).records():
            n += len(r.key) + len(r.value)
        return n
    return go


# Python objects, one a record: uncompressed and one codec, small and 1 KiB values.
OBJECT_ROWS = [("none", 100), ("none", 1024), ("lz4", 100)]


def section_objects(size: dict, tmp: Path) -> dict:
    import kafkalog
    from aiokafka.record.memory_records import MemoryRecords as Aio
    from kafka.record.memory_records import MemoryRecords as KafkaPython

    rows = []
    for codec, vb in OBJECT_ROWS:
        n = max(2, min(size["py_max_records"], size["py_bytes"] // (vb + 20)))
        path = build_log(tmp / f"obj-{codec}-{vb}-0", n, vb, codec)
        data = b"".join(p.read_bytes() for p in sorted(path.glob("*.log")))
        expected = checksum_pairs((r.key, r.value) for r in kafkalog.Log(path).records())
        for name, cls in {"aiokafka": Aio, "kafka-python": KafkaPython}.items():
            recs, pairs = cls(data), []
            while recs.has_next():
                pairs.extend((r.key, r.value) for r in recs.next_batch())
            if checksum_pairs(pairs) != expected:
                raise SystemExit(f"objects {codec}/{vb} B: {name} decoded other records than Log.records()")
        contenders = {"kafkalog records()": records_iterator(path),
                      "aiokafka": python_peer(Aio, data),
                      "aiokafka no crc": python_peer(Aio, data, check_crcs=False),
                      "kafka-python": python_peer(KafkaPython, data)}
        med = interleaved(contenders, size["repeat"] * 3)
        rows.append({"codec": codec, "value_bytes": vb, "records": n, "median_s": med})
        log(f"objects {codec} {vb} B: " + ", ".join(f"{k} {n / v:,.0f}/s" for k, v in med.items()))
        shutil.rmtree(path)
    return {"rows": rows}


# --------------------------------------------------------------------------- Kafka's Java code


def jmh_classpath() -> list[str]:
    m2 = Path.home() / ".m2" / "repository"
    jars = [m2 / f"org/openjdk/jmh/jmh-core/{JMH_VERSION}/jmh-core-{JMH_VERSION}.jar",
            m2 / f"org/openjdk/jmh/jmh-generator-annprocess/{JMH_VERSION}/jmh-generator-annprocess-{JMH_VERSION}.jar",
            m2 / "net/sf/jopt-simple/jopt-simple/5.0.4/jopt-simple-5.0.4.jar",
            m2 / "org/apache/commons/commons-math3/3.6.1/commons-math3-3.6.1.jar"]
    if not all(j.is_file() for j in jars):
        log("fetching JMH from Maven Central (mvn dependency:get)")
        for art in ("jmh-core", "jmh-generator-annprocess"):
            run(["mvn", "-q", "dependency:get", f"-Dartifact=org.openjdk.jmh:{art}:{JMH_VERSION}"])
    missing = [str(j) for j in jars if not j.is_file()]
    if missing:
        raise SystemExit(f"JMH jars missing after mvn dependency:get: {missing}")
    return [str(j) for j in jars]


def build_java(out: Path) -> str:
    import kafka_harness as kh

    cp = ":".join(jmh_classpath() + [kh.kafka_classpath(KAFKA_VERSION)])
    out.mkdir(parents=True, exist_ok=True)
    # javac runs JMH's annotation processor (on the classpath), which writes the generated
    # benchmark classes and META-INF/BenchmarkList next to ours.
    run(["javac", "-d", str(out), "-cp", cp, str(BENCHES / "java" / "KafkaPeer.java")])
    return f"{out}:{cp}"


def rust_peer(size: dict, segment: Path) -> dict:
    cmd = ["cargo", "bench", "-q", "--bench", "kafka_peer"]
    if size["profile"] != "bench":
        cmd += ["--profile", size["profile"]]
    out = run(cmd + ["--", str(segment), size["rust_secs"]], cwd=ROOT).stdout
    return {d["op"]: d for d in map(json.loads, (l for l in out.splitlines() if l.startswith("{")))}


def section_java(size: dict, tmp: Path) -> dict:
    import kafka_harness as kh

    path = build_log(tmp / "java-0", size["java_records"], 100, "none", per_batch=500)
    segment = sorted(path.glob("*.log"))[0]
    log("building Kafka's side (javac + JMH's annotation processor) and kafkalog's (cargo bench)")
    cp = build_java(tmp / "java-classes")
    rust_before = rust_peer(size, segment)
    java_sum = run([kh._java(), "-cp", cp, "kafkalog.bench.KafkaPeer", "checksum", str(segment)]).stdout
    n, crc = map(int, java_sum.split()[1:3])
    rs = rust_before["checksum"]
    if (n, crc) != (rs["records"], rs["crc32"]):
        raise SystemExit(f"Kafka's FileRecords read {n} records crc {crc}, kafkalog {rs['records']} crc {rs['crc32']}")
    log("JMH: Kafka's FileRecords, OffsetIndex, TimeIndex, MemoryRecordsBuilder")
    result = tmp / "jmh.json"
    run([kh._java(), "-Xmx1g", "-cp", cp, "org.openjdk.jmh.Main", "kafkalog.bench.KafkaPeer",
         "-p", f"log={segment}", *size["jmh"], "-t", "1", "-rf", "json", "-rff", str(result)])
    java = {b["benchmark"].rsplit(".", 1)[1]: b["primaryMetric"]["score"] for b in json.loads(result.read_text())}
    rust_after = rust_peer(size, segment)
    # Python to pyarrow on the same segment, in the same run.
    import kafkalog
    t = kafkalog.Log(path).to_arrow().read_all()
    if checksum_pairs(zip(t.column("key").to_pylist(), t.column("value").to_pylist())) != (n, crc):
        raise SystemExit("Log.to_arrow read other records than Kafka's FileRecords")
    del t
    contenders = {"to_arrow": to_arrow_reader(path, False)}
    if has_zero_copy():
        contenders["to_arrow zero-copy"] = to_arrow_reader(path, True)
        if has_crc_thread():
            contenders["to_arrow zero-copy, 1 thread"] = to_arrow_reader(path, True, one_thread=True)
    py = interleaved(contenders, size["repeat"])
    ops = ["deep_iteration", "deep_iteration_mapped", "deep_iteration_no_crc", "deep_iteration_in_memory", "offset_index_lookup", "time_index_lookup", "build_and_append", "memcpy", "crc32c", "read_windows"]
    rust = {op: median([rust_before[op]["ns_per_op"], rust_after[op]["ns_per_op"]]) for op in ops}
    java_names = {"deep_iteration_no_crc": "deepIteration", "deep_iteration_crc": "deepIterationCheckingCrcs",
                  "deep_iteration_in_memory": "memoryDeepIterationCheckingCrcs",
                  "offset_index_lookup": "offsetIndexLookup",
                  "time_index_lookup": "timeIndexLookup", "build_and_append": "buildAndAppend"}
    rust["deep_iteration_crc"] = rust["deep_iteration"]  # kafkalog's deep iteration always checks CRCs
    java_names["deep_iteration_mapped"] = "deepIterationCheckingCrcs"  # Java's way to read the file
    return {"records": n, "bytes": segment.stat().st_size, "rust_ns": rust,
            "rust_runs": {op: [rust_before[op]["ns_per_op"], rust_after[op]["ns_per_op"]] for op in ops},
            "java_ns": {op: java[j] for op, j in java_names.items()}, "python_s": py,
            "index_entries": rust_before["offset_index_lookup"]["entries"],
            "time_index_entries": rust_before["time_index_lookup"]["entries"]}


# --------------------------------------------------------------------------- Spark


def spark_kafka_jars() -> str:
    proc = run(["bash", str(ROOT / ".ci" / "fetch_spark_kafka.sh"), SPARK_KAFKA_VERSION])
    folder = Path(proc.stdout.strip().splitlines()[-1])
    return ",".join(sorted(str(p) for p in folder.glob("*.jar")))


def section_spark(size: dict, tmp: Path, env: dict) -> dict:
    import kafka_harness as kh
    from confluent_kafka import Producer

    jars = spark_kafka_jars()
    topic, partitions = "bench", 2
    broker = kh.Broker(KAFKA_VERSION, work_dir=tmp / "broker", properties={"log.retention.ms": -1})
    results = []
    try:
        broker.start()
        kh.create_topic(broker.bootstrap, topic, partitions=partitions)
        log(f"producing {size['spark_records']:,} records of 100 B to a {KAFKA_VERSION} broker")
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 256 << 10,
                      "compression.type": "none", "acks": "all"})
        for i in range(size["spark_records"]):
            while True:
                try:
                    p.produce(topic, key=b"key-%08d" % i, value=make_value(i, 100), partition=i % partitions)
                    break
                except BufferError:
                    p.poll(0.05)
            if i % 10000 == 0:
                p.poll(0)
        if p.flush(120):
            raise SystemExit("producer did not deliver every record")
        del p  # before the broker stops, or librdkafka logs its reconnect attempts
        broker.stop()
        copy = tmp / "datadir-copy"
        shutil.copytree(broker.log_dir, copy)
        broker.start()
        for cores in size["cores"]:
            log(f"Spark local[{cores}]: Spark's Kafka source against the kafkalog source")
            out = run([sys.executable, str(BENCHES / "spark_kafka.py"), "--bootstrap", broker.bootstrap,
                       "--data-dir", str(copy), "--topic", topic, "--cores", str(cores),
                       "--repeat", str(size["spark_repeat"]), "--jars", jars], env=env).stdout
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        broker.close()
    return {"records": size["spark_records"], "partitions": partitions, "runs": results}


# --------------------------------------------------------------------------- scaling over cores


def thread_counts(cores: int) -> list[int]:
    counts, t = [], 1
    while t < cores:
        counts.append(t)
        t *= 2
    return counts + [cores]


def scale_read_kafkalog(path: str, zero_copy: bool) -> tuple[int, int]:
    import kafkalog

    # threads=1, check_crcs_ahead=False: each read on its one thread, so T readers use T cores.
    table = kafkalog.Log(path).to_arrow(zero_copy=zero_copy, **one_thread_kw()).read_all()
    return table.num_rows, byte_lengths(table.column("key")) + byte_lengths(table.column("value"))


def scale_read_aiokafka(path: str) -> tuple[int, int]:
    from aiokafka.record.memory_records import MemoryRecords

    # As aiokafka's consumer decodes a fetch: the bytes in memory, each batch's CRC checked.
    n = total = 0
    for seg in sorted(Path(path).glob("*.log")):
        records = MemoryRecords(seg.read_bytes())
        while records.has_next():
            batch = records.next_batch()
            if not batch.validate_crc():
                raise SystemExit("aiokafka found a CRC mismatch")
            for r in batch:
                n += 1
                total += len(r.key) + len(r.value)
    return n, total


def scale_warm(_: int) -> int:
    import aiokafka.record.memory_records  # noqa: F401  (the import out of the timed rounds)
    return os.getpid()


def section_scaling(size: dict, tmp: Path) -> dict:
    """Reading a topic's partitions on 1, 2, 4, ... cores: kafkalog on threads of one process (each
    read releases the GIL), aiokafka's decoder on as many processes (it holds the GIL)."""
    import multiprocessing
    from concurrent.futures import ThreadPoolExecutor

    parts = size["scale_partitions"]
    per_partition = size["scale_bytes"] // 120
    paths = [str(build_log(tmp / "scale" / f"bench-{p}", per_partition, 100, "none")) for p in range(parts)]
    cores = os.cpu_count() or 1
    ctx = multiprocessing.get_context("spawn")  # no fork of a process holding pyarrow's threads
    runs = []
    for t in thread_counts(cores):
        with ThreadPoolExecutor(t) as threads, ctx.Pool(t) as procs:
            procs.map(scale_warm, range(t))
            expected = None
            contenders = {
                "kafkalog zero-copy": lambda: threads.map(scale_read_kafkalog, paths, [True] * parts),
                "kafkalog": lambda: threads.map(scale_read_kafkalog, paths, [False] * parts),
                "kafkalog zero-copy processes": lambda: procs.starmap(scale_read_kafkalog,
                                                                      [(p, True) for p in paths], chunksize=1),
                "aiokafka": lambda: procs.map(scale_read_aiokafka, paths, chunksize=1),
            }
            for name, fn in contenders.items():  # each pair read the same records (and warms up)
                got = [tuple(x) for x in fn()]
                if expected is None:
                    expected = got
                elif got != expected:
                    raise SystemExit(f"scaling: {name} read {got}, kafkalog zero-copy {expected}")
            med = interleaved({k: (lambda f=f: list(f())) for k, f in contenders.items()}, size["scale_repeat"])
        records = sum(n for n, _ in expected)
        runs.append({"threads": t, "median_s": med})
        log(f"scaling {t} cores: " + ", ".join(f"{k} {records / v:,.0f}/s" for k, v in med.items()))
    shutil.rmtree(tmp / "scale")
    return {"partitions": parts, "records": records, "value_bytes": 100, "runs": runs}


# --------------------------------------------------------------------------- index, RSS


def section_index(size: dict) -> dict:
    cmd = ["cargo", "bench", "-q", "--bench", "index_lookup"]
    if size["profile"] != "bench":
        cmd += ["--profile", size["profile"], "--", "--test"]
    out = run(cmd, cwd=ROOT).stdout
    return {"lines": [l for l in out.splitlines() if l.startswith(("RATIO", "PAGES", "PAIRED"))]}


RSS_CHILD = r"""
import sys, kafkalog
def status(key):  # current (VmRSS) or peak (VmHWM) resident memory, bytes
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
threads = None if sys.argv[3] == "None" else int(sys.argv[3])
r = kafkalog.Log(sys.argv[1]).to_arrow(batch_rows=int(sys.argv[2]), threads=threads)
opened = status("VmHWM")  # opening a folder without a clean-shutdown marker validates it first
first, most, rows, batches = None, 0, 0, 0
for b in r:
    rows += b.num_rows; batches += 1
    now = status("VmRSS"); most = max(most, now)
    first = now if first is None else first
    del b
print(opened, first, most, status("VmHWM"), rows, batches)
"""


# Values of 1,000 B: records under 1 KiB, which a log no writer holds reads through its memory maps
# with the CRC checker thread (the pages released behind the reader), the default path that
# could hold most memory; 1 KiB values would take the read windows.
RSS_VALUE_BYTES = 1000


def section_rss(size: dict, tmp: Path, env: dict) -> dict:
    rows = size["rss_batch_rows"] * size["rss_batches"]
    path = build_log(tmp / "rss-0", rows, RSS_VALUE_BYTES, "none")
    result = {"log_bytes": sum(p.stat().st_size for p in path.glob("*.log")), "rows": rows,
              "batch_rows": size["rss_batch_rows"], "value_bytes": RSS_VALUE_BYTES, "runs": []}
    # One thread, and the default: chunks decoded ahead on the machine's cores.
    for threads in ("1", "None"):
        out = run([sys.executable, "-c", RSS_CHILD, str(path), str(size["rss_batch_rows"]), threads],
                  env=env).stdout.split()
        opened, first, most, peak, got, batches = map(int, out)
        if got != rows:
            raise SystemExit(f"streaming read {got} rows of {rows}")
        result["runs"].append({"threads": threads, "batches": batches, "peak_after_open": opened,
                               "rss_first_batch": first, "rss_most": most, "peak": peak})
    return result


# --------------------------------------------------------------------------- report


def fmt_rate(x: float) -> str:
    return f"{x / 1e6:,.2f} M" if x >= 1e6 else f"{x / 1e3:,.1f} k"


def report(res: dict, size_name: str) -> str:
    m = res["machine"]
    out = [f"# kafkalog performance, side by side\n",
           f"Generated by `benches/run_all.py` ({size_name} size) on {res['date']} in {res['wall_s']:.0f} s.\n",
           f"Machine: {m['cores']} cores, {m['cpu']}, {m['memory_gib']:.1f} GiB memory, Linux {m['kernel']}, "
           f"Python {m['python']}, pyarrow {m.get('pyarrow', '?')}; load average {m['load'][0]:.1f} at the start. "
           + (res.get("machine_note") or
              f"**The machine was shared** with other jobs building and testing while this ran: absolute "
              f"figures are noisy; the ratios compare contenders measured interleaved in the same run "
              f"(medians). This machine has {m['cores']} cores, so its scaling rows stop there "
              f"(`RESULTS-16core.md`: a 16-core machine's).")
           + " `OPENBLAS_NUM_THREADS=1` (numpy's BLAS threads, imported with pyarrow, otherwise spin on every "
           "core).\n",
           f"kafkalog: {res['build']}.\n"]
    if "python" in res:
        py = res["python"]
        out.append("## Decoding one segment into Python: Log.to_arrow vs aiokafka vs kafka-python\n")
        out.append("Each reader decodes the same segment file(s) (kafkalog opens the log folder; the "
                   "peers get the segment bytes in memory) and touches every key and value; records "
                   "checked equal first (count + CRC32 of keys and values). aiokafka and kafka-python run "
                   "as their consumers do by default (`check_crcs=True`: each batch's CRC32C checked, as "
                   "kafkalog always does); the `no CRC` columns are their bare decoders. Records/s, median of the "
                   "interleaved runs; `x` = kafkalog's records/s over the peer's. `kafkalog to_arrow` copies "
                   "keys and values into `binary` columns; `zero_copy=True` points `binary_view` columns into "
                   "the segment. Both are `to_arrow`'s defaults otherwise: a read of 2 MiB or more is decoded in "
                   "chunks of 1-4 MiB on the machine's cores (`threads=None`: as many threads as cores, at most "
                   "8), the peers on one (they hold the GIL). `1 thread` is the zero-copy read with "
                   "`threads=1, check_crcs_ahead=False`, every step on the calling thread as the peers do. A "
                   "segment no writer holds is read through a memory map (a copying read uses the map for "
                   "uncompressed records of 64 B to 1 KiB; otherwise read windows). `from bytes` is "
                   "`kafkalog.records_to_arrow(data, zero_copy=True)` on the peers' own input, the segment "
                   "bytes in memory (one thread, each batch's CRC checked). Batches hold up to 500 records "
                   "(as many as fit in 256 KiB); `one a batch` rows hold one record per batch, as a "
                   "producer sending a record at a time writes them.\n")
        zc = py["zero_copy"]
        one = zc and all("kafkalog zero-copy 1 thread" in r["median_s"] for r in py["rows"])
        mem = all("kafkalog bytes" in r["median_s"] for r in py["rows"])
        nocrc = all("aiokafka no crc" in r["median_s"] for r in py["rows"])
        kpnocrc = all("kafka-python no crc" in r["median_s"] for r in py["rows"])
        head = "| codec | value | records | kafkalog to_arrow |" + (" zero_copy=True |" if zc else "") + (" zero-copy, 1 thread |" if one else "") + \
               (" from bytes |" if mem else "") + " aiokafka |" + (" aiokafka no CRC |" if nocrc else "") + " kafka-python |" + \
               (" kafka-python no CRC |" if kpnocrc else "") + " vs aiokafka |" + \
               (" vs aiokafka no CRC |" if nocrc else "") + " vs kafka-python |" + \
               (" vs kafka-python no CRC |" if kpnocrc else "") + (" zero-copy vs aiokafka |" if zc else "") + \
               (" zero-copy 1 thread vs aiokafka |" if one else "") + (" from bytes vs aiokafka |" if mem else "")
        out += [head, "|" + "---|" * (head.count("|") - 1)]
        for r in py["rows"]:
            n, t = r["records"], r["median_s"]
            value = f"{r['value_bytes']} B" + (", one a batch" if r.get("per_batch") == 1 else "")
            cells = [r["codec"], value, f"{n:,}", fmt_rate(n / t["kafkalog"]) + "/s"]
            if zc:
                cells.append(fmt_rate(n / t["kafkalog zero-copy"]) + "/s")
            if one:
                cells.append(fmt_rate(n / t["kafkalog zero-copy 1 thread"]) + "/s")
            if mem:
                cells.append(fmt_rate(n / t["kafkalog bytes"]) + "/s")
            cells.append(fmt_rate(n / t["aiokafka"]) + "/s")
            if nocrc:
                cells.append(fmt_rate(n / t["aiokafka no crc"]) + "/s")
            cells.append(fmt_rate(n / t["kafka-python"]) + "/s")
            if kpnocrc:
                cells.append(fmt_rate(n / t["kafka-python no crc"]) + "/s")
            cells.append(f"**{t['aiokafka'] / t['kafkalog']:.1f}x**")
            if nocrc:
                cells.append(f"{t['aiokafka no crc'] / t['kafkalog']:.1f}x")
            cells.append(f"{t['kafka-python'] / t['kafkalog']:.0f}x")
            if kpnocrc:
                cells.append(f"{t['kafka-python no crc'] / t['kafkalog']:.0f}x")
            if zc:
                cells.append(f"{t['aiokafka'] / t['kafkalog zero-copy']:.1f}x")
            if one:
                cells.append(f"{t['aiokafka'] / t['kafkalog zero-copy 1 thread']:.1f}x")
            if mem:
                cells.append(f"{t['aiokafka'] / t['kafkalog bytes']:.1f}x")
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    if "objects" in res:
        out.append("## Records as Python objects: Log.records() vs aiokafka vs kafka-python\n")
        out.append("The same segment decoded into one Python object per record, every key and value "
                   "touched (`len`), records checked equal first; the peers run as in the to_arrow table (their "
                   "consumers' default checks each batch's CRC, as kafkalog always does). `Log.records()` "
                   "decodes 8,192 records at a time with the GIL released, then hands out a `Record` each "
                   "(offset, timestamp, key, value, headers). Records/s, median of interleaved runs.\n")
        out += ["| codec | value | records | kafkalog records() | aiokafka | aiokafka no CRC | kafka-python | vs aiokafka | vs aiokafka no CRC | vs kafka-python |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for r in res["objects"]["rows"]:
            med, n = r["median_s"], r["records"]
            ours = med["kafkalog records()"]
            out.append(f"| {r['codec']} | {r['value_bytes']} B | {n:,} | {fmt_rate(n / ours)}/s | {fmt_rate(n / med['aiokafka'])}/s "
                       f"| {fmt_rate(n / med['aiokafka no crc'])}/s | {fmt_rate(n / med['kafka-python'])}/s "
                       f"| **{med['aiokafka'] / ours:.1f}x** | {med['aiokafka no crc'] / ours:.1f}x | {med['kafka-python'] / ours:.0f}x |")
        out.append("")
    if "java" in res:
        j = res["java"]
        n = j["records"]
        out.append("## Kafka's own Java code (JMH) vs kafkalog's Rust, same segment\n")
        out.append(f"One segment of {n:,} records with 100-byte values, 500 per batch, uncompressed "
                   f"({j['bytes'] / 1e6:.1f} MB), written by kafkalog with its .index ({j['index_entries']:,} "
                   f"entries) and .timeindex ({j['time_index_entries']:,}). Java: kafka-clients/kafka-storage "
                   f"{KAFKA_VERSION}, JMH {JMH_VERSION} (average time, 1 fork, warmed up, 1 thread). Rust: "
                   f"benches/kafka_peer.rs (median of samples after a warm-up; run before and after the JVM, "
                   f"median of the two). Both single-threaded. Records checked equal (count + CRC32). "
                   f"Kafka's `FileRecords` deep iteration alone does not check batch CRCs; its consumer does "
                   f"(`check.crcs=true` by default), and kafkalog's readers always do (CRC32C of every batch): "
                   f"both are given, each side doing the same work. Both file rows pay the kernel's copy of "
                   f"the file into the reader's buffer; the in-memory row leaves it out.\n")
        out += ["| work | Kafka (Java, JMH) | kafkalog (Rust) | Rust vs Java |", "|---|---|---|---|"]
        labels = {"deep_iteration_no_crc": ("deep iteration of the file (FileRecords, every key/value/headers), no CRC check on either side", n, "records"),
                  "deep_iteration_crc": ("deep iteration of the file with each batch's CRC checked (`ensureValid()`, as Kafka's consumer with check.crcs=true; kafkalog's `FileRecords::for_each_batch` always checks)", n, "records"),
                  "deep_iteration_mapped": ("deep iteration of the file with CRCs checked, each side reading the file its way: Kafka's `FileRecords` (a read into its buffer), kafkalog's memory map of a read-only file no writer holds (`FileRecords::for_each_batch_mapped`, the zero-copy reader's path)", n, "records"),
                  "deep_iteration_in_memory": ("deep iteration of the segment's bytes in memory (MemoryRecords, as a consumer decodes a fetch), CRC checked", n, "records"),
                  "offset_index_lookup": ("OffsetIndex.lookup, 1024 random targets", 1024, "lookups"),
                  "time_index_lookup": ("TimeIndex.lookup, 1024 random targets", 1024, "lookups"),
                  "build_and_append": ("MemoryRecordsBuilder + FileRecords.append, 500 x 100 B", 500, "records")}
        for op, (label, per, unit) in labels.items():
            if op not in j["java_ns"]:
                continue
            jn, rn = j["java_ns"][op], j["rust_ns"][op]
            out.append(f"| {label} | {fmt_rate(per / jn * 1e9)} {unit}/s | {fmt_rate(per / rn * 1e9)} {unit}/s "
                       f"| **{jn / rn:.1f}x** |")
        if "read_windows" in j["rust_ns"] and "deep_iteration_crc" in j["java_ns"]:
            jn, rd, rn = j["java_ns"]["deep_iteration_crc"], j["rust_ns"]["read_windows"], j["rust_ns"]["deep_iteration"]
            out.append(f"\nThrough read windows the file's read alone (`pread` into a 1 MiB window, nothing decoded; "
                       f"machine limits below) takes {rd / 1e6:.2f} ms of kafkalog's {rn / 1e6:.2f} ms "
                       f"({rd / rn:.0%}): were decoding free, that row could reach {jn / rd:.1f}x Java's "
                       f"{jn / 1e6:.2f} ms, no more.")
        out.append("")
        b = j["bytes"]
        memcpy = b / j["rust_ns"]["memcpy"] * 1e9
        crc = b / j["rust_ns"]["crc32c"] * 1e9
        deep = b / j["rust_ns"]["deep_iteration"] * 1e9
        out.append("### Against the machine's limits (same run, same segment)\n")
        out += ["| path | GB/s of segment | records/s | fraction of memcpy | fraction of CRC32C |", "|---|---|---|---|---|",
                f"| memcpy of the segment (in memory) | {memcpy / 1e9:.2f} | | 1 | |",
                f"| CRC32C of the segment (`checksum::crc32c`, as kafkalog checks batches: the crc-fast crate) | {crc / 1e9:.2f} | | | 1 |"]
        if "read_windows" in j["rust_ns"]:
            read = b / j["rust_ns"]["read_windows"] * 1e9
            out.append(f"| the kernel's read of the cached segment into a reused 1 MiB window (`pread`, nothing decoded: the "
                       f"floor of both sides' `FileRecords` rows) | {read / 1e9:.2f} | | {read / memcpy:.2f} | |")
        out.append(f"| kafkalog Rust deep iteration (file read + CRC + decode) | {deep / 1e9:.2f} | {fmt_rate(n / j['rust_ns']['deep_iteration'] * 1e9)} | {deep / memcpy:.2f} | {deep / crc:.2f} |")
        if "deep_iteration_mapped" in j["rust_ns"]:
            mapped = b / j["rust_ns"]["deep_iteration_mapped"] * 1e9
            out.append(f"| kafkalog Rust deep iteration, file memory-mapped (CRC + decode) | {mapped / 1e9:.2f} "
                       f"| {fmt_rate(n / j['rust_ns']['deep_iteration_mapped'] * 1e9)} | {mapped / memcpy:.2f} | {mapped / crc:.2f} |")
        for name, s in j["python_s"].items():
            rate = b / s
            cores = "one core" if "1 thread" in name else f"{res['machine']['cores']} cores"
            out.append(f"| Python `Log.{name}` to a pyarrow table (file read + CRC + decode + Arrow; {cores}) | {rate / 1e9:.2f} "
                       f"| {fmt_rate(n / s)} | {rate / memcpy:.2f} | {rate / crc:.2f} |")
        out.append("")
    if "spark" in res:
        s = res["spark"]
        out.append("## Spark: Spark's Kafka source vs the kafkalog source\n")
        out.append(f"A {KAFKA_VERSION} broker, topic `bench` with {s['partitions']} partitions, {s['records']:,} "
                   f"records of 100 B (confluent-kafka producer). Spark's Kafka source "
                   f"(spark-sql-kafka-0-10 {SPARK_KAFKA_VERSION}) reads it from the running broker; "
                   f"`format(\"kafkalog\")` reads a copy of the broker's data dir. Query: per partition "
                   f"count, sum of value lengths, max offset; rows checked equal. One Spark JVM per core "
                   f"count, runs interleaved, median; end to end (planning, tasks, collect).\n")
        out += ["| cores | Spark's Kafka source | kafkalog source | kafkalog vs Kafka source |", "|---|---|---|---|"]
        for r in s["runs"]:
            a, k = r["median_s"]["spark-kafka"], r["median_s"]["kafkalog"]
            out.append(f"| {r['cores']} | {a:.2f} s ({fmt_rate(s['records'] / a)} rec/s) | {k:.2f} s "
                       f"({fmt_rate(s['records'] / k)} rec/s) | **{a / k:.1f}x** |")
        out.append(f"\nThis machine has {res['machine']['cores']} cores, so these rows stop there.\n")
    if "scaling" in res:
        sc = res["scaling"]
        n = sc["records"]
        out.append("## Scaling over cores: a topic's partitions read in parallel\n")
        out.append(f"One topic of {sc['partitions']} partitions, {n:,} records of {sc['value_bytes']} B values "
                   f"in all, uncompressed; every partition read whole, every key and value touched (their "
                   f"lengths summed), results checked equal. kafkalog: `Log(partition).to_arrow()` on T "
                   f"threads of one process (each read releases the GIL; `threads=1, check_crcs_ahead=False`, "
                   f"so one core per reader), and the zero-copy read on T processes of a pool as well. aiokafka: "
                   f"its decoder (each batch's CRC checked, as its consumer does) on T processes of a pool, "
                   f"since it holds the GIL; each reads the segment bytes into memory first. Records/s, "
                   f"median of interleaved rounds; speed-up against the same contender on one core.\n")
        procs = all("kafkalog zero-copy processes" in r["median_s"] for r in sc["runs"])
        kinds = ["kafkalog zero-copy", "kafkalog"] + (["kafkalog zero-copy processes"] if procs else []) + ["aiokafka"]
        out += ["| cores | kafkalog zero_copy=True (threads) | kafkalog to_arrow (threads) |"
                + (" kafkalog zero_copy=True (processes) |" if procs else "")
                + " aiokafka (processes) | zero-copy vs aiokafka | to_arrow vs aiokafka |",
                "|---|---|---|---|---|---|" + ("---|" if procs else "")]
        base = sc["runs"][0]["median_s"]
        for r in sc["runs"]:
            t = r["median_s"]
            cells = [str(r["threads"])]
            for k in kinds:
                cells.append(f"{fmt_rate(n / t[k])}/s ({base[k] / t[k]:.1f}x)")
            cells += [f"**{t['aiokafka'] / t['kafkalog zero-copy']:.1f}x**", f"{t['aiokafka'] / t['kafkalog']:.1f}x"]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    if "index" in res:
        out.append("## Index lookups: warm/cold search vs a plain binary search (criterion, benches/index_lookup.rs)\n")
        out.append("A nearly full default 10 MiB .index (1,310,000 entries); `caught_up` targets near the end, "
                   "`random` anywhere; both searches read the same bytes (the writable index's mapping, and "
                   "`read_only_`: the snapshot a read-only `Log` searches). Ratio = kafkalog time / binary search "
                   "time (below 1 is faster). PAIRED: the two interleaved batch by batch on fresh targets, the "
                   "median of the per-round ratios (the figure to quote on a shared machine); RATIO: criterion's "
                   "separate windows over 1024 repeated targets. PAGES: distinct 4 KiB pages touched over 10,000 "
                   "lookups.\n")
        out.append("```\n" + "\n".join(res["index"]["lines"]) + "\n```\n")
    if "rss" in res:
        r = res["rss"]
        mib = 2**20
        out.append("## Memory while streaming\n")
        runs = r.get("runs") or [{"threads": "1", **r}]
        out.append(f"`Log.to_arrow(batch_rows={r['batch_rows']}, threads=T)` over a {r['log_bytes'] / mib:.0f} MiB "
                   f"log ({r['rows']:,} records of {r.get('value_bytes', 1024):,} B values) in a fresh process "
                   f"per run, each batch dropped after reading; `threads=None` (the default) decodes chunks of "
                   f"at most 4 MiB ahead of the reader on the machine's cores, at most two per thread"
                   # The reader's rule: records under 1 KiB, Arrow batches that hold 1 MiB of them.
                   + ("; read through the segments' memory maps (with the CRC checker thread on one thread), "
                      "pages released behind the reader" if r.get('value_bytes', 1024) < 1024 and r['batch_rows'] >= 16384
                      else "")
                   + ". Resident memory from /proc/self/status:\n")
        out += ["| threads | Arrow batches | peak after opening the log | RSS holding the first batch | largest RSS holding any batch | growth over the stream | peak of the process |",
                "|---|---|---|---|---|---|---|"]
        for x in runs:
            out.append(f"| {x['threads']} | {x['batches']} | {x['peak_after_open'] / mib:.0f} MiB | {x['rss_first_batch'] / mib:.0f} MiB "
                       f"| {x['rss_most'] / mib:.0f} MiB | {(x['rss_most'] - x['rss_first_batch']) / mib:.0f} MiB "
                       f"(log: {r['log_bytes'] / mib:.0f} MiB) | {x['peak'] / mib:.0f} MiB |")
        out.append("")
    return "\n".join(out) + "\n"


def release_build(env: dict) -> str:
    """A release build of the Python extension in target/bench-py (the venv's is cargo's dev profile)."""
    wheels = ROOT / "target" / "bench-wheel"
    shutil.rmtree(wheels, ignore_errors=True)
    log("maturin build --release (minutes on a busy machine)")
    run([str(Path(sys.executable).parent / "maturin"), "build", "--release", "-q", "-o", str(wheels)], cwd=ROOT)
    site = ROOT / "target" / "bench-py"
    shutil.rmtree(site, ignore_errors=True)
    run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
         *map(str, wheels.glob("*.whl"))])
    return str(site)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="smoke-test sizes; prints the table, writes no file")
    ap.add_argument("--only", default="python,objects,java,spark,index,rss,scaling")
    ap.add_argument("--out", default=str(BENCHES / "RESULTS.md"))
    ap.add_argument("--update", action="store_true",
                    help="re-run only the --only sections and merge them into the existing RESULTS.json/.md")
    ap.add_argument("--codecs", default=",".join(CODECS), help="the python section's codecs")
    ap.add_argument("--machine-note", default="",
                    help="replaces the report's sentence on the machine being shared (another machine's run)")
    ap.add_argument("--no-release-build", action="store_true",
                    help="full sizes with the kafkalog already importable (e.g. after maturin develop --release)")
    args = ap.parse_args()
    size_name = "tiny" if args.tiny else "full"
    size = SIZES[size_name]
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    env = dict(os.environ)
    if not args.tiny and not args.no_release_build and "_KAFKALOG_BENCH_CHILD" not in os.environ:
        site = release_build(env)
        env["PYTHONPATH"] = site + os.pathsep + env.get("PYTHONPATH", "")
        env["_KAFKALOG_BENCH_CHILD"] = "1"
        # Run again with the release build first on the path (the parent imported nothing of kafkalog).
        sys.exit(subprocess.run([sys.executable, *sys.argv], env=env).returncode)
    import kafkalog
    build = (f"release build ({Path(kafkalog.__file__).parent})" if os.environ.get("_KAFKALOG_BENCH_CHILD")
             else f"the venv's build ({'tiny run: dev profile' if args.tiny else 'as installed'})")
    t0 = time.time()
    res: dict = {"machine": machine(), "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                 "build": build}
    previous = Path(args.out).with_suffix(".json")
    if args.machine_note:
        res["machine_note"] = args.machine_note
    if args.update and previous.is_file():
        res = json.loads(previous.read_text())
        res["date"] += f" (sections {args.only} re-run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC})"
        res["machine"].setdefault("pyarrow", machine()["pyarrow"])
    with tempfile.TemporaryDirectory(prefix="kafkalog-bench-") as tmp:
        tmp = Path(tmp)
        for name in sections:
            log(f"section {name}")
            if name == "python":
                res["python"] = section_python(size, tmp, [c for c in args.codecs.split(",") if c])
            elif name == "objects":
                res["objects"] = section_objects(size, tmp)
            elif name == "java":
                res["java"] = section_java(size, tmp)
            elif name == "spark":
                res["spark"] = section_spark(size, tmp, env)
            elif name == "index":
                res["index"] = section_index(size)
            elif name == "rss":
                res["rss"] = section_rss(size, tmp, env)
            elif name == "scaling":
                res["scaling"] = section_scaling(size, tmp)
            else:
                raise SystemExit(f"unknown section {name}")
    res["wall_s"] = res.get("wall_s", 0) + time.time() - t0 if args.update else time.time() - t0
    text = report(res, size_name)
    print(text)
    if not args.tiny:
        Path(args.out).write_text(text)
        Path(args.out).with_suffix(".json").write_text(json.dumps(res, indent=1))
        log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
