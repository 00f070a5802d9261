//! Decoding one log's offset range into Arrow on several threads. The range is cut into chunks
//! of consecutive offsets; threads of one process-wide pool decode chunks (each with a one-thread
//! [`LogArrowReader`] of its own) while the caller takes their batches in offset order. A reader
//! has at most `2 × threads` chunks of at most 4 MiB out at a time, and the process about four
//! per pool thread over all readers, so memory stays bounded however long the logs are and
//! however many are read at once; and its chunks hold at most `MAX_QUEUED_BYTES` of records
//! decoded ahead, however much compressed batches inflate. A pool thread never waits for a caller (a chunk's batches queue
//! until taken), so readers consumed in any order, from any number of Python threads, cannot
//! starve one another of threads.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;

use super::LogArrowReader;
use crate::error::{Error, Result};

/// What a chunk's decoder sends, in order: batches (with the offset the next batch starts at
/// and their record bytes), then `Done`, `Stopped` or one error. A channel that closes without
/// any of them means the decoder panicked.
enum ChunkItem {
    Batch(RecordBatch, i64, usize),
    Failed(Error),
    Done,
    /// The reader's batches not yet taken hold [`MAX_QUEUED_BYTES`]: the chunk from this offset
    /// on is decoded again once the caller reaches it.
    Stopped(i64),
}

/// Record bytes a reader's chunks may hold decoded ahead of the caller. Chunks are cut by the
/// log's bytes, which compressed batches inflate many times over: a black-box tester's zstd
/// batches (13 KB on disk, 95 MiB of values each) held 3.8-5.5 GB ahead on 2 threads, against
/// 391 MiB read on one.
const MAX_QUEUED_BYTES: usize = 64 << 20;

/// Chunks smaller than this cost more in hand-offs than a second thread saves.
const MIN_CHUNK_BYTES: u64 = 1 << 20;

/// Chunks larger than this hold more memory ahead of the caller than they save time: 8 threads
/// with 2 chunks each out hold at most 64 MiB of records.
const MAX_CHUNK_BYTES: u64 = 4 << 20;

/// Chunks out in this process, over all readers: beyond `MAX_CHUNKS_PER_POOL_THREAD` per pool
/// thread, a reader gets no chunk past its first, so many readers at once (a partition per
/// Python thread) hold no more chunks than a few readers would.
static CHUNKS_OUT: AtomicUsize = AtomicUsize::new(0);
const MAX_CHUNKS_PER_POOL_THREAD: usize = 4;

/// Chunks per thread over a range that is read whole: enough that threads finishing at
/// different times still end together.
const CHUNKS_PER_THREAD: u64 = 4;

/// The default number of threads: the machine's cores, at most 8 (past that, one log's decode
/// is bound by memory bandwidth, and other partitions' readers want cores too).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// Offsets per chunk for reading `[start, end)` of a log holding `log_bytes` over
/// `log_offsets` offsets on `threads` threads, or `None` where one thread does best: a range
/// of fewer than two chunks of `MIN_CHUNK_BYTES`. A chunk spans at most `MAX_CHUNK_BYTES` (its
/// reader cuts it into Arrow batches as one thread would); bytes per offset are the log's
/// average (a compacted log's sparse offsets make chunks span more offsets, not more bytes).
pub(super) fn chunk_span(
    range: i64,
    log_bytes: u64,
    log_offsets: i64,
    threads: usize,
) -> Option<i64> {
    if threads < 2 || range < 2 {
        return None;
    }
    let bytes_per_offset = (log_bytes / log_offsets.max(1) as u64).max(1);
    let min_span = (MIN_CHUNK_BYTES / bytes_per_offset).max(1);
    let max_span = (MAX_CHUNK_BYTES / bytes_per_offset).max(1);
    if (range as u64) < 2 * min_span {
        return None;
    }
    let even = (range as u64).div_ceil(threads as u64 * CHUNKS_PER_THREAD);
    Some(even.clamp(min_span, max_span) as i64)
}

