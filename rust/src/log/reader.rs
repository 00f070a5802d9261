//! Record-level iteration over a log, across segments, with Kafka's isolation levels: what a
//! read_uncommitted or read_committed consumer would see (read_committed drops the records of
//! aborted transactions, using the aborted-transaction index as Kafka's fetcher does, and
//! control records always).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

use crate::error::{Error, Result};
use crate::index::txn::AbortedTxn;
use crate::log::{FetchIsolation, Log};
use crate::record::batch::{Batch, BatchRecordIter};
use crate::record::control::ControlRecordType;
use crate::record::file_records::FileAccess;
use crate::record::record::{OwnedRecord, Record};
use std::ops::Range;

use arrow_buffer::Buffer;

/// What a read_committed consumer tracks: aborted transactions not yet reached, and producers
/// whose aborted transaction is in progress at the current position.
struct AbortedFilter {
    pending: BinaryHeap<Reverse<(i64, i64)>>, // (first_offset, producer_id)
    aborting: HashSet<i64>,
}

impl AbortedFilter {
    fn new(aborted: &[AbortedTxn]) -> Self {
        AbortedFilter {
            pending: aborted
                .iter()
                .map(|t| Reverse((t.first_offset, t.producer_id)))
                .collect(),
            aborting: HashSet::new(),
        }
    }

    /// Kafka's `Fetcher` logic: returns whether the batch's records are to be skipped.
    fn skip(&mut self, batch: &Batch<'_>) -> Result<bool> {
        while let Some(Reverse((first, pid))) = self.pending.peek().copied() {
            if first > batch.last_offset() {
                break;
            }
            self.pending.pop();
            self.aborting.insert(pid);
        }
        if batch.is_control() {
            if let Some(marker) = batch.end_txn_marker()? {
                if marker.control_type == ControlRecordType::Abort {
                    self.aborting.remove(&batch.producer_id());
                }
            }
            return Ok(true);
        }
        Ok(batch.is_transactional() && self.aborting.contains(&batch.producer_id()))
    }
}

/// What `Log::for_each_batch` calls for each batch: (position, batch, all its records, the range
/// of those a consumer sees); it returns whether to go on.
pub type BatchVisitor<'v> =
    dyn FnMut(u64, &Batch<'_>, &[Record<'_>], Range<usize>) -> Result<bool> + 'v;

/// [`BatchVisitor`] also given the read window (an Arrow buffer) holding the batch's bytes:
/// records of an uncompressed batch borrow from it, so a reader can keep them without copying.
pub type WindowBatchVisitor<'v> =
    dyn FnMut(u64, &Batch<'_>, &[Record<'_>], Range<usize>, &Buffer) -> Result<bool> + 'v;

/// [`WindowBatchVisitor`] given the batch's records undecoded: an iterator that decodes each
/// as it is pulled, and the offsets [start, end) a consumer sees (records outside them are
/// the caller's to pass over).
pub type LazyBatchVisitor<'v> =
    dyn FnMut(u64, &Batch<'_>, BatchRecordIter<'_>, Range<i64>, &Buffer) -> Result<bool> + 'v;

impl Log {
    /// Calls `visit(position, batch, records, in_range)` (it returns whether to go on) for each
    /// batch a consumer with `isolation` sees in [start, end) up to the isolation's bound:
    /// `records` is the whole batch, `records[in_range]` those in [start, end). Control batches
    /// stay out, as consumers never see them, unless `include_control`.
    /// Batches come from each segment's `FileRecords::for_each_batch`, the one batch loop.
    pub fn for_each_batch(
        &self,
        start: Option<i64>,
        end: Option<i64>,
        isolation: FetchIsolation,
        include_control: bool,
        visit: &mut BatchVisitor<'_>,
    ) -> Result<()> {
        self.for_each_batch_in_window(
            start,
            end,
            isolation,
            include_control,
            &mut |pos, batch, records, range, _| visit(pos, batch, records, range),
        )
    }

    /// [`Self::for_each_batch`], also handing `visit` the read window holding each batch
    /// (see `FileRecords::for_each_batch_in_window`).
    pub fn for_each_batch_in_window(
        &self,
        start: Option<i64>,
        end: Option<i64>,
        isolation: FetchIsolation,
        include_control: bool,
        visit: &mut WindowBatchVisitor<'_>,
    ) -> Result<()> {
        self.for_each_batch_lazy(
            start,
            end,
            isolation,
            include_control,
            FileAccess::Windows,
            &mut |pos, batch, iter, offsets, window| {
                let mut records = Vec::with_capacity(iter.count_hint());
                iter.try_for_each_record(|record| {
                    records.push(record);
                    Ok(())
                })?;
                // Records are in offset order, so those in range are one run.
                let first = records.partition_point(|r| r.offset < offsets.start);
                let last = records.partition_point(|r| r.offset < offsets.end);
                let go_on = first >= last || visit(pos, batch, &records, first..last, window)?;
                // A legacy wrapper's records may reach the end before its header says.
                Ok(go_on && records.last().is_none_or(|r| r.offset < offsets.end - 1))
            },
        )
    }

