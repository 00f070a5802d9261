use std::fs;

use super::*;
use crate::error::{Error, Result};
use crate::index::txn::AbortedTxn;
use crate::record::batch::{Batch, DefaultBatch};
use crate::record::builder::{end_txn_marker_batch, BatchBuilder, BatchOptions};
use crate::record::control::{ControlRecordType, EndTransactionMarker};

const PID: i64 = 1000;

fn data(base_offset: i64, pid: i64, epoch: i16, base_seq: i32, n: i32, txn: bool) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        base_offset,
        producer_id: pid,
        producer_epoch: epoch,
        base_sequence: base_seq,
        is_transactional: txn,
        ..Default::default()
    });
    for i in 0..n {
        b.append(1_000 + i as i64, None, Some(b"v"), &[]).unwrap();
    }
    b.build().unwrap()
}

fn marker(offset: i64, pid: i64, epoch: i16, commit: bool, coordinator_epoch: i32) -> Vec<u8> {
    let control_type = if commit {
        ControlRecordType::Commit
    } else {
        ControlRecordType::Abort
    };
    end_txn_marker_batch(
        offset,
        2_000,
        0,
        pid,
        epoch,
        EndTransactionMarker {
            control_type,
            coordinator_epoch,
        },
    )
    .unwrap()
}

fn manager() -> (tempfile::TempDir, ProducerStateManager) {
    let dir = tempfile::tempdir().unwrap();
    let m = ProducerStateManager::new(dir.path(), false).unwrap();
    (dir, m)
}

/// Client append of one batch: check, "write", apply; returns the completed txns.
fn append(
    m: &mut ProducerStateManager,
    bytes: &[u8],
    origin: AppendOrigin,
) -> Result<Vec<CompletedTxn>> {
    let b = DefaultBatch::new(bytes).unwrap();
    match m.check_and_prepare(&[b], origin)? {
        AppendCheck::Duplicate(d) => panic!("unexpected duplicate {d:?}"),
        AppendCheck::Append(p) => {
            let done = m.apply(p)?;
            for c in &done {
                m.complete_txn(c)?;
            }
            m.update_map_end_offset(b.last_offset() + 1);
            Ok(done)
        }
    }
}

fn check(m: &ProducerStateManager, bytes: &[u8]) -> Result<AppendCheck> {
    m.check_and_prepare(&[DefaultBatch::new(bytes).unwrap()], AppendOrigin::Client)
}

#[test]
fn sequences_in_order_gaps_and_wrap() {
    let (_d, mut m) = manager();
    append(&mut m, &data(0, PID, 0, 0, 3, false), AppendOrigin::Client).unwrap();
    append(&mut m, &data(3, PID, 0, 3, 2, false), AppendOrigin::Client).unwrap();
    let e = m.last_entry(PID).unwrap();
    assert_eq!(
        (
            e.first_seq(),
            e.last_seq(),
            e.first_data_offset(),
            e.last_data_offset()
        ),
        (0, 4, 0, 4)
    );
    // A gap is an out-of-order error.
    let err = check(&m, &data(5, PID, 0, 6, 1, false)).unwrap_err();
    assert!(matches!(&err, Error::OutOfOrderSequence(_)), "{err}");
    // So is going back to a sequence that is not a cached batch.
    assert!(check(&m, &data(5, PID, 0, 4, 1, false)).is_err());
    // Sequences wrap from i32::MAX to 0.
    let (_d2, mut m2) = manager();
    append(
        &mut m2,
        &data(0, PID, 0, i32::MAX - 1, 2, false),
        AppendOrigin::Client,
    )
    .unwrap();
    assert_eq!(m2.last_entry(PID).unwrap().last_seq(), i32::MAX);
    append(&mut m2, &data(2, PID, 0, 0, 1, false), AppendOrigin::Client).unwrap();
    // A batch straddling the wrap: base MAX-1, 4 records -> last seq 1.
    let (_d3, mut m3) = manager();
    append(
        &mut m3,
        &data(0, PID, 0, i32::MAX - 1, 4, false),
        AppendOrigin::Client,
    )
    .unwrap();
    let e = m3.last_entry(PID).unwrap();
    assert_eq!((e.first_seq(), e.last_seq()), (i32::MAX - 1, 1));
    append(&mut m3, &data(4, PID, 0, 2, 1, false), AppendOrigin::Client).unwrap();
    // An unknown producer may start at any sequence (its state may have expired).
    append(&mut m3, &data(5, 77, 0, 42, 1, false), AppendOrigin::Client).unwrap();
}

