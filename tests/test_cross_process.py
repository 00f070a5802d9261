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


# A long-lived writer: plain, transactional (committed and aborted) and compressed batches of
# BATCH records, rolling small segments; after each append returns it publishes the acknowledged
# log end offset (atomically, through a rename) so readers can wait for it to move.
LIVE_WRITER = textwrap.dedent(
    """
    import os, sys, time, kafkalog
    path, seconds = sys.argv[1], float(sys.argv[2])
    BATCH = 20
    log = kafkalog.Log(path, read_only=False, config={"segment.bytes": 6000})
    acked = os.path.join(os.path.dirname(path), "acked")
    end = time.time() + seconds
    n = 0
    codecs = ["none", "gzip", "lz4", "zstd", "snappy"]
    while time.time() < end or n < 20:
        recs = [{"value": b"%08d-%03d-%03d" % (n, i, BATCH)} for i in range(BATCH)]
        kind = n % 4
        if kind < 2:
            log.append(recs, compression=codecs[n % 5])
        else:
            pid = 1000 + n
            log.append(recs, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True,
                       compression=codecs[n % 5])
            log.write_txn_marker(pid, 0, commit=kind == 2)
        tmp = acked + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d %d" % (n, log.log_end_offset))
        os.replace(tmp, acked)
        n += 1
    log.close()
    print(n)
    """
)

# Reads with every API and isolation and checks what it sees: offsets strictly increasing and
# below the bound the open published (log end, high watermark, last stable offset), whole
# batches only (each append's BATCH records all there, or none), aborted appends (n % 4 == 3)
# never under read_committed, committed ones whole.
LIVE_READER = textwrap.dedent(
    """
    import os, sys, time, collections, kafkalog
    path, seconds, mode = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    acked = os.path.join(os.path.dirname(path), "acked")
    def acked_end():
        try:
            with open(acked) as f:
                return int(f.read().split()[1])
        except (FileNotFoundError, IndexError):
            return -1

    def check(offsets, values, bound, committed, what):
        assert all(a < b for a, b in zip(offsets, offsets[1:])), f"{what}: offsets not increasing"
        assert not offsets or offsets[-1] < bound, f"{what}: offset {offsets[-1]} past the end {bound}"
        per = collections.Counter()
        for v in values:
            n, i, count = (int(x) for x in v.split(b"-"))
            per[n] += 1
            assert not (committed and n % 4 == 3), f"{what}: aborted append {n} read committed"
        for n, c in per.items():
            assert c == 20, f"{what}: partial batch, append {n} has {c} of 20 records"

    if mode == "hold":
        # Holds a read-only open across the writer's appends: the writer must go on.
        log = kafkalog.Log(path)
        seen = log.log_end_offset
        deadline = time.time() + 120
        while acked_end() < seen + 100:
            assert time.time() < deadline, "the writer made no progress while a reader held the log open"
            time.sleep(0.05)
        assert log.log_end_offset == seen, "a read-only view moved by itself"
        check([r.offset for r in log.records()], [r.value for r in log.records()], seen, False, "held")
        log.close()
        print(1)
        sys.exit(0)

    end = time.time() + seconds
    reads = 0
    while time.time() < end or reads == 0:
        log = kafkalog.Log(path)
        leo, hw, lso = log.log_end_offset, log.high_watermark, log.last_stable_offset
        assert lso <= hw <= leo
        for isolation, bound in [("read_uncommitted", hw), ("read_committed", lso)]:
            rs = list(log.records(isolation=isolation))
            check([r.offset for r in rs], [r.value for r in rs], bound, isolation == "read_committed", f"records/{isolation}")
            t = log.to_arrow(isolation=isolation, batch_rows=7).read_all()
            check(t.column("offset").to_pylist(), t.column("value").to_pylist(), bound,
                  isolation == "read_committed", f"to_arrow/{isolation}")
        for isolation, bound in [("log_end", leo), ("high_watermark", hw), ("committed", lso)]:
            start, offsets, values = log.log_start_offset, [], []
            while start < bound:
                info = log.read(start, max_bytes=3000, isolation=isolation)
                if not info["batches"]:
                    break
                for b in info["batches"]:
                    assert b.last_offset < bound, f"read/{isolation}: batch ending at {b.last_offset} past {bound}"
                    assert len(b.records) == b.records_count, f"read/{isolation}: partial batch"
                    if not b.is_control:
                        offsets += [r.offset for r in b.records]
                        values += [r.value for r in b.records]
                start = info["batches"][-1].last_offset + 1
            # A fetch hands aborted batches over with the list to drop them by, as Kafka's does.
            check(offsets, values, bound, False, f"read/{isolation}")
        log.close()
        reads += 1
    print(reads)
    """
)