    /// The offset after the batch holding `offset` (the first batch past it when it is in no
    /// batch: a gap, or control records dropped), found as Kafka's `translateOffset` finds a
    /// fetch's batch; `None` past the last batch.
    pub fn end_of_batch_at(&self, offset: i64) -> Result<Option<i64>> {
        let st = self.readable_state()?;
        for segment in st.segments.from_offset(offset) {
            if let Some(found) = segment.translate_offset(offset, 0)? {
                return Ok(Some(found.offset + 1));
            }
        }
        Ok(None)
    }

    /// The one loop under [`Self::for_each_batch`]: each batch a consumer with `isolation`
    /// sees in [start, end), with its records still to decode ([`LazyBatchVisitor`]). `access`
    /// says how segments are read (`FileRecords::for_each_batch_mapped`); memory maps only for
    /// callers that checked no writer can truncate them while the windows live.
    pub fn for_each_batch_lazy(
        &self,
        start: Option<i64>,
        end: Option<i64>,
        isolation: FetchIsolation,
        include_control: bool,
        access: FileAccess,
        visit: &mut LazyBatchVisitor<'_>,
    ) -> Result<()> {
        let st = self.readable_state()?;
        let start = Self::read_start_in(&st, start)?;
        let bound = Self::max_offset_metadata(&st, isolation).message_offset;
        let end = end.map_or(bound, |e| e.min(bound));
        if start >= end {
            return Ok(());
        }
        let mut filter = if isolation == FetchIsolation::TxnCommitted {
            Some(AbortedFilter::new(&Self::collect_aborted(&st, start, end)?))
        } else {
            None
        };
        let mut scratch = Vec::new();
        let mut finished = false;
        let mut previous_last = i64::MIN;
        for segment in st.segments.from_offset(start) {
            if finished || segment.base_offset() >= end {
                break;
            }
            // A flushed segment is not validated on open: offsets rewritten outside the CRC
            // (a base offset) show here, as a batch that does not fit where it lies.
            let (floor, ceiling) = (
                segment.lowest_offset(),
                st.segments
                    .higher(segment.base_offset())
                    .map_or(i64::MAX, |s| s.base_offset()),
            );
            let position = segment
                .translate_offset(start, 0)?
                .map_or(segment.size(), |p| p.position);
            let log = segment.log();
            // Where the range ends in its last segment: after the batch holding `end - 1`. A
            // read that gets there is done with the map's pages it is on, and releases them
            // (`release_behind`) once no neighbouring read is on them; one stopped before
            // (a full Arrow batch) goes on there at its next call. Damage in the search is
            // left for the read to meet in order, after the rows before it.
            let read_end = if end < ceiling
                && matches!(
                    access,
                    FileAccess::Mapped {
                        release_behind: true,
                        ..
                    }
                ) {
                segment
                    .translate_offset(end - 1, position)
                    .ok()
                    .flatten()
                    .map_or(log.size_in_bytes(), |last| last.position + last.size as u64)
            } else {
                log.size_in_bytes()
            };
            let max_decompressed = segment.max_decompressed();
            log.for_each_batch_mapped(
                position,
                read_end,
                segment.max_batch_size(),
                access,
                &mut |pos, batch, window| {
                    let first = match batch {
                        Batch::V2(b) => b.base_offset(),
                        Batch::Legacy(_) => batch.last_offset(),
                    };
                    if first <= previous_last
                        || first < floor
                        || batch.last_offset() < first
                        || batch.last_offset() >= ceiling
                    {
                        // The first batch read has no batch before it to name.
                        let after = if previous_last == i64::MIN {
                            String::new()
                        } else {
                            format!("after offset {previous_last}, ")
                        };
                        return Err(Error::corrupt(format!(
                            "batch of offsets {first}..{} is out of place: {after}in the segment \
                             of offsets {floor}..{}",
                            batch.last_offset(),
                            ceiling.saturating_sub(1)
                        )));
                    }
                    previous_last = batch.last_offset();
                    if batch.last_offset() < start {
                        return Ok(true);
                    }
                    let skip = match &mut filter {
                        Some(f) => f.skip(batch)?,
                        None => batch.is_control() && !include_control,
                    };
                    finished = batch.last_offset() >= end - 1;
                    if !skip || (include_control && batch.is_control()) {
                        // A compressed batch's inflated buffer is its window: zero-copy readers
                        // keep views into it instead of copying its values out.
                        let mut inflated = None;
                        let (records, window) = batch.records_with_window(
                            window,
                            &mut inflated,
                            &mut scratch,
                            max_decompressed,
                        )?;
                        if !visit(pos, batch, records, start..end, window)? {
                            finished = true;
                        }
                    }
                    Ok(!finished)
                },
            )?;
        }
        Ok(())
    }

    /// The records of [start, end) as a consumer with `isolation` sees them, in offset order.
    pub fn records(
        &self,
        start: Option<i64>,
        end: Option<i64>,
        isolation: FetchIsolation,
    ) -> Result<Vec<OwnedRecord>> {
        let mut out = Vec::new();
        self.for_each_batch(
            start,
            end,
            isolation,
            false,
            &mut |_pos, _batch, records, in_range| {
                out.extend(records[in_range].iter().map(|r| r.to_owned_record()));
                Ok(true)
            },
        )?;
        Ok(out)
    }
}
