//! Kafka records as Arrow record batches with the schema of Spark's Kafka source
//! (`KafkaRecordToRowConverter`), and Arrow tables with Spark's Kafka sink columns back into
//! Kafka record batches. Records reach the builder from the Log's one batch iterator
//! (`Log::for_each_batch`); nothing here parses Kafka bytes.

use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, ListBuilder, StringBuilder, StructBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int32Type, Int64Type, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use arrow_array::{
    Array, ArrayRef, BinaryArray, BinaryViewArray, Int32Array, Int64Array, RecordBatch,
    RecordBatchReader, StringArray, TimestampMicrosecondArray,
};
use arrow_buffer::{Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use std::ops::RangeBounds;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::datadir::validate_topic_name;
use crate::error::{Error, Result};
use crate::log::{FetchIsolation, Log};
use crate::producer::partitioner::DEFAULT_BATCH_SIZE;
use crate::producer::{estimated_record_bytes, partition_for_key, StickyPartitioner};
use crate::record::batch::BatchRecordIter;
use crate::record::builder::{BatchBuilder, BatchOptions};
use crate::record::codec::Compression;
use crate::record::file_records::{
    FileAccess, CHECK_AHEAD_BYTES_PER_RECORD, CHECK_AHEAD_MIN_BYTES,
};
use crate::record::record::Record;

mod read_ahead;
pub use read_ahead::default_threads;
use read_ahead::{chunk_span, ReadAhead};

/// Rows per Arrow batch unless the caller says otherwise.
pub const DEFAULT_BATCH_ROWS: usize = 64 * 1024;

/// Key, value and header bytes per Arrow batch unless the caller says otherwise: 64K rows of
/// 1 MiB values would be 64 GiB in one batch; this keeps a stream's memory bounded by bytes too.
pub const DEFAULT_BATCH_BYTES: usize = 64 << 20;

/// The most bytes an Arrow batch's key or value column takes (a Kafka batch past the budget
/// ends the Arrow batch before it): `binary` offsets are 32-bit, and a Kafka batch holds at
/// most 256 MiB decompressed (`DEFAULT_MAX_DECOMPRESSED_BYTES`).
pub const MAX_BATCH_BYTES: usize = 1 << 30;

/// `struct<key: string, value: binary>`, one Kafka header.
pub fn header_fields() -> Fields {
    Fields::from(vec![
        Field::new("key", DataType::Utf8, true),
        Field::new("value", DataType::Binary, true),
    ])
}

/// The `headers` column's type: Spark's `array<struct<key, value>>` as Spark's own Arrow
/// conversion names it (list item "element").
pub fn headers_type() -> DataType {
    DataType::List(Arc::new(Field::new(
        "element",
        DataType::Struct(header_fields()),
        true,
    )))
}

/// The timestamp column's type: Spark's TimestampType in Arrow, microseconds in UTC.
pub fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// Spark's Kafka source schema: key, value, topic, partition, offset, timestamp, timestampType,
/// and headers when asked for. Every field nullable, as Spark declares them.
pub fn kafka_source_schema(include_headers: bool) -> SchemaRef {
    kafka_source_schema_with(include_headers, false)
}

/// [`kafka_source_schema`]; with `zero_copy` key and value are `binary_view` (Arrow's
/// BinaryView), whose values can point into the read windows instead of being copied.
pub fn kafka_source_schema_with(include_headers: bool, zero_copy: bool) -> SchemaRef {
    let bytes = if zero_copy {
        DataType::BinaryView
    } else {
        DataType::Binary
    };
    let mut fields = vec![
        Field::new("key", bytes.clone(), true),
        Field::new("value", bytes, true),
        Field::new("topic", DataType::Utf8, true),
        Field::new("partition", DataType::Int32, true),
        Field::new("offset", DataType::Int64, true),
        Field::new("timestamp", timestamp_type(), true),
        Field::new("timestampType", DataType::Int32, true),
    ];
    if include_headers {
        fields.push(Field::new("headers", headers_type(), true));
    }
    Arc::new(Schema::new(fields))
}

/// Keys or values copied into one `binary` column: Arrow's offsets, values and validity
/// buffers written directly (a record's bytes are one `extend_from_slice`), sized up front from
/// the Kafka batches' payloads so they are never regrown while a batch is added.
struct CopiedBytes {
    offsets: Vec<i32>,
    values: Vec<u8>,
    nulls: NullBufferBuilder,
}

impl CopiedBytes {
    fn with_capacity(rows: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        CopiedBytes {
            offsets,
            values: Vec::with_capacity(bytes),
            nulls: NullBufferBuilder::new(rows),
        }
    }

    #[inline(always)]
    fn append(&mut self, value: Option<&[u8]>) {
        match value {
            Some(v) => {
                self.values.extend_from_slice(v);
                self.nulls.append_non_null();
            }
            None => self.nulls.append_null(),
        }
        // The reader cuts Arrow batches well below 2 GiB of bytes (MAX_BATCH_BYTES).
        self.offsets.push(self.values.len() as i32);
    }

    fn finish(&mut self) -> BinaryArray {
        // No room yet: the next batch's is made when it starts (see `KafkaRecordBatchBuilder::
        // finish`).
        let fresh = CopiedBytes::with_capacity(0, 0);
        let CopiedBytes {
            offsets,
            values,
            mut nulls,
        } = std::mem::replace(self, fresh);
        BinaryArray::new(
            OffsetBuffer::new(ScalarBuffer::from(offsets)),
            Buffer::from_vec(values),
            nulls.finish(),
        )
    }
}

/// `v.reserve(additional)`, except that a vector holding only its first `prefix` elements (a
/// column with no row yet) is replaced by a new allocation: growing it would have the allocator
/// copy its whole old capacity (mimalloc's realloc does), for nothing.
fn reserve_fresh<T: Copy + Default>(v: &mut Vec<T>, prefix: usize, additional: usize) {
    if v.len() <= prefix && v.capacity() < v.len() + additional {
        let mut fresh = Vec::with_capacity(v.len() + additional);
        fresh.extend_from_slice(v);
        *v = fresh;
    } else {
        v.reserve(additional);
    }
}

/// Keys or values as one `binary_view` column (Arrow's BinaryView layout written directly): a
/// 16-byte view per row, values of up to 12 bytes inside their view, longer ones pointing into
/// the window that holds them (a memory map, a read window or a compressed batch's inflated
/// buffer, added once as a data buffer, never copied). Values outside any window (legacy
/// batches' records, records handed in as a list) are copied into blocks of the column's own.
struct ViewedBytes {
    views: Vec<u128>,
    buffers: Vec<Buffer>,
    nulls: NullBufferBuilder,
    /// The window last added to `buffers`: (address, length, index). A window held in
    /// `buffers` cannot be freed, so its address identifies it.
    window: Option<(usize, usize, u32)>,
    /// Copied values not yet a buffer, and the index that buffer will take: nothing else is
    /// added to `buffers` before it (`add_buffer` flushes it first).
    copies: Vec<u8>,
    copies_index: Option<u32>,
}

/// Bytes per block of copied values (Arrow's own view builder grows its blocks up to 2 MiB).
const COPY_BLOCK_BYTES: usize = 2 << 20;

impl ViewedBytes {
    fn with_capacity(rows: usize) -> Self {
        ViewedBytes {
            views: Vec::with_capacity(rows),
            buffers: Vec::new(),
            nulls: NullBufferBuilder::new(rows),
            window: None,
            copies: Vec::new(),
            copies_index: None,
        }
    }

    /// The view of a value of up to 12 bytes: its length, then the bytes, zero-padded. Built
    /// from two fixed-size loads that overlap (a copy of a variable length is a `memcpy` call,
    /// a fifth of a zero-copy read of 12-byte keys).
    #[inline(always)]
    fn inline_view(v: &[u8]) -> u128 {
        let n = v.len();
        debug_assert!(n <= 12);
        let data: u128 = if n >= 8 {
            let head = u64::from_le_bytes(v[..8].try_into().expect("8 bytes"));
            let tail = u64::from_le_bytes(v[n - 8..].try_into().expect("8 bytes"));
            // `tail` ends with bytes 8..n: shifted down, the bytes before them drop out.
            u128::from(head) | u128::from(tail.checked_shr(8 * (16 - n as u32)).unwrap_or(0)) << 64
        } else if n >= 4 {
            let head = u32::from_le_bytes(v[..4].try_into().expect("4 bytes"));
            let tail = u32::from_le_bytes(v[n - 4..].try_into().expect("4 bytes"));
            u128::from(head) | u128::from(tail.checked_shr(8 * (8 - n as u32)).unwrap_or(0)) << 32
        } else if n > 0 {
            // 1 to 3 bytes: the first, middle and last (some the same byte).
            u128::from(v[0])
                | u128::from(v[n / 2]) << (8 * (n / 2))
                | u128::from(v[n - 1]) << (8 * (n - 1))
        } else {
            0
        };
        n as u128 | data << 32
    }

    /// The view of a longer value at `offset` in buffer `index`: length, first 4 bytes, index,
    /// offset.
    #[inline(always)]
    fn buffer_view(v: &[u8], index: u32, offset: u32) -> u128 {
        let prefix = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
        u128::from(v.len() as u32)
            | (u128::from(prefix) << 32)
            | (u128::from(index) << 64)
            | (u128::from(offset) << 96)
    }

    fn add_buffer(&mut self, buffer: Buffer) -> u32 {
        self.flush_copies();
        self.buffers.push(buffer);
        (self.buffers.len() - 1) as u32
    }

    fn flush_copies(&mut self) {
        if self.copies_index.take().is_some() {
            let copies = std::mem::take(&mut self.copies);
            self.buffers.push(Buffer::from_vec(copies));
        }
    }

    #[inline(always)]
    fn append(&mut self, value: Option<&[u8]>, window: Option<&Buffer>) {
        let Some(v) = value else {
            self.views.push(0);
            self.nulls.append_null();
            return;
        };
        self.nulls.append_non_null();
        if v.len() <= 12 {
            self.views.push(Self::inline_view(v));
            return;
        }
        if let Some(w) = window {
            let (start, p) = (w.as_ptr() as usize, v.as_ptr() as usize);
            if p >= start && p + v.len() <= start + w.len() {
                let index = match self.window {
                    Some((s, l, i)) if s == start && l == w.len() => i,
                    _ => {
                        let i = self.add_buffer(w.clone());
                        self.window = Some((start, w.len(), i));
                        i
                    }
                };
                // A window is at most a Kafka batch or 1 MiB: offsets fit in 32 bits.
                self.views
                    .push(Self::buffer_view(v, index, (p - start) as u32));
                return;
            }
        }
        self.append_copy(v);
    }

    #[inline(never)]
    fn append_copy(&mut self, v: &[u8]) {
        if self.copies_index.is_some() && self.copies.len() + v.len() > COPY_BLOCK_BYTES {
            self.flush_copies();
        }
        let index = match self.copies_index {
            Some(i) => i,
            None => {
                self.copies = Vec::with_capacity(v.len().max(COPY_BLOCK_BYTES));
                let i = self.buffers.len() as u32;
                self.copies_index = Some(i);
                i
            }
        };
        let offset = self.copies.len() as u32;
        self.copies.extend_from_slice(v);
        self.views.push(Self::buffer_view(v, index, offset));
    }

    fn finish(&mut self) -> BinaryViewArray {
        self.flush_copies();
        let fresh = ViewedBytes::with_capacity(0);
        let ViewedBytes {
            views,
            buffers,
            mut nulls,
            ..
        } = std::mem::replace(self, fresh);
        // SAFETY: every view was made above from the bytes it describes: inline ones hold their
        // value, the others name a buffer of `buffers` and a range checked to lie inside it (a
        // window) or written there (a copy); any bytes are valid binary.
        unsafe {
            BinaryViewArray::new_unchecked(ScalarBuffer::from(views), buffers, nulls.finish())
        }
    }
}

/// Appending one key or value to a column; the record decoding loop is generic over it, so each
/// kind of column gets a loop of its own instead of a choice made for every value.
trait AppendBytes {
    /// `window`: the buffer holding the batch's bytes, for columns that point into it.
    fn append_bytes(&mut self, value: Option<&[u8]>, window: Option<&Buffer>);
}

impl AppendBytes for CopiedBytes {
    #[inline(always)]
    fn append_bytes(&mut self, value: Option<&[u8]>, _window: Option<&Buffer>) {
        self.append(value)
    }
}

impl AppendBytes for ViewedBytes {
    #[inline(always)]
    fn append_bytes(&mut self, value: Option<&[u8]>, window: Option<&Buffer>) {
        self.append(value, window)
    }
}

impl AppendBytes for BytesColumn {
    #[inline(always)]
    fn append_bytes(&mut self, value: Option<&[u8]>, window: Option<&Buffer>) {
        self.append(value, window)
    }
}

/// A key or value column: bytes copied into a `binary` column, or `binary_view` views into
/// the read windows (zero-copy).
enum BytesColumn {
    Copied(CopiedBytes),
    Views(ViewedBytes),
}

impl BytesColumn {
    fn new(zero_copy: bool, rows: usize, bytes: usize) -> Self {
        if zero_copy {
            BytesColumn::Views(ViewedBytes::with_capacity(rows))
        } else {
            BytesColumn::Copied(CopiedBytes::with_capacity(rows, bytes))
        }
    }

    /// Room for `rows` more rows of at most `bytes` bytes in all.
    fn reserve(&mut self, rows: usize, bytes: usize) {
        match self {
            BytesColumn::Copied(c) => {
                reserve_fresh(&mut c.offsets, 1, rows);
                reserve_fresh(&mut c.values, 0, bytes);
            }
            BytesColumn::Views(v) => reserve_fresh(&mut v.views, 0, rows),
        }
    }

    #[inline(always)]
    fn append(&mut self, value: Option<&[u8]>, window: Option<&Buffer>) {
        match self {
            BytesColumn::Copied(c) => c.append(value),
            BytesColumn::Views(v) => v.append(value, window),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            BytesColumn::Copied(c) => Arc::new(c.finish()),
            BytesColumn::Views(v) => Arc::new(v.finish()),
        }
    }
}

/// Column builders for one Arrow batch of one partition's records.
pub struct KafkaRecordBatchBuilder {
    schema: SchemaRef,
    topic: Option<String>,
    partition: Option<i32>,
    zero_copy: bool,
    key: BytesColumn,
    value: BytesColumn,
    offset: Vec<i64>,
    timestamp: Vec<i64>,
    timestamp_type: Vec<i32>,
    headers: Option<ListBuilder<StructBuilder>>,
    /// Key, value and header bytes taken so far (an upper bound: whole Kafka payloads).
    bytes: usize,
    /// The first record whose timestamp does not fit Arrow's microseconds: (offset, ms).
    timestamp_overflow: Option<(i64, i64)>,
}

impl KafkaRecordBatchBuilder {
    /// `topic`/`partition` fill their columns (null when the folder is not named `<topic>-<n>`).
    pub fn new(topic: Option<String>, partition: Option<i32>, include_headers: bool) -> Self {
        Self::new_with(topic, partition, include_headers, false)
    }

    /// [`Self::new`]; `zero_copy` builds `binary_view` key and value columns
    /// ([`kafka_source_schema_with`]).
    pub fn new_with(
        topic: Option<String>,
        partition: Option<i32>,
        include_headers: bool,
        zero_copy: bool,
    ) -> Self {
        let headers = include_headers.then(|| {
            let entry = StructBuilder::new(
                header_fields(),
                vec![
                    Box::new(StringBuilder::new()),
                    Box::new(BinaryBuilder::new()),
                ],
            );
            ListBuilder::new(entry).with_field(Arc::new(Field::new(
                "element",
                DataType::Struct(header_fields()),
                true,
            )))
        });
        KafkaRecordBatchBuilder {
            schema: kafka_source_schema_with(include_headers, zero_copy),
            topic,
            partition,
            zero_copy,
            key: BytesColumn::new(zero_copy, 0, 0),
            value: BytesColumn::new(zero_copy, 0, 0),
            offset: Vec::new(),
            timestamp: Vec::new(),
            timestamp_type: Vec::new(),
            headers,
            bytes: 0,
            timestamp_overflow: None,
        }
    }

    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    pub fn len(&self) -> usize {
        self.offset.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offset.is_empty()
    }

    /// Key, value and header bytes added so far, counted as whole Kafka record payloads (an
    /// upper bound): what a reader cuts Arrow batches by.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Adds the records of one Kafka batch as rows, the way Spark's Kafka source converts each
    /// ConsumerRecord (copied: records given as a list borrow from no read window).
    pub fn append_batch(&mut self, records: &[Record<'_>]) -> Result<()> {
        let bytes = records
            .iter()
            .map(|r| r.key.map_or(0, <[u8]>::len) + r.value.map_or(0, <[u8]>::len))
            .sum();
        self.reserve(records.len(), bytes);
        let (key, value, mut rows) = self.columns();
        for record in records {
            rows.push(key, value, record, None);
        }
        self.check_timestamps()
    }

    /// Spark's source converts a timestamp with `Math.multiplyExact` and fails past what
    /// microseconds hold; so does this, rather than change the value.
    fn check_timestamps(&mut self) -> Result<()> {
        match self.timestamp_overflow.take() {
            None => Ok(()),
            Some((offset, ms)) => Err(Error::InvalidRecord(format!(
                "the record at offset {offset} has timestamp {ms} ms, past what a microsecond \
                 timestamp holds (Arrow's and Spark's; Spark's Kafka source fails on it too): \
                 read it with records()"
            ))),
        }
    }

    /// Adds the records of one Kafka batch whose offsets lie in `offsets`, decoding each
    /// straight into the columns (`Log::for_each_batch_lazy`): no list of records is kept.
    pub fn append_records(
        &mut self,
        records: BatchRecordIter<'_>,
        offsets: impl RangeBounds<i64>,
        window: Option<&Buffer>,
    ) -> Result<()> {
        let payload = records.payload_len();
        if self.bytes + payload > i32::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "a Kafka batch of {payload} bytes does not fit in an Arrow batch holding {} \
                 (binary columns take at most 2 GiB)",
                self.bytes
            )));
        }
        self.reserve(records.count_hint(), payload);
        // One loop per kind of batch and of column (both columns copy, or both point into the
        // windows): nothing is chosen per record.
        match records {
            BatchRecordIter::V2(records) => self.append_decoded(records, &offsets, window),
            BatchRecordIter::Legacy(records) => {
                self.append_decoded(records.map(Ok), &offsets, window)
            }
        }?;
        self.check_timestamps()
    }

    #[inline(always)]
    fn append_decoded<'r>(
        &mut self,
        records: impl Iterator<Item = Result<Record<'r>>>,
        offsets: &impl RangeBounds<i64>,
        window: Option<&Buffer>,
    ) -> Result<()> {
        let (key, value, mut rows) = self.columns();
        match (key, value) {
            (BytesColumn::Copied(key), BytesColumn::Copied(value)) => {
                rows.append_decoded(key, value, records, offsets, window)
            }
            (BytesColumn::Views(key), BytesColumn::Views(value)) => {
                rows.append_decoded(key, value, records, offsets, window)
            }
            (key, value) => rows.append_decoded(key, value, records, offsets, window),
        }
    }

    fn reserve(&mut self, rows: usize, bytes: usize) {
        // The payload's bytes bound the values, which take most of them: the value column gets
        // room for all, so it never regrows (and copies) while the batch is added. Keys, a small
        // share, grow as appended (reserving the whole payload for them too would regrow the key
        // buffer to twice its size once per Arrow batch).
        self.reserve_columns(rows, bytes);
        self.bytes += bytes;
    }

    /// Room in every column for `rows` more rows with `value_bytes` of values.
    fn reserve_columns(&mut self, rows: usize, value_bytes: usize) {
        self.key.reserve(rows, 0);
        self.value.reserve(rows, value_bytes);
        reserve_fresh(&mut self.offset, 0, rows);
        reserve_fresh(&mut self.timestamp, 0, rows);
        reserve_fresh(&mut self.timestamp_type, 0, rows);
    }

    /// The key and value columns, and the others, borrowed apart.
    fn columns(&mut self) -> (&mut BytesColumn, &mut BytesColumn, Rows<'_>) {
        let KafkaRecordBatchBuilder {
            key,
            value,
            offset,
            timestamp,
            timestamp_type,
            headers,
            timestamp_overflow,
            ..
        } = self;
        let rows = Rows {
            offset,
            timestamp,
            timestamp_type,
            headers: headers.as_mut(),
            timestamp_overflow,
        };
        (key, value, rows)
    }

    /// Adds one record as a row.
    pub fn append(&mut self, record: &Record<'_>) -> Result<()> {
        self.append_batch(std::slice::from_ref(record))
    }

    fn append_headers(headers: &mut ListBuilder<StructBuilder>, record: &Record<'_>) {
        // Spark gives null, not an empty array, for a record without headers.
        if record.headers.is_empty() {
            headers.append_null();
            return;
        }
        let entries = headers.values();
        for h in &record.headers {
            entries
                .field_builder::<StringBuilder>(0)
                .expect("header key builder")
                .append_value(&h.key);
            entries
                .field_builder::<BinaryBuilder>(1)
                .expect("header value builder")
                .append_option(h.value);
            entries.append(true);
        }
        headers.append(true);
    }

    /// The rows added so far as one batch; the builder starts empty again, its columns
    /// unallocated until the next batch reserves room for its rows ([`Self::reserve_columns`],
    /// so they are written once, not regrown). Made here, that room would be taken while the
    /// caller still holds the batch before this one (a 192 MiB log of 1,000 B values read on
    /// one thread peaked 262 MiB above the open in 65 MB batches, 248 MiB with the room made
    /// later; in 16 MB batches 103 and 91 MiB).
    pub fn finish(&mut self) -> RecordBatch {
        let rows = self.len();
        // The same topic and partition on every row: built once per Arrow batch, in buffers
        // of their final size (from an iterator, Arrow's builder regrows them as it goes).
        let topic: ArrayRef = match &self.topic {
            Some(t) => Arc::new(repeated_string(t, rows)),
            None => Arc::new(StringArray::new_null(rows)),
        };
        let partition: ArrayRef = match self.partition {
            Some(p) => Arc::new(Int32Array::from_value(p, rows)),
            None => Arc::new(Int32Array::new_null(rows)),
        };
        let taken = |v: &mut Vec<i64>| std::mem::take(v);
        let timestamp =
            TimestampMicrosecondArray::new(ScalarBuffer::from(taken(&mut self.timestamp)), None)
                .with_timezone("UTC");
        let timestamp_type = Int32Array::new(
            ScalarBuffer::from(std::mem::take(&mut self.timestamp_type)),
            None,
        );
        let mut columns: Vec<ArrayRef> = vec![
            self.key.finish(),
            self.value.finish(),
            topic,
            partition,
            Arc::new(Int64Array::new(
                ScalarBuffer::from(taken(&mut self.offset)),
                None,
            )),
            Arc::new(timestamp),
            Arc::new(timestamp_type),
        ];
        if let Some(headers) = &mut self.headers {
            columns.push(Arc::new(headers.finish()));
        }
        self.bytes = 0;
        RecordBatch::try_new(self.schema.clone(), columns)
            .expect("columns built to the schema they are checked against")
    }
}

