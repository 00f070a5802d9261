"""Builds target/device-bundle: the java section of benches/run_all.py (Kafka's own Java code under
JMH against kafkalog's Rust in benches/kafka_peer.rs, one thread each, the same segment) made to
run on a bare x86-64 Linux machine with no JDK, Maven, cargo or network, such as the machines the
project's device tool lends (README.md here).

    .venv/bin/python benches/device/make_bundle.py     # about a minute; the bundle is ~40 MB

What goes in: a Java runtime cut down with `jlink` from the local JDK 17 (the modules JMH and
Kafka's classes need), the jars those classes load, KafkaPeer compiled with JMH's annotation
processor, the segment `run_all.build_log` writes for the java section (xz-compressed), the
kafka_peer bench binary (profiling build, stripped) and run.sh.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "benches"))
sys.path.insert(0, str(ROOT / "tests"))
import run_all  # noqa: E402
import kafka_harness as kh  # noqa: E402

OUT = ROOT / "target" / "device-bundle"
# Found by trial: every benchmark and the checksum run with these (jdeps also names java.desktop
# and java.security.*, which nothing here loads).
JRE_MODULES = "java.base,java.management,java.logging,jdk.unsupported"
KAFKA_JARS = ["kafka-clients", "kafka-storage", "kafka-server-common", "slf4j-api"]


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    (OUT / "lib").mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        run_all.log("jlink: a Java runtime of " + JRE_MODULES)
        run(["jlink", "--add-modules", JRE_MODULES, "--strip-debug", "--no-header-files",
             "--no-man-pages", "--compress=2", "--output", str(tmp / "jre")])
        run(["tar", "-C", str(tmp), "-czf", str(OUT / "jre.tar.gz"), "jre"])

        run_all.log("jars and KafkaPeer compiled with JMH's annotation processor")
        jars = [Path(j) for j in run_all.jmh_classpath() if "annprocess" not in j]
        libs = kh.kafka_libs(run_all.KAFKA_VERSION)
        for name in KAFKA_JARS:
            found = sorted(p for p in libs.glob(f"{name}-*.jar") if p.name[len(name) + 1].isdigit())
            if not found:
                raise SystemExit(f"no {name} jar in {libs}")
            jars.append(found[-1])
        for jar in jars:
            shutil.copy2(jar, OUT / "lib" / jar.name)
        run_all.build_java(OUT / "classes")

        run_all.log("the segment: 400,000 records of 100 B, 500 a batch, uncompressed")
        segment = run_all.build_log(tmp / "java-0", 400_000, 100, "none", per_batch=500)
        sums = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n"
                for p in sorted(segment.iterdir()) if p.is_file()]
        (OUT / "segment.sha256").write_text("".join(sums))
        run(["tar", "-C", str(tmp), "-cJf", str(OUT / "segment.tar.xz"), "java-0"])

    run_all.log("kafka_peer (cargo bench --profile profiling --no-run), stripped")
    built = run(["cargo", "bench", "--profile", "profiling", "--bench", "kafka_peer", "--no-run",
                 "--message-format=json"], cwd=ROOT).stdout
    exe = [m["executable"] for m in map(json.loads, built.splitlines())
           if m.get("reason") == "compiler-artifact" and m.get("executable")
           and m["target"]["name"] == "kafka_peer"]
    if not exe:
        raise SystemExit("cargo built no kafka_peer executable")
    run(["strip", "-o", str(OUT / "kafka_peer"), exe[-1]])
    shutil.copy2(HERE / "run.sh", OUT / "run.sh")
    size = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    run_all.log(f"{OUT}: {size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
