"""One log read whole into pyarrow on 1, 2, 4, ... threads (`Log.to_arrow(threads=T)`), against
aiokafka's consumer path (CRCs checked) on the same segment bytes, interleaved in one run:

    python benches/one_log_threads.py [records ...]      # default: 139810 1118480

100 B values, uncompressed; each read touches every value (their lengths summed). Prints one
line per contender: median time, records/s and the ratio to aiokafka. `benches/RESULTS-16core.md`
quotes a run on a 16-core machine."""
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import run_all  # noqa: E402

import kafkalog  # noqa: E402
from aiokafka.record.memory_records import MemoryRecords as Aio  # noqa: E402


def reader(path: Path, records: int, zero_copy: bool, threads):
    def go():
        kw = {"zero_copy": zero_copy, "threads": threads}
        if threads == 1:
            kw["check_crcs_ahead"] = False  # every step on the calling thread
        table = kafkalog.Log(path).to_arrow(**kw).read_all()
        assert table.num_rows == records
        return run_all.byte_lengths(table.column("value"))
    return go


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [139_810, 1_118_480]
    counts = [t for t in (1, 2, 4, 8, 16, 32) if t <= max(2, os.cpu_count() or 1)]
    with tempfile.TemporaryDirectory(prefix="kafkalog-threads-") as tmp:
        for n in sizes:
            path = run_all.build_log(Path(tmp) / f"n{n}" / "t-0", n, 100, "none")
            data = b"".join(p.read_bytes() for p in sorted(path.glob("*.log")))
            contenders = {"aiokafka": run_all.python_peer(Aio, data)}
            for t in counts:
                contenders[f"zero-copy, threads={t}"] = reader(path, n, True, t)
                contenders[f"copying, threads={t}"] = reader(path, n, False, t)
            contenders["zero-copy, threads=None"] = reader(path, n, True, None)
            med = run_all.interleaved(contenders, 15 if n < 500_000 else 5)
            for name, s in med.items():
                print(f"{n:>9,} {name:24s} {s * 1e3:8.2f} ms {n / s / 1e6:7.2f} M/s  "
                      f"{med['aiokafka'] / s:5.2f}x aiokafka", flush=True)


if __name__ == "__main__":
    main()