/// The columns besides key and value, borrowed for one Kafka batch's rows.
struct Rows<'b> {
    offset: &'b mut Vec<i64>,
    timestamp: &'b mut Vec<i64>,
    timestamp_type: &'b mut Vec<i32>,
    headers: Option<&'b mut ListBuilder<StructBuilder>>,
    timestamp_overflow: &'b mut Option<(i64, i64)>,
}

impl Rows<'_> {
    /// Decodes `records` into the columns, the rows of those in `offsets` (every record is
    /// decoded, and checked, the others are not rows).
    #[inline(always)]
    fn append_decoded<'r>(
        &mut self,
        key: &mut impl AppendBytes,
        value: &mut impl AppendBytes,
        records: impl Iterator<Item = Result<Record<'r>>>,
        offsets: &impl RangeBounds<i64>,
        window: Option<&Buffer>,
    ) -> Result<()> {
        for record in records {
            let record = record?;
            if offsets.contains(&record.offset) {
                self.push(key, value, &record, window);
            }
        }
        Ok(())
    }

    /// Adds `record` as a row, the way Spark's Kafka source converts a ConsumerRecord.
    #[inline(always)]
    fn push(
        &mut self,
        key: &mut impl AppendBytes,
        value: &mut impl AppendBytes,
        record: &Record<'_>,
        window: Option<&Buffer>,
    ) {
        key.append_bytes(record.key, window);
        value.append_bytes(record.value, window);
        self.offset.push(record.offset);
        // Kafka's milliseconds as Spark's microseconds; exact, since 1000 divides them back.
        let (micros, overflow) = record.timestamp.overflowing_mul(1000);
        if overflow && self.timestamp_overflow.is_none() {
            *self.timestamp_overflow = Some((record.offset, record.timestamp));
        }
        self.timestamp.push(micros);
        self.timestamp_type
            .push(i32::from(record.timestamp_type.id()));
        if let Some(headers) = self.headers.as_deref_mut() {
            KafkaRecordBatchBuilder::append_headers(headers, record);
        }
    }
}

