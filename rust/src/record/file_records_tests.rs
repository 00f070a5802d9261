//! Kafka's `FileRecordsTest`: appends and the cached size, reads of slices, truncation, header
//! scans, `searchForOffsetWithSize` / `searchForTimestamp` / `largestTimestampAfter`, where scans
//! stop on a torn tail, and (the crate's own) `find_next_valid_batch`, skipped ranges and views.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::record::batch::{Batch, BatchPrefix};
use crate::record::builder::{BatchBuilder, BatchOptions};
use crate::record::file_records::{
    BatchHeader, FileAccess, FileRecords, LogOffsetPosition, TimestampAndOffset,
    CHECK_AHEAD_MIN_BYTES, DEFAULT_MAX_BATCH_SIZE, POPULATE_CHUNK,
};
#[cfg(target_os = "linux")]
use crate::testutil::mapped_resident_bytes;
use crate::testutil::{batch_at, batch_with, values_of};

const MAX: usize = DEFAULT_MAX_BATCH_SIZE;

/// Kafka's `createFileRecords(values)`: one single-record batch per value, offsets 0, 1, 2.
fn values_file(dir: &Path) -> (FileRecords, Vec<Vec<u8>>) {
    let path = dir.join("00000000000000000000.log");
    let mut records = FileRecords::open(&path, true).unwrap();
    let batches: Vec<Vec<u8>> = (0..3).map(|o| batch_at(o, &[1_000 + o])).collect();
    for b in &batches {
        records.append(b).unwrap();
    }
    records.flush().unwrap();
    (records, batches)
}

fn headers(records: &FileRecords, start: u64) -> Vec<BatchHeader> {
    records
        .headers_from(start, MAX)
        .collect::<crate::error::Result<_>>()
        .unwrap()
}

/// The record values of every batch in `[start, end)` through the batch loop.
fn values_in(records: &FileRecords, start: u64, end: u64) -> crate::error::Result<Vec<String>> {
    let mut out = Vec::new();
    records.for_each_batch(start, end, MAX, &mut |_, batch| {
        let mut scratch = Vec::new();
        for r in batch.records(&mut scratch, usize::MAX)? {
            out.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        }
        Ok(true)
    })?;
    Ok(out)
}