#[test]
fn duplicates_of_the_last_five_batches() {
    let (_d, mut m) = manager();
    let batches: Vec<Vec<u8>> = (0..6)
        .map(|i| data(i * 2, PID, 0, i as i32 * 2, 2, false))
        .collect();
    for b in &batches {
        append(&mut m, b, AppendOrigin::Client).unwrap();
    }
    assert_eq!(
        m.last_entry(PID).unwrap().batch_metadata().count(),
        NUM_BATCHES_TO_RETAIN
    );
    for i in 1..6i64 {
        // The retry arrives with new offsets; the cached ones are reported.
        match check(&m, &data(100 + i, PID, 0, i as i32 * 2, 2, false)).unwrap() {
            AppendCheck::Duplicate(d) => {
                assert_eq!((d.first_offset(), d.last_offset), (i * 2, i * 2 + 1))
            }
            AppendCheck::Append(_) => panic!("batch {i} should be a duplicate"),
        }
    }
    // The oldest batch fell out of the cache: an ordinary out-of-order error now.
    assert!(check(&m, &data(100, PID, 0, 0, 2, false)).is_err());
    // A partial overlap is not a duplicate.
    assert!(check(&m, &data(100, PID, 0, 10, 1, false)).is_err());
    // Replication never dedupes.
    let b = data(100, PID, 0, 10, 2, false);
    assert!(matches!(
        m.check_and_prepare(&[DefaultBatch::new(&b).unwrap()], AppendOrigin::Replication)
            .unwrap(),
        AppendCheck::Append(_)
    ));
}

#[test]
fn epoch_fencing() {
    let (_d, mut m) = manager();
    append(&mut m, &data(0, PID, 5, 0, 2, false), AppendOrigin::Client).unwrap();
    let err = check(&m, &data(2, PID, 4, 2, 1, false)).unwrap_err();
    assert!(matches!(&err, Error::InvalidProducerEpoch(_)), "{err}");
    // A new epoch must restart at sequence 0.
    let err = check(&m, &data(2, PID, 6, 2, 1, false)).unwrap_err();
    assert!(
        matches!(&err, Error::OutOfOrderSequence(s) if s.contains("must be 0")),
        "{err}"
    );
    append(&mut m, &data(2, PID, 6, 0, 1, false), AppendOrigin::Client).unwrap();
    let e = m.last_entry(PID).unwrap();
    assert_eq!(
        (e.producer_epoch, e.batch_metadata().count()),
        (6, 1),
        "new epoch clears old batches"
    );
    // The coordinator is checked for epochs but not sequences.
    assert!(m
        .check_and_prepare(
            &[DefaultBatch::new(&data(3, PID, 6, 9, 1, false)).unwrap()],
            AppendOrigin::Coordinator
        )
        .is_ok());
    assert!(m
        .check_and_prepare(
            &[DefaultBatch::new(&data(3, PID, 5, 9, 1, false)).unwrap()],
            AppendOrigin::Coordinator
        )
        .is_err());
    // Replication accepts an older epoch.
    append(
        &mut m,
        &data(3, PID, 5, 9, 1, false),
        AppendOrigin::Replication,
    )
    .unwrap();
}