/// A `string` column of `rows` times `value` (the topic column).
fn repeated_string(value: &str, rows: usize) -> StringArray {
    let len = value.len();
    // `LogArrowReader` cuts batches at MAX_BATCH_BYTES / len rows (plus one Kafka batch).
    let offsets: Vec<i32> = (0..=rows)
        .map(|i| i32::try_from(i * len).expect("topic column under 2 GiB"))
        .collect();
    let values = value.repeat(rows).into_bytes();
    // SAFETY: `rows` copies of a `str`, each at the offsets made for it: valid UTF-8 at every
    // offset (Arrow's check would walk every byte of the column again).
    unsafe {
        StringArray::new_unchecked(
            OffsetBuffer::new_unchecked(ScalarBuffer::from(offsets)),
            Buffer::from_vec(values),
            None,
        )
    }
}

/// The topic and partition a `<topic>-<partition>` folder (or its `.<id>-delete`, `-future`, `-stray`) holds.
pub fn topic_partition_of(log: &Log) -> (Option<String>, Option<i32>) {
    // A `-delete`, `-future` or `-stray` folder holds its partition's records too (Kafka's
    // `parseTopicPartitionName` reads all four names); a folder named otherwise has no topic.
    match log
        .dir()
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(crate::log::checkpoint::parse_partition_dir)
    {
        Some(dir) => (Some(dir.topic), Some(dir.partition)),
        None => (None, None),
    }
}

/// Streams a log's records as Arrow batches of at most about `batch_rows` rows (a Kafka batch is
/// never split, so a batch may run over by one Kafka batch). The range is fixed when the reader
/// is made; the log's lock is held only while one Arrow batch is decoded, so appends go on.
pub struct LogArrowReader {
    log: Arc<Log>,
    builder: KafkaRecordBatchBuilder,
    next: i64,
    end: i64,
    isolation: FetchIsolation,
    batch_rows: usize,
    batch_bytes: usize,
    /// How segments are read: memory maps for zero-copy on a log no writer holds.
    file_access: FileAccess,
    done: bool,
    /// Threads decoding chunks of the range ahead of the caller; 1 decodes on the caller's.
    threads: usize,
    read_ahead: Option<ReadAhead>,
    /// Record bytes (keys, values, headers) of the last batch `next_batch` returned.
    last_batch_bytes: usize,
}

impl LogArrowReader {
    /// `start=None` is the log start offset; `end=None` is what a consumer with `isolation` could
    /// read (the high watermark, or the last stable offset for read_committed), and an `end` past
    /// it is cut there. A `start` outside [log start, log end] is `OffsetOutOfRange`.
    pub fn new(
        log: Arc<Log>,
        start: Option<i64>,
        end: Option<i64>,
        isolation: FetchIsolation,
        include_headers: bool,
        batch_rows: usize,
    ) -> Result<Self> {
        if batch_rows == 0 {
            return Err(Error::InvalidArgument(
                "batch_rows must be at least 1".into(),
            ));
        }
        let start = log.checked_read_start(start)?;
        let bound = log.fetch_upper_bound(isolation);
        let end = end.map_or(bound, |e| e.min(bound));
        let (topic, partition) = topic_partition_of(&log);
        // A log no writer holds cannot be truncated under a memory map of it: read through maps
        // (no copy by the read), the pages released behind the reader since values are copied.
        let file_access = if log.segments_can_be_mapped() {
            FileAccess::Mapped {
                check_crcs_ahead: true,
                release_behind: true,
                windows_without_checker: true,
            }
        } else {
            FileAccess::Windows
        };
        Ok(LogArrowReader {
            builder: KafkaRecordBatchBuilder::new(topic, partition, include_headers),
            log,
            next: start,
            end,
            isolation,
            batch_rows,
            batch_bytes: DEFAULT_BATCH_BYTES,
            file_access,
            done: false,
            threads: 1,
            read_ahead: None,
            last_batch_bytes: 0,
        })
    }

    pub fn schema(&self) -> SchemaRef {
        self.builder.schema()
    }

    /// Key and value as `binary_view` columns pointing into the segments instead of copies
    /// (see [`kafka_source_schema_with`]); call before the first batch. A read-only log that no
    /// writer holds (no running broker on its data dir, no writable `Log` on the folder) is read
    /// through memory maps of its segments, so the views point into the page cache and reading
    /// copies no value at all (the pages stay mapped while views hold them); otherwise into read
    /// windows (one copy, by the read).
    pub fn zero_copy(mut self, zero_copy: bool) -> Self {
        let (topic, partition) = (self.builder.topic.clone(), self.builder.partition);
        let headers = self.builder.headers.is_some();
        self.builder = KafkaRecordBatchBuilder::new_with(topic, partition, headers, zero_copy);
        if let FileAccess::Mapped {
            release_behind,
            windows_without_checker,
            ..
        } = &mut self.file_access
        {
            // Views keep the map's pages; copies need neither them nor the map.
            (*release_behind, *windows_without_checker) = (!zero_copy, !zero_copy);
        }
        self
    }

    /// Whether segments are read through memory maps: a read-only log no writer holds.
    pub fn maps_files(&self) -> bool {
        self.file_access != FileAccess::Windows
    }

    /// With `false`, a memory-mapped read ([`Self::maps_files`]) checks CRCs on the reading
    /// thread instead of on a second one running ahead (`FileAccess::Mapped`'s
    /// `check_crcs_ahead`, the default): for callers that already keep every core busy.
    pub fn check_crcs_ahead(mut self, ahead: bool) -> Self {
        if let FileAccess::Mapped {
            check_crcs_ahead, ..
        } = &mut self.file_access
        {
            *check_crcs_ahead = ahead;
        }
        self
    }

    /// Cuts Arrow batches at about `bytes` of keys, values and headers (counted as whole Kafka
    /// payloads; a Kafka batch is never split, so one batch may be larger), at most
    /// [`MAX_BATCH_BYTES`] (a larger value is capped there) so a `binary` column's 32-bit
    /// offsets never overflow.
    pub fn batch_bytes(mut self, bytes: usize) -> Result<Self> {
        if bytes == 0 {
            return Err(Error::InvalidArgument(
                "batch_bytes must be at least 1".into(),
            ));
        }
        self.batch_bytes = bytes.min(MAX_BATCH_BYTES);
        Ok(self)
    }