fn append_raw(path: &PathBuf, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

fn corrupt_at(err: Error) -> (String, Option<u64>) {
    match err {
        Error::CorruptRecord { message, location } => (message, location.position),
        other => panic!("expected a CorruptRecord error, got {other:?}"),
    }
}

#[test]
fn test_file_size() {
    let dir = tempfile::tempdir().unwrap();
    let (mut records, _) = values_file(dir.path());
    let on_disk = |r: &FileRecords| std::fs::metadata(r.path()).unwrap().len();
    assert_eq!(records.size_in_bytes(), on_disk(&records));
    for i in 0..20 {
        let b = batch_at(3 + i, &[5]);
        assert_eq!(records.append(&b).unwrap(), b.len());
        assert_eq!(records.size_in_bytes(), on_disk(&records));
    }
    assert_eq!(headers(&records, 0).len(), 23);
}

/// Kafka's iteration ignores bytes too few for a header at the end; the crate's scans report
/// them as a corruption at their position (what recovery truncates), after every whole batch.
#[test]
fn test_iteration_over_partial_and_truncation() {
    for size in [0usize, 2, 4, 5, 6, 16] {
        let dir = tempfile::tempdir().unwrap();
        let (records, _) = values_file(dir.path());
        let valid_end = records.size_in_bytes();
        append_raw(&records.path().to_path_buf(), &vec![0u8; size]);
        let records = FileRecords::open(records.path(), false).unwrap();
        let scanned: Vec<_> = records.headers_from(0, MAX).collect();
        let whole: Vec<i64> = scanned
            .iter()
            .filter_map(|h| h.as_ref().ok().map(|h| h.base_offset))
            .collect();
        assert_eq!(whole, [0, 1, 2], "{size} trailing bytes");
        if size == 0 {
            assert_eq!(scanned.len(), 3);
        } else {
            assert_eq!(scanned.len(), 4, "the scan stops after the error");
            let err = scanned.into_iter().last().unwrap().unwrap_err();
            let (message, position) = corrupt_at(err);
            assert_eq!(
                message,
                format!("{size} trailing bytes are too few for a batch header")
            );
            assert_eq!(position, Some(valid_end));
        }
        assert_eq!(
            values_in(&records, 0, valid_end).unwrap(),
            ["v0", "v1", "v2"]
        );
        // The batch loop over the whole file refuses the torn tail, naming where it is.
        if size > 0 {
            let (_, position) = corrupt_at(values_in(&records, 0, u64::MAX).unwrap_err());
            assert_eq!(position, Some(valid_end));
        }
        // largestTimestampAfter stops at the torn tail instead of failing.
        assert_eq!(
            records.largest_timestamp_after(0, MAX).unwrap().timestamp,
            1_002
        );
    }
}

/// A batch cut short by the end of the file (a crash mid-append): scans stop there with an error
/// naming the position; a view limited to the whole batches reads cleanly.
#[test]
fn torn_batch_at_the_end_stops_the_scan() {
    let dir = tempfile::tempdir().unwrap();
    let (records, _) = values_file(dir.path());
    let valid_end = records.size_in_bytes();
    let next = batch_at(3, &[1_003]);
    append_raw(&records.path().to_path_buf(), &next[..next.len() - 7]);
    let mut view = FileRecords::open(records.path(), false).unwrap();
    let err = view.read_header(valid_end, MAX).unwrap_err();
    let (message, position) = corrupt_at(err);
    assert_eq!(
        message,
        format!(
            "batch of {} bytes at offset 3 exceeds the {} bytes available",
            next.len(),
            next.len() - 7
        )
    );
    assert_eq!(position, Some(valid_end));
    view.limit_to(valid_end);
    assert_eq!(view.size_in_bytes(), valid_end);
    assert_eq!(headers(&view, 0).len(), 3);
    assert_eq!(view.read_header(valid_end, MAX).unwrap(), None);
    assert_eq!(values_in(&view, 0, u64::MAX).unwrap(), ["v0", "v1", "v2"]);
}

#[test]
fn test_read() {
    let dir = tempfile::tempdir().unwrap();
    let (records, batches) = values_file(dir.path());
    let size = records.size_in_bytes();
    let all = batches.concat();
    assert_eq!(records.read_range(0, size as usize).unwrap(), all);
    let first = batches[0].len();
    // From the second batch to the end, however far past the end the length reaches.
    for len in [
        size as usize - first,
        size as usize,
        i32::MAX as usize,
        usize::MAX,
    ] {
        let read = records.read_range(first as u64, len).unwrap();
        assert_eq!(read, &all[first..], "len {len}");
        assert_eq!(values_of(&read), ["v1", "v2"]);
    }
    // A single batch starting from the second.
    let read = records.read_range(first as u64, batches[1].len()).unwrap();
    assert_eq!(read, batches[1]);
    assert!(records.read_range(size, 10).unwrap().is_empty());
    assert!(records.read_range(size + 100, 10).unwrap().is_empty());
}

#[test]
fn test_iterator_with_limits() {
    let dir = tempfile::tempdir().unwrap();
    let (records, batches) = values_file(dir.path());
    let start = records
        .search_for_offset_with_size(1, 0, MAX)
        .unwrap()
        .unwrap()
        .position;
    let size = batches[1].len() as u64;
    assert_eq!(values_in(&records, start, start + size).unwrap(), ["v1"]);
    // Kafka's slice stops before a cut batch; the crate's batch loop calls it a corruption (a
    // `Log` only hands it ranges of whole batches).
    let (_, position) = corrupt_at(values_in(&records, start, start + size - 1).unwrap_err());
    assert_eq!(position, Some(start));
    // A visitor that returns false stops the loop.
    let mut seen = 0;
    records
        .for_each_batch(0, u64::MAX, MAX, &mut |_, _| {
            seen += 1;
            Ok(false)
        })
        .unwrap();
    assert_eq!(seen, 1);
}

#[test]
fn test_search() {
    let dir = tempfile::tempdir().unwrap();
    let (mut records, batches) = values_file(dir.path());
    let last = batch_at(50, &[2_000]);
    records.append(&last).unwrap();
    let sizes: Vec<usize> = batches.iter().map(Vec::len).collect();
    let at = |offset: i64, position: usize, size: usize| {
        Some(LogOffsetPosition {
            offset,
            position: position as u64,
            size,
        })
    };
    let search = |target: i64, start: usize| {
        records
            .search_for_offset_with_size(target, start as u64, MAX)
            .unwrap()
    };
    assert_eq!(search(0, 0), at(0, 0, sizes[0]));
    assert_eq!(search(1, 0), at(1, sizes[0], sizes[1]));
    assert_eq!(search(1, sizes[0]), at(1, sizes[0], sizes[1]));
    let fourth = sizes[0] + sizes[1] + sizes[2];
    assert_eq!(search(3, fourth), at(50, fourth, last.len()));
    assert_eq!(search(50, fourth), at(50, fourth, last.len()));
    assert_eq!(search(51, 0), None);
}

#[test]
fn test_truncate() {
    let dir = tempfile::tempdir().unwrap();
    let (mut records, batches) = values_file(dir.path());
    let size = records.size_in_bytes();
    let end = records
        .search_for_offset_with_size(1, 0, MAX)
        .unwrap()
        .unwrap()
        .position;
    assert_eq!(records.truncate_to(end).unwrap(), size - end);
    assert_eq!(records.size_in_bytes(), batches[0].len() as u64);
    assert_eq!(std::fs::metadata(records.path()).unwrap().len(), end);
    assert_eq!(headers(&records, 0).len(), 1);
    // To the same size: nothing removed.
    assert_eq!(records.truncate_to(end).unwrap(), 0);
}

/// A file a read-only view maps (zero-copy Arrow buffers) is never cut under the map: the
/// writer copies what it keeps to a new file renamed over the old one, which stays whole for the
/// map. Cut in place, reading the map past the cut faulted the process (SIGBUS; a black-box
/// tester, through `Log.truncate_to` and recovery). Unmapped, the file is cut in place.
#[test]
fn truncating_a_file_a_view_maps_leaves_the_map_whole() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let (mut records, batches) = values_file(dir.path());
    let before = std::fs::read(records.path()).unwrap();
    let inode = |path: &Path| std::fs::metadata(path).unwrap().ino();
    let first_inode = inode(records.path());
    let keep = batches[0].len() as u64;

    let view = FileRecords::open(records.path(), false).unwrap();
    let mapped = view.mapped().expect("a read-only file maps");
    records.truncate_to(keep).unwrap();
    assert_eq!(
        mapped.as_slice(),
        &before[..],
        "the map reads what it mapped"
    );
    assert_ne!(
        inode(records.path()),
        first_inode,
        "a new file took the name"
    );
    assert_eq!(std::fs::metadata(records.path()).unwrap().len(), keep);
    assert!(!dir.path().join("00000000000000000000.log.cleaned").exists());
    // The writer goes on in the new file.
    records.append(&batches[1]).unwrap();
    assert_eq!(
        std::fs::read(records.path()).unwrap(),
        [&batches[0][..], &batches[1][..]].concat()
    );
    drop((view, mapped));

    // Nothing maps it now: cut in place, as Kafka does.
    let second_inode = inode(records.path());
    records.truncate_to(keep).unwrap();
    assert_eq!(inode(records.path()), second_inode);
    assert_eq!(std::fs::read(records.path()).unwrap(), batches[0]);
}