#[test]
fn transactions_commit_abort_and_unstable_offsets() {
    let (_d, mut m) = manager();
    let (a, b) = (1, 2);
    append(&mut m, &data(0, a, 0, 0, 2, true), AppendOrigin::Client).unwrap();
    assert_eq!(m.first_unstable_offset(), Some(0));
    append(&mut m, &data(2, b, 0, 0, 1, true), AppendOrigin::Client).unwrap();
    append(&mut m, &data(3, a, 0, 2, 1, true), AppendOrigin::Client).unwrap();
    assert_eq!(m.last_entry(a).unwrap().current_txn_first_offset, Some(0));
    // A non-transactional write inside an open transaction is rejected.
    assert!(check(&m, &data(4, a, 0, 3, 1, false)).is_err());

    // Commit a's transaction at offset 4: LSO is b's first offset, which is still open.
    let mk = marker(4, a, 0, true, 3);
    let AppendCheck::Append(p) = m
        .check_and_prepare(
            &[DefaultBatch::new(&mk).unwrap()],
            AppendOrigin::Coordinator,
        )
        .unwrap()
    else {
        panic!()
    };
    let done = m.apply(p).unwrap();
    assert_eq!(
        done,
        vec![CompletedTxn {
            producer_id: a,
            first_offset: 0,
            last_offset: 4,
            is_aborted: false
        }]
    );
    assert_eq!(m.last_stable_offset(&done[0]), 2);
    assert_eq!(done[0].to_aborted_txn(2), None, "commits are not indexed");
    m.complete_txn(&done[0]).unwrap();
    assert!(m.complete_txn(&done[0]).is_err(), "completing twice");
    assert_eq!(m.last_entry(a).unwrap().current_txn_first_offset, None);
    assert_eq!(m.last_entry(a).unwrap().coordinator_epoch, 3);
    assert_eq!(m.first_undecided_offset(), Some(2));
    assert_eq!(
        m.first_unstable_offset(),
        Some(0),
        "a's marker is not yet under the high watermark"
    );
    m.on_high_watermark_updated(5);
    assert_eq!(m.first_unstable_offset(), Some(2));

    // Abort b's at 5: nothing else open, so LSO is just past the marker.
    let done = append(
        &mut m,
        &marker(5, b, 0, false, 3),
        AppendOrigin::Coordinator,
    )
    .unwrap();
    assert_eq!(
        done,
        vec![CompletedTxn {
            producer_id: b,
            first_offset: 2,
            last_offset: 5,
            is_aborted: true
        }]
    );
    assert_eq!(done[0].to_aborted_txn(6), Some(AbortedTxn::new(b, 2, 5, 6)));
    assert_eq!(m.first_undecided_offset(), None);
    m.on_high_watermark_updated(6);
    assert_eq!(m.first_unstable_offset(), None);

    // A zombie coordinator's marker is fenced; a marker with no open transaction completes nothing.
    assert!(check(&m, &marker(6, a, 0, true, 2)).is_err());
    assert_eq!(
        append(&mut m, &marker(6, a, 0, true, 3), AppendOrigin::Coordinator).unwrap(),
        vec![]
    );
}

#[test]
fn replay_rebuilds_the_same_state() {
    let batches = [
        data(0, 1, 0, 0, 2, false),
        data(2, 2, 3, 0, 1, true),
        data(3, 1, 0, 2, 3, false),
        data(6, 3, 0, 0, 1, true),
        marker(7, 2, 3, false, 1),
        data(8, 2, 3, 1, 1, true),
    ];
    let (_d, mut live) = manager();
    for b in &batches {
        append(&mut live, b, AppendOrigin::Client).unwrap();
    }
    let (_d2, mut replayed) = manager();
    let mut aborted = vec![];
    for b in &batches {
        if let Some((c, lso)) = replayed.replay_batch(&Batch::parse(b).unwrap()).unwrap() {
            aborted.extend(c.to_aborted_txn(lso));
        }
    }
    assert_eq!(
        aborted,
        vec![AbortedTxn::new(2, 2, 7, 6)],
        "LSO is producer 3's open txn"
    );
    assert_eq!(live.active_producers(), replayed.active_producers());
    assert_eq!(replayed.map_end_offset(), 9);
    assert_eq!(replayed.first_undecided_offset(), Some(6));
    assert_eq!(
        replayed
            .ongoing_txns()
            .map(|t| t.first_offset)
            .collect::<Vec<_>>(),
        vec![6, 8]
    );
}