    /// Decodes on `threads` threads (0: [`default_threads`]) when the range is long enough to
    /// pay for them (at most the cores): pool threads decode chunks of the range (1 to 4 MiB,
    /// ending after a Kafka batch) ahead of the caller, who gets the batches in offset order,
    /// each cut as this reader cuts them (a chunk's end also ends a batch). At most two chunks
    /// per thread are out at a time. Call before the first batch; 1 (the default) decodes on
    /// the calling thread, with the CRC checker thread of [`Self::check_crcs_ahead`] (chunks
    /// check their own CRCs).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = if threads == 0 {
            default_threads()
        } else {
            // The pool has a thread per core: more would only hold more chunks ahead.
            threads.min(std::thread::available_parallelism().map_or(1, |n| n.get()))
        };
        self
    }

    /// The offset the next Arrow batch starts at (the end once the reader is done).
    pub fn position(&self) -> i64 {
        self.next
    }

    /// A one-thread reader of `[start, end)` set up as this one, for a chunk of its range.
    fn chunk_reader(&self, start: i64, end: i64) -> LogArrowReader {
        let b = &self.builder;
        let mut file_access = self.file_access;
        if let FileAccess::Mapped {
            check_crcs_ahead,
            windows_without_checker,
            ..
        } = &mut file_access
        {
            *check_crcs_ahead = false;
            // Chunks copy their values out of the map too: the pages other threads fault in
            // while this one decodes cost less than a read's copy of the file (100 B values,
            // 140,000 records on 2 threads: 0.8x the time through read windows).
            *windows_without_checker = false;
        }
        LogArrowReader {
            log: self.log.clone(),
            builder: KafkaRecordBatchBuilder::new_with(
                b.topic.clone(),
                b.partition,
                b.headers.is_some(),
                b.zero_copy,
            ),
            next: start,
            end,
            isolation: self.isolation,
            batch_rows: self.batch_rows,
            batch_bytes: self.batch_bytes,
            file_access,
            done: false,
            threads: 1,
            read_ahead: None,
            last_batch_bytes: 0,
        }
    }

    /// The next batch from the workers, starting them on the first call.
    fn next_read_ahead(&mut self) -> Result<Option<RecordBatch>> {
        let mut ahead = match self.read_ahead.take() {
            Some(ahead) if ahead.in_this_process() => ahead,
            stale => {
                // A forked child's chunks out are its parent's to decode: left alone (their
                // channels and pool belong to threads this process does not have), and read
                // again from where the child's reader stands.
                std::mem::forget(stale);
                let span = chunk_span(
                    self.end - self.next,
                    self.log.size_in_bytes(),
                    self.log.log_end_offset() - self.log.log_start_offset(),
                    self.threads,
                );
                match span {
                    Some(span) => ReadAhead::start(self.threads, self.next, span)?,
                    None => {
                        self.threads = 1;
                        return self.next_batch();
                    }
                }
            }
        };
        loop {
            // A chunk ends after the Kafka batch holding its last offset; where that batch
            // cannot be found (damage, which the chunk's read reports), where it was planned.
            let batch_end = |nominal: i64| {
                let found = self.log.end_of_batch_at(nominal - 1);
                found.ok().flatten().unwrap_or(nominal)
            };
            let chunk_reader = |start, end| self.chunk_reader(start, end);
            ahead.hand_out(self.end, batch_end, chunk_reader);
            // An error drops `ahead` (its chunks are not read on); asked again, the reader
            // starts over where the error was, as a one-thread reader does.
            match ahead.next(|start, end| self.chunk_reader(start, end))? {
                Some((batch, next)) => {
                    self.next = next;
                    if let Some(batch) = batch {
                        self.read_ahead = Some(ahead);
                        return Ok(Some(batch));
                    }
                }
                None => {
                    self.done = true;
                    return Ok(None);
                }
            }
        }
    }

    /// The next Arrow batch, `Ok(None)` once the range is read.
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        if self.done || self.next >= self.end {
            self.done = true;
            return Ok(None);
        }
        if self.threads > 1 {
            return self.next_read_ahead();
        }
        // The topic column repeats the name on every row: cut batches before its 32-bit
        // offsets could overflow (millions of rows of a long name).
        let topic_len = self.builder.topic.as_ref().map_or(0, String::len).max(1);
        let limit = self.batch_rows.min(MAX_BATCH_BYTES / topic_len);
        let byte_limit = self.batch_bytes;
        // An Arrow batch too small to take `CHECK_AHEAD_MIN_BYTES` of the records a checker
        // thread is used for (a consumer's poll of 500 records) gets none: starting it would
        // cost more than it saves, and it would check batches past where this read stops.
        let mut file_access = self.file_access;
        let min_rows = CHECK_AHEAD_MIN_BYTES / CHECK_AHEAD_BYTES_PER_RECORD.start();
        if (limit as u64) < min_rows || (byte_limit as u64) < CHECK_AHEAD_MIN_BYTES {
            if let FileAccess::Mapped {
                check_crcs_ahead, ..
            } = &mut file_access
            {
                *check_crcs_ahead = false;
            }
        }
        let batch_start = self.next;
        let (builder, next) = (&mut self.builder, &mut self.next);
        // Set while a Kafka batch's records go into the columns, to the rows before them: a
        // failure then leaves part of that batch in them.
        let mut appending = None;
        let read = self.log.for_each_batch_lazy(
            Some(*next),
            Some(self.end),
            self.isolation,
            false,
            file_access,
            &mut |_position, batch, records, offsets, window| {
                // A Kafka batch is never split: one that would take the Arrow batch past its
                // byte budget starts the next one instead.
                if !builder.is_empty() && builder.bytes() + records.payload_len() > byte_limit {
                    return Ok(false);
                }
                if builder.is_empty() {
                    // Room for the whole Arrow batch, estimated from its first Kafka batch: grown
                    // Kafka batch by Kafka batch, the columns would be reallocated (and copied)
                    // a dozen times per Arrow batch (11% of `to_arrow`'s time, perf).
                    // The last Kafka batch may run past `limit`: room for one more, so that
                    // batch does not double every column (a copy of the whole Arrow batch).
                    let rows = limit.min(usize::try_from(offsets.end - offsets.start).unwrap_or(0))
                        + records.count_hint();
                    let per_row = records.payload_len() / records.count_hint().max(1);
                    builder.reserve_columns(rows, per_row.saturating_mul(rows).min(byte_limit));
                }
                appending = Some(builder.len());
                builder.append_records(records, offsets, Some(window))?;
                appending = None;
                *next = batch.last_offset() + 1;
                Ok(builder.len() < limit && builder.bytes() < byte_limit)
            },
        );
        if let Err(e) = read {
            if let Some(rows_before) = appending {
                // Columns with part of a Kafka batch in them are dropped, whole.
                let b = &self.builder;
                self.builder = KafkaRecordBatchBuilder::new_with(
                    b.topic.clone(),
                    b.partition,
                    b.headers.is_some(),
                    b.zero_copy,
                );
                if rows_before > 0 {
                    // The Kafka batches before it went with them: read again alone (they
                    // decoded), their rows still come out first.
                    let failed_at = self.next;
                    let end = std::mem::replace(&mut self.end, failed_at);
                    self.next = batch_start;
                    let again = self.next_batch();
                    (self.end, self.next, self.done) = (end, failed_at, false);
                    return match again {
                        Ok(Some(batch)) => Ok(Some(batch)),
                        Ok(None) => Err(e),
                        Err(again) => Err(again),
                    };
                }
            }
            // The rows of the Kafka batches before the damage come out first, as a consumer
            // gets those records; asked again, the reader starts at the damaged batch and fails.
            if self.builder.is_empty() {
                return Err(e);
            }
        }
        if self.builder.is_empty() {
            // Only aborted or control batches were left before the end.
            self.done = true;
            return Ok(None);
        }
        self.last_batch_bytes = self.builder.bytes();
        Ok(Some(self.builder.finish()))
    }
}

impl Iterator for LogArrowReader {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch()
            .map_err(|e| ArrowError::ExternalError(Box::new(e)))
            .transpose()
    }
}

impl RecordBatchReader for LogArrowReader {
    fn schema(&self) -> SchemaRef {
        self.builder.schema()
    }
}

/// Kafka record batches held in memory, back to back (a `.log` segment's bytes, a segment of
/// tiered storage, the records of a fetch), as Arrow batches of about `batch_rows` rows (a
/// Kafka batch is never split) with Spark's Kafka source schema, as a read_uncommitted consumer
/// sees them: every batch's CRC checked, control batches left out, any magic and codec. A
/// batch cut short or damaged is an error naming its byte position. With `zero_copy`, the
/// `binary_view` keys and values of uncompressed v2 batches point into `data`.
pub fn records_to_arrow(
    data: &Buffer,
    topic: Option<String>,
    partition: Option<i32>,
    include_headers: bool,
    zero_copy: bool,
    batch_rows: usize,
    max_decompressed: usize,
) -> Result<Vec<RecordBatch>> {
    let mut builder =
        KafkaRecordBatchBuilder::new_with(topic, partition, include_headers, zero_copy);
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    let mut batches = crate::record::batch::BatchIter::new(data.as_slice());
    loop {
        let position = batches.position();
        let Some(batch) = batches.next() else { break };
        let at = |e: Error| e.at(None, position as u64);
        let batch = batch?;
        batch.ensure_valid().map_err(at)?;
        if batch.is_control() {
            continue;
        }
        // Views hold 32-bit offsets into their buffer: past that, each batch is its own window.
        let window = if data.len() <= i32::MAX as usize {
            data.clone()
        } else {
            data.slice_with_length(position, batch.size_in_bytes())
        };
        let mut inflated = None;
        let (records, window) = batch
            .records_with_window(&window, &mut inflated, &mut scratch, max_decompressed)
            .map_err(at)?;
        // Every batch is kept: the next gets room as large as the last at once, so its columns
        // are not regrown Kafka batch by Kafka batch.
        let finish_with_room = |builder: &mut KafkaRecordBatchBuilder, out: &mut Vec<_>| {
            let (rows, bytes) = (builder.len(), builder.bytes());
            out.push(builder.finish());
            builder.reserve_columns(rows, bytes);
        };
        if !builder.is_empty() && builder.bytes() + records.payload_len() > DEFAULT_BATCH_BYTES {
            finish_with_room(&mut builder, &mut out);
        }
        builder
            .append_records(records, .., Some(window))
            .map_err(at)?;
        if builder.len() >= batch_rows {
            finish_with_room(&mut builder, &mut out);
        }
    }
    if !builder.is_empty() || out.is_empty() {
        out.push(builder.finish());
    }
    Ok(out)
}

/// One row of Spark's Kafka sink columns, borrowed from the Arrow arrays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkRow<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Vec<(&'a str, Option<&'a [u8]>)>,
    /// Milliseconds since the epoch; None leaves the producer's clock to stamp it.
    pub timestamp: Option<i64>,
    pub topic: Option<&'a str>,
    pub partition: Option<i32>,
}

/// Spark's Kafka sink columns of one Arrow batch (`value` required; `key`, `headers`, `topic`,
/// `partition`, `timestamp` optional), type-checked once so rows are read without checks.
pub struct SinkColumns {
    key: Option<ArrayRef>,
    value: ArrayRef,
    headers: Option<ArrayRef>,
    timestamp: Option<ArrayRef>,
    topic: Option<ArrayRef>,
    partition: Option<ArrayRef>,
    rows: usize,
    /// The number of this batch's first row in the whole input (errors name rows by it).
    first_row: usize,
}