/// The pool's threads: one per core. A panic in a chunk's decoder ends that job only (the
/// reader reports it as an error), never the process. A child forked after the pool started
/// has the pool but none of its threads (fork copies only the forking thread), so a process
/// that is not the pool's own makes a new one.
fn pool() -> Result<Arc<rayon_core::ThreadPool>> {
    static POOL: Mutex<Option<(u32, Arc<rayon_core::ThreadPool>)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((owner, threads)) = pool.as_ref() {
        if *owner == pid {
            return Ok(threads.clone());
        }
    }
    let threads = rayon_core::ThreadPoolBuilder::new()
        .num_threads(std::thread::available_parallelism().map_or(1, |n| n.get()))
        .thread_name(|i| format!("kafkalog-arrow-{i}"))
        .panic_handler(|_| {})
        .build()
        .map_err(|e| Error::IllegalState(format!("cannot start the decoding threads: {e}")))?;
    let threads = Arc::new(threads);
    // The parent's chunks are not this process's to count.
    CHUNKS_OUT.store(0, Ordering::Relaxed);
    // The parent's pool stays as it is: dropping it here would signal threads this process
    // does not have.
    if let Some(parents) = pool.replace((pid, threads.clone())) {
        std::mem::forget(parents);
    }
    Ok(threads)
}

/// Chunks of a reader's range being decoded ahead of the caller.
pub(super) struct ReadAhead {
    pool: Arc<rayon_core::ThreadPool>,
    /// The process whose pool decodes the chunks out: a forked child has none of its threads.
    pid: u32,
    /// Chunks handed out, in offset order, with the offset each ends at and its number.
    chunks: VecDeque<(Receiver<ChunkItem>, i64, u64)>,
    /// The number the next chunk handed out gets.
    next_number: u64,
    /// The number of the chunk at the front, the one the caller waits on.
    front: Arc<AtomicU64>,
    /// Where the next chunk to hand out starts.
    next_start: i64,
    span: i64,
    window: usize,
    /// Set when the reader is dropped: chunks not started yet are not read.
    dropped: Arc<AtomicBool>,
    /// Record bytes of the batches sent and not yet taken, over the reader's chunks.
    queued: Arc<AtomicUsize>,
}

