"""Renders the output folder of benches/device/run.sh as the "Kafka's own Java code (JMH) vs kafkalog's
Rust, same segment" section of benches/RESULTS.md, with benches/run_all.py's own report code.

    .venv/bin/python benches/device/render.py OUT_FOLDER

The result dict is assembled as run_all.py's section_java does (Rust: median of the before/after
runs; kafkalog's deep iteration always checks CRCs; Java's file read with CRCs stands for the
mapped row), then run_all.report() renders it and the Java section is cut out of its output.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "benches"))
import run_all  # noqa: E402  (stdlib-only at import time)

# As in run_all.section_java.
OPS = ["deep_iteration", "deep_iteration_mapped", "deep_iteration_no_crc", "deep_iteration_in_memory",
       "offset_index_lookup", "time_index_lookup", "build_and_append", "memcpy", "crc32c"]
JAVA_NAMES = {"deep_iteration_no_crc": "deepIteration", "deep_iteration_crc": "deepIterationCheckingCrcs",
              "deep_iteration_in_memory": "memoryDeepIterationCheckingCrcs",
              "offset_index_lookup": "offsetIndexLookup",
              "time_index_lookup": "timeIndexLookup", "build_and_append": "buildAndAppend",
              "deep_iteration_mapped": "deepIterationCheckingCrcs"}  # Java's way to read the file


def jsonl(path: Path) -> dict:
    lines = (l for l in path.read_text().splitlines() if l.startswith("{"))
    return {d["op"]: d for d in map(json.loads, lines)}


def machine(text: str) -> dict:
    def section(name: str) -> str:
        m = re.search(rf"^## {re.escape(name)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
        return m.group(1).strip() if m else ""
    lscpu = section("lscpu")
    cpu = re.search(r"^Model name:\s*(.+)$", lscpu, re.M)
    mem = re.search(r"^Mem:\s+(\d+)", section("free -g"), re.M)
    load = re.search(r"load average:\s*([\d.]+),\s*([\d.]+),\s*([\d.]+)", section("uptime"))
    kernel = section("uname -a").split()
    return {"cores": int(section("nproc") or 0), "cpu": cpu.group(1).strip() if cpu else "?",
            "memory_gib": float(mem.group(1)) if mem else 0.0,
            "load": tuple(map(float, load.groups())) if load else (0.0, 0.0, 0.0),
            "kernel": kernel[2] if len(kernel) > 2 else "?", "python": "-", "pyarrow": "-",
            "java": section("java -version").splitlines()[-1] if section("java -version") else "?",
            "mode": section("mode")}


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: render.py OUT_FOLDER")
    out = Path(sys.argv[1])
    before, after = jsonl(out / "rust_before.jsonl"), jsonl(out / "rust_after.jsonl")
    java = {b["benchmark"].rsplit(".", 1)[1]: b["primaryMetric"]["score"]
            for b in json.loads((out / "jmh.json").read_text())}
    units = {b["primaryMetric"]["scoreUnit"] for b in json.loads((out / "jmh.json").read_text())}
    if units != {"ns/op"}:
        raise SystemExit(f"JMH units {units}, expected ns/op")
    n, crc = before["checksum"]["records"], before["checksum"]["crc32"]
    if (after["checksum"]["records"], after["checksum"]["crc32"]) != (n, crc):
        raise SystemExit("the Rust runs before and after the JVM read different records")
    rust = {op: statistics.median([before[op]["ns_per_op"], after[op]["ns_per_op"]]) for op in OPS}
    rust["deep_iteration_crc"] = rust["deep_iteration"]  # kafkalog's deep iteration always checks CRCs
    m = machine((out / "machine.txt").read_text())
    j = {"records": n, "bytes": before["deep_iteration"]["bytes"], "rust_ns": rust,
         "rust_runs": {op: [before[op]["ns_per_op"], after[op]["ns_per_op"]] for op in OPS},
         "java_ns": {op: java[name] for op, name in JAVA_NAMES.items()}, "python_s": {},
         "index_entries": before["offset_index_lookup"]["entries"],
         "time_index_entries": before["time_index_lookup"]["entries"]}
    res = {"machine": m, "date": "-", "wall_s": 0, "build": "-", "machine_note": "-", "java": j}
    text = run_all.report(res, "device bundle")
    start = text.index("## Kafka's own Java code")
    end = text.find("\n## ", start + 1)
    section = text[start:] if end < 0 else text[start:end + 1]
    print(f"Machine: {m['cores']} cores (nproc), {m['cpu']}, {m['memory_gib']:.0f} GiB (free -g), "
          f"Linux {m['kernel']}, load average {m['load'][0]:.1f} at the start; {m['java']}. "
          f"Run: {m['mode']}.\n")
    print(section.rstrip() + "\n")
    print("Rust runs before / after the JVM (ns/op): " + ", ".join(
        f"{op} {a:,.0f} / {b:,.0f}" for op, (a, b) in j["rust_runs"].items()))


if __name__ == "__main__":
    main()