#[test]
fn test_truncate_not_called_if_size_is_bigger_than_target_size() {
    let dir = tempfile::tempdir().unwrap();
    let (mut records, _) = values_file(dir.path());
    let size = records.size_in_bytes();
    let err = records.truncate_to(size + 1).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("to the larger size"), "{err}");
    assert_eq!(std::fs::metadata(records.path()).unwrap().len(), size);
}

#[test]
fn read_only_files_refuse_appends_and_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let (records, _) = values_file(dir.path());
    let size = records.size_in_bytes();
    let mut view = FileRecords::open(records.path(), false).unwrap();
    assert!(!view.is_writable());
    assert!(matches!(
        view.append(&batch_at(3, &[1])),
        Err(Error::ReadOnly(_))
    ));
    assert!(matches!(view.truncate_to(0), Err(Error::ReadOnly(_))));
    assert_eq!(std::fs::metadata(records.path()).unwrap().len(), size);
    // A read-only open of a missing file is an I/O error and creates nothing.
    let missing = dir.path().join("missing.log");
    assert!(matches!(
        FileRecords::open(&missing, false),
        Err(Error::Io { .. })
    ));
    assert!(!missing.exists());
}

/// Kafka refuses a segment past 2 GiB (positions are ints); a sparse file stands in for a big one.
#[test]
fn append_past_two_gib_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.log");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(i32::MAX as u64 - 10)
        .unwrap();
    let mut records = FileRecords::open(&path, true).unwrap();
    let err = records.append(&batch_at(0, &[1])).unwrap_err();
    assert!(matches!(err, Error::IllegalState(_)), "{err}");
    assert_eq!(records.size_in_bytes(), i32::MAX as u64 - 10);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        i32::MAX as u64 - 10
    );
}