impl ReadAhead {
    pub(super) fn start(threads: usize, next_start: i64, span: i64) -> Result<Self> {
        Ok(ReadAhead {
            pool: pool()?,
            pid: std::process::id(),
            chunks: VecDeque::new(),
            next_number: 0,
            front: Arc::new(AtomicU64::new(0)),
            next_start,
            span,
            window: 2 * threads,
            dropped: Arc::new(AtomicBool::new(false)),
            queued: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Hands out chunks of `[next_start, end)` until `window` are out, each read by a reader
    /// `chunk_reader` makes for its range. `batch_end` moves a chunk's end past the Kafka batch
    /// it falls in, so no batch is decoded twice or split between Arrow batches.
    pub(super) fn hand_out(
        &mut self,
        end: i64,
        batch_end: impl Fn(i64) -> i64,
        chunk_reader: impl Fn(i64, i64) -> LogArrowReader,
    ) {
        let cap = MAX_CHUNKS_PER_POOL_THREAD * self.pool.current_num_threads();
        while self.chunks.len() < self.window
            && self.next_start < end
            && (self.chunks.is_empty() || CHUNKS_OUT.load(Ordering::Relaxed) < cap)
        {
            let nominal = self.next_start.saturating_add(self.span);
            let chunk_end = if nominal < end {
                batch_end(nominal).clamp(nominal, end)
            } else {
                end
            };
            let number = self.next_number;
            self.next_number += 1;
            let results = self.spawn(chunk_reader(self.next_start, chunk_end), number);
            self.chunks.push_back((results, chunk_end, number));
            CHUNKS_OUT.fetch_add(1, Ordering::Relaxed);
            self.next_start = chunk_end;
        }
    }

    /// Decodes `reader`'s range (of chunk `number`) on the pool; its items come through the
    /// receiver. Where the reader's batches not yet taken hold `MAX_QUEUED_BYTES`, it stops
    /// before its next batch (a pool thread never waits for a caller: see the module's doc),
    /// unless its chunk is the one the caller waits on and it sent nothing yet, so the caller
    /// always gets a batch from a chunk it resumes.
    fn spawn(&self, mut reader: LogArrowReader, number: u64) -> Receiver<ChunkItem> {
        let (out, results) = mpsc::channel();
        let (dropped, queued, front) = (
            self.dropped.clone(),
            self.queued.clone(),
            self.front.clone(),
        );
        self.pool.spawn_fifo(move || {
            if dropped.load(Ordering::Relaxed) {
                return;
            }
            let mut sent = false;
            let last = loop {
                if queued.load(Ordering::Relaxed) >= MAX_QUEUED_BYTES
                    && (sent || front.load(Ordering::Relaxed) != number)
                {
                    break ChunkItem::Stopped(reader.position());
                }
                match reader.next_batch() {
                    Ok(Some(batch)) => {
                        let bytes = reader.last_batch_bytes;
                        let _held = queued.fetch_add(bytes, Ordering::Relaxed) + bytes;
                        #[cfg(test)]
                        tests::PEAK_QUEUED.fetch_max(_held, Ordering::Relaxed);
                        let item = ChunkItem::Batch(batch, reader.position(), bytes);
                        // The caller dropped the reader: stop.
                        if out.send(item).is_err() {
                            return;
                        }
                        sent = true;
                    }
                    Ok(None) => break ChunkItem::Done,
                    Err(e) => break ChunkItem::Failed(e),
                }
            };
            let _ = out.send(last);
        });
        results
    }

    /// The next batch in offset order with the offset after it; a batch of `None` when the
    /// chunk at the front is done (the caller hands out more and asks again); `None` when no
    /// chunk is out. A chunk whose decoder stopped ahead goes on from where it stopped, read
    /// by a reader `chunk_reader` makes.
    pub(super) fn next(
        &mut self,
        chunk_reader: impl Fn(i64, i64) -> LogArrowReader,
    ) -> Result<Option<(Option<RecordBatch>, i64)>> {
        let Some((results, chunk_end, number)) = self.chunks.front() else {
            return Ok(None);
        };
        let (chunk_end, number) = (*chunk_end, *number);
        match results.recv() {
            Ok(ChunkItem::Batch(batch, next, bytes)) => {
                self.queued.fetch_sub(bytes, Ordering::Relaxed);
                Ok(Some((Some(batch), next)))
            }
            Ok(ChunkItem::Stopped(at)) => {
                let results = self.spawn(chunk_reader(at, chunk_end), number);
                self.chunks[0].0 = results;
                self.next(chunk_reader)
            }
            Ok(ChunkItem::Failed(e)) => Err(e),
            Ok(ChunkItem::Done) => {
                self.chunks.pop_front();
                if let Some((_, _, next)) = self.chunks.front() {
                    self.front.store(*next, Ordering::Relaxed);
                }
                CHUNKS_OUT.fetch_sub(1, Ordering::Relaxed);
                Ok(Some((None, chunk_end)))
            }
            Err(_) => Err(Error::IllegalState(
                "a decoding thread stopped before the end of its chunk".into(),
            )),
        }
    }
}

impl ReadAhead {
    /// Whether the chunks out are decoded by this process's threads: not in a child forked
    /// after they were handed out, which must hand them out again to its own pool.
    pub(super) fn in_this_process(&self) -> bool {
        self.pid == std::process::id()
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::Relaxed);
        // A forked child counts none of its parent's chunks.
        if self.in_this_process() {
            CHUNKS_OUT.fetch_sub(self.chunks.len(), Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{FetchIsolation, Log, LogOptions};
    use crate::record::builder::{BatchBuilder, BatchOptions};
    use crate::record::codec::Compression;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, TimestampMicrosecondType};
    use arrow_array::Array;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    /// 300 Kafka batches of 100 records (3.7 MB over 1 MiB segments): uncompressed, lz4
    /// and gzip, null keys, and every 25th batch a transaction, aborted or committed in turn.
    fn write_log(dir: &Path) -> PathBuf {
        let path = dir.join("orders-3");
        let mut config = crate::config::LogConfig::default();
        config.set("segment.bytes", &(1 << 20).to_string()).unwrap();
        let log = Log::open(
            &path,
            LogOptions {
                read_only: false,
                create: true,
                config,
                ..LogOptions::default()
            },
        )
        .unwrap();
        let (pid, mut sequence, mut offset) = (7, 0, 0i64);
        // Values that do not compress (xorshift), so every segment holds about a mebibyte.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut noise = move || {
            (0..110)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect::<Vec<u8>>()
        };
        for i in 0..300 {
            let txn = i % 25 == 5;
            let mut b = BatchBuilder::new(BatchOptions {
                compression: [Compression::None, Compression::Lz4, Compression::Gzip][i % 3],
                producer_id: if txn { pid } else { -1 },
                producer_epoch: if txn { 0 } else { -1 },
                base_sequence: if txn { sequence } else { -1 },
                is_transactional: txn,
                ..BatchOptions::default()
            });
            for r in 0..100 {
                let key = format!("key-{offset}");
                let value = noise();
                let key = (r % 7 != 0).then_some(key.as_bytes());
                b.append(1_700_000_000_000 + offset, key, Some(&value), &[])
                    .unwrap();
                offset += 1;
            }
            log.append_as_leader(&b.build().unwrap(), 0).unwrap();
            if txn {
                sequence += 100;
                crate::testutil::append_end_txn_marker(
                    &log,
                    pid,
                    i % 50 == 5,
                    0,
                    1_700_000_000_000,
                );
                offset += 1;
            }
        }
        log.close().unwrap();
        // As a cleanly stopped broker leaves a data dir: opening it checks no batch.
        std::fs::write(
            dir.join(".kafka_cleanshutdown"),
            r#"{"version":0,"brokerEpoch":0}"#,
        )
        .unwrap();
        path
    }

    /// The most record bytes any reader's chunks held decoded ahead of its caller.
    pub(super) static PEAK_QUEUED: AtomicUsize = AtomicUsize::new(0);

    /// Chunks are cut by the log's bytes, which compressed batches inflate: what the chunks hold
    /// decoded ahead of a slow caller is bounded by `MAX_QUEUED_BYTES` (and one Arrow batch per
    /// chunk), not by the chunks' inflated size (a black-box tester's zstd batches held GBs).
    #[test]
    fn decoding_ahead_holds_a_bounded_number_of_inflated_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bombs-0");
        let log = Log::open(
            &path,
            LogOptions {
                read_only: false,
                create: true,
                ..LogOptions::default()
            },
        )
        .unwrap();
        // Each value: one random 64 KiB block 16 times over, so a batch of four inflates
        // 4 MiB from about 64 KiB on disk. 48 batches: 3 MiB of log, 192 MiB of values.
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..48 {
            let block: Vec<u8> = (0..64 << 10)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let value = block.repeat(16);
            let mut b = BatchBuilder::new(BatchOptions {
                compression: Compression::Zstd,
                ..BatchOptions::default()
            });
            for i in 0..4 {
                b.append(1_700_000_000_000 + i, None, Some(&value), &[])
                    .unwrap();
            }
            log.append_as_leader(&b.build().unwrap(), 0).unwrap();
        }
        log.close().unwrap();
        assert!(
            std::fs::metadata(path.join("00000000000000000000.log"))
                .unwrap()
                .len()
                > 2 << 20
        );
        let log = open(&path, true);
        let mut reader = LogArrowReader::new(
            log.clone(),
            None,
            None,
            FetchIsolation::HighWatermark,
            false,
            4, // an Arrow batch a Kafka batch: 4 MiB each
        )
        .unwrap()
        .threads(2);
        let (mut rows, mut largest) = (0, 0);
        while let Some(batch) = reader.next_batch().unwrap() {
            rows += batch.num_rows();
            let values = batch.column_by_name("value").unwrap().as_binary::<i32>();
            largest = largest.max(values.value_data().len());
            // A slow caller: the pool runs ahead as far as it may.
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
        assert_eq!(rows, 192);
        let peak = PEAK_QUEUED.load(Ordering::Relaxed);
        assert!(peak > 0, "no chunk was decoded ahead");
        // Each pool thread may add one batch past the limit: they check it before decoding.
        let threads = pool().unwrap().current_num_threads();
        assert!(
            peak <= MAX_QUEUED_BYTES + threads * largest,
            "{peak} bytes held ahead; batches of {largest} on {threads} threads"
        );
    }

    fn open(path: &Path, read_only: bool) -> Arc<Log> {
        let options = LogOptions {
            read_only,
            ..LogOptions::default()
        };
        Arc::new(Log::open(path, options).unwrap())
    }

    /// The whole log to its high watermark in batches of up to 65,536 rows.
    fn whole_log(log: &Arc<Log>, threads: usize) -> LogArrowReader {
        let isolation = FetchIsolation::HighWatermark;
        LogArrowReader::new(log.clone(), None, None, isolation, false, 65_536)
            .unwrap()
            .threads(threads)
    }

    /// Offsets, timestamps, keys and values of every row, and how many batches held them.
    type Rows = (
        Vec<i64>,
        Vec<i64>,
        Vec<Option<Vec<u8>>>,
        Vec<Option<Vec<u8>>>,
        usize,
    );

    fn read(
        log: &Arc<Log>,
        isolation: FetchIsolation,
        zero_copy: bool,
        batch_rows: usize,
        threads: usize,
    ) -> Rows {
        let mut reader = LogArrowReader::new(log.clone(), None, None, isolation, false, batch_rows)
            .unwrap()
            .zero_copy(zero_copy)
            .threads(threads);
        let end = reader.end;
        let mut rows: Rows = Default::default();
        while let Some(batch) = reader.next_batch().unwrap() {
            assert!(batch.num_rows() <= batch_rows + 100, "{}", batch.num_rows());
            batch
                .columns()
                .iter()
                .for_each(|c| c.to_data().validate_full().unwrap());
            let bytes = |name: &str| -> Vec<Option<Vec<u8>>> {
                let c = batch.column_by_name(name).unwrap();
                match c.data_type() {
                    arrow_schema::DataType::BinaryView => c
                        .as_binary_view()
                        .iter()
                        .map(|v| v.map(<[u8]>::to_vec))
                        .collect(),
                    _ => c
                        .as_binary::<i32>()
                        .iter()
                        .map(|v| v.map(<[u8]>::to_vec))
                        .collect(),
                }
            };
            let offsets = batch
                .column_by_name("offset")
                .unwrap()
                .as_primitive::<Int64Type>();
            assert!(
                reader.position() > offsets.value(offsets.len() - 1),
                "the position follows the batches handed out"
            );
            // No Kafka batch is split: the one before the first row ends where it starts.
            let first = offsets.value(0);
            if first > 0 {
                assert!(log.end_of_batch_at(first - 1).unwrap().unwrap() <= first);
            }
            rows.0.extend(offsets.values());
            let ts = batch.column_by_name("timestamp").unwrap();
            rows.1
                .extend(ts.as_primitive::<TimestampMicrosecondType>().values());
            rows.2.extend(bytes("key"));
            rows.3.extend(bytes("value"));
            rows.4 += 1;
        }
        assert_eq!(reader.position(), end);
        rows
    }

    #[test]
    fn threads_give_one_threads_rows_in_offset_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_log(dir.path());
        // Writable: read windows; read-only with no writer: the segments' memory maps.
        for read_only in [false, true] {
            let log = open(&path, read_only);
            assert!(log.size_in_bytes() > 3 << 20, "{}", log.size_in_bytes());
            assert_eq!(log.log_end_offset(), 30_012);
            for isolation in [FetchIsolation::HighWatermark, FetchIsolation::TxnCommitted] {
                for zero_copy in [false, true] {
                    for batch_rows in [9_000, 65_536] {
                        let one = read(&log, isolation, zero_copy, batch_rows, 1);
                        let three = read(&log, isolation, zero_copy, batch_rows, 3);
                        let case = format!("{read_only} {isolation:?} {zero_copy} {batch_rows}");
                        let expected = if isolation == FetchIsolation::TxnCommitted {
                            30_000 - 6 * 100
                        } else {
                            30_000
                        };
                        assert_eq!(one.0.len(), expected, "{case}");
                        assert_eq!(one.0, three.0, "{case}");
                        assert_eq!(one.1, three.1, "{case}");
                        assert_eq!(one.2, three.2, "{case}");
                        assert_eq!(one.3, three.3, "{case}");
                        // Chunks of a mebibyte: 4 batches where one thread makes 1 of 65,536
                        // rows (4 of 9,000: chunks that long are all but those batches).
                        assert!(three.4 >= 4 && three.4 >= one.4, "{case}: {}", three.4);
                    }
                }
            }
        }
    }

    #[test]
    fn damage_past_the_first_chunks_fails_the_read_where_one_thread_fails() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_log(dir.path());
        // A byte inside a batch's records halfway through the third segment: its CRC no longer
        // matches.
        let mut segments: Vec<PathBuf> = std::fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        segments.sort();
        let log = open(&path, true);
        let mut bytes = std::fs::read(&segments[2]).unwrap();
        let half = bytes.len() / 2;
        bytes[half] ^= 0x40;
        std::fs::write(&segments[2], bytes).unwrap();
        let outcome = |threads: usize| {
            let mut reader = whole_log(&log, threads);
            let mut rows = 0;
            loop {
                match reader.next_batch() {
                    Ok(Some(batch)) => rows += batch.num_rows(),
                    Ok(None) => panic!("read past the damage"),
                    Err(e) => {
                        // Asked again, the reader fails again: nothing is stepped over.
                        let again = reader.next_batch().err().unwrap();
                        assert_eq!(again.to_string(), e.to_string());
                        return (rows, e.to_string());
                    }
                }
            }
        };
        let (one_rows, one_error) = outcome(1);
        let (rows, error) = outcome(4);
        assert!(error.contains("CRC") || error.contains("crc"), "{error}");
        assert_eq!(error, one_error);
        // Rows before the damaged batch are handed out first, in order, then the error.
        let base = |segment: &Path| -> usize {
            let stem = segment.file_stem().unwrap().to_str().unwrap();
            stem.parse().unwrap()
        };
        // Every row before the damaged batch, however the rows were cut into Arrow batches.
        assert_eq!(rows, one_rows);
        assert!(
            rows > 0 && rows < base(&segments[3]),
            "{rows} rows, the damage in the segment at offset {}",
            base(&segments[2])
        );
    }

    #[test]
    fn many_readers_at_once_hold_a_few_chunks_per_pool_thread() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_log(dir.path());
        let log = open(&path, true);
        let cap = MAX_CHUNKS_PER_POOL_THREAD * pool().unwrap().current_num_threads();
        let readers = 2 * cap;
        let mut started: Vec<LogArrowReader> = (0..readers)
            .map(|_| {
                let mut reader = whole_log(&log, 8);
                assert!(reader.next_batch().unwrap().is_some());
                reader
            })
            .collect();
        let out = |r: &LogArrowReader| r.read_ahead.as_ref().map_or(0, |a| a.chunks.len());
        let held: usize = started.iter().map(out).sum();
        // Each reader keeps one chunk at least, so it goes on; past the cap, no more (other
        // tests' readers at once only leave these fewer).
        assert!(held <= cap + readers, "{held} chunks out, cap {cap}");
        assert!(started.iter().all(|r| out(r) >= 1 || r.done));
        // Every reader still reads the whole log.
        for reader in &mut started {
            while reader.next_batch().unwrap().is_some() {}
            assert_eq!(LogArrowReader::position(reader), 30_012);
        }
    }

