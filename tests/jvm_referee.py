"""Kafka's own partitioner and assignors as referees: small JVM programs (tests/java/*.java)
compiled once per pytest process against the cached kafka-clients jar, then run with many cases
per JVM start (lines on stdin, one answer line each). A missing JDK or jar fails the test."""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import List, Sequence

from kafka_harness import KAFKA_VERSIONS, kafka_classpath, kafka_libs

JAVA_DIR = Path(__file__).resolve().parent / "java"


class RefereeUnavailable(AssertionError):
    """The referee (JDK or Kafka's jars) is missing: the test fails and says why."""


@functools.lru_cache(maxsize=None)
def compiled_classes() -> str:
    javac = shutil.which("javac")
    if javac is None:
        raise RefereeUnavailable("javac is not on PATH: Kafka's partitioner/assignor referee needs a JDK")
    version = KAFKA_VERSIONS[0]
    if not any(kafka_libs(version).glob("kafka-clients-*.jar")):
        raise RefereeUnavailable(f"no kafka-clients jar in {kafka_libs(version)}: run scripts/setup.sh")
    out = tempfile.mkdtemp(prefix="kafkalog-referee-")
    sources = sorted(str(p) for p in JAVA_DIR.glob("*.java"))
    proc = subprocess.run([javac, "-nowarn", "-d", out, "-cp", kafka_classpath(version), *sources],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RefereeUnavailable(f"javac failed:\n{proc.stderr[-3000:]}")
    return out


def run(main: str, lines: Sequence[str], version: str = KAFKA_VERSIONS[0]) -> List[str]:
    """Runs a referee program over ``lines`` with Kafka ``version``'s jars; its answer lines."""
    java = shutil.which("java")
    if java is None:
        raise RefereeUnavailable("java is not on PATH")
    classes = compiled_classes()
    proc = subprocess.run(
        # Kafka's own logging off: log4j2's default configuration prints errors (an assignor's
        # "claiming the same TopicPartition") on stdout, among the answers.
        [java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Dorg.apache.logging.log4j.level=OFF",
         "-cp", f"{classes}:{kafka_classpath(version)}", main],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=300,
    )
    if proc.returncode != 0:
        raise RefereeUnavailable(f"{main} ({version}) failed:\n{proc.stderr[-3000:]}")
    out = proc.stdout.splitlines()
    assert len(out) == len(lines), f"{main} answered {len(out)} lines for {len(lines)} cases"
    return out
