"""Builds the fuzz targets' seed corpus (fuzz/corpus/<target>/) from real files: the partition
folder a Kafka 4.4 broker wrote (python/kafkalog/examples/demo-0) and folders and batches that
kafkalog writes for every codec and for legacy magic 0 and 1. Run with the venv's python
(kafkalog installed): `.venv/bin/python fuzz/make_corpus.py`. Inputs are framed as each target
reads them (see the target's doc comment and kafkalog_fuzz::split_folder)."""

import hashlib
import shutil
import struct
import sys
import tempfile
from pathlib import Path

import kafkalog

ROOT = Path(__file__).resolve().parent
DEMO = ROOT.parent / "python" / "kafkalog" / "examples" / "demo-0"
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
KINDS = {".log": 0x80, ".index": 1, ".timeindex": 2, ".txnindex": 3, ".snapshot": 4}


def records(n, seed=0, magic=2):
    """`n` records; headers on every other one where the magic has them (2)."""
    return [
        {"key": b"k%d" % i if i % 3 else None, "value": b"value-%d-" % (seed + i) * (1 + i % 4),
         "timestamp": 1_700_000_000_000 + i, "headers": [("h", b"x%d" % i)] if i % 2 and magic == 2 else []}
        for i in range(n)
    ]


def batches_of(data):
    """Splits a log file's bytes into its batches (offset 8, length 4, then length bytes)."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        if length <= 0 or pos + 12 + length > len(data):
            break
        out.append(data[pos : pos + 12 + length])
        pos += 12 + length
    return out


def payload(batch):
    """(codec, magic, compressed bytes) of a compressed batch, else None."""
    magic = batch[16]
    if magic == 2:
        codec = struct.unpack_from(">h", batch, 21)[0] & 7
        return (codec, 2, batch[61:]) if codec else None
    codec = batch[17] & 7
    if not codec:
        return None
    pos = 18 + (8 if magic == 1 else 0)
    (klen,) = struct.unpack_from(">i", batch, pos)
    pos += 4 + max(klen, 0)
    (vlen,) = struct.unpack_from(">i", batch, pos)
    return codec, magic, batch[pos + 4 : pos + 4 + vlen]


def join_folder(folder):
    """All the files of a partition folder in log_folder's framing."""
    out = b""
    for f in sorted(folder.iterdir()):
        if f.name == "leader-epoch-checkpoint":
            kind, base = 5, 0
        elif f.name == "partition.metadata":
            kind, base = 6, 0
        elif f.suffix in KINDS and f.stem.isdigit():
            kind, base = KINDS[f.suffix], int(f.stem)
            if base >= 2**32:
                continue
        else:
            continue
        data = f.read_bytes()[:65535]
        out += struct.pack("<BIH", kind, base, len(data)) + data
    return out


def kafkalog_folders(tmp):
    """Partition folders kafkalog writes: one per codec (plain, idempotent and transactional
    batches, an aborted and a committed transaction, several segments), one of legacy batches."""
    folders = []
    for codec in CODECS:
        path = tmp / f"{codec}-0"
        log = kafkalog.Log(path, read_only=False, create=True, config={"segment.bytes": 4096, "segment.index.bytes": 4096})
        log.append(records(20), compression=codec)
        log.append(records(10, 20), compression=codec, producer_id=7, producer_epoch=0, base_sequence=0)
        log.append(records(5, 30), compression=codec, producer_id=8, producer_epoch=0, base_sequence=0, transactional=True)
        log.write_txn_marker(8, 0, commit=False)
        log.append(records(5, 35), compression=codec, producer_id=8, producer_epoch=0, base_sequence=5, transactional=True)
        log.write_txn_marker(8, 0, commit=True)
        log.append(records(30, 40), compression=codec)
        log.close()
        folders.append(path)
    # Legacy batches cannot be appended (Kafka converts them up); a segment of them is written
    # as a broker of that era left it, and a writable open builds its indexes.
    path = tmp / "legacy-0"
    path.mkdir()
    data, base = b"", 0
    for magic in (0, 1):
        for codec in CODECS:
            if codec == "zstd":
                continue  # zstd needs magic 2
            data += kafkalog.encode_batch(records(5, base, magic), base_offset=base, compression=codec, magic=magic)
            base += 5
    (path / "00000000000000000000.log").write_bytes(data)
    kafkalog.Log(path, read_only=False).close()
    folders.append(path)
    return folders


def main():
    out = ROOT / "corpus"
    shutil.rmtree(out, ignore_errors=True)
    seeds = {}

    def add(target, data):
        d = out / target
        d.mkdir(parents=True, exist_ok=True)
        (d / hashlib.sha1(data).hexdigest()).write_bytes(data)
        seeds[target] = seeds.get(target, 0) + 1

    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        folders = [DEMO] + kafkalog_folders(tmp)
        encoded = []
        for magic in (0, 1, 2):
            for codec in CODECS:
                if codec == "zstd" and magic < 2:
                    continue
                for tx in ([False, True] if magic == 2 else [False]):
                    encoded.append(kafkalog.encode_batch(
                        records(8, magic=magic), base_offset=42, compression=codec, magic=magic,
                        transactional=tx, producer_id=5 if tx else -1, producer_epoch=0 if tx else -1,
                        base_sequence=0 if tx else -1))
        for folder in folders:
            add("log_folder", join_folder(folder))
            for f in sorted(folder.iterdir()):
                data = f.read_bytes()
                if f.suffix == ".log":
                    encoded += batches_of(data)
                    add("batch_v2" if data[16:17] == b"\x02" else "legacy", b"\x00" + data[:16384])
                elif f.suffix in (".index", ".timeindex", ".txnindex"):
                    target = {".index": "offset_index", ".timeindex": "time_index", ".txnindex": "txn_index"}[f.suffix]
                    probe = int(f.stem) + 7 if f.suffix != ".timeindex" else 1_700_000_000_005
                    add(target, struct.pack("<qq", int(f.stem), probe) + data[:8192])
                elif f.suffix == ".snapshot":
                    add("producer_snapshot", b"\x00" + data)
                elif f.name == "leader-epoch-checkpoint":
                    add("checkpoint", b"\x01" + data)
                elif f.name == "partition.metadata":
                    add("checkpoint", b"\x02" + data)
        for b in encoded:
            add("batch_v2" if b[16] == 2 else "legacy", b"\x00" + b)
            p = payload(b)
            if p:
                codec, magic, data = p
                name = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}[codec]
                add(f"decompress_{name}", bytes([magic]) + data)
        # Log dir checkpoints as a broker writes them (version 0, count, "topic partition offset").
        add("checkpoint", b"\x00" + b"0\n2\ndemo 0 302\norders 3 17\n")
        add("checkpoint", b"\x00" + b"0\n0\n")
        add("checkpoint", b"\x03" + b'{"version":0,"brokerEpoch":42}')
    for target, n in sorted(seeds.items()):
        print(f"{target}: {n} seeds")


if __name__ == "__main__":
    sys.exit(main())
