"""The kafkalog Spark data source on a real Spark standalone cluster.

A master and two workers (1 core, 1 GiB each) are started on 127.0.0.1 from the pyspark
package's own ``bin/spark-class``; a SparkSession connects to them, so the data source plans its
partitions in the driver and reads/writes them in the workers' executor processes. The cluster is
always killed at teardown. A cluster that fails to start is a failed test, never a skip.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

import kafkalog  # noqa: E402
from kafkalog import Log  # noqa: E402

import pyspark  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

import kafkalog.spark as ks  # noqa: E402

BASE_TS = 1700000000000
CHECKPOINT_FILES = {
    "log-start-offset-checkpoint",
    "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
    "meta.properties",
}
PARTITION_FILE = re.compile(
    r"^(\d{20}\.(log|index|timeindex|txnindex|snapshot)|leader-epoch-checkpoint|partition\.metadata)$"
)
START_TIMEOUT = 150


# --------------------------------------------------------------------------------------------
# helpers


_GIVEN_PORTS: set = set()


def free_port() -> int:
    """A free port, never one given before in this process: a port is free again once its probe
    closes, and two daemons handed the same one (a worker's UI on the master's) answer for each
    other."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _GIVEN_PORTS:
            _GIVEN_PORTS.add(port)
            return port


def http_json(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read().decode())


def tail(path, n=40):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError as e:
        return f"<{e}>"


def _b(x):
    return None if x is None else bytes(x)


def collect(df, headers=False):
    cols = ["key", "value", "topic", "partition", "offset", "unix_millis(timestamp) AS ts", "timestampType"]
    if headers:
        cols.append("headers")
    out = []
    for r in df.selectExpr(*cols).collect():
        t = (_b(r["key"]), _b(r["value"]), r["topic"], r["partition"], r["offset"], r["ts"], r["timestampType"])
        if headers:
            h = r["headers"]
            t += (None if h is None else [(x["key"], _b(x["value"])) for x in h],)
        out.append(t)
    return sorted(out, key=lambda t: (t[2], t[3], t[4]))


def log_records(path):
    log = Log(path)
    try:
        return list(log.records())
    finally:
        log.close()


def leos(data_dir):
    out = {}
    for n in sorted(os.listdir(data_dir)):
        p = Path(data_dir) / n
        if p.is_dir() and re.match(r"^.+-\d+$", n):
            log = Log(p)
            try:
                out[n] = (log.log_start_offset, log.log_end_offset)
            finally:
                log.close()
    return out


def check_data_dir_clean(data_dir, expected_tps):
    names = sorted(os.listdir(data_dir))
    dirs = {n for n in names if (Path(data_dir) / n).is_dir()}
    files = {n for n in names if not (Path(data_dir) / n).is_dir()}
    assert dirs == set(expected_tps), f"unexpected folders in data dir: {sorted(dirs ^ set(expected_tps))}"
    assert files <= CHECKPOINT_FILES, f"unexpected files in data dir: {sorted(files - CHECKPOINT_FILES)}"
    for d in dirs:
        stray = [n for n in os.listdir(Path(data_dir) / d) if not PARTITION_FILE.match(n)]
        assert not stray, f"unexpected files in {d}: {stray}"


def expect_error(build, *words):
    with pytest.raises(Exception) as ei:
        res = build()
        if res is not None and hasattr(res, "collect"):
            res.collect()
    msg = str(ei.value)
    assert any(w.lower() in msg.lower() for w in words), f"error names none of {words!r}: {msg[:3000]}"
    return msg


def read(spark, path, **opts):
    r = spark.read.format("kafkalog").option("path", str(path))
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def writer(df, path, **opts):
    w = df.write.format("kafkalog").option("path", str(path)).mode("append")
    for k, v in opts.items():
        w = w.option(k, v)
    return w


# --------------------------------------------------------------------------------------------
# the cluster