#[test]
fn snapshot_round_trip_and_reload() {
    let (dir, mut m) = manager();
    append(&mut m, &data(0, 1, 2, 0, 3, false), AppendOrigin::Client).unwrap();
    append(&mut m, &data(3, 2, 0, 0, 1, true), AppendOrigin::Client).unwrap();
    let path = m.take_snapshot().unwrap().unwrap();
    assert_eq!(path, dir.path().join("00000000000000000004.snapshot"));
    assert_eq!(m.take_snapshot().unwrap(), None, "nothing new since");
    let entries = read_snapshot(&path).unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].last_seq(), 2);
    assert_eq!(entries[0].last_data_offset(), 2);
    assert_eq!(entries[0].first_seq(), 0);
    assert_eq!(entries[1].current_txn_first_offset, Some(3));

    let mut fresh = ProducerStateManager::new(dir.path(), false)
        .unwrap()
        .with_producer_id_expiration_ms(i64::MAX);
    assert_eq!(fresh.latest_snapshot_offset(), Some(4));
    let load = fresh.truncate_and_reload(0, 4, 5_000).unwrap();
    assert_eq!(load.loaded_offset, Some(4));
    assert_eq!(fresh.map_end_offset(), 4);
    assert_eq!(fresh.first_unstable_offset(), Some(3));
    assert_eq!(fresh.last_entry(1).unwrap().last_seq(), 2);
    // The next in-order batch is accepted, and a retry of the snapshotted batch is a duplicate.
    assert!(matches!(
        check(&fresh, &data(4, 1, 2, 0, 3, false)).unwrap(),
        AppendCheck::Duplicate(_)
    ));
    append(
        &mut fresh,
        &data(4, 1, 2, 3, 1, false),
        AppendOrigin::Client,
    )
    .unwrap();

    // Expiry drops idle producers without open transactions when loading.
    let mut expiring = ProducerStateManager::new(dir.path(), true)
        .unwrap()
        .with_producer_id_expiration_ms(10);
    expiring.truncate_and_reload(0, 4, 1_000_000).unwrap();
    assert_eq!(
        expiring
            .active_producers()
            .keys()
            .copied()
            .collect::<Vec<_>>(),
        vec![2]
    );

    // Truncating below the snapshot removes it and restarts from the log start.
    let load = fresh.truncate_and_reload(0, 3, 5_000).unwrap();
    assert_eq!(load.loaded_offset, None);
    assert!(fresh.active_producers().is_empty());
    assert_eq!(fresh.map_end_offset(), 0);
    assert!(!path.exists());
}

#[test]
fn snapshot_byte_layout() {
    let mut e = ProducerStateEntry::empty(0x0102030405060708);
    e.add_batch(0x0a0b, 0x11223344, 100, 4, 0x55);
    e.coordinator_epoch = 7;
    e.current_txn_first_offset = Some(96);
    let empty = ProducerStateEntry::new(9, 1, 2, 3, None, None);
    let bytes = encode_snapshot([&e, &empty]);
    assert_eq!(bytes.len(), 10 + 2 * 46);
    assert_eq!(&bytes[0..2], &[0, 1], "version 1");
    assert_eq!(
        u32::from_be_bytes(bytes[2..6].try_into().unwrap()),
        crate::checksum::crc32c(&bytes[6..])
    );
    assert_eq!(&bytes[6..10], &2i32.to_be_bytes(), "array count");
    let r = &bytes[10..56];
    assert_eq!(
        &r[0..8],
        &0x0102030405060708i64.to_be_bytes(),
        "producer_id"
    );
    assert_eq!(&r[8..10], &0x0a0bi16.to_be_bytes(), "epoch");
    assert_eq!(&r[10..14], &0x11223344i32.to_be_bytes(), "last_sequence");
    assert_eq!(&r[14..22], &100i64.to_be_bytes(), "last_offset");
    assert_eq!(&r[22..26], &4i32.to_be_bytes(), "offset_delta");
    assert_eq!(&r[26..34], &0x55i64.to_be_bytes(), "timestamp");
    assert_eq!(&r[34..38], &7i32.to_be_bytes(), "coordinator_epoch");
    assert_eq!(&r[38..46], &96i64.to_be_bytes(), "current_txn_first_offset");
    let r = &bytes[56..];
    assert_eq!(
        &r[10..14],
        &(-1i32).to_be_bytes(),
        "no batch: last_sequence -1"
    );
    assert_eq!(
        &r[14..22],
        &(-1i64).to_be_bytes(),
        "no batch: last_offset -1"
    );
    assert_eq!(&r[22..26], &0i32.to_be_bytes(), "no batch: offset_delta 0");
    assert_eq!(&r[38..46], &(-1i64).to_be_bytes(), "no txn: -1");
    let back = decode_snapshot(&bytes).unwrap();
    assert_eq!(back[1], empty);
    assert_eq!(back[0].last_seq(), 0x11223344);
    assert_eq!(back[0].first_data_offset(), 96);
    // An empty snapshot: header only.
    assert_eq!(decode_snapshot(&encode_snapshot([])).unwrap(), vec![]);
}

