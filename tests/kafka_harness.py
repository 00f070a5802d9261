"""Kafka referee harness: run a real Apache Kafka broker and its tools locally.

Plain Python module (no kafkalog import) for tests that prove byte compatibility
with Apache Kafka's on-disk log format:

* ``kafka_libs(version)``     -- jars of a Kafka release (fetched with .ci/fetch_kafka.sh)
* ``Broker``                  -- single-node KRaft broker+controller on 127.0.0.1
* ``create_topic`` / ``produce`` / ``produce_transactions`` / ``consume_all`` /
  ``list_offsets``            -- client helpers on confluent-kafka (librdkafka)
* ``dump_log_segments``       -- run Kafka's DumpLogSegments and parse its output

Nothing here skips: if Kafka cannot be fetched or started a ``RuntimeError``
(or ``KafkaHarnessError``) is raised with the reason.
"""

from __future__ import annotations

import atexit
import base64
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
import weakref
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

KAFKA_VERSIONS = ["4.4.0", "3.9.2"]

REPO_ROOT = Path(__file__).resolve().parent.parent
FETCH_SCRIPT = REPO_ROOT / ".ci" / "fetch_kafka.sh"

HeaderList = List[Tuple[str, Optional[bytes]]]


class KafkaHarnessError(RuntimeError):
    """Kafka could not be fetched, started, or driven as asked."""


# --------------------------------------------------------------------------- #
# Jars
# --------------------------------------------------------------------------- #