fn is_bytes_like(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
    )
}

fn is_string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// Bytes of row `i` of a binary or string array of any width; None when null.
fn bytes_at(array: &dyn Array, i: usize) -> Option<&[u8]> {
    if array.is_null(i) {
        return None;
    }
    Some(match array.data_type() {
        DataType::Binary => array.as_binary::<i32>().value(i),
        DataType::LargeBinary => array.as_binary::<i64>().value(i),
        DataType::BinaryView => array.as_binary_view().value(i),
        DataType::Utf8 => array.as_string::<i32>().value(i).as_bytes(),
        DataType::LargeUtf8 => array.as_string::<i64>().value(i).as_bytes(),
        DataType::Utf8View => array.as_string_view().value(i).as_bytes(),
        _ => unreachable!("checked by SinkColumns::new"),
    })
}

fn str_at(array: &dyn Array, i: usize) -> Option<&str> {
    // Only string arrays reach here (checked), whose bytes are UTF-8 (`checked_utf8`).
    bytes_at(array, i).map(|b| std::str::from_utf8(b).expect("Arrow strings are UTF-8"))
}

/// A dictionary-encoded binary or string column (a pandas categorical, a Parquet column read
/// with its dictionary) decoded to its value type, so the sink reads it as any other; other
/// columns as they are (the type check names a dictionary of anything else).
fn decoded(name: &str, column: ArrayRef) -> Result<ArrayRef> {
    let DataType::Dictionary(_, value_type) = column.data_type() else {
        return Ok(column);
    };
    if !is_bytes_like(value_type) {
        return Ok(column);
    }
    let dictionary = column.as_any_dictionary();
    let values = dictionary.values();
    if is_string(value_type) {
        checked_utf8(name, values)?;
    }
    // normalized_keys needs a value; without one every row is null.
    let keys = if values.is_empty() {
        Vec::new()
    } else {
        dictionary.normalized_keys()
    };
    let row = |i: usize| {
        (!column.is_null(i))
            .then(|| keys.get(i).and_then(|&k| bytes_at(values.as_ref(), k)))
            .flatten()
    };
    if is_string(value_type) {
        let mut out = StringBuilder::with_capacity(column.len(), 0);
        for i in 0..column.len() {
            // The dictionary's values are a string array, checked UTF-8 above.
            out.append_option(
                row(i).map(|b| std::str::from_utf8(b).expect("Arrow strings are UTF-8")),
            );
        }
        Ok(Arc::new(out.finish()))
    } else {
        let mut out = BinaryBuilder::with_capacity(column.len(), 0);
        for i in 0..column.len() {
            out.append_option(row(i));
        }
        Ok(Arc::new(out.finish()))
    }
}

/// Checks a column the sink reads strings from (a string key, value or topic, the headers'
/// keys) against Arrow's rules, its UTF-8 included: pyarrow builds string arrays over any bytes
/// without checking (`binary_array.view(pa.string())`), and text is decoded as such here.
fn checked_utf8(name: &str, column: &ArrayRef) -> Result<()> {
    column.to_data().validate_full().map_err(|e| {
        Error::InvalidArgument(format!(
            "column '{name}' is not valid Arrow data ({e}); a string column must hold UTF-8: \
             send bytes as binary"
        ))
    })
}

fn column_error(name: &str, found: &DataType, wanted: &str) -> Error {
    let found = type_name(found);
    Error::InvalidArgument(format!(
        "column '{name}' has type {found}; Kafka's sink takes {wanted}"
    ))
}

/// A type as the sink's errors name the wanted one (`array<struct<key: string, value:
/// binary>>`), where arrow's own names spell out every nested field's metadata.
fn type_name(t: &DataType) -> String {
    match t {
        DataType::List(item) | DataType::LargeList(item) | DataType::ListView(item) => {
            format!("array<{}>", type_name(item.data_type()))
        }
        DataType::Struct(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|f| format!("{}: {}", f.name(), type_name(f.data_type())))
                .collect();
            format!("struct<{}>", fields.join(", "))
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "binary".into(),
        DataType::Dictionary(_, value) => format!("dictionary<{}>", type_name(value)),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => format!(
                "map<{}, {}>",
                type_name(kv[0].data_type()),
                type_name(kv[1].data_type())
            ),
            other => format!("map<{}>", type_name(other)),
        },
        other => other.to_string().to_lowercase(),
    }
}

/// Spark's Kafka sink checks on a write's schema, before any row (Spark's driver checks them
/// when it analyses the write): the columns' types as [`SinkColumns::new`] takes them, and a
/// topic from the option (`topic`) or a `topic` column. With `data_dir`, a `topic` the write
/// would create is checked there as the commit will check it (not in a broker's log dir).
pub fn check_sink_schema(
    schema: SchemaRef,
    topic: Option<&str>,
    data_dir: Option<&std::path::Path>,
) -> Result<()> {
    SinkColumns::for_write(&RecordBatch::new_empty(schema.clone()), topic.is_some())?;
    if topic.is_none() && schema.index_of("topic").is_err() {
        return Err(Error::InvalidArgument(
            "Kafka's sink needs the 'topic' option or a 'topic' column".into(),
        ));
    }
    if let Some(topic) = topic {
        crate::datadir::refuse_a_producer_of_an_internal_topic(topic)?;
    }
    if let (Some(topic), Some(dir)) = (topic, data_dir) {
        if dir.is_dir() && !crate::datadir::topic_partition_counts(dir)?.contains_key(topic) {
            crate::datadir::refuse_new_partitions_beside_a_broker(dir, topic)?;
        } else if dir.is_dir() {
            // Said on the driver, before any task: the configs its commit appends by.
            crate::datadir::topic_log_config(dir, topic)?;
        }
    }
    Ok(())
}

impl SinkColumns {
    /// [`Self::new`] for a write that may name its topic by option: then, as in Spark's sink,
    /// the option wins and a `topic` column is not read, whatever its type.
    pub fn for_write(batch: &RecordBatch, topic_option: bool) -> Result<Self> {
        match batch.schema().index_of("topic") {
            Ok(topic) if topic_option => {
                let others: Vec<usize> = (0..batch.num_columns()).filter(|&i| i != topic).collect();
                let without_topic = batch
                    .project(&others)
                    .map_err(|e| Error::InvalidArgument(e.to_string()))?;
                Self::new(&without_topic)
            }
            _ => Self::new(batch),
        }
    }

    /// Checks a batch's columns against Spark's Kafka sink; a wrong type names the column.
    pub fn new(batch: &RecordBatch) -> Result<Self> {
        let schema = batch.schema();
        let get = |name: &str| -> Result<Option<ArrayRef>> {
            let Ok(i) = schema.index_of(name) else {
                return Ok(None);
            };
            let source = batch.column(i);
            // A dictionary's string values were checked as `decoded` read them.
            let checked = matches!(source.data_type(), DataType::Dictionary(..));
            let column = decoded(name, source.clone())?;
            if (is_string(column.data_type()) && !checked) || name == "headers" {
                checked_utf8(name, &column)?;
            }
            Ok(Some(column))
        };
        let bytes_col = |name: &str| -> Result<Option<ArrayRef>> {
            match get(name)? {
                Some(c) if is_bytes_like(c.data_type()) || c.data_type() == &DataType::Null => {
                    Ok(Some(c))
                }
                Some(c) => Err(column_error(name, c.data_type(), "binary or string")),
                None => Ok(None),
            }
        };
        let value = bytes_col("value")?.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "Kafka's sink needs a 'value' column (binary or string); found columns {:?}",
                schema
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect::<Vec<_>>()
            ))
        })?;
        let key = bytes_col("key")?;
        let topic = match get("topic")? {
            Some(c) if is_string(c.data_type()) || c.data_type() == &DataType::Null => Some(c),
            Some(c) => return Err(column_error("topic", c.data_type(), "string")),
            None => None,
        };
        let partition = match get("partition")? {
            Some(c)
                if matches!(
                    c.data_type(),
                    DataType::Int32 | DataType::Int64 | DataType::Null
                ) =>
            {
                Some(c)
            }
            Some(c) => return Err(column_error("partition", c.data_type(), "int")),
            None => None,
        };
        let timestamp = match get("timestamp")? {
            Some(c)
                if matches!(
                    c.data_type(),
                    DataType::Timestamp(_, _) | DataType::Int64 | DataType::Null
                ) =>
            {
                Some(c)
            }
            Some(c) => {
                return Err(column_error(
                    "timestamp",
                    c.data_type(),
                    "timestamp or int64 milliseconds",
                ))
            }
            None => None,
        };
        let headers = match get("headers")? {
            Some(c) if c.data_type() == &DataType::Null => None,
            Some(c) => {
                let ok = match c.data_type() {
                    DataType::List(item) | DataType::LargeList(item) => match item.data_type() {
                        DataType::Struct(fields) => {
                            fields.len() == 2
                                && fields[0].name() == "key"
                                && is_string(fields[0].data_type())
                                && fields[1].name() == "value"
                                && (is_bytes_like(fields[1].data_type())
                                    || fields[1].data_type() == &DataType::Null)
                        }
                        _ => false,
                    },
                    _ => false,
                };
                if !ok {
                    return Err(column_error(
                        "headers",
                        c.data_type(),
                        "array<struct<key: string, value: binary>>",
                    ));
                }
                Some(c)
            }
            None => None,
        };
        Ok(SinkColumns {
            key,
            value,
            headers,
            timestamp,
            topic,
            partition,
            rows: batch.num_rows(),
            first_row: 0,
        })
    }

    pub fn num_rows(&self) -> usize {
        self.rows
    }

    pub fn has_topic(&self) -> bool {
        self.topic.is_some()
    }

    /// Numbers this batch's rows from `first_row` in errors: the rows of the input's batches
    /// before it.
    pub fn numbered_from(mut self, first_row: usize) -> Self {
        self.first_row = first_row;
        self
    }

    /// Row `i` (< `num_rows()`).
    pub fn row(&self, i: usize) -> Result<SinkRow<'_>> {
        let n = self.first_row + i;
        fn opt_bytes(c: Option<&ArrayRef>, i: usize) -> Option<&[u8]> {
            match c {
                Some(a) if a.data_type() != &DataType::Null => bytes_at(a.as_ref(), i),
                _ => None,
            }
        }
        let partition = match &self.partition {
            Some(a) if !a.is_null(i) => Some(match a.data_type() {
                DataType::Int32 => a.as_primitive::<Int32Type>().value(i),
                DataType::Int64 => {
                    let p = a.as_primitive::<Int64Type>().value(i);
                    i32::try_from(p).map_err(|_| {
                        Error::InvalidArgument(format!("partition {p} in row {n} is out of range"))
                    })?
                }
                _ => unreachable!("checked by SinkColumns::new"),
            }),
            _ => None,
        };
        let timestamp = match &self.timestamp {
            Some(a) if !a.is_null(i) => Some(match a.data_type() {
                DataType::Int64 => a.as_primitive::<Int64Type>().value(i),
                DataType::Timestamp(TimeUnit::Second, _) => {
                    let s = a.as_primitive::<TimestampSecondType>().value(i);
                    s.checked_mul(1000).ok_or_else(|| {
                        Error::InvalidArgument(format!(
                            "row {n} has timestamp {s} s, past what Kafka's millisecond \
                             timestamps hold"
                        ))
                    })?
                }
                DataType::Timestamp(TimeUnit::Millisecond, _) => {
                    a.as_primitive::<TimestampMillisecondType>().value(i)
                }
                DataType::Timestamp(TimeUnit::Microsecond, _) => a
                    .as_primitive::<TimestampMicrosecondType>()
                    .value(i)
                    .div_euclid(1000),
                DataType::Timestamp(TimeUnit::Nanosecond, _) => a
                    .as_primitive::<TimestampNanosecondType>()
                    .value(i)
                    .div_euclid(1_000_000),
                _ => unreachable!("checked by SinkColumns::new"),
            }),
            _ => None,
        };
        if let Some(t) = timestamp.filter(|t| *t < 0) {
            // Kafka's ProducerRecord, through which Spark's Kafka sink writes every row.
            return Err(Error::InvalidArgument(format!(
                "row {n} has timestamp {t}: a timestamp must be non-negative or null, as \
                 Kafka's producer requires"
            )));
        }
        let mut headers = Vec::new();
        if let Some(h) = &self.headers {
            if !h.is_null(i) {
                // Entries are read from the column's child array, so they borrow from the column.
                let (child, range) = match h.data_type() {
                    DataType::List(_) => {
                        let l = h.as_list::<i32>();
                        let o = l.value_offsets();
                        (l.values(), o[i] as usize..o[i + 1] as usize)
                    }
                    _ => {
                        let l = h.as_list::<i64>();
                        let o = l.value_offsets();
                        (l.values(), o[i] as usize..o[i + 1] as usize)
                    }
                };
                let fields = child.as_struct();
                let (keys, values) = (fields.column(0), fields.column(1));
                for (k, j) in range.enumerate() {
                    // Spark's Kafka sink has no header to make of a null one; never dropped.
                    if fields.is_null(j) {
                        return Err(Error::InvalidArgument(format!(
                            "row {n} has a null header (its headers' entry {k}): a header is a \
                             struct of a key and a value"
                        )));
                    }
                    let key = str_at(keys.as_ref(), j).ok_or_else(|| {
                        Error::InvalidArgument(format!("row {n} has a header with a null key"))
                    })?;
                    let value = if values.data_type() == &DataType::Null {
                        None
                    } else {
                        bytes_at(values.as_ref(), j)
                    };
                    headers.push((key, value));
                }
            }
        }
        Ok(SinkRow {
            key: opt_bytes(self.key.as_ref(), i),
            value: opt_bytes(Some(&self.value), i),
            headers,
            timestamp,
            topic: match &self.topic {
                Some(a) if a.data_type() != &DataType::Null => str_at(a.as_ref(), i),
                _ => None,
            },
            partition,
        })
    }
}