#[test]
fn corrupt_snapshots_are_clear_errors() {
    let e = ProducerStateEntry::new(
        1,
        0,
        -1,
        5,
        None,
        Some(BatchMetadata {
            last_seq: 0,
            last_offset: 0,
            offset_delta: 0,
            timestamp: 5,
        }),
    );
    let good = encode_snapshot([&e]);
    let msg = |b: &[u8]| decode_snapshot(b).unwrap_err().to_string();
    assert!(msg(&good[..5]).contains("fewer than"));
    assert!(msg(&good[..good.len() - 1]).contains("CRC"), "truncated");
    let mut bad = good.clone();
    bad[20] ^= 1;
    assert!(msg(&bad).contains("CRC"));
    let mut v0 = good.clone();
    v0[1] = 0;
    assert!(msg(&v0).contains("unknown version 0"));
    // A huge count with a valid CRC: rejected against the size, nothing allocated from it.
    let mut huge = good.clone();
    huge[6..10].copy_from_slice(&i32::MAX.to_be_bytes());
    let crc = crate::checksum::crc32c(&huge[6..]);
    huge[2..6].copy_from_slice(&crc.to_be_bytes());
    assert!(
        msg(&huge).contains("claims 2147483647 entries"),
        "{}",
        msg(&huge)
    );
    let mut neg = good.clone();
    neg[6..10].copy_from_slice(&(-1i32).to_be_bytes());
    let crc = crate::checksum::crc32c(&neg[6..]);
    neg[2..6].copy_from_slice(&crc.to_be_bytes());
    assert!(msg(&neg).contains("negative"));

    // Loading skips a corrupt latest snapshot for an older good one; errors name the file.
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(snapshot_file_name(1)), &good).unwrap();
    fs::write(dir.path().join(snapshot_file_name(5)), &bad).unwrap();
    let mut ro = ProducerStateManager::new(dir.path(), true)
        .unwrap()
        .with_producer_id_expiration_ms(i64::MAX);
    let load = ro.truncate_and_reload(0, 10, 0).unwrap();
    assert_eq!(load.loaded_offset, Some(1));
    assert_eq!(load.skipped.len(), 1);
    assert!(load.skipped[0]
        .error
        .to_string()
        .contains("00000000000000000005.snapshot"));
    assert!(
        dir.path().join(snapshot_file_name(5)).exists(),
        "read-only leaves it"
    );
    let mut rw = ProducerStateManager::new(dir.path(), false)
        .unwrap()
        .with_producer_id_expiration_ms(i64::MAX);
    assert_eq!(
        rw.truncate_and_reload(0, 10, 0).unwrap().loaded_offset,
        Some(1)
    );
    assert!(
        !dir.path().join(snapshot_file_name(5)).exists(),
        "writable deletes it, as Kafka does"
    );
}