def kafka_cache_dir() -> Path:
    env = os.environ.get("KAFKALOG_KAFKA_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "kafkalog" / "kafka"


def kafka_libs(version: str) -> Path:
    """Directory holding the broker/tool jars of Kafka ``version``.

    Runs ``.ci/fetch_kafka.sh VERSION`` when the cache is not complete yet.
    Raises ``RuntimeError`` (KafkaHarnessError) with the reason if it cannot.
    """
    vdir = kafka_cache_dir() / version
    libs = vdir / "libs"
    if (vdir / ".complete").is_file() and libs.is_dir():
        return libs
    if not FETCH_SCRIPT.is_file():
        raise KafkaHarnessError(f"fetch script not found: {FETCH_SCRIPT}")
    if shutil.which("bash") is None:
        raise KafkaHarnessError("bash not found on PATH; needed to run .ci/fetch_kafka.sh")
    try:
        proc = subprocess.run(
            ["bash", str(FETCH_SCRIPT), version],
            capture_output=True, text=True, timeout=1800,
        )
    except subprocess.TimeoutExpired as e:
        raise KafkaHarnessError(f"fetching Kafka {version} timed out after {e.timeout}s") from e
    if proc.returncode != 0:
        raise KafkaHarnessError(
            f"could not fetch Kafka {version} (.ci/fetch_kafka.sh exit {proc.returncode}):\n"
            f"{proc.stderr.strip()[-4000:]}"
        )
    out = proc.stdout.strip().splitlines()
    path = Path(out[-1]) if out else libs
    if not path.is_dir():
        raise KafkaHarnessError(f"fetch script for Kafka {version} did not produce {path}")
    return path


def kafka_classpath(version: str, tools: bool = False) -> str:
    """Java classpath for ``version``. With ``tools=True`` (DumpLogSegments)
    and a ``tools-fallback`` dir present (kafka-tools:VERSION not published on
    Maven Central, see fetch_kafka.sh) that dir's complete classpath is used
    instead: see ``kafka_tools_version``."""
    libs = kafka_libs(version)
    fb = libs.parent / "tools-fallback"
    if tools and fb.is_dir():
        return str(fb / "*")
    return str(libs / "*")


def kafka_tools_version(version: str) -> str:
    """The Kafka release whose DumpLogSegments is used for ``version``: the
    same one, unless kafka-tools:VERSION is missing from Maven Central (4.4.0),
    where it is the nearest earlier release fetched into tools-fallback/."""
    fb = kafka_libs(version).parent / "tools-fallback" / "VERSION.txt"
    return fb.read_text().strip() if fb.is_file() else version


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    j = shutil.which("java")
    if not j:
        raise KafkaHarnessError("java not found (set JAVA_HOME or put java on PATH); Kafka needs JDK 17")
    return j


def _major(version: str) -> int:
    return int(version.split(".")[0])


def _class_in_jars(dirs: Iterable[Path], cls: str) -> bool:
    entry = cls.replace(".", "/") + ".class"
    for d in dirs:
        if not d.is_dir():
            continue
        for jar in sorted(d.glob("*.jar")):
            try:
                with zipfile.ZipFile(jar) as z:
                    z.getinfo(entry)
                    return True
            except KeyError:
                continue
            except zipfile.BadZipFile:
                continue
    return False


_DUMP_CLASS_CACHE: Dict[str, str] = {}


def dump_log_segments_class(version: str) -> str:
    """``kafka.tools.DumpLogSegments`` (Scala, up to 4.2) or
    ``org.apache.kafka.tools.DumpLogSegments`` (Java, from 4.3), by probing jars."""
    if version in _DUMP_CLASS_CACHE:
        return _DUMP_CLASS_CACHE[version]
    libs = kafka_libs(version)
    fb = libs.parent / "tools-fallback"
    dirs = [fb] if fb.is_dir() else [libs]
    for cls in ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments"):
        if _class_in_jars(dirs, cls):
            _DUMP_CLASS_CACHE[version] = cls
            return cls
    raise KafkaHarnessError(f"no DumpLogSegments class found in the jars of Kafka {version} ({libs})")


def _log4j_config(version: str, path: Path, log_file: Optional[Path], level: str = "INFO") -> List[str]:
    """Write a log4j (3.x) or log4j2 (4.x) config; return the JVM -D flags for it.
    ``log_file`` None sends logging to stderr."""
    if _major(version) >= 4:
        lines = ["status = error", "name = kafkalog-harness"]
        if log_file is not None:
            lines += [
                "appender.main.type = File",
                "appender.main.name = MAIN",
                f"appender.main.fileName = {log_file}",
            ]
        else:
            lines += [
                "appender.main.type = Console",
                "appender.main.name = MAIN",
                "appender.main.target = SYSTEM_ERR",
            ]
        lines += [
            "appender.main.layout.type = PatternLayout",
            "appender.main.layout.pattern = [%d] %p %m (%c)%n",
            f"rootLogger.level = {level}",
            "rootLogger.appenderRef.main.ref = MAIN",
            "logger.req.name = kafka.request.logger",
            "logger.req.level = WARN",
        ]
        path.write_text("\n".join(lines) + "\n")
        return [f"-Dlog4j2.configurationFile={path}", "-Dlog4j2.disable.jmx=true"]
    lines = [f"log4j.rootLogger={level}, main"]
    if log_file is not None:
        lines += ["log4j.appender.main=org.apache.log4j.FileAppender", f"log4j.appender.main.File={log_file}"]
    else:
        lines += ["log4j.appender.main=org.apache.log4j.ConsoleAppender", "log4j.appender.main.Target=System.err"]
    lines += [
        "log4j.appender.main.layout=org.apache.log4j.PatternLayout",
        "log4j.appender.main.layout.ConversionPattern=[%d] %p %m (%c)%n",
        "log4j.logger.kafka.request.logger=WARN",
    ]
    path.write_text("\n".join(lines) + "\n")
    return [f"-Dlog4j.configuration=file:{path}"]


# --------------------------------------------------------------------------- #
# Broker
# --------------------------------------------------------------------------- #

def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def random_cluster_id() -> str:
    """A Kafka cluster id: a random UUID, URL-safe base64 without padding. Never one starting
    with '-' (1 in 64): StorageTool's argument parser reads ``-t -xyz`` as a missing value."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


DEFAULT_BROKER_PROPERTIES: Dict[str, Any] = {
    "num.partitions": 1,
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "transaction.state.log.num.partitions": 1,
    "share.coordinator.state.topic.replication.factor": 1,
    "share.coordinator.state.topic.min.isr": 1,
    "group.initial.rebalance.delay.ms": 0,
    "message.max.bytes": 4 * 1024 * 1024,
    "replica.fetch.max.bytes": 4 * 1024 * 1024,
    "num.network.threads": 2,
    "num.io.threads": 2,
    "background.threads": 2,
    "num.recovery.threads.per.data.dir": 1,
    "log.cleaner.threads": 1,
    # the default 128 MiB dedupe buffer would eat a small heap
    "log.cleaner.dedupe.buffer.size": 16 * 1024 * 1024,
}

DEFAULT_JVM_OPTS = [
    "-Xmx512m", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true", "-Djava.net.preferIPv4Stack=true",
]


_LIVE_BROKERS: "weakref.WeakSet[Broker]" = weakref.WeakSet()


@atexit.register
def _kill_live_brokers() -> None:
    # brokers run in their own session (no Ctrl-C); never leave a JVM behind
    for b in list(_LIVE_BROKERS):
        try:
            b._kill()
        except Exception:
            pass


class Broker:
    """Single-node KRaft (combined broker+controller) Apache Kafka on 127.0.0.1.

    ``with Broker("4.4.0", properties={...}) as b: b.bootstrap``.
    The log dir (``log_dir``) holds the topic partition dirs and the metadata
    log; it is a temp dir by default and survives ``stop()``/``restart()``.
    The broker's own log goes to ``<work_dir>/broker.log`` (stdout/stderr of
    the JVM to ``<work_dir>/broker.out``); ``log_tail()`` reads both.
    """

    def __init__(
        self,
        version: str = KAFKA_VERSIONS[0],
        log_dir: Optional[Union[str, Path]] = None,
        properties: Optional[Mapping[str, Any]] = None,
        *,
        work_dir: Optional[Union[str, Path]] = None,
        node_id: int = 1,
        cluster_id: Optional[str] = None,
        jvm_opts: Sequence[str] = DEFAULT_JVM_OPTS,
        startup_timeout: float = 60.0,
        log_level: str = "INFO",
    ):
        self.version = version
        self._tmp: Optional[tempfile.TemporaryDirectory] = None
        if work_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=f"kafkalog-broker-{version}-")
            work_dir = self._tmp.name
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = Path(log_dir) if log_dir is not None else self.work_dir / "data"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.node_id = node_id
        self.cluster_id = cluster_id or random_cluster_id()
        self.jvm_opts = list(jvm_opts)
        self.startup_timeout = startup_timeout
        self.log_level = log_level
        self.host = "127.0.0.1"
        self.port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.properties: Dict[str, Any] = dict(DEFAULT_BROKER_PROPERTIES)
        if properties:
            self.properties.update(properties)
        self.broker_log = self.work_dir / "broker.log"
        self.stdout_log = self.work_dir / "broker.out"
        self.config_file = self.work_dir / "server.properties"
        self.proc: Optional[subprocess.Popen] = None
        self._out_fh = None
        self.last_start_seconds: Optional[float] = None

    # -- config ----------------------------------------------------------- #
    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def partition_dir(self, topic: str, partition: int = 0) -> Path:
        return self.log_dir / f"{topic}-{partition}"

    def server_properties(self) -> Dict[str, Any]:
        props: Dict[str, Any] = {
            "process.roles": "broker,controller",
            "node.id": self.node_id,
            "controller.quorum.voters": f"{self.node_id}@{self.host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.log_dir),
        }
        props.update(self.properties)
        return props

    def _write_config(self) -> None:
        lines = []
        for k, v in self.server_properties().items():
            if isinstance(v, bool):
                v = "true" if v else "false"
            lines.append(f"{k}={v}")
        self.config_file.write_text("\n".join(lines) + "\n")

    def _java_cmd(self, main: str, args: Sequence[str], log_file: Optional[Path], log_cfg_name: str) -> List[str]:
        cfg = self.work_dir / log_cfg_name
        log_flags = _log4j_config(self.version, cfg, log_file, self.log_level)
        return [_java(), *self.jvm_opts, *log_flags, "-cp", kafka_classpath(self.version), main, *args]

    # -- storage format --------------------------------------------------- #
    def is_formatted(self) -> bool:
        return (self.log_dir / "meta.properties").is_file()

    def format_storage(self) -> None:
        """``kafka.tools.StorageTool format -t <cluster id> -c server.properties``
        with static ``controller.quorum.voters`` (works for 3.9 and 4.x)."""
        self._write_config()
        cmd = self._java_cmd(
            "kafka.tools.StorageTool",
            ["format", "-t", self.cluster_id, "-c", str(self.config_file), "--ignore-formatted"],
            None, "log4j-tools.properties",
        )
        # StorageTool logs little; keep its log at WARN
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=self.work_dir)
        if proc.returncode != 0 or not self.is_formatted():
            raise KafkaHarnessError(
                f"Kafka {self.version} StorageTool format failed (exit {proc.returncode}):\n"
                f"cmd: {' '.join(cmd)}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
            )

    # -- lifecycle -------------------------------------------------------- #
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> "Broker":
        if self.running():
            return self
        t0 = time.monotonic()
        kafka_libs(self.version)  # raises with a clear reason if unavailable
        if not self.is_formatted():
            self.format_storage()
        self._write_config()
        cmd = self._java_cmd("kafka.Kafka", [str(self.config_file)], self.broker_log, "log4j-broker.properties")
        self._out_fh = open(self.stdout_log, "ab")
        self.proc = subprocess.Popen(
            cmd, stdout=self._out_fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=self.work_dir, start_new_session=True,
        )
        _LIVE_BROKERS.add(self)
        try:
            self._wait_ready(self.startup_timeout)
        except BaseException:
            self._kill()
            raise
        self.last_start_seconds = time.monotonic() - t0
        return self

    def _wait_ready(self, timeout: float) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 2000,
                             "log_level": 0, "logger": _NullLogger()})
        last_err: Any = None
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                rc = None if self.proc is None else self.proc.returncode
                raise KafkaHarnessError(
                    f"Kafka {self.version} broker exited during startup (exit {rc}).\n{self.log_tail()}"
                )
            try:
                md = admin.list_topics(timeout=2)
                if self.node_id in md.brokers:
                    return
                last_err = f"metadata lists brokers {list(md.brokers)}"
            except Exception as e:  # KafkaException while not up yet
                last_err = e
            time.sleep(0.25)
        raise KafkaHarnessError(
            f"Kafka {self.version} broker on {self.bootstrap} not ready after {timeout:.0f}s "
            f"(last: {last_err}).\n{self.log_tail()}"
        )

    def stop(self, timeout: float = 60.0) -> Optional[int]:
        """Graceful SIGTERM (controlled shutdown, clean-shutdown marker written);
        SIGKILL after ``timeout``. Returns the JVM exit code: 143 (128+SIGTERM)
        is the normal result of a graceful stop; see ``clean_shutdown_marker()``."""
        if self.proc is None:
            return None
        rc = self.proc.poll()
        if rc is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                rc = self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._kill()
                rc = self.proc.returncode
        self.proc = None
        if self._out_fh is not None:
            self._out_fh.close()
            self._out_fh = None
        return rc

    def kill(self) -> None:
        """SIGKILL: an unclean shutdown (for recovery tests)."""
        self._kill()
        self.proc = None

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        if self._out_fh is not None:
            self._out_fh.close()
            self._out_fh = None

    def restart(self) -> "Broker":
        self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "Broker":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def clean_shutdown_marker(self) -> bool:
        return (self.log_dir / ".kafka_cleanshutdown").exists()

    def log_tail(self, lines: int = 60) -> str:
        out = []
        for f in (self.broker_log, self.stdout_log):
            if f.is_file():
                text = f.read_text(errors="replace").splitlines()
                out.append(f"--- tail of {f} ---")
                out.extend(text[-lines:])
        return "\n".join(out) if out else "(no broker log written)"

    def __repr__(self) -> str:
        state = "running" if self.running() else "stopped"
        return f"<Broker kafka {self.version} {self.bootstrap} {state} log_dir={self.log_dir}>"


class _NullLogger:
    """Swallow librdkafka log lines (connection refused while starting...)."""

    def log(self, *args: Any, **kw: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


# --------------------------------------------------------------------------- #
# Client helpers (confluent-kafka)
# --------------------------------------------------------------------------- #

def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "logger": _NullLogger()})


def create_topic(bootstrap: str, topic: str, partitions: int = 1,
                 config: Optional[Mapping[str, Any]] = None, timeout: float = 30.0) -> None:
    """Create ``topic`` (replication factor 1) with topic ``config`` (e.g.
    ``segment.bytes``, ``max.message.bytes``, ``message.timestamp.type``) and
    wait until every partition has a leader. A ``segment.bytes`` below 1 MiB,
    which Kafka 4.x rejects, is retried as ``internal.segment.bytes``."""
    from confluent_kafka.admin import NewTopic

    from confluent_kafka import KafkaException

    admin = _admin(bootstrap)
    cfg = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (config or {}).items()}

    def attempt(c: Dict[str, str]) -> None:
        fut = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1, config=c)],
                                  operation_timeout=timeout, request_timeout=timeout)
        fut[topic].result(timeout=timeout)

    try:
        attempt(cfg)
    except KafkaException as e:
        # Kafka 4.x (KIP-1030) rejects segment.bytes < 1 MiB; its tests use the
        # internal topic config internal.segment.bytes instead (unknown to 3.x).
        if "segment.bytes" in cfg and "at least 1048576" in str(e):
            cfg2 = dict(cfg)
            cfg2["internal.segment.bytes"] = cfg2.pop("segment.bytes")
            attempt(cfg2)
        else:
            raise
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=topic, timeout=5)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions and \
                all(p.leader >= 0 and p.error is None for p in t.partitions.values()):
            return
        time.sleep(0.1)
    raise KafkaHarnessError(f"topic {topic} has no leader for every partition after {timeout}s")


def _producer_config(bootstrap: str, compression: str, idempotent: bool, linger_ms: Optional[int],
                     batch_size: Optional[int], extra: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    cfg: Dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "compression.type": compression,
        "enable.idempotence": bool(idempotent),
        "acks": "all",
        "message.max.bytes": 8 * 1024 * 1024,
        "logger": _NullLogger(),
    }
    if linger_ms is not None:
        cfg["linger.ms"] = linger_ms
    if batch_size is not None:
        cfg["batch.size"] = batch_size
    if extra:
        cfg.update(extra)
    return cfg


def _produce_one(producer, topic: str, msg: Mapping[str, Any], on_delivery) -> None:
    kw: Dict[str, Any] = {"on_delivery": on_delivery}
    if msg.get("key") is not None:
        kw["key"] = msg["key"]
    if msg.get("value") is not None:
        kw["value"] = msg["value"]
    if msg.get("headers"):
        kw["headers"] = [(k, v) for k, v in msg["headers"]]
    if msg.get("timestamp") is not None:
        kw["timestamp"] = int(msg["timestamp"])
    if msg.get("partition") is not None:
        kw["partition"] = int(msg["partition"])
    while True:
        try:
            producer.produce(topic, **kw)
            return
        except BufferError:
            producer.poll(0.1)


class _Deliveries:
    def __init__(self, n: int):
        self.results: List[Optional[Dict[str, Any]]] = [None] * n
        self.errors: List[str] = []

    def callback(self, i: int):
        def cb(err, m):
            if err is not None:
                self.errors.append(f"message {i}: {err}")
            else:
                ts_type, ts = m.timestamp()
                self.results[i] = {"partition": m.partition(), "offset": m.offset(), "timestamp": ts,
                                   "timestamp_type": _TS_TYPES.get(ts_type, ts_type)}
        return cb


def produce(bootstrap: str, topic: str, messages: Sequence[Mapping[str, Any]], compression: str = "none",
            idempotent: bool = False, linger_ms: Optional[int] = 5, batch_size: Optional[int] = None,
            config: Optional[Mapping[str, Any]] = None, timeout: float = 60.0) -> List[Dict[str, Any]]:
    """Produce ``messages`` (dicts ``{key, value, headers: [(str, bytes|None)],
    timestamp, partition}``, each optional) with one producer; flush and check
    every delivery. Returns, per message in order, ``{partition, offset,
    timestamp, timestamp_type}`` as acknowledged by the broker."""
    from confluent_kafka import Producer

    p = Producer(_producer_config(bootstrap, compression, idempotent, linger_ms, batch_size, config))
    d = _Deliveries(len(messages))
    for i, m in enumerate(messages):
        _produce_one(p, topic, m, d.callback(i))
        p.poll(0)
    left = p.flush(timeout)
    if left:
        raise KafkaHarnessError(f"produce to {topic}: {left} messages not delivered within {timeout}s")
    if d.errors:
        raise KafkaHarnessError(f"produce to {topic} failed: {d.errors[:5]}")
    return d.results  # type: ignore[return-value]


def produce_transactions(bootstrap: str, topic: str,
                         txns: Sequence[Tuple[Sequence[Mapping[str, Any]], bool]],
                         transactional_id: Optional[str] = None, compression: str = "none",
                         linger_ms: Optional[int] = 5, batch_size: Optional[int] = None,
                         config: Optional[Mapping[str, Any]] = None,
                         timeout: float = 60.0) -> List[List[Dict[str, Any]]]:
    """Run transactions with one transactional producer: ``txns`` is a list of
    ``(messages, commit)``; every message is flushed to the log before the
    transaction is committed (``commit=True``) or aborted. Returns, per
    transaction, the delivery results (as ``produce``) plus ``committed``."""
    from confluent_kafka import Producer

    cfg = _producer_config(bootstrap, compression, True, linger_ms, batch_size, config)
    cfg["transactional.id"] = transactional_id or f"kafkalog-txn-{uuid.uuid4().hex[:12]}"
    p = Producer(cfg)
    p.init_transactions(timeout)
    out: List[List[Dict[str, Any]]] = []
    for msgs, commit in txns:
        d = _Deliveries(len(msgs))
        p.begin_transaction()
        for i, m in enumerate(msgs):
            _produce_one(p, topic, m, d.callback(i))
            p.poll(0)
        left = p.flush(timeout)
        if left or d.errors:
            raise KafkaHarnessError(f"transactional produce to {topic} failed: {left} undelivered, {d.errors[:5]}")
        if commit:
            p.commit_transaction(timeout)
        else:
            p.abort_transaction(timeout)
        out.append([dict(r, committed=bool(commit)) for r in d.results])  # type: ignore[arg-type]
    return out


_TS_TYPES = {0: "NoTimestampType", 1: "CreateTime", 2: "LogAppendTime"}


def _partitions_of(bootstrap: str, topic: str, timeout: float) -> List[int]:
    md = _admin(bootstrap).list_topics(topic=topic, timeout=timeout)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        raise KafkaHarnessError(f"topic {topic} not found: {None if t is None else t.error}")
    return sorted(t.partitions)


def consume_all(bootstrap: str, topic: str, isolation: str = "read_uncommitted",
                timeout: float = 60.0, partitions: Optional[Sequence[int]] = None) -> List[Dict[str, Any]]:
    """Read every record of ``topic`` from the earliest offset up to the end
    offsets (high watermark, or LSO for ``read_committed``) taken at the start.
    Returns dicts ``{partition, offset, timestamp, timestamp_type, key, value,
    headers}`` sorted by (partition, offset); headers is a list of
    ``(str, bytes|None)`` (empty if none)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition, OFFSET_BEGINNING

    if isolation not in ("read_uncommitted", "read_committed"):
        raise ValueError(f"isolation must be read_uncommitted or read_committed, not {isolation!r}")
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"kafkalog-harness-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "isolation.level": isolation,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "fetch.message.max.bytes": 8 * 1024 * 1024,
        "logger": _NullLogger(),
    })
    try:
        parts = list(partitions) if partitions is not None else _partitions_of(bootstrap, topic, timeout)
        ends: Dict[int, int] = {}
        starts: Dict[int, int] = {}
        for p in parts:
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False)
            starts[p], ends[p] = lo, hi
        todo = {p for p in parts if ends[p] > starts[p]}
        out: List[Dict[str, Any]] = []
        if todo:
            c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(todo)])
            deadline = time.monotonic() + timeout
            while todo and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= ends.get(m.partition(), 0):
                            todo.discard(m.partition())
                        continue
                    raise KafkaHarnessError(f"consume {topic}: {m.error()}")
                ts_type, ts = m.timestamp()
                hdrs = m.headers() or []
                out.append({
                    "partition": m.partition(), "offset": m.offset(), "timestamp": ts,
                    "timestamp_type": _TS_TYPES.get(ts_type, ts_type),
                    "key": m.key(), "value": m.value(), "headers": [(k, v) for k, v in hdrs],
                })
                if m.offset() + 1 >= ends[m.partition()]:
                    todo.discard(m.partition())
            if todo:
                raise KafkaHarnessError(
                    f"consume {topic} ({isolation}): partitions {sorted(todo)} did not reach end offsets "
                    f"{ {p: ends[p] for p in todo} } within {timeout}s")
        out.sort(key=lambda r: (r["partition"], r["offset"]))
        return out
    finally:
        c.close()


