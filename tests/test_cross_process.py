"""One process writes a partition folder (open, append, close: the close trims the indexes) while
other processes open it read-only and read: readers never crash (a shared mapping of a trimmed
index would be SIGBUS), never see a partial batch, and always see offsets in order."""

import subprocess
import sys
import textwrap

import kafkalog

WRITER = textwrap.dedent(
    """
    import sys, time, kafkalog
    path, seconds = sys.argv[1], float(sys.argv[2])
    end = time.time() + seconds
    n = 0
    while time.time() < end:
        log = kafkalog.Log(path, read_only=False, create=True, config={"segment.bytes": 20000})
        log.append([{"value": b"%08d" % (n * 50 + i)} for i in range(50)])
        log.close()
        n += 1
    print(n)
    """
)

READER = textwrap.dedent(
    """
    import sys, time, kafkalog
    path, seconds = sys.argv[1], float(sys.argv[2])
    end = time.time() + seconds
    reads = 0
    while time.time() < end:
        log = kafkalog.Log(path)
        offsets = [r.offset for r in log.records()]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))) if offsets else True, "gap"
        assert len(offsets) % 50 == 0, f"partial batch: {len(offsets)} records"
        values = log.to_arrow().read_all().column("value").to_pylist()
        assert values == [b"%08d" % i for i in range(len(values))], "Arrow rows out of order"
        log.close()
        reads += 1
    print(reads)
    """
)


def test_readers_survive_a_writer_in_another_process(tmp_path):
    path = tmp_path / "shared-0"
    kafkalog.Log(str(path), read_only=False, create=True).close()
    seconds = "6"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), seconds], stdout=subprocess.PIPE, text=True)
    readers = [
        subprocess.Popen([sys.executable, "-c", READER, str(path), seconds], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for r in readers:
        out, err = r.communicate(timeout=120)
        assert r.returncode == 0, f"reader died (exit {r.returncode}): {err[-2000:]}"
        assert int(out) > 0
    w_out, _ = writer.communicate(timeout=120)
    assert writer.returncode == 0 and int(w_out) > 0