def _spark_class() -> Path:
    p = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not p.exists():
        pytest.fail(f"pyspark has no bin/spark-class at {p}: cannot start a standalone cluster")
    return p


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("spark-cluster")
    spark_class = _spark_class()
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_class.parent.parent),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY="384m",
        SPARK_LOG_DIR=str(base / "logs"),
        SPARK_WORKER_DIR=str(base / "work"),
        PYSPARK_PYTHON=sys.executable,
    )
    port, webui = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = []

    def launch(name, args):
        out = open(base / f"{name}.log", "wb")
        p = subprocess.Popen(
            [str(spark_class), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(base),
            start_new_session=True,  # its own process group: teardown kills it and its executors
        )
        out.close()
        procs.append((name, p))
        return p

    def logs():
        return "\n".join(f"--- {n}.log ---\n{tail(base / f'{n}.log')}" for n, _ in procs)

    def kill_all():
        for _, p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.time() + 15
        for _, p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                pass
        for _, p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the group: the JVM and any executor it left
            except (ProcessLookupError, PermissionError):
                pass
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    try:
        launch(
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(webui)],
        )
        for i in range(2):
            (base / f"work{i}").mkdir()
            launch(
                f"worker{i}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(free_port()),
                    "--work-dir",
                    str(base / f"work{i}"),
                ],
            )
        deadline = time.time() + START_TIMEOUT
        state = None
        while time.time() < deadline:
            dead = [(n, p.returncode) for n, p in procs if p.poll() is not None]
            if dead:
                pytest.fail(f"Spark standalone cluster process exited during start-up: {dead}\n{logs()}")
            try:
                state = http_json(f"http://127.0.0.1:{webui}/json/")
                alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
                if len(alive) >= 2:
                    break
            except (OSError, ValueError):  # not up yet, or a page before the JSON (run 11-27)
                pass
            time.sleep(1)
        else:
            pytest.fail(f"Spark standalone cluster: 2 workers did not register in {START_TIMEOUT}s (master state {state})\n{logs()}")
    except BaseException:
        kill_all()
        raise
    try:
        yield {"url": url, "webui": webui, "base": base, "logs": logs}
    finally:
        kill_all()


@pytest.fixture(scope="module")
def spark(cluster):
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    ui_port = free_port()
    try:
        s = (
            SparkSession.builder.master(cluster["url"])
            .appName("kafkalog-spark-cluster-tests")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "true")
            .config("spark.ui.port", str(ui_port))
            .config("spark.executor.memory", "512m")
            .config("spark.executor.cores", "1")
            .config("spark.cores.max", "2")
            .config("spark.task.maxFailures", "2")
            .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
            .config("spark.pyspark.python", sys.executable)
            .config("spark.pyspark.driver.python", sys.executable)
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.python.worker.faulthandler.enabled", "true")
            .getOrCreate()
        )
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"could not connect a SparkSession to {cluster['url']}: {e}\n{cluster['logs']()}")
    try:
        sc = s.sparkContext
        assert sc.master == cluster["url"], f"session is not on the cluster: {sc.master}"
        sc.setLogLevel("ERROR")
        deadline = time.time() + START_TIMEOUT
        n = 0
        while time.time() < deadline:
            n = sc._jsc.sc().getExecutorIds().size()
            if n >= 2:
                break
            time.sleep(1)
        else:
            pytest.fail(f"only {n} executors registered with the driver in {START_TIMEOUT}s\n{cluster['logs']()}")
        ks.register(s)
        s._kl_ui = f"http://127.0.0.1:{sc.uiWebUrl.rsplit(':', 1)[1]}" if sc.uiWebUrl else f"http://127.0.0.1:{ui_port}"
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("cluster-data") / "data"
    d.mkdir()
    recs = []
    for p in range(3):
        log = Log(d / f"orders-{p}", read_only=False, create=True, config={"segment.bytes": 1 << 16})
        for b, codec in enumerate(["none", "zstd", "gzip", "lz4", "snappy"]):
            batch = [
                {
                    "key": b"k%d-%d" % (p, b * 20 + i),
                    "value": b"v%d-%d-" % (p, b * 20 + i) + b"x" * (i * 50),
                    "headers": [("b", str(b).encode()), ("i", str(i).encode())] if i % 3 else None,
                    "timestamp": BASE_TS + p * 10_000 + b * 20 + i,
                }
                for i in range(20)
            ]
            first, _ = log.append(batch, compression=codec)
            for i, r in enumerate(batch):
                recs.append(
                    (r["key"], r["value"], "orders", p, first + i, r["timestamp"], 0, [tuple(h) for h in r["headers"]] if r["headers"] else None)
                )
        log.close()
    log = Log(d / "tx-0", read_only=False, create=True)
    log.append([{"value": b"p0", "timestamp": BASE_TS}])
    log.append([{"value": b"a0", "timestamp": BASE_TS}, {"value": b"a1", "timestamp": BASE_TS}], producer_id=3, producer_epoch=0, base_sequence=0, transactional=True)
    log.append([{"value": b"p1", "timestamp": BASE_TS}])
    log.append([{"value": b"c0", "timestamp": BASE_TS}], producer_id=4, producer_epoch=0, base_sequence=0, transactional=True)
    log.write_txn_marker(3, 0, commit=False)
    log.append([{"value": b"p2", "timestamp": BASE_TS}])
    log.write_txn_marker(4, 0, commit=True)
    for i in range(10):
        log.append([{"value": b"q%d" % i, "timestamp": BASE_TS}])
    log.close()
    return d, sorted(recs, key=lambda t: (t[2], t[3], t[4]))