#[test]
fn test_search_for_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    let mut records = FileRecords::open(&path, true).unwrap();
    let epoch3 = |base_offset, stamps: &[i64]| {
        batch_with(
            BatchOptions {
                base_offset,
                partition_leader_epoch: 3,
                ..Default::default()
            },
            stamps,
        )
    };
    records.append(&batch_at(0, &[10, 30, 20])).unwrap();
    records.append(&epoch3(3, &[40, 50])).unwrap();
    let search = |target, starting_offset| {
        records
            .search_for_timestamp(target, 0, starting_offset, MAX, usize::MAX)
            .unwrap()
    };
    let found = |timestamp, offset, leader_epoch| {
        Some(TimestampAndOffset {
            timestamp,
            offset,
            leader_epoch,
        })
    };
    // The first record at or past the target, in offset order, not the closest timestamp.
    assert_eq!(search(15, 0), found(30, 1, None));
    assert_eq!(search(30, 0), found(30, 1, None));
    assert_eq!(search(0, 0), found(10, 0, None));
    // Records below the starting offset are skipped.
    assert_eq!(search(15, 2), found(20, 2, None));
    assert_eq!(search(45, 0), found(50, 4, Some(3)));
    assert_eq!(search(51, 0), None);
}

#[test]
fn test_largest_timestamp_after() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    let mut records = FileRecords::open(&path, true).unwrap();
    let empty = records.largest_timestamp_after(0, MAX).unwrap();
    assert_eq!((empty.timestamp, empty.offset), (-1, -1));
    let a = batch_at(0, &[10, 90, 20]);
    records.append(&a).unwrap();
    records.append(&batch_at(3, &[50, 60])).unwrap();
    let best = records.largest_timestamp_after(0, MAX).unwrap();
    // The max batch timestamp, with the last offset of the batch holding it.
    assert_eq!((best.timestamp, best.offset), (90, 2));
    let best = records
        .largest_timestamp_after(a.len() as u64, MAX)
        .unwrap();
    assert_eq!((best.timestamp, best.offset), (60, 4));
}

#[test]
fn header_scan_reports_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let (records, batches) = values_file(dir.path());
    let hs = headers(&records, 0);
    let mut position = 0u64;
    for (i, h) in hs.iter().enumerate() {
        let size = batches[i].len();
        assert_eq!(
            *h,
            BatchHeader {
                position,
                size,
                magic: 2,
                base_offset: i as i64,
                last_offset: i as i64,
                max_timestamp: 1_000 + i as i64,
                is_control: false,
            }
        );
        position += size as u64;
    }
    // Scans from a batch boundary start there; past the end there is nothing.
    assert_eq!(headers(&records, hs[1].position), hs[1..]);
    assert!(headers(&records, records.size_in_bytes()).is_empty());
    // A length beyond `max_batch_size` is refused before anything is read for it.
    let (message, _) = corrupt_at(records.read_header(0, 20).unwrap_err());
    assert!(
        message.contains("exceeds the 20 bytes available"),
        "{message}"
    );
}