def test_live_writer_and_readers_in_other_processes(tmp_path):
    """One process keeps a log open and appends (plain, compressed, committed and aborted
    transactions, segment rolls) while reader processes open the folder read-only again and
    again and read it with records, to_arrow and read at every isolation, and one reader holds
    its open across many appends (which must go on)."""
    path = tmp_path / "live-0"
    kafkalog.Log(str(path), read_only=False, create=True).close()
    seconds = "8"
    writer = subprocess.Popen([sys.executable, "-c", LIVE_WRITER, str(path), seconds],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    readers = [
        subprocess.Popen([sys.executable, "-c", LIVE_READER, str(path), seconds, mode],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for mode in ["read", "read", "hold"]
    ]
    for r in readers:
        out, err = r.communicate(timeout=180)
        assert r.returncode == 0, f"reader died (exit {r.returncode}): {err[-3000:]}"
        assert int(out) > 0
    w_out, w_err = writer.communicate(timeout=180)
    assert writer.returncode == 0, w_err[-3000:]
    assert int(w_out) >= 20
    # Everything the writer acknowledged is there, in order, aborted appends excluded.
    log = kafkalog.Log(str(path))
    values = [r.value for r in log.records(isolation="read_committed")]
    appends = sorted({int(v.split(b"-")[0]) for v in values})
    assert appends == [n for n in range(int(w_out)) if n % 4 != 3]
    log.close()


FORKED = textwrap.dedent(
    """
    import os, sys, kafkalog
    from kafkalog import Log, Producer, Topic, Consumer
    data = sys.argv[1]
    t = Topic.create(data, "t", 1)
    log = Log(os.path.join(data, "solo-0"), read_only=False, create=True)
    log.append([{"value": b"parent %d" % i} for i in range(10)])
    producer = Producer(t, linger_ms=60000)
    producer.send(b"parent 0").get()
    producer.send(b"left open by the parent")   # an open batch the child inherits
    consumer = Consumer(data, "g", ["t"])
    consumer.poll(10)
    pid = os.fork()
    if pid == 0:
        # The child: every write through the parent's writers is refused, and closing them (or
        # interpreter exit) writes nothing.
        failures = []
        for name, write in [("append", lambda: log.append([{"value": b"child"}])),
                            ("truncate_to", lambda: log.truncate_to(5)),
                            ("send", lambda: producer.send(b"child")),
                            ("flush", producer.flush),
                            ("poll", lambda: consumer.poll(1)),
                            ("commit", consumer.commit)]:
            try:
                write()
                failures.append(name + " was taken")
            except kafkalog.ConcurrentWriterError as e:
                if "forked" not in str(e):
                    failures.append(f"{name}: {e}")
        log.close()
        producer.close()
        consumer.close()
        if failures:
            print(failures, file=sys.stderr)
        sys.exit(1 if failures else 0)   # a normal exit: what is left is dropped too
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    # The parent goes on: its maps were not cut under it (SIGBUS) and nothing was lost.
    log.append([{"value": b"parent after"}])
    assert [r.value for r in log.records()] == [b"parent %d" % i for i in range(10)] + [b"parent after"]
    log.close()
    producer.send(b"parent after").get()
    producer.close()
    with Log(os.path.join(data, "t-0")) as t0:
        assert [r.value for r in t0.records()] == [b"parent 0", b"left open by the parent", b"parent after"]
    consumer.commit()
    consumer.close()
    print("ok")
    """
)


def test_a_forked_child_cannot_write_through_its_parents_writers(tmp_path):
    """A child forked while a writable Log, Producer or Consumer was open shares its locks (they
    belong to open files, which fork shares): the child's appends were taken and then overwritten
    by the parent's (records both were told were written lost), and its exit trimmed the
    parent's mapped indexes, so the parent's next append died of SIGBUS (a black-box tester).
    Now the child is refused, and its copies close without a write."""
    proc = subprocess.run([sys.executable, "-c", FORKED, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (proc.returncode, proc.stderr[-3000:])
    verify = subprocess.run([sys.executable, "-m", "kafkalog", "verify", str(tmp_path)], capture_output=True,
                            text=True, timeout=120)
    assert verify.returncode == 0, verify.stdout + verify.stderr