def stage_tasks(spark, group):
    """(number of tasks, executor ids that ran them) over the jobs of a job group."""
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    jobs = tracker.getJobIdsForGroup(group)
    assert jobs, f"no Spark job ran for group {group}"
    app = sc.applicationId
    n_tasks = 0
    executors = []
    for j in jobs:
        info = tracker.getJobInfo(j)
        for sid in info.stageIds:
            st = tracker.getStageInfo(sid)
            if st is not None:
                n_tasks += st.numTasks
            # the UI's REST API has the executor of each task (listener events arrive asynchronously)
            deadline = time.time() + 20
            while time.time() < deadline:
                try:
                    tasks = http_json(f"{spark._kl_ui}/api/v1/applications/{app}/stages/{sid}/0/taskList?length=10000")
                except OSError:
                    tasks = []
                if tasks and all(t.get("status") == "SUCCESS" for t in tasks):
                    executors += [t["executorId"] for t in tasks]
                    break
                time.sleep(0.5)
    return n_tasks, executors


# --------------------------------------------------------------------------------------------
# tests


def test_cluster_has_two_workers_and_executors(cluster, spark):
    state = http_json(f"http://127.0.0.1:{cluster['webui']}/json/")
    assert len([w for w in state["workers"] if w["state"] == "ALIVE"]) == 2
    apps = [a for a in state.get("activeapps", []) if a.get("name") == "kafkalog-spark-cluster-tests"]
    assert apps, f"the test application is not running on the master: {state.get('activeapps')}"
    assert spark.sparkContext._jsc.sc().getExecutorIds().size() == 2


def test_read_split_over_executor_tasks(spark, data):
    d, recs = data
    sc = spark.sparkContext
    df = read(spark, d, subscribe="orders", includeHeaders="true", minPartitions="6")
    n = df.rdd.getNumPartitions()
    assert n >= 6, f"minPartitions=6 planned {n} partitions"
    sc.setJobGroup("kl-read", "kafkalog cluster read")
    try:
        got = collect(df, headers=True)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert got == recs
    n_tasks, executors = stage_tasks(spark, "kl-read")
    assert n_tasks >= 6, f"the read ran as {n_tasks} tasks"
    assert executors and "driver" not in executors, f"tasks ran on {executors}"
    assert len(set(executors)) == 2, f"the read's tasks ran on executors {sorted(set(executors))}, not on both workers"


def test_read_plain_partitions_on_cluster(spark, data):
    d, recs = data
    df = read(spark, d, subscribe="orders")
    assert df.rdd.getNumPartitions() >= 3
    assert collect(df) == [r[:7] for r in recs]
    got = collect(read(spark, d, assign='{"orders":[1]}', startingOffsets='{"orders":{"1":15}}', endingOffsets='{"orders":{"1":65}}', maxRecordsPerPartition="10"))
    assert [r[4] for r in got] == list(range(15, 65))
    assert got == [r[:7] for r in recs if r[3] == 1 and 15 <= r[4] < 65]