#[test]
fn buffered_header_walk_reads_what_the_header_scan_reads() {
    // Batches of one record, of a few KiB and of hundreds of KiB, mixed: the walk's reads switch
    // between small and large ones, and each header must still come whole and in order.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000000.log");
    let mut records = FileRecords::open(&path, true).unwrap();
    let mut offset = 0i64;
    for round in 0..40 {
        let value = vec![b'v'; [10, 5_000, 300_000, 60][round % 4]];
        let count = [1, 3, 2, 200][round % 4];
        let mut b = BatchBuilder::new(BatchOptions {
            base_offset: offset,
            ..Default::default()
        });
        for _ in 0..count {
            b.append(1_000, None, Some(&value), &[]).unwrap();
        }
        records.append(&b.build().unwrap()).unwrap();
        offset += count as i64;
    }
    records.flush().unwrap();
    let expected = headers(&records, 0);
    let walk = |records: &FileRecords, start: u64| {
        let mut seen = Vec::new();
        records
            .for_each_header(start, MAX, &mut |h| {
                seen.push(*h);
                true
            })
            .map(|()| seen)
    };
    assert_eq!(walk(&records, 0).unwrap(), expected);
    assert_eq!(walk(&records, expected[7].position).unwrap(), expected[7..]);
    // Stopped by the visitor.
    let mut n = 0;
    records
        .for_each_header(0, MAX, &mut |_| {
            n += 1;
            n < 5
        })
        .unwrap();
    assert_eq!(n, 5);
    // A batch cut short at the end of the file is an error at its position.
    let torn = records.size_in_bytes();
    append_raw(&path, &batch_at(offset, &[1, 2, 3])[..40]);
    let records = FileRecords::open(&path, false).unwrap();
    let (_, position) = corrupt_at(walk(&records, 0).unwrap_err());
    assert_eq!(position, Some(torn));
}

#[test]
fn find_next_valid_batch_resyncs_after_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    let mut records = FileRecords::open(&path, true).unwrap();
    let a = batch_at(0, &[1, 2]);
    let b = batch_at(2, &[3]);
    records.append(&a).unwrap();
    records.append(&[0xAB; 37]).unwrap();
    records.append(&b).unwrap();
    records.append(&[0u8; 500]).unwrap();
    let b_at = (a.len() + 37) as u64;
    assert_eq!(records.find_next_valid_batch(0, 0, MAX).unwrap(), Some(0));
    assert_eq!(
        records.find_next_valid_batch(1, 0, MAX).unwrap(),
        Some(b_at)
    );
    assert_eq!(
        records.find_next_valid_batch(b_at, 0, MAX).unwrap(),
        Some(b_at)
    );
    // Nothing valid after b: the zero-filled tail holds no batch.
    assert_eq!(
        records.find_next_valid_batch(b_at + 1, 0, MAX).unwrap(),
        None
    );
    // Batches below `min_offset` do not count.
    assert_eq!(
        records.find_next_valid_batch(0, 2, MAX).unwrap(),
        Some(b_at)
    );
    assert_eq!(records.find_next_valid_batch(0, 3, MAX).unwrap(), None);
    // A batch larger than `max_batch_size` is not trusted.
    assert_eq!(
        records.find_next_valid_batch(1, 0, b.len() - 1).unwrap(),
        None
    );
    // A batch with a flipped byte (bad CRC) is not a resync point.
    let mut bad = b.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    let path2 = dir.path().join("1.log");
    let mut damaged = FileRecords::open(&path2, true).unwrap();
    damaged.append(&[7u8; 3]).unwrap();
    damaged.append(&bad).unwrap();
    assert_eq!(damaged.find_next_valid_batch(0, 0, MAX).unwrap(), None);
    assert!(Batch::parse(&bad).unwrap().ensure_valid().is_err());
}