def list_offsets(bootstrap: str, topic: str, partition: int = 0, timeout: float = 30.0) -> Dict[str, Any]:
    """ListOffsets for one partition: ``{earliest, latest, high_watermark,
    last_stable, max_timestamp, max_timestamp_offset}``. ``latest`` and
    ``high_watermark`` are read_uncommitted LATEST; ``last_stable`` is the
    read_committed LATEST (the LSO)."""
    from confluent_kafka import TopicPartition, IsolationLevel
    from confluent_kafka.admin import OffsetSpec

    admin = _admin(bootstrap)
    tp = TopicPartition(topic, partition)

    def one(spec, iso=IsolationLevel.READ_UNCOMMITTED):
        res = admin.list_offsets({tp: spec}, isolation_level=iso, request_timeout=timeout)
        return res[tp].result(timeout=timeout)

    earliest = one(OffsetSpec.earliest()).offset
    latest = one(OffsetSpec.latest()).offset
    lso = one(OffsetSpec.latest(), IsolationLevel.READ_COMMITTED).offset
    out: Dict[str, Any] = {"earliest": earliest, "latest": latest, "high_watermark": latest, "last_stable": lso}
    try:
        mt = one(OffsetSpec.max_timestamp())
        out["max_timestamp"], out["max_timestamp_offset"] = mt.timestamp, mt.offset
    except Exception:  # older brokers / empty partitions
        out["max_timestamp"], out["max_timestamp_offset"] = None, None
    return out


