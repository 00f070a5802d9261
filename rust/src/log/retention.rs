//! Retention (Kafka's `deleteOldSegments` family) and `deleteRecords`: segments leave the log by
//! time, by size, or because they fall wholly below the log start offset, never past the high
//! watermark and never as the empty active segment; when every segment must go, the log rolls
//! first so an empty active segment remains.

use crate::error::{Error, Result};
use crate::log::{Log, LogState};
use crate::segment::LogSegment;

/// Why segments are deleted (Kafka's `SegmentDeletionReason`), reported back to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletionReason {
    RetentionTime,
    RetentionSize,
    LogStartOffset,
}

/// Kafka's `DeleteRecordsRequest.HIGH_WATERMARK`: delete records up to the high watermark.
pub const DELETE_TO_HIGH_WATERMARK: i64 = -1;

impl Log {
    /// Kafka's `deleteOldSegments`: applies the log start offset (always), then `retention.bytes`
    /// and `retention.ms` (for `cleanup.policy=delete` logs), in Kafka 4's order, so one call
    /// deletes what one of a broker's retention checks deletes (time first, as Kafka 3's Scala
    /// log did, can leave segments a size pass then frees); returns the number of segments
    /// deleted.
    pub fn delete_old_segments(&self) -> Result<usize> {
        let mut st = self.write_state()?;
        let now = self.now();
        let by_retention = self.config().cleanup_policy_delete;
        let mut deleted = self.delete_segments_where(
            &mut st,
            DeletionReason::LogStartOffset,
            |_seg, next, st| Ok(next.is_some_and(|n| n <= st.log_start_offset)),
        )?;
        let retention_bytes = self.config().retention_bytes;
        if by_retention && retention_bytes >= 0 {
            let mut diff = st.segments.size_in_bytes() as i64 - retention_bytes;
            deleted += self.delete_segments_where(
                &mut st,
                DeletionReason::RetentionSize,
                |seg, _next, _st| {
                    if diff - seg.size() as i64 >= 0 {
                        diff -= seg.size() as i64;
                        Ok(true)
                    } else {
                        Ok(false)
                    }
                },
            )?;
        }
        let retention_ms = self.config().retention_ms;
        if by_retention && retention_ms >= 0 {
            deleted += self.delete_segments_where(
                &mut st,
                DeletionReason::RetentionTime,
                |seg, _next, _st| Ok(now - seg.largest_timestamp_ro()? > retention_ms),
            )?;
        }
        Ok(deleted)
    }

    /// Kafka's `deletableSegments` + `deleteSegments`: the longest prefix of segments for which
    /// `predicate` holds, each wholly below the high watermark, the last one not an empty active
    /// segment.
    fn delete_segments_where(
        &self,
        st: &mut LogState,
        _reason: DeletionReason,
        mut predicate: impl FnMut(&LogSegment, Option<i64>, &LogState) -> Result<bool>,
    ) -> Result<usize> {
        let hw = st.high_watermark.message_offset;
        let leo = st.log_end_offset.message_offset;
        let bases = st.segments.base_offsets();
        let mut deletable = Vec::new();
        for (i, &base) in bases.iter().enumerate() {
            let next = bases.get(i + 1).copied();
            let segment = st.segments.get(base).expect("listed segment");
            let upper_bound = next.unwrap_or(leo);
            let is_last_and_empty = next.is_none() && segment.size() == 0;
            if hw >= upper_bound && !is_last_and_empty && predicate(segment, next, st)? {
                deletable.push(base);
            } else {
                break;
            }
        }
        if deletable.is_empty() {
            return Ok(0);
        }
        if deletable.len() == st.segments.len() {
            // Never leave the log without a segment: roll first, as Kafka does.
            self.roll_in(st, None)?;
        }
        for base in &deletable {
            let segment = st.segments.remove(*base).expect("listed segment");
            self.delete_segment_files(segment, false)?;
            // The producer snapshot taken when this segment was rolled goes with it (Kafka's
            // deleteProducerSnapshots).
            st.producer_state.remove_and_delete_snapshot(*base)?;
        }
        let first = st.segments.first().map_or(leo, LogSegment::base_offset);
        if first > st.log_start_offset {
            Self::set_log_start_offset(st, first)?;
        }
        Ok(deletable.len())
    }

    /// Kafka's `deleteRecords` (`Partition.deleteRecordsOnLeader`): moves the log start offset
    /// to `offset`, never past the high watermark (-1, `DeleteRecordsRequest.HIGH_WATERMARK`:
    /// to it); segments wholly below it go on the next `delete_old_segments`. A topic whose
    /// `cleanup.policy` lacks `delete` refuses it, as Kafka's PolicyViolation. Returns the new
    /// log start offset.
    pub fn delete_records(&self, offset: i64) -> Result<i64> {
        if !self.config.cleanup_policy_delete {
            return Err(Error::InvalidArgument(format!(
                "records of {} cannot be deleted: its cleanup.policy has no 'delete' (Kafka's \
                 PolicyViolation)",
                self.dir.display()
            )));
        }
        let offset = match offset {
            DELETE_TO_HIGH_WATERMARK => self.high_watermark(),
            offset if offset < 0 => {
                return Err(Error::OffsetOutOfRange {
                    offset,
                    start: self.log_start_offset(),
                    end: self.high_watermark(),
                })
            }
            offset => offset,
        };
        self.maybe_increment_log_start_offset(offset)
    }

    /// Kafka's `UnifiedLog.maybeIncrementLogStartOffset`: [`Self::delete_records`] without the
    /// partition's checks (any cleanup policy; a negative offset changes nothing).
    pub fn maybe_increment_log_start_offset(&self, offset: i64) -> Result<i64> {
        let mut st = self.write_state()?;
        let hw = st.high_watermark.message_offset;
        if offset > hw {
            return Err(Error::OffsetOutOfRange {
                offset,
                start: st.log_start_offset,
                end: hw,
            });
        }
        if offset > st.log_start_offset {
            Self::set_log_start_offset(&mut st, offset)?;
        }
        Ok(st.log_start_offset)
    }

    fn set_log_start_offset(st: &mut LogState, offset: i64) -> Result<()> {
        st.log_start_offset = offset;
        st.leader_epoch_cache.truncate_from_start(offset)?;
        st.producer_state.on_log_start_offset_incremented(offset);
        if st.recovery_point < offset {
            st.recovery_point = offset;
        }
        if st.high_watermark.message_offset < offset {
            st.high_watermark = crate::segment::LogOffsetMetadata::offset_only(offset);
        }
        Ok(())
    }
}