#[test]
fn skipped_ranges_are_stepped_over() {
    let dir = tempfile::tempdir().unwrap();
    let (records, batches) = values_file(dir.path());
    let (s0, s1) = (batches[0].len() as u64, batches[1].len() as u64);
    let mut view = FileRecords::open(records.path(), false).unwrap();
    view.skip_ranges(vec![(s0, s0 + s1), (5, 5)]);
    assert_eq!(view.skipped_ranges(), &[(s0, s0 + s1)]);
    let offsets: Vec<i64> = headers(&view, 0).iter().map(|h| h.base_offset).collect();
    assert_eq!(offsets, [0, 2]);
    assert_eq!(values_in(&view, 0, u64::MAX).unwrap(), ["v0", "v2"]);
    // Raw reads stop where a skipped range starts.
    assert_eq!(view.read_range(0, 1 << 20).unwrap(), batches[0]);
    assert_eq!(view.read_header(s0, MAX).unwrap().unwrap().base_offset, 2);
    let prefix = BatchPrefix::parse(&batches[2], usize::MAX).unwrap();
    assert_eq!(prefix.offset, 2);
}

#[test]
fn rename_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let (mut records, _) = values_file(dir.path());
    let old = records.path().to_path_buf();
    let new = dir.path().join("00000000000000000000.log.deleted");
    records.rename_to(&new).unwrap();
    assert_eq!(records.path(), new);
    assert!(!old.exists() && new.exists());
    assert_eq!(headers(&records, 0).len(), 3);
    records.delete().unwrap();
    assert!(!new.exists());
    // Deleting what is already gone is fine, as Kafka's deleteIfExists.
    records.delete().unwrap();
}

/// The read window is filled without zeroing it first: what comes back is exactly the file's
/// bytes, a reused buffer holds no stale tail, and a file that ends early is an error, never
/// a window with unread bytes in it.
#[test]
fn windows_are_read_whole_or_not_at_all() {
    use crate::record::file_records::read_exact_at_into;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bytes");
    let content: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&path, &content).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let mut buf = vec![0xAA; 50];
    read_exact_at_into(&file, &mut buf, 4_000, 1_000).unwrap();
    assert_eq!(buf, content[1_000..5_000]);
    read_exact_at_into(&file, &mut buf, 10, 9_990).unwrap();
    assert_eq!(buf, content[9_990..]);
    let err = read_exact_at_into(&file, &mut buf, 11, 9_990).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
}

/// A segment cut short by another process after it was opened (a broker truncating it) makes a
/// scan fail with an I/O error naming the file; no batch is made up from bytes not read.
#[test]
fn a_segment_truncated_under_an_open_reader_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (records, _) = values_file(dir.path());
    std::fs::OpenOptions::new()
        .write(true)
        .open(records.path())
        .unwrap()
        .set_len(10)
        .unwrap();
    let err = records
        .for_each_batch(0, records.size_in_bytes(), MAX, &mut |_, _| Ok(true))
        .unwrap_err();
    assert!(
        err.to_string().contains("00000000000000000000.log"),
        "{err}"
    );
}

/// Each visited batch's position and values.
type Visited = Vec<(u64, Vec<String>)>;

/// Every batch's (position, values) through `access`, stopping after `stop_after` batches; the
/// error, if any, as (message, position).
fn visit_with(
    records: &FileRecords,
    access: FileAccess,
    stop_after: usize,
) -> (Visited, Option<(String, Option<u64>)>) {
    let mut seen = Vec::new();
    let mut scratch = Vec::new();
    let result = records.for_each_batch_mapped(
        0,
        records.size_in_bytes(),
        MAX,
        access,
        &mut |pos, batch, _| {
            let values = batch
                .records(&mut scratch, usize::MAX)?
                .into_iter()
                .map(|r| String::from_utf8(r.value.unwrap().to_vec()).unwrap())
                .collect();
            seen.push((pos, values));
            Ok(seen.len() < stop_after)
        },
    );
    (seen, result.err().map(corrupt_at))
}

/// Batches of 100 records with 100-byte values (the size the checker thread is used for) up to
/// `bytes`; their positions.
fn write_batches_of_100_byte_values(path: &Path, bytes: u64) -> Vec<u64> {
    assert!(
        bytes > 2 * CHECK_AHEAD_MIN_BYTES,
        "a range the checker thread reads"
    );
    let mut writer = FileRecords::open(path, true).unwrap();
    let mut positions = Vec::new();
    let mut offset = 0i64;
    while writer.size_in_bytes() < bytes {
        positions.push(writer.size_in_bytes());
        let mut batch = BatchBuilder::new(BatchOptions {
            base_offset: offset,
            ..Default::default()
        });
        for i in 0..100 {
            let value = format!("{:0100}", offset + i);
            batch.append(7, None, Some(value.as_bytes()), &[]).unwrap();
        }
        writer.append(&batch.build().unwrap()).unwrap();
        offset += 100;
    }
    writer.flush().unwrap();
    positions
}