/// Producer settings for turning sink rows into Kafka batches.
#[derive(Debug, Clone, Copy)]
pub struct SinkBatchOptions {
    pub compression: Compression,
    /// A batch is closed once its uncompressed size reaches this (Kafka's `batch.size` idea,
    /// kept under the default `max.message.bytes`).
    pub batch_bytes: usize,
}

impl Default for SinkBatchOptions {
    fn default() -> Self {
        SinkBatchOptions {
            compression: Compression::None,
            batch_bytes: DEFAULT_SINK_BATCH_BYTES,
        }
    }
}

/// Well under Kafka's default `max.message.bytes` (1 MiB + 12) so a broker takes every batch.
pub const DEFAULT_SINK_BATCH_BYTES: usize = 512 * 1024;

fn append_row(builder: &mut BatchBuilder, row: &SinkRow<'_>, now: i64) -> Result<()> {
    builder.append(
        row.timestamp.unwrap_or(now),
        row.key,
        row.value,
        &row.headers,
    )
}

/// Encodes every row of `columns` (a single partition's) as v2 batches back to back, offsets
/// relative, ready for `Log::append_as_leader`.
pub fn encode_sink_rows(
    columns: &SinkColumns,
    options: SinkBatchOptions,
    now: i64,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut builder = BatchBuilder::new(BatchOptions {
        compression: options.compression,
        ..Default::default()
    });
    for i in 0..columns.num_rows() {
        append_row(&mut builder, &columns.row(i)?, now)?;
        if builder.estimated_size() >= options.batch_bytes {
            let full = std::mem::replace(
                &mut builder,
                BatchBuilder::new(BatchOptions {
                    compression: options.compression,
                    ..Default::default()
                }),
            );
            out.extend_from_slice(&full.build()?);
        }
    }
    if !builder.is_empty() {
        out.extend_from_slice(&builder.build()?);
    }
    Ok(out)
}

/// Where each sink row goes: the `topic` option over the column, the `partition` column, else
/// Kafka's built-in partitioner (murmur2 of the key, sticky for null keys) over the topic's
/// partition count (the data dir's, or `new_topic_partitions` for a topic it does not have yet).
pub struct PartitionRouter {
    topic_option: Option<String>,
    counts: BTreeMap<String, i32>,
    new_topic_partitions: i32,
    sticky: HashMap<String, StickyPartitioner>,
}

impl PartitionRouter {
    /// Whether the write names its topic by option (a `topic` column is then not read).
    pub fn has_topic_option(&self) -> bool {
        self.topic_option.is_some()
    }

    pub fn new(
        topic_option: Option<String>,
        counts: BTreeMap<String, i32>,
        new_topic_partitions: i32,
    ) -> Result<Self> {
        if let Some(t) = &topic_option {
            validate_topic_name(t)?;
        }
        if new_topic_partitions < 1 {
            return Err(Error::InvalidArgument(format!(
                "a new topic needs at least one partition, not {new_topic_partitions}"
            )));
        }
        Ok(PartitionRouter {
            topic_option,
            counts,
            new_topic_partitions,
            sticky: HashMap::new(),
        })
    }

    /// Partition count a topic has or will be created with.
    pub fn partition_count(&self, topic: &str) -> i32 {
        self.counts
            .get(topic)
            .copied()
            .unwrap_or(self.new_topic_partitions)
    }

    pub fn route(&mut self, row: &SinkRow<'_>, row_index: usize) -> Result<(String, i32)> {
        let topic = match (&self.topic_option, row.topic) {
            (Some(t), _) => t.clone(),
            (None, Some(t)) => {
                if !self.counts.contains_key(t) {
                    validate_topic_name(t)?;
                }
                t.to_string()
            }
            (None, None) => {
                return Err(Error::InvalidArgument(format!(
                    "row {row_index} has no topic: give the 'topic' option or a 'topic' column"
                )))
            }
        };
        let count = self.partition_count(&topic);
        let partition = match (row.partition, row.key) {
            (Some(p), _) if p < 0 || p >= count => {
                return Err(Error::InvalidArgument(format!(
                    "row {row_index} asks for partition {p} of topic '{topic}', which has {count}"
                )))
            }
            (Some(p), _) => p,
            (None, Some(key)) => partition_for_key(key, count),
            (None, None) => {
                let sticky = self
                    .sticky
                    .entry(topic.clone())
                    .or_insert_with(|| StickyPartitioner::new(count, DEFAULT_BATCH_SIZE));
                let partition = sticky.partition();
                // Spark's producer sends full batches while a task streams rows: each
                // batch.size worth of bytes completes one, so the switch is never held back.
                sticky.update(estimated_record_bytes(None, row.value, &row.headers), true);
                partition
            }
        };
        Ok((topic, partition))
    }
}

/// Writes routed rows as v2 batches into one staging file per topic-partition under `dir`, so
/// a task's output can be appended later by the log's one writer (`datadir::commit_staged`).
/// A stager dropped before [`BatchStager::finish`] (its task failed) removes its files.
pub struct BatchStager {
    dir: PathBuf,
    prefix: String,
    options: SinkBatchOptions,
    /// Where the topics' configs are read from (their `max.message.bytes`).
    data_dir: Option<PathBuf>,
    max_message_bytes: BTreeMap<String, usize>,
    open: BTreeMap<(String, i32), (BatchBuilder, std::fs::File, PathBuf)>,
    finished: bool,
}

impl BatchStager {
    /// Files are named `<topic>-<partition>.<prefix>.batches` (the prefix tells tasks apart),
    /// in `dir`, which must exist: the job's driver makes it, and removes it when the job
    /// aborts, so a task still running then fails instead of leaving files behind. Batches
    /// stay within their topic's `max.message.bytes` (its configs in `data_dir`).
    pub fn new(
        dir: &Path,
        prefix: &str,
        options: SinkBatchOptions,
        data_dir: Option<&Path>,
    ) -> Result<Self> {
        if !dir.is_dir() {
            return Err(Error::io(
                dir,
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "the write's staging folder is gone (its job was aborted)",
                ),
            ));
        }
        Ok(BatchStager {
            dir: dir.to_path_buf(),
            prefix: prefix.to_string(),
            options,
            data_dir: data_dir.map(Path::to_path_buf),
            max_message_bytes: BTreeMap::new(),
            open: BTreeMap::new(),
            finished: false,
        })
    }

    /// The topic's `max.message.bytes` (its configs in the data dir; the default for a topic
    /// the write creates).
    fn max_message_bytes(&mut self, topic: &str) -> Result<usize> {
        if let Some(&limit) = self.max_message_bytes.get(topic) {
            return Ok(limit);
        }
        let limit = match &self.data_dir {
            Some(data_dir) if data_dir.is_dir() => {
                crate::datadir::topic_log_config(data_dir, topic)?.max_message_bytes
            }
            _ => crate::config::LogConfig::default().max_message_bytes,
        };
        self.max_message_bytes.insert(topic.to_owned(), limit);
        Ok(limit)
    }

    fn new_builder(&self) -> BatchBuilder {
        BatchBuilder::new(BatchOptions {
            compression: self.options.compression,
            ..Default::default()
        })
    }

    pub fn add(
        &mut self,
        topic: String,
        partition: i32,
        row: &SinkRow<'_>,
        now: i64,
    ) -> Result<()> {
        let limit = self.max_message_bytes(&topic)?;
        let key = (topic, partition);
        if !self.open.contains_key(&key) {
            let path = self
                .dir
                .join(format!("{}-{}.{}.batches", key.0, key.1, self.prefix));
            let file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
            let builder = self.new_builder();
            self.open.insert(key.clone(), (builder, file, path));
        }
        let compression = self.options.compression;
        let fresh = || {
            BatchBuilder::new(BatchOptions {
                compression,
                ..Default::default()
            })
        };
        let (builder, file, path) = self.open.get_mut(&key).expect("inserted above");
        // A batch the topic's max.message.bytes would refuse is closed before the record that
        // would take it there, as Kafka's producer splits a batch the broker refused as too
        // large: a `kafka.batch.size` over the limit then still writes (a record too large on
        // its own fails at the commit, as Kafka's producer fails it). The estimate is of
        // uncompressed bytes, so compressed batches stay below the limit too.
        let record_bytes = estimated_record_bytes(row.key, row.value, &row.headers);
        if !builder.is_empty() && builder.estimated_size() + record_bytes + 64 > limit {
            let full = std::mem::replace(builder, fresh());
            file.write_all(&full.build()?)
                .map_err(|e| Error::io(&*path, e))?;
        }
        append_row(builder, row, now)?;
        if builder.estimated_size() >= self.options.batch_bytes {
            let full = std::mem::replace(builder, fresh());
            file.write_all(&full.build()?)
                .map_err(|e| Error::io(&*path, e))?;
        }
        Ok(())
    }

    /// Writes what is left, syncs, and lists the staged files.
    pub fn finish(mut self) -> Result<Vec<(String, i32, PathBuf)>> {
        let mut out = Vec::new();
        for ((topic, partition), (builder, file, path)) in &mut self.open {
            if !builder.is_empty() {
                let last = std::mem::replace(builder, BatchBuilder::new(BatchOptions::default()));
                file.write_all(&last.build()?)
                    .map_err(|e| Error::io(&*path, e))?;
            }
            file.sync_data().map_err(|e| Error::io(&*path, e))?;
            out.push((topic.clone(), *partition, path.clone()));
        }
        self.finished = true;
        Ok(out)
    }
}