    #[test]
    fn a_reader_dropped_or_closed_mid_read_stops_its_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_log(dir.path());
        let log = open(&path, true);
        let reader = || whole_log(&log, 2);
        let mut first = reader();
        assert!(first.next_batch().unwrap().is_some());
        drop(first);
        let mut second = reader();
        let mut rows = second.next_batch().unwrap().unwrap().num_rows();
        log.close().unwrap();
        // Chunks decoded before the close still come; a chunk that starts after it fails with
        // the closed log's error. Either every row arrives or the read fails: none is dropped.
        loop {
            match second.next_batch() {
                Ok(Some(batch)) => rows += batch.num_rows(),
                Ok(None) => {
                    assert_eq!(rows, 30_000);
                    break;
                }
                Err(e) => {
                    assert!(e.to_string().contains("closed"), "{e}");
                    break;
                }
            }
        }
    }

    /// A copying read on threads releases the map's pages behind its chunks, those its chunks
    /// share at their boundaries once both are past them: none of the segment stays resident
    /// after the read, as after a read on one thread.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_copying_read_leaves_no_page_of_the_map_resident() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big-0");
        let mut config = crate::config::LogConfig::default();
        config.set("segment.bytes", &(1 << 30).to_string()).unwrap();
        let options = LogOptions {
            read_only: false,
            create: true,
            config,
            ..LogOptions::default()
        };
        let log = Log::open(&path, options).unwrap();
        // About 6 chunks of the map (4 MiB each) in one segment.
        let value = [7u8; 100];
        let batches = (6 * crate::record::file_records::POPULATE_CHUNK / 60_000) as i64;
        for i in 0..batches {
            let mut b = BatchBuilder::new(BatchOptions::default());
            for r in 0..500 {
                b.append(1_700_000_000_000 + i * 500 + r, None, Some(&value), &[])
                    .unwrap();
            }
            log.append_as_leader(&b.build().unwrap(), 0).unwrap();
        }
        log.close().unwrap();
        std::fs::write(
            dir.path().join(".kafka_cleanshutdown"),
            r#"{"version":0,"brokerEpoch":0}"#,
        )
        .unwrap();
        let segment = path.join("00000000000000000000.log");
        for threads in [2, 1] {
            let log = open(&path, true);
            let mut rows = 0;
            for batch in whole_log(&log, threads) {
                rows += batch.unwrap().num_rows();
            }
            assert_eq!(rows as i64, batches * 500, "{threads} threads");
            let resident = crate::testutil::mapped_resident_bytes(&segment);
            assert_eq!(resident, 0, "{threads} threads: {resident} bytes resident");
        }
    }

    #[test]
    fn chunks_span_a_mebibyte_to_four() {
        // 17 MB over 139,810 offsets (123 B each) on 2 threads: 8 chunks of 17,477 offsets.
        assert_eq!(chunk_span(139_810, 17_177_870, 139_810, 2), Some(17_477));
        // One thread, or a range under two mebibyte chunks: no threads.
        assert_eq!(chunk_span(139_810, 17_177_870, 139_810, 1), None);
        assert_eq!(chunk_span(10_000, 17_177_870, 139_810, 2), None);
        // A long log: chunks of 4 MiB (34,100 records of 123 B).
        assert_eq!(
            chunk_span(100_000_000, 12_300_000_000, 100_000_000, 8),
            Some(34_100)
        );
        // 100 KiB records: 39 of them make 4 MiB. Records over 4 MiB: one per chunk.
        assert_eq!(chunk_span(1_000_000, 100 << 30, 1_000_000, 8), Some(39));
        assert_eq!(chunk_span(100, 1 << 30, 100, 8), Some(1));
    }
}