def offset_for_timestamp(bootstrap: str, topic: str, partition: int, timestamp: int,
                         timeout: float = 30.0) -> int:
    """ListOffsets by timestamp: first offset whose timestamp >= ``timestamp`` (-1 if none)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    tp = TopicPartition(topic, partition)
    admin = _admin(bootstrap)  # held until the answer comes: a client collected first never answers
    res = admin.list_offsets({tp: OffsetSpec.for_timestamp(timestamp)}, request_timeout=timeout)
    return res[tp].result(timeout=timeout).offset


# --------------------------------------------------------------------------- #
# DumpLogSegments
# --------------------------------------------------------------------------- #

@dataclass
class DumpedFile:
    """Parsed DumpLogSegments output of one file."""
    path: str
    kind: str                                  # log | index | timeindex | txnindex | snapshot | other
    starting_offset: Optional[int] = None      # "Log starting offset: N"
    batches: List[Dict[str, Any]] = field(default_factory=list)         # .log: each with "records"
    index_entries: List[Dict[str, int]] = field(default_factory=list)  # .index: {offset, position}
    time_index_entries: List[Dict[str, int]] = field(default_factory=list)  # .timeindex: {timestamp, offset}
    aborted_txns: List[Dict[str, Any]] = field(default_factory=list)   # .txnindex
    producer_entries: List[Dict[str, Any]] = field(default_factory=list)  # .snapshot (producer state)
    notes: List[str] = field(default_factory=list)      # "is empty", "passed sanity check", ...
    unparsed: List[str] = field(default_factory=list)   # lines the parser did not understand

    @property
    def records(self) -> List[Dict[str, Any]]:
        return [r for b in self.batches for r in b.get("records", [])]


@dataclass
class DumpResult:
    command: List[str]
    returncode: int
    stdout: str
    stderr: str
    files: List[DumpedFile] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)   # mismatches, corruption, exceptions: assert empty
    tool_version: str = ""                            # Kafka release whose DumpLogSegments ran
    warnings: List[str] = field(default_factory=list) # known tool quirks filtered out of errors

    def file(self, path: Union[str, Path]) -> DumpedFile:
        p = Path(path).resolve()
        for f in self.files:
            if Path(f.path).resolve() == p:
                return f
        raise KeyError(str(path))

    @property
    def batches(self) -> List[Dict[str, Any]]:
        return [b for f in self.files if f.kind == "log" for b in f.batches]

    @property
    def records(self) -> List[Dict[str, Any]]:
        return [r for b in self.batches for r in b.get("records", [])]

    @property
    def index_entries(self) -> List[Dict[str, int]]:
        return [e for f in self.files if f.kind == "index" for e in f.index_entries]

    @property
    def time_index_entries(self) -> List[Dict[str, int]]:
        return [e for f in self.files if f.kind == "timeindex" for e in f.time_index_entries]

    @property
    def aborted_txns(self) -> List[Dict[str, Any]]:
        return [e for f in self.files for e in f.aborted_txns]


_KV_RE = re.compile(r"([A-Za-z][A-Za-z0-9]*): (\S+)")
_INT_RE = re.compile(r"-?\d+$")
_TS_KEYS = ("CreateTime", "LogAppendTime", "NoTimestampType", "NO_TIMESTAMP_TYPE")


def _convert(v: str) -> Any:
    if _INT_RE.match(v):
        return int(v)
    if v == "true":
        return True
    if v == "false":
        return False
    return v


def _kv_pairs(text: str) -> Dict[str, Any]:
    return {k: _convert(v) for k, v in _KV_RE.findall(text)}


def _file_kind(path: str) -> str:
    name = Path(path).name
    for suffix, kind in ((".log", "log"), (".index", "index"), (".timeindex", "timeindex"),
                         (".txnindex", "txnindex"), (".snapshot", "snapshot"), (".checkpoint", "snapshot")):
        if name.endswith(suffix):
            return kind
    return "other"


def _parse_batch_line(line: str) -> Dict[str, Any]:
    b = _kv_pairs(line)
    # deleteHorizonMs prints as "OptionalLong.empty" / "OptionalLong[123]"
    dh = b.get("deleteHorizonMs")
    if isinstance(dh, str):
        m = re.match(r"OptionalLong\[(-?\d+)\]", dh)
        b["deleteHorizonMs"] = int(m.group(1)) if m else None
    for tk in _TS_KEYS:
        if tk in b:
            b["timestamp_type"] = tk
            b["maxTimestamp"] = b[tk]
            break
    b["records"] = []
    b["raw"] = line
    return b


def _split_key_payload(rest: str, rec: Dict[str, Any]) -> None:
    """``rest`` is what follows the metadata: `` key: K payload: P`` or
    `` payload: P`` or ``key: K``. K and P are strings that may contain spaces;
    keySize (UTF-8 bytes) disambiguates where it can."""
    rest = rest[1:] if rest.startswith(" ") else rest
    if rest.startswith("key: "):
        body = rest[len("key: "):]
        cands = [m.start() for m in re.finditer(re.escape(" payload: "), body)]
        split = None
        ksize = rec.get("keySize")
        for c in cands:
            if isinstance(ksize, int) and len(body[:c].encode("utf-8", "surrogateescape")) == ksize:
                split = c
                break
        if split is None and cands:
            split = cands[0] if rec.get("valueSize", -1) >= 0 else None
        if split is None:
            rec["key"] = body
        else:
            rec["key"] = body[:split]
            rec["payload"] = body[split + len(" payload: "):]
    elif rest.startswith("payload: "):
        rec["payload"] = rest[len("payload: "):]
    elif rest:
        rec["unparsed_tail"] = rest


_REC_META_RE = re.compile(
    r"^\|?\s*offset: (?P<offset>-?\d+) (?P<tstype>\w+): (?P<ts>-?\d+) keySize: (?P<ks>-?\d+) valueSize: (?P<vs>-?\d+)"
)


def _parse_record_line(line: str) -> Dict[str, Any]:
    m = _REC_META_RE.match(line)
    if not m:
        # skip-record-metadata style: "| key: .. payload: .."
        rec: Dict[str, Any] = {"raw": line}
        _split_key_payload(line.lstrip("|"), rec)
        return rec
    rec = {
        "offset": int(m.group("offset")),
        "timestamp_type": m.group("tstype"),
        "timestamp": int(m.group("ts")),
        "keySize": int(m.group("ks")),
        "valueSize": int(m.group("vs")),
        "raw": line,
    }
    rec[m.group("tstype")] = rec["timestamp"]
    rest = line[m.end():]
    sm = re.match(r" sequence: (-?\d+) headerKeys: \[(.*?)\]", rest)
    if sm:
        rec["sequence"] = int(sm.group(1))
        rec["headerKeys"] = sm.group(2).split(",") if sm.group(2) else []
        rest = rest[sm.end():]
    lm = re.match(r" isValid: (\w+) crc: (\d+)\}?", rest)
    if lm:
        rec["isValid"] = lm.group(1) == "true"
        rec["crc"] = int(lm.group(2))
        rest = rest[lm.end():]
    em = re.match(r" endTxnMarker: (\w+) coordinatorEpoch: (-?\d+)", rest)
    if em:
        rec["endTxnMarker"] = em.group(1)
        rec["coordinatorEpoch"] = int(em.group(2))
        rest = rest[em.end():]
    else:
        cm = re.match(r" (SnapshotHeader|SnapshotFooter|KRaftVersion|KRaftVoters|LeaderChange) (.*)$", rest)
        if cm:
            rec["controlRecord"] = cm.group(1)
            rec["controlData"] = cm.group(2)
            return rec
        ct = re.match(r" controlType: (\S+)", rest)
        if ct:
            rec["controlType"] = ct.group(1)
            rest = rest[ct.end():]
    _split_key_payload(rest, rec)
    return rec


_ERROR_LINE_RE = re.compile(
    r"mismatch|non-consecutive|corrupt|invalid bytes|exception|error|not found in the log|"
    r"out of order|indexed offset|is followed by|failed", re.IGNORECASE)
_BENIGN_STDERR_RE = re.compile(r"^(SLF4J:|WARNING: |OpenJDK 64-Bit Server VM warning)")


def parse_dump_output(stdout: str, stderr: str = "", warnings: Optional[List[str]] = None
                      ) -> Tuple[List[DumpedFile], List[str]]:
    """Parse DumpLogSegments stdout (and stderr for errors) of 3.x/4.x.
    Returns (files, errors); known tool quirks go to ``warnings`` if given."""
    files: List[DumpedFile] = []
    errors: List[str] = []
    cur: Optional[DumpedFile] = None
    last_rec: Optional[Dict[str, Any]] = None
    for line in stdout.splitlines():
        if line.startswith("Dumping "):
            cur = DumpedFile(path=line[len("Dumping "):].strip(), kind=_file_kind(line[len("Dumping "):].strip()))
            files.append(cur)
            last_rec = None
            continue
        if cur is None:
            if line.strip():
                errors.append(line)
            continue
        s = line.strip()
        if not s:
            continue
        if s.startswith("Log starting offset:"):
            cur.starting_offset = int(s.split(":", 1)[1])
            continue
        if s.startswith("baseOffset:") or (s.startswith("offset:") and " position: " in s and " magic: " in s):
            b = _parse_batch_line(s)
            cur.batches.append(b)
            last_rec = None
            if b.get("isvalid") is False:
                errors.append(f"{cur.path}: invalid batch: {s}")
            continue
        if line.startswith("|"):
            rec = _parse_record_line(line)
            if cur.batches:
                cur.batches[-1]["records"].append(rec)
            else:
                cur.unparsed.append(line)
            last_rec = rec
            continue
        if cur.kind == "index" and re.match(r"offset: -?\d+ position: -?\d+$", s):
            cur.index_entries.append(_kv_pairs(s))
            continue
        if cur.kind == "timeindex" and re.match(r"timestamp: -?\d+ offset: -?\d+$", s):
            cur.time_index_entries.append(_kv_pairs(s))
            continue
        if cur.kind == "txnindex" and "producerId:" in s and "firstOffset:" in s:
            cur.aborted_txns.append(_kv_pairs(s))
            continue
        if cur.kind == "snapshot" and s.startswith("producerId:"):
            cur.producer_entries.append(_kv_pairs(s))
            continue
        if s.endswith("is empty.") or s.endswith("passed sanity check.") or s.startswith("Snapshot end offset") \
                or s == "KRaft bootstrap snapshot":
            cur.notes.append(s)
            continue
        if s.startswith("Found ") and "invalid bytes" in s:
            errors.append(f"{cur.path}: {s}")
            continue
        if last_rec is not None and "payload" in last_rec:
            # a payload containing a newline continues on the next line
            last_rec["payload"] += "\n" + line
            continue
        if _ERROR_LINE_RE.search(s):
            errors.append(f"{cur.path}: {s}")
        cur.unparsed.append(line)
    errors.extend(_stderr_errors(stderr, warnings))
    return files, errors


_NONCONSEC_HDR_RE = re.compile(r"^Non-consecutive offsets in (.+)$")
_NONCONSEC_PAIR_RE = re.compile(r"^(-?\d+) is followed by (-?\d+)$")


def _stderr_errors(stderr: str, warnings: Optional[List[str]] = None) -> List[str]:
    """Error lines of DumpLogSegments' stderr, minus known tool quirks (moved
    to ``warnings``): the Java DumpLogSegments of 4.3 reports "-1 is followed
    by N" for every segment whose base offset N is not 0 (the Scala tool of
    <= 4.2 special-cased the first record); that pair is not an error."""
    out: List[str] = []
    lines = [l.strip() for l in stderr.splitlines()]
    i = 0
    while i < len(lines):
        s = lines[i]
        i += 1
        if not s or _BENIGN_STDERR_RE.match(s):
            continue
        m = _NONCONSEC_HDR_RE.match(s)
        if m:
            base: Optional[int] = None
            stem = Path(m.group(1)).stem
            if stem.isdigit():
                base = int(stem)
            real: List[str] = []
            while i < len(lines) and _NONCONSEC_PAIR_RE.match(lines[i]):
                a, b = map(int, _NONCONSEC_PAIR_RE.match(lines[i]).groups())  # type: ignore[union-attr]
                if a == -1 and b == base:
                    if warnings is not None:
                        warnings.append(f"{s}: {lines[i]} (DumpLogSegments quirk: first record of the segment)")
                else:
                    real.append(lines[i])
                i += 1
            if real:
                out.append(s)
                out.extend(real)
            continue
        out.append(s)
    return out


def dump_log_segments(version: str, files: Sequence[Union[str, Path]], deep_iteration: bool = True,
                      print_data: bool = True, index_sanity_check: bool = False,
                      verify_index_only: bool = False, extra_args: Sequence[str] = (),
                      timeout: float = 300.0) -> DumpResult:
    """Run Kafka ``version``'s DumpLogSegments over ``files`` (.log, .index,
    .timeindex, .txnindex, .snapshot; one JVM for all) and parse the output.
    ``DumpResult.errors`` collects index/log mismatches, non-consecutive
    offsets, invalid batches, trailing invalid bytes, exceptions, stderr, and
    a non-zero exit: a caller asserts it is empty."""
    files = [str(Path(f)) for f in files]
    if not files:
        raise ValueError("dump_log_segments: no files given")
    cls = dump_log_segments_class(version)
    args = ["--files", ",".join(files)]
    if deep_iteration:
        args.append("--deep-iteration")
    if print_data:
        args.append("--print-data-log")
    if index_sanity_check:
        args.append("--index-sanity-check")
    if verify_index_only:
        args.append("--verify-index-only")
    args.extend(extra_args)
    with tempfile.TemporaryDirectory(prefix="kafkalog-dump-") as tmp:
        log_flags = _log4j_config(kafka_tools_version(version), Path(tmp) / "log4j-dump.properties", None, "WARN")
        # UTF-8 whatever the locale, so printed payloads compare byte for byte with kafkalog's.
        cmd = [_java(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Dfile.encoding=UTF-8", "-Dsun.stdout.encoding=UTF-8", "-Dsun.stderr.encoding=UTF-8", *log_flags,
               "-cp", kafka_classpath(version, tools=True), cls, *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", errors="surrogateescape",
                              timeout=timeout)
    warnings: List[str] = []
    parsed, errors = parse_dump_output(proc.stdout, proc.stderr, warnings)
    if proc.returncode != 0:
        errors.insert(0, f"DumpLogSegments exited with {proc.returncode}")
    return DumpResult(command=cmd, returncode=proc.returncode, stdout=proc.stdout, stderr=proc.stderr,
                      files=parsed, errors=errors, warnings=warnings,
                      tool_version=kafka_tools_version(version))


def segment_files(partition_dir: Union[str, Path], suffixes: Sequence[str] = (".log", ".index", ".timeindex")
                  ) -> List[Path]:
    """Segment files of a partition dir with the given suffixes, sorted by base offset then suffix order."""
    d = Path(partition_dir)
    out = [p for p in d.iterdir() if p.suffix in suffixes and p.stem.isdigit()]
    order = {s: i for i, s in enumerate(suffixes)}
    return sorted(out, key=lambda p: (int(p.stem), order[p.suffix]))