#[test]
fn snapshot_housekeeping_and_read_only() {
    let dir = tempfile::tempdir().unwrap();
    for o in [0, 10, 20, 30, 45] {
        fs::write(dir.path().join(snapshot_file_name(o)), encode_snapshot([])).unwrap();
    }
    fs::write(
        dir.path().join("00000000000000000099.snapshot.deleted"),
        b"",
    )
    .unwrap();
    fs::write(dir.path().join("junk.snapshot"), b"").unwrap();
    let mut ro = ProducerStateManager::new(dir.path(), true).unwrap();
    assert_eq!(ro.snapshot_offsets(), vec![0, 10, 20, 30, 45]);
    ro.delete_snapshots_before(20).unwrap();
    ro.update_map_end_offset(100);
    assert_eq!(ro.take_snapshot().unwrap(), None, "read-only never writes");
    assert_eq!(ro.oldest_snapshot_offset(), Some(20));
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        7,
        "read-only deleted nothing"
    );

    let mut m = ProducerStateManager::new(dir.path(), false).unwrap();
    m.delete_snapshots_before(10).unwrap();
    assert_eq!(m.oldest_snapshot_offset(), Some(10));
    // Segments at 10 and 30: 20 is stray and dropped; 45 is the clean-shutdown snapshot above
    // every segment and stays.
    m.remove_stray_snapshots(&[10, 30]).unwrap();
    assert_eq!(m.snapshot_offsets(), vec![10, 30, 45]);
    m.remove_stray_snapshots(&[10, 30, 50]).unwrap();
    assert_eq!(m.snapshot_offsets(), vec![10, 30]);
    m.truncate_fully_and_start_at(7).unwrap();
    assert_eq!(m.snapshot_offsets(), Vec::<i64>::new());
    assert_eq!(m.map_end_offset(), 7);
    assert!(!dir.path().join(snapshot_file_name(30)).exists());
}

#[test]
fn random_snapshot_bytes_never_panic() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for _ in 0..2000 {
        let len = rng.gen_range(0..200);
        let mut b: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        if len >= 10 && rng.gen_bool(0.7) {
            // Valid version and CRC so the count and entries are reached.
            b[0..2].copy_from_slice(&1i16.to_be_bytes());
            if rng.gen_bool(0.5) {
                let n: i32 = (len - 10) / 46;
                b[6..10].copy_from_slice(&n.to_be_bytes());
            }
            let crc = crate::checksum::crc32c(&b[6..]);
            b[2..6].copy_from_slice(&crc.to_be_bytes());
        }
        if let Ok(entries) = decode_snapshot(&b) {
            for e in &entries {
                let _ = (e.first_seq(), e.first_data_offset(), e.last_seq());
            }
        }
    }
}

#[test]
fn sequence_helpers() {
    assert_eq!(decrement_sequence(5, 2), 3);
    assert_eq!(decrement_sequence(1, 3), i32::MAX - 1);
    assert_eq!(decrement_sequence(0, 1), i32::MAX);
    // Garbage from a corrupt snapshot must not panic.
    let _ = decrement_sequence(i32::MIN, i32::MAX);
    let _ = decrement_sequence(i32::MAX, -1);
    let _ = decrement_sequence(i32::MIN, i32::MIN);
    assert!(in_sequence(i32::MAX, 0) && in_sequence(4, 5) && !in_sequence(4, 4));
    assert_eq!(
        offset_from_snapshot_name("00000000000000000042.snapshot"),
        Some(42)
    );
    assert_eq!(offset_from_snapshot_name("42.snapshot.deleted"), None);
    assert_eq!(offset_from_snapshot_name("-1.snapshot"), None);
}

// Files from a Kafka 4.4.0 broker's `my-topic.x-0` after 20 idempotent records (producer 0),
// three transactions of producer 1 (commit, abort, commit) and 5 more idempotent records
// (producer 2), then a clean shutdown.
const BROKER_SEGMENT: &[&str] = &[
    "0000000000000000000000ef000000000239970885000000000013000001a204ec568c000001a204ec568d0000000000",
    "000000000000000000000000141000000001047630001000000201047631001000000401047632001000000601047633",
    "001000000801047634001000000a01047635001000000c01047636001000020e01047637001000021001047638001000",
    "021201047639001200021401067631300012000216010676313100120002180106763132001200021a01067631330012",
    "00021c0106763134001200021e0106763135001200022001067631360012000222010676313700120002240106763138",
    "001200022601067631390000000000000000140000003a0000000002ee0c1e43001000000000000001a204ec5cb90000",
    "01a204ec5cb9000000000000000100000000000000000001100000000104743100000000000000001500000042000000",
    "00026f649854003000000000000001a204ec5d00000001a204ec5d0000000000000000010000ffffffff000000012000",
    "000008000000010c0000000000000000000000000000160000003a000000000270bbd6d5001000000000000001a204ec",
    "5cef000001a204ec5cef0000000000000001000000000001000000011000000001046131000000000000000017000000",
    "420000000002736e4c6e003000000000000001a204ec5d27000001a204ec5d2700000000000000010000ffffffff0000",
    "00012000000008000000000c0000000000000000000000000000180000003a0000000002777fc0020010000000000000",
    "01a204ec5d2a000001a204ec5d2a00000000000000010000000000020000000110000000010463310000000000000000",
    "190000004200000000024075f8d8003000000000000001a204ec5d31000001a204ec5d3100000000000000010000ffff",
    "ffff000000012000000008000000010c00000000000000000000000000001a0000005e00000000029cd2193a00000000",
    "0004000001a204ec5d37000001a204ec5d37000000000000000200000000000000000005100000000104773000100000",
    "020104773100100000040104773200100000060104773300100000080104773400",
];
const BROKER_SNAPSHOT_31: &[&str] = &[
    "00015f873889000000030000000000000000000000000013000000000000001300000013000001a204ec568dffffffff",
    "ffffffffffffffff0000000000000001000000000002000000000000001800000000000001a204ec5d3100000000ffff",
    "ffffffffffff0000000000000002000000000004000000000000001e00000004000001a204ec5d37ffffffffffffffff",
    "ffffffff",
];