/// Read windows, and the memory map read with a checker thread and with its pages released
/// behind the read, alone and together: as Arrow's readers ask (a copying one uses the map only
/// with the checker), and as `Log.records()` does (the map, pages released, no checker).
fn other_accesses() -> Vec<FileAccess> {
    let mut accesses = vec![FileAccess::Windows];
    for (check_crcs_ahead, release_behind, windows_without_checker) in [
        (true, false, false),
        (false, true, true),
        (true, true, true),
        (false, true, false),
    ] {
        accesses.push(FileAccess::Mapped {
            check_crcs_ahead,
            release_behind,
            windows_without_checker,
        });
    }
    accesses
}

/// The checker thread of `check_crcs_ahead`, and releasing the map's pages behind the read,
/// change nothing a reader sees: the same batches, the same error at the same position for a
/// CRC mismatch midway (the reader checks what the checker could not vouch for), and an early
/// stop ends the read (and the checker) at once.
#[test]
fn crcs_checked_ahead_read_as_checked_in_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000000.log");
    // Past two chunks of the map, so pages are released behind the read midway.
    let positions = write_batches_of_100_byte_values(&path, 2 * POPULATE_CHUNK + 100_000);

    let records = FileRecords::open(&path, false).unwrap();
    let (inline, none) = visit_with(
        &records,
        FileAccess::Mapped {
            check_crcs_ahead: false,
            release_behind: false,
            windows_without_checker: false,
        },
        usize::MAX,
    );
    assert!(none.is_none());
    assert_eq!(inline.len(), positions.len());
    assert_eq!(
        inline.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
        positions
    );
    for access in other_accesses() {
        assert_eq!(
            visit_with(&records, access, usize::MAX),
            (inline.clone(), None),
            "{access:?}"
        );
        let (stopped, error) = visit_with(&records, access, 3);
        assert_eq!(
            (stopped.as_slice(), error),
            (&inline[..3], None),
            "{access:?}"
        );
    }
    drop(records);

    // One value byte flipped in a batch two thirds in: its CRC no longer matches.
    let damaged = positions.len() * 2 / 3;
    let mut bytes = std::fs::read(&path).unwrap();
    let end = positions[damaged + 1] as usize;
    bytes[end - 2] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();
    let records = FileRecords::open(&path, false).unwrap();
    let expected = visit_with(
        &records,
        FileAccess::Mapped {
            check_crcs_ahead: false,
            release_behind: false,
            windows_without_checker: false,
        },
        usize::MAX,
    );
    assert_eq!(expected.0, inline[..damaged]);
    let (_, at) = expected.1.as_ref().expect("a CRC mismatch");
    assert_eq!(*at, Some(positions[damaged]));
    for access in other_accesses() {
        assert_eq!(
            visit_with(&records, access, usize::MAX),
            expected,
            "{access:?}"
        );
    }
}

/// A read through the map with `release_behind` hands back the pages it has passed, so a long
/// copying read keeps only the chunks around it resident, and none once it reached the end;
/// without it (zero-copy readers, whose views point into the map) the whole file stays mapped.
#[cfg(target_os = "linux")]
#[test]
fn mapped_pages_are_released_behind_the_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000000.log");
    write_batches_of_100_byte_values(&path, 4 * POPULATE_CHUNK + 100_000);
    let size = std::fs::metadata(&path).unwrap().len();
    for (check_crcs_ahead, release_behind, windows_without_checker) in [
        (false, false, false),
        // `Log.records()`: the map on the reader's thread alone.
        (false, true, false),
        (true, true, true),
    ] {
        let records = FileRecords::open(&path, false).unwrap();
        let access = FileAccess::Mapped {
            check_crcs_ahead,
            release_behind,
            windows_without_checker,
        };
        let (seen, error) = visit_with(&records, access, usize::MAX);
        assert!(error.is_none() && !seen.is_empty(), "{access:?}");
        let resident = mapped_resident_bytes(&path);
        if release_behind {
            // Read to the end: its last chunk is released too.
            assert_eq!(
                resident, 0,
                "{access:?}: {resident} of {size} bytes resident"
            );
        } else {
            assert!(
                resident >= size - 4096,
                "{access:?}: {resident} of {size} bytes resident"
            );
        }
    }
}