impl Drop for BatchStager {
    fn drop(&mut self) {
        if !self.finished {
            for (_, _, path) in self.open.values() {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::LogOptions;
    use arrow_array::{BinaryArray, Int64Array, ListArray, StringArray, StructArray};

    type TestRecord<'a> = (
        Option<&'a [u8]>,
        Option<&'a [u8]>,
        Vec<(&'a str, Option<&'a [u8]>)>,
    );

    fn log_with(records: &[TestRecord<'_>]) -> (tempfile::TempDir, Arc<Log>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("orders-3");
        let log = crate::testutil::create_log(&path);
        for (key, value, headers) in records {
            let mut b = BatchBuilder::new(BatchOptions::default());
            b.append(1_700_000_000_123, *key, *value, headers).unwrap();
            log.append_as_leader(&b.build().unwrap(), 0).unwrap();
        }
        (dir, Arc::new(log))
    }

    #[test]
    fn a_timestamp_past_microseconds_fails_the_read_instead_of_changing() {
        // Kafka takes any long once message.timestamp.after.max.ms allows it; Spark's source
        // fails converting one past i64 microseconds, and so does this (no clamped value).
        let dir = tempfile::tempdir().unwrap();
        let mut config = crate::config::LogConfig::default();
        config
            .set("message.timestamp.after.max.ms", &i64::MAX.to_string())
            .unwrap();
        let log = Log::open(
            dir.path().join("t-0"),
            LogOptions {
                read_only: false,
                create: true,
                config,
                ..LogOptions::default()
            },
        )
        .unwrap();
        for ts in [1_700_000_000_000, i64::MAX / 1000 + 1] {
            let mut b = BatchBuilder::new(BatchOptions::default());
            b.append(ts, None, Some(b"v"), &[]).unwrap();
            log.append_as_leader(&b.build().unwrap(), 0).unwrap();
        }
        let log = Arc::new(log);
        for zero_copy in [false, true] {
            let err = whole_log_reader(&log, 10, zero_copy)
                .collect::<std::result::Result<Vec<_>, _>>()
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("offset 1 has timestamp 9223372036854776 ms"),
                "{err}"
            );
        }
        let first = LogArrowReader::new(log, None, Some(1), FetchIsolation::LogEnd, false, 10)
            .unwrap()
            .next_batch()
            .unwrap()
            .unwrap();
        assert_eq!(first.num_rows(), 1);
    }

    #[test]
    fn rows_follow_sparks_kafka_source() {
        let (_d, log) = log_with(&[
            (Some(b"k0"), Some(b"v0"), vec![]),
            (None, None, vec![("h", Some(b"1")), ("n", None)]),
        ]);
        let mut reader =
            LogArrowReader::new(log, None, None, FetchIsolation::HighWatermark, true, 10).unwrap();
        let batch = reader.next_batch().unwrap().unwrap();
        assert!(reader.next_batch().unwrap().is_none());
        assert_eq!(batch.schema(), kafka_source_schema(true));
        assert_eq!(batch.num_rows(), 2);
        let key = batch
            .column(0)
            .as_any()
            .downcast_ref::<BinaryArray>()
            .unwrap();
        assert_eq!(key.value(0), b"k0");
        assert!(key.is_null(1));
        let topic = batch
            .column(2)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(topic.value(1), "orders");
        assert_eq!(batch.column(3).as_primitive::<Int32Type>().value(0), 3);
        let offsets = batch
            .column(4)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(offsets.values(), &[0, 1]);
        assert_eq!(
            batch
                .column(5)
                .as_primitive::<TimestampMicrosecondType>()
                .value(0),
            1_700_000_000_123_000
        );
        assert_eq!(batch.column(6).as_primitive::<Int32Type>().value(0), 0);
        let headers = batch
            .column(7)
            .as_any()
            .downcast_ref::<ListArray>()
            .unwrap();
        assert!(headers.is_null(0), "no headers is null, as Spark gives");
        let entries = headers.value(1);
        let entries = entries.as_any().downcast_ref::<StructArray>().unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries.column(0).as_string::<i32>().value(1), "n");
        assert!(entries.column(1).is_null(1));
    }

    #[test]
    fn batches_stream_in_bounded_chunks_and_resume_where_they_stopped() {
        let recs: Vec<_> = (0..25).map(|_| (None, Some(&b"x"[..]), vec![])).collect();
        let (_d, log) = log_with(&recs);
        let reader = LogArrowReader::new(
            log,
            Some(3),
            Some(20),
            FetchIsolation::HighWatermark,
            false,
            4,
        )
        .unwrap();
        let batches: Vec<_> = reader.map(|b| b.unwrap()).collect();
        assert!(batches.iter().all(|b| b.num_rows() <= 4));
        let offsets: Vec<i64> = batches
            .iter()
            .flat_map(|b| b.column(4).as_primitive::<Int64Type>().values().to_vec())
            .collect();
        assert_eq!(offsets, (3..20).collect::<Vec<_>>());
    }

    #[test]
    fn batches_are_cut_by_bytes_without_splitting_a_kafka_batch() {
        let dir = tempfile::tempdir().unwrap();
        let log = crate::testutil::create_log(&dir.path().join("big-0"));
        // 10 Kafka batches of 3 records of 1000 bytes (a little over 3 KB of payload each).
        let value = vec![b'v'; 1000];
        for batch in 0..10 {
            let mut b = BatchBuilder::new(BatchOptions::default());
            for i in 0..3 {
                let key = format!("k{}", batch * 3 + i);
                b.append(1_700_000_000_000, Some(key.as_bytes()), Some(&value), &[])
                    .unwrap();
            }
            log.append_as_leader(&b.build().unwrap(), 0).unwrap();
        }
        let reader = LogArrowReader::new(
            Arc::new(log),
            Some(1),
            None,
            FetchIsolation::HighWatermark,
            false,
            DEFAULT_BATCH_ROWS,
        )
        .unwrap()
        .batch_bytes(7_000)
        .unwrap();
        let batches: Vec<_> = reader.map(|b| b.unwrap()).collect();
        // Two Kafka batches (about 6.1 KB) fit under 7,000 bytes, a third does not; the first
        // Arrow batch starts at offset 1, inside the first Kafka batch.
        let rows: Vec<usize> = batches.iter().map(|b| b.num_rows()).collect();
        assert_eq!(rows, vec![5, 6, 6, 6, 6]);
        let offsets: Vec<i64> = batches
            .iter()
            .flat_map(|b| b.column(4).as_primitive::<Int64Type>().values().to_vec())
            .collect();
        assert_eq!(offsets, (1..30).collect::<Vec<_>>());
        let values: usize = batches
            .iter()
            .map(|b| b.column(1).as_binary::<i32>().value_data().len())
            .sum();
        assert_eq!(values, 29 * 1000);
    }

    /// Zero-copy columns hold exactly the copying reader's bytes, and Arrow's full validation
    /// accepts every view (they are built without Arrow's checks): inline values, nulls, values
    /// pointing into read windows, memory maps and inflated compressed batches.
    #[test]
    fn zero_copy_views_are_valid_arrow_and_equal_the_copies() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(crate::testutil::create_log(&dir.path().join("views-0")));
        let big = vec![7u8; 300 << 10];
        // Twelve compressed batches first (over 2 MiB of values), then both kinds in turn
        // (windows and inflated buffers interleaved).
        for b in 0..30usize {
            let compression = if b < 12 || b % 3 == 1 {
                Compression::Lz4
            } else {
                Compression::None
            };
            let mut batch = BatchBuilder::new(BatchOptions {
                compression,
                ..BatchOptions::default()
            });
            for i in 0..20usize {
                let value: Option<&[u8]> = match i % 4 {
                    0 => None,
                    1 => Some(&big[..5]),
                    2 => Some(&big[..(i + b) << 10]),
                    _ => Some(&big[..((b % 3 + 1) * 30) << 10]),
                };
                let key = format!("key-{b}-{i}");
                batch
                    .append(1_700_000_000_000, Some(key.as_bytes()), value, &[])
                    .unwrap();
            }
            log.append_as_leader(&batch.build().unwrap(), 0).unwrap();
        }
        // The writable log reads through windows; read-only, with no writer left, through
        // memory maps of its segments (views into the mapping).
        let path = log.dir().to_path_buf();
        log.close().unwrap();
        drop(log);
        let writer = Arc::new(
            Log::open(
                &path,
                LogOptions {
                    read_only: false,
                    ..Default::default()
                },
            )
            .unwrap(),
        );
        let reader = Arc::new(Log::open(&path, LogOptions::default()).unwrap());
        let mapped = |log: &Arc<Log>| whole_log_reader(log, 9, true).maps_files();
        assert!(!mapped(&writer), "a log being written is not mapped");
        assert!(
            !mapped(&reader),
            "nor read-only while a writer holds the folder"
        );
        check_views_equal_copies(&writer);
        writer.close().unwrap();
        drop(writer);
        assert!(mapped(&reader), "read-only with no writer: mapped");
        check_views_equal_copies(&reader);
    }