def test_read_committed_on_cluster(spark, data):
    d, _ = data
    df = read(spark, d, subscribe="tx", maxRecordsPerPartition="3", **{"kafka.isolation.level": "read_committed"})
    assert df.rdd.getNumPartitions() >= 2
    got = [r[1] for r in collect(df)]
    assert got == [b"p0", b"p1", b"c0", b"p2"] + [b"q%d" % i for i in range(10)]
    got = [r[1] for r in collect(read(spark, d, subscribe="tx", minPartitions="4"))]
    assert got == [b"p0", b"a0", b"a1", b"p1", b"c0", b"p2"] + [b"q%d" % i for i in range(10)]


def test_read_logs_on_cluster(spark, data):
    d, recs = data
    folders = [str(d / f"orders-{p}") for p in range(3)]
    opts = dict(subscribe="orders", includeHeaders="true", minPartitions="4")
    df_fn = ks.read_logs(spark, folders, **opts)
    df_fmt = read(spark, ",".join(folders), **opts)
    assert df_fn.schema == df_fmt.schema
    assert collect(df_fn, headers=True) == collect(df_fmt, headers=True) == recs


def test_write_on_cluster(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    sc = spark.sparkContext
    df = spark.range(0, 200, 1, 4).selectExpr(
        "concat('key-', cast(id as string)) AS key",
        "concat('value-', cast(id as string)) AS value",
        "CASE WHEN id % 2 = 0 THEN array(named_struct('key', 'id', 'value', cast(cast(id as string) as binary))) END AS headers",
    )
    sc.setJobGroup("kl-write", "kafkalog cluster write")
    try:
        writer(df, d, topic="written", partitions="3", **{"kafka.compression.type": "lz4"}).save()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    check_data_dir_clean(d, [f"written-{p}" for p in range(3)])
    seen = {}
    for p in range(3):
        recs = log_records(d / f"written-{p}")
        assert [r.offset for r in recs] == list(range(len(recs)))
        for r in recs:
            k = r.key.decode()
            assert k not in seen, f"{k} written twice"
            seen[k] = (p, r.value, r.headers)
    assert len(seen) == 200
    for i in range(200):
        k = f"key-{i}"
        assert seen[k] == (
            kafkalog._kafkalog.partition_for_key(k.encode(), 3),
            f"value-{i}".encode(),
            [("id", str(i).encode())] if i % 2 == 0 else [],
        ), k
    n_tasks, executors = stage_tasks(spark, "kl-write")
    assert n_tasks >= 4 and executors and "driver" not in executors, (n_tasks, executors)
    # read back on the cluster
    back = read(spark, d, subscribe="written", includeHeaders="true", minPartitions="4").selectExpr("cast(key as string) k", "cast(value as string) v", "partition", "headers").collect()
    assert sorted((r["k"], r["v"], r["partition"]) for r in back) == sorted(
        (f"key-{i}", f"value-{i}", kafkalog._kafkalog.partition_for_key(f"key-{i}".encode(), 3)) for i in range(200)
    )
    assert all((r["headers"] is None) == (int(r["v"].split("-")[1]) % 2 == 1) for r in back)
    # a second job appends after the first
    writer(df, d, topic="written").save()
    total = sum(len(log_records(d / f"written-{p}")) for p in range(3))
    assert total == 400
    check_data_dir_clean(d, [f"written-{p}" for p in range(3)])


def test_failed_write_on_cluster_changes_nothing(spark, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    for p in range(2):
        log = Log(d / f"t-{p}", read_only=False, create=True)
        log.append([{"value": b"pre", "timestamp": BASE_TS}])
        log.close()
    before = leos(d)
    df = spark.range(0, 200, 1, 4).selectExpr(
        "cast(id as string) AS value",
        "CASE WHEN id = 199 THEN 5 ELSE cast(id % 2 AS int) END AS partition",
    )
    expect_error(lambda: writer(df, d, topic="t").save(), "partition")
    assert leos(d) == before, "a failed write job must not change any log"
    check_data_dir_clean(d, ["t-0", "t-1"])