/// Reads of neighbouring ranges (a threaded `to_arrow`'s chunks) share the chunk of the map at
/// their boundary: the one that leaves it first keeps it for the other, so the pages ahead of
/// a read are never dropped under it, and the last to leave releases it.
#[cfg(target_os = "linux")]
#[test]
fn neighbouring_reads_release_their_shared_chunk_once_both_left() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000000.log");
    let positions = write_batches_of_100_byte_values(&path, 3 * POPULATE_CHUNK);
    let size = std::fs::metadata(&path).unwrap().len();
    let records = FileRecords::open(&path, false).unwrap();
    let access = FileAccess::Mapped {
        check_crcs_ahead: false,
        release_behind: true,
        windows_without_checker: false,
    };
    // The first read ends and the second starts midway through the second chunk.
    let boundary = *positions
        .iter()
        .find(|&&p| p >= POPULATE_CHUNK * 3 / 2)
        .unwrap();
    let mut second_read = false;
    records
        .for_each_batch_mapped(0, boundary, usize::MAX, access, &mut |position, _, _| {
            if !second_read && position >= POPULATE_CHUNK * 5 / 4 {
                second_read = true;
                // The second read runs to the end of the file while the first is in the
                // shared chunk, then leaves it.
                records.for_each_batch_mapped(
                    boundary,
                    size,
                    usize::MAX,
                    access,
                    &mut |_, _, _| Ok(true),
                )?;
                let resident = mapped_resident_bytes(&path);
                assert!(
                    resident >= POPULATE_CHUNK / 2,
                    "the first read's chunk was released under it: {resident} bytes resident"
                );
            }
            Ok(true)
        })
        .unwrap();
    assert!(second_read);
    assert_eq!(
        mapped_resident_bytes(&path),
        0,
        "the last to leave releases"
    );
}

/// A file cut short after it was mapped (another process opened it writable and truncated it):
/// reads through the map would fault (SIGBUS) on the cut pages, so every access reads the file
/// as it is now instead, through read windows, and reports what is missing; `mapped` gives no
/// map to point into.
#[test]
fn a_mapped_file_cut_short_is_read_as_it_is_now() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000000.log");
    write_batches_of_100_byte_values(&path, 4 * POPULATE_CHUNK + 100_000);
    let size = std::fs::metadata(&path).unwrap().len();
    let records = FileRecords::open(&path, false).unwrap();
    assert!(records.mapped().is_some());
    let (whole, error) = visit_with(&records, FileAccess::Windows, usize::MAX);
    assert!(error.is_none());
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(size / 2)
        .unwrap();
    assert!(records.mapped().is_none(), "a map past the file's end");
    for access in other_accesses() {
        let mut seen = 0;
        let result = records.for_each_batch_mapped(0, size, MAX, access, &mut |_pos, batch, _| {
            batch.ensure_valid()?;
            seen += 1;
            Ok(true)
        });
        assert!(seen < whole.len(), "{access:?}");
        let error = result.expect_err("the cut goes unreported").to_string();
        assert!(error.contains("the file ends"), "{access:?}: {error}");
    }
}

/// A file another process's writer cut after it was opened is said to be cut, where a read said
/// only "failed to fill whole buffer" (a black-box tester).
#[test]
fn a_read_of_a_file_cut_since_it_opened_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (records, _) = values_file(dir.path());
    let size = records.size_in_bytes();
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("00000000000000000000.log"))
        .unwrap()
        .set_len(size / 2)
        .unwrap();
    let e = records
        .read_range(0, size as usize)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cut since"), "{e}");
    assert!(
        e.contains(&format!("held {size} when the log was opened")),
        "{e}"
    );
}