    /// A read-only log no writer holds is read through memory maps with the CRC checker thread,
    /// copying or not, but only by readers whose Arrow batches take at least
    /// `CHECK_AHEAD_MIN_BYTES` (not a consumer's poll of 500 records); all read the same rows.
    #[test]
    fn crc_checker_thread_only_for_large_arrow_batches() {
        use crate::record::file_records::CHECKERS_STARTED;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("orders-0");
        let log = crate::testutil::create_log(&path);
        let value = vec![b'v'; 100];
        for _ in 0..40 {
            let mut batch = BatchBuilder::new(BatchOptions::default());
            for i in 0..500 {
                let key = format!("key-{i}");
                batch
                    .append(1_700_000_000_000, Some(key.as_bytes()), Some(&value), &[])
                    .unwrap();
            }
            log.append_as_leader(&batch.build().unwrap(), 0).unwrap();
        }
        log.close().unwrap();
        drop(log);
        let log = Arc::new(Log::open(&path, LogOptions::default()).unwrap());
        let checkers = || CHECKERS_STARTED.with(|n| n.get());
        let read = |rows: usize, zero_copy: bool| {
            let before = checkers();
            let reader = whole_log_reader(&log, rows, zero_copy);
            assert!(reader.maps_files());
            let total: usize = reader.map(|b| b.unwrap().num_rows()).sum();
            assert_eq!(total, 20_000);
            checkers() - before
        };
        for zero_copy in [false, true] {
            assert_eq!(read(500, zero_copy), 0, "zero_copy={zero_copy}");
            let expected = usize::from(std::thread::available_parallelism().unwrap().get() > 1);
            assert_eq!(
                read(DEFAULT_BATCH_ROWS, zero_copy),
                expected,
                "zero_copy={zero_copy}"
            );
        }
    }

    #[test]
    fn inline_views_hold_length_then_bytes_zero_padded() {
        let bytes: Vec<u8> = (1..=12).map(|b| b * 17).collect();
        for n in 0..=12 {
            let mut expected = [0u8; 16];
            expected[..4].copy_from_slice(&(n as u32).to_le_bytes());
            expected[4..4 + n].copy_from_slice(&bytes[..n]);
            assert_eq!(
                ViewedBytes::inline_view(&bytes[..n]),
                u128::from_le_bytes(expected),
                "{n} bytes"
            );
        }
    }

    /// Records outside any window (handed in as a list) are copied into blocks of the column's
    /// own, a new block once one is full: valid views, the same bytes.
    #[test]
    fn zero_copy_columns_copy_values_outside_windows_into_blocks() {
        let big = vec![3u8; 300 << 10];
        let records: Vec<Record<'_>> = (0..20usize)
            .map(|i| Record {
                offset: i as i64,
                timestamp: 0,
                timestamp_type: crate::record::record::TimestampType::CreateTime,
                key: (i % 5 != 0).then_some(&big[..i]),
                value: Some(&big[..(i * 15) << 10]),
                headers: Vec::new(),
            })
            .collect();
        let mut builder = KafkaRecordBatchBuilder::new_with(None, None, false, true);
        builder.append_batch(&records).unwrap();
        let batch = builder.finish();
        for (column, expected) in [
            (1, records.iter().map(|r| r.value).collect::<Vec<_>>()),
            (0, records.iter().map(|r| r.key).collect()),
        ] {
            let views = batch.column(column);
            views.to_data().validate_full().unwrap();
            let views = views.as_binary_view();
            assert!(
                column == 0 || views.data_buffers().len() > 1,
                "several copy blocks"
            );
            let got: Vec<Option<&[u8]>> = views.iter().collect();
            assert_eq!(got, expected);
        }
    }

    fn whole_log_reader(log: &Arc<Log>, rows: usize, zero_copy: bool) -> LogArrowReader {
        LogArrowReader::new(
            log.clone(),
            None,
            None,
            FetchIsolation::HighWatermark,
            false,
            rows,
        )
        .unwrap()
        .zero_copy(zero_copy)
    }

    fn check_views_equal_copies(log: &Arc<Log>) {
        // 97 rows: many Arrow batches; 100,000: one, over every window.
        for rows in [97, 100_000] {
            let read = |zero_copy: bool| -> Vec<RecordBatch> {
                whole_log_reader(log, rows, zero_copy)
                    .collect::<std::result::Result<_, _>>()
                    .unwrap()
            };
            let (copied, viewed) = (read(false), read(true));
            assert_eq!(copied.len(), viewed.len());
            for (c, v) in copied.iter().zip(&viewed) {
                for name in ["key", "value"] {
                    let view = v.column_by_name(name).unwrap();
                    view.to_data().validate_full().unwrap();
                    let view = view.as_binary_view();
                    let copy = c.column_by_name(name).unwrap().as_binary::<i32>();
                    assert_eq!(view.len(), copy.len());
                    for i in 0..copy.len() {
                        assert_eq!(view.is_null(i), copy.is_null(i), "{name} {i}");
                        assert_eq!(view.value(i), copy.value(i), "{name} {i}");
                    }
                }
            }
            assert_eq!(copied.iter().map(|b| b.num_rows()).sum::<usize>(), 600);
        }
    }

    #[test]
    fn start_outside_the_log_is_out_of_range() {
        let (_d, log) = log_with(&[(None, Some(b"v"), vec![])]);
        let err = LogArrowReader::new(log, Some(5), None, FetchIsolation::HighWatermark, false, 4)
            .err()
            .unwrap();
        assert!(
            matches!(err, Error::OffsetOutOfRange { offset: 5, .. }),
            "{err}"
        );
    }

    #[test]
    fn records_in_memory_read_as_the_log_reads_them() {
        // Mixed codecs, over 2 MiB: the bytes of the segments decode to the log reader's rows,
        // copied and as views, cut after the Kafka batch that reaches the row count.
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(crate::testutil::create_log(&dir.path().join("mem-0")));
        let value = vec![3u8; 40 << 10];
        for b in 0..80usize {
            let compression = [Compression::None, Compression::Zstd, Compression::Lz4][b % 3];
            let mut batch = BatchBuilder::new(BatchOptions {
                compression,
                ..BatchOptions::default()
            });
            for i in 0..(b % 5 + 1) {
                let key = format!("k{b}-{i}");
                let v = (i % 2 == 0).then(|| &value[..(b * 37 + i) % value.len()]);
                batch
                    .append(1_700_000_000_000, Some(key.as_bytes()), v, &[])
                    .unwrap();
            }
            log.append_as_leader(&batch.build().unwrap(), 0).unwrap();
        }
        let mut bytes = Vec::new();
        for base in log.segment_base_offsets() {
            bytes.extend(std::fs::read(log.dir().join(format!("{base:020}.log"))).unwrap());
        }
        let data = Buffer::from_vec(bytes);
        for zero_copy in [false, true] {
            let expected: Vec<RecordBatch> = whole_log_reader(&log, 10, zero_copy)
                .map(|b| b.unwrap())
                .collect();
            let got = records_to_arrow(
                &data,
                Some("mem".into()),
                Some(0),
                false,
                zero_copy,
                10,
                crate::record::batch::DEFAULT_MAX_DECOMPRESSED_BYTES,
            )
            .unwrap();
            assert!(got.len() > 10);
            assert_eq!(got, expected);
        }
    }

    #[test]
    fn sink_columns_reject_wrong_types_by_name() {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "value",
            DataType::Int64,
            true,
        )]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1]))]).unwrap();
        let err = SinkColumns::new(&batch).err().unwrap().to_string();
        assert!(
            err.contains("'value'") && err.contains("has type int64;"),
            "{err}"
        );
    }

    /// A map headers column is named as Spark names the type (a user tester saw Arrow's debug
    /// form of every nested field).
    #[test]
    fn a_map_headers_column_is_named_map_of_string_to_binary() {
        let mut headers =
            arrow_array::builder::MapBuilder::new(None, StringBuilder::new(), BinaryBuilder::new());
        headers.keys().append_value("k");
        headers.values().append_value(b"v");
        headers.append(true).unwrap();
        let headers = headers.finish();
        let schema = Arc::new(Schema::new(vec![
            Field::new("value", DataType::Binary, true),
            Field::new("headers", headers.data_type().clone(), true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(arrow_array::BinaryArray::from(vec![Some(&b"v"[..])])),
                Arc::new(headers),
            ],
        )
        .unwrap();
        let err = SinkColumns::new(&batch).err().unwrap().to_string();
        assert!(
            err.contains("'headers' has type map<string, binary>;"),
            "{err}"
        );
    }

    /// With the `topic` option, Spark's sink does not read a `topic` column, whatever its type
    /// (kafkalog refused an int one; a black-box tester); without it the column is checked.
    #[test]
    fn a_topic_option_leaves_the_topic_column_unread() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("value", DataType::Utf8, true),
            Field::new("topic", DataType::Int64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(arrow_array::StringArray::from(vec!["v"])),
                Arc::new(Int64Array::from(vec![5])),
            ],
        )
        .unwrap();
        assert!(!SinkColumns::for_write(&batch, true).unwrap().has_topic());
        check_sink_schema(schema.clone(), Some("t"), None).unwrap();
        let err = check_sink_schema(schema, None, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("'topic'"), "{err}");
        assert!(SinkColumns::for_write(&batch, false).is_err());
    }

    #[test]
    fn rows_without_a_key_stick_to_a_partition_for_a_batch_size_of_bytes() {
        let mut router =
            PartitionRouter::new(Some("t".into()), BTreeMap::from([("t".into(), 2)]), 1).unwrap();
        let value = [7u8; 1000];
        let row = SinkRow {
            key: None,
            value: Some(&value),
            headers: vec![],
            timestamp: None,
            topic: None,
            partition: None,
        };
        let parts: Vec<i32> = (0..1700)
            .map(|i| router.route(&row, i).unwrap().1)
            .collect();
        // 1,021 bytes counted a row: the 17th takes the partition past batch.size (16,384), and
        // the next row draws again; a draw may land on the same partition, so every run of one
        // partition is a whole number of 17-row stints (1,700 rows are 100 stints).
        let per_stint = DEFAULT_BATCH_SIZE.div_ceil(1021);
        assert_eq!(per_stint, 17);
        let mut runs: Vec<usize> = vec![];
        for (i, p) in parts.iter().enumerate() {
            match runs.last_mut() {
                Some(n) if parts[i - 1] == *p => *n += 1,
                _ => runs.push(1),
            }
        }
        assert!(runs.iter().all(|n| n % per_stint == 0), "{runs:?}");
        // 100 draws over 2 partitions: the same one again about half the time.
        assert!(
            runs.len() > 25 && runs.len() < 75,
            "{} runs of 100 stints",
            runs.len()
        );
        let keyed = SinkRow {
            key: Some(b"k"),
            ..row
        };
        assert_eq!(
            router.route(&keyed, 0).unwrap().1,
            crate::producer::partition_for_key(b"k", 2)
        );
    }
}