fn unhex(parts: &[&str]) -> Vec<u8> {
    let h: String = parts.concat();
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn replaying_a_broker_segment_reproduces_its_snapshot() {
    use crate::record::batch::BatchIter;
    let segment = unhex(BROKER_SEGMENT);
    let broker_snapshot = unhex(BROKER_SNAPSHOT_31);
    let dir = tempfile::tempdir().unwrap();
    let mut m = ProducerStateManager::new(dir.path(), false).unwrap();
    let mut aborted = vec![];
    for batch in BatchIter::new(&segment) {
        if let Some((c, lso)) = m.replay_batch(&batch.unwrap()).unwrap() {
            aborted.extend(c.to_aborted_txn(lso));
        }
    }
    // The broker's .txnindex holds exactly this entry.
    assert_eq!(aborted, vec![AbortedTxn::new(1, 22, 23, 24)]);
    assert_eq!(m.map_end_offset(), 31);
    assert_eq!(m.first_undecided_offset(), None);
    let path = m.take_snapshot().unwrap().unwrap();
    assert!(path.ends_with("00000000000000000031.snapshot"));
    // Kafka iterates its HashMap of small producer ids in ascending order, so the bytes match.
    assert_eq!(fs::read(&path).unwrap(), broker_snapshot);

    let entries = decode_snapshot(&broker_snapshot).unwrap();
    let mut replayed: Vec<ProducerStateEntry> = m.active_producers().values().cloned().collect();
    replayed.sort_by_key(|e| e.producer_id);
    assert_eq!(entries.len(), 3);
    for (disk, mem) in entries.iter().zip(&replayed) {
        assert_eq!(disk.producer_id, mem.producer_id);
        assert_eq!(disk.producer_epoch, mem.producer_epoch);
        assert_eq!(disk.coordinator_epoch, mem.coordinator_epoch);
        assert_eq!(disk.last_seq(), mem.last_seq());
        assert_eq!(disk.last_data_offset(), mem.last_data_offset());
        assert_eq!(disk.current_txn_first_offset, mem.current_txn_first_offset);
    }
    assert_eq!(
        (
            entries[1].last_seq(),
            entries[1].last_data_offset(),
            entries[1].coordinator_epoch
        ),
        (2, 24, 0)
    );
}

/// A reader lists the snapshots, then a writer in another process takes a newer one and deletes
/// this one: the load goes on with the next older snapshot, where it failed "No such file".
#[test]
fn a_snapshot_deleted_after_the_listing_is_passed_over() {
    let dir = tempfile::tempdir().unwrap();
    for o in [10, 20] {
        fs::write(dir.path().join(snapshot_file_name(o)), encode_snapshot([])).unwrap();
    }
    let mut ro = ProducerStateManager::new(dir.path(), true).unwrap();
    fs::remove_file(dir.path().join(snapshot_file_name(20))).unwrap();
    let load = ro.load_from_snapshot(0, 0).unwrap();
    assert_eq!(load.loaded_offset, Some(10));
    assert!(load.skipped.is_empty());
    assert_eq!(ro.snapshot_offsets(), vec![10]);
}
