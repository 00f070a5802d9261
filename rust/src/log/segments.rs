//! The ordered map of a log's segments by base offset (Kafka's `LogSegments`): floor lookups
//! find the segment holding an offset, the last entry is the active segment.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::segment::LogSegment;

#[derive(Debug, Default)]
pub struct LogSegments {
    segments: BTreeMap<i64, LogSegment>,
}

impl LogSegments {
    pub fn new() -> Self {
        LogSegments {
            segments: BTreeMap::new(),
        }
    }
    pub fn add(&mut self, segment: LogSegment) -> Option<LogSegment> {
        self.segments.insert(segment.base_offset(), segment)
    }
    pub fn remove(&mut self, base_offset: i64) -> Option<LogSegment> {
        self.segments.remove(&base_offset)
    }
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }
    pub fn len(&self) -> usize {
        self.segments.len()
    }
    pub fn contains(&self, base_offset: i64) -> bool {
        self.segments.contains_key(&base_offset)
    }
    pub fn get(&self, base_offset: i64) -> Option<&LogSegment> {
        self.segments.get(&base_offset)
    }
    pub fn get_mut(&mut self, base_offset: i64) -> Option<&mut LogSegment> {
        self.segments.get_mut(&base_offset)
    }
    pub fn active(&self) -> Option<&LogSegment> {
        self.segments.values().next_back()
    }
    pub fn active_mut(&mut self) -> Option<&mut LogSegment> {
        self.segments.values_mut().next_back()
    }
    pub fn first(&self) -> Option<&LogSegment> {
        self.segments.values().next()
    }
    pub fn base_offsets(&self) -> Vec<i64> {
        self.segments.keys().copied().collect()
    }
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &LogSegment> {
        self.segments.values()
    }
    pub fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut LogSegment> {
        self.segments.values_mut()
    }
    /// The segment holding `offset`: the one with the largest base offset <= `offset`.
    pub fn floor(&self, offset: i64) -> Option<&LogSegment> {
        self.segments.range(..=offset).next_back().map(|(_, s)| s)
    }
    pub fn floor_mut(&mut self, offset: i64) -> Option<&mut LogSegment> {
        self.segments
            .range_mut(..=offset)
            .next_back()
            .map(|(_, s)| s)
    }
    /// The first segment after the one based at `base_offset`.
    pub fn higher(&self, base_offset: i64) -> Option<&LogSegment> {
        self.segments
            .range((Bound::Excluded(base_offset), Bound::Unbounded))
            .next()
            .map(|(_, s)| s)
    }
    /// Segments from the one holding `from` (inclusive) on.
    pub fn from_offset(&self, from: i64) -> impl Iterator<Item = &LogSegment> {
        let start = self
            .segments
            .range(..=from)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        self.segments.range(start..).map(|(_, s)| s)
    }
    pub fn size_in_bytes(&self) -> u64 {
        self.segments.values().map(LogSegment::size).sum()
    }
}
