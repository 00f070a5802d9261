// Kafka's own Java code on the files benches/run_all.py builds, measured with JMH (warmed up,
// one fork): the same work kafkalog's benches/kafka_peer.rs does in Rust. `main` with
// "checksum <log>" prints the record count and a CRC32 of every key then value (zlib's chained
// crc32, as the Python side computes it), so run_all.py can check both read the same records.
package kafkalog.bench;

import java.io.File;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.record.internal.FileLogInputStream.FileChannelRecordBatch;
import org.apache.kafka.common.record.internal.FileRecords;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.MemoryRecordsBuilder;
import org.apache.kafka.common.record.internal.MutableRecordBatch;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.storage.internals.log.OffsetIndex;
import org.apache.kafka.storage.internals.log.TimeIndex;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@State(Scope.Thread)
public class KafkaPeer {
    /** The segment (.log) to iterate; its .index/.timeindex sit beside it. */
    @Param({""})
    public String log;
    /** Lookups per benchmark call, the same sequence as kafka_peer.rs draws. */
    public static final int LOOKUPS = 1024;
    /** Records per appended batch and value size, as kafka_peer.rs builds them. */
    public static final int APPEND_RECORDS = 500;
    public static final int APPEND_VALUE_BYTES = 100;

    FileRecords records;
    MemoryRecords memoryRecords;
    OffsetIndex offsetIndex;
    TimeIndex timeIndex;
    long[] offsetTargets;
    long[] timeTargets;
    byte[][] keys;
    byte[] value;
    File appendFile;
    FileRecords appendRecords;
    ByteBuffer appendBuffer;

    /** Knuth's MMIX LCG: the same targets in Java and Rust without sharing a file. */
    static long[] targets(long lo, long hi, int n, long seed) {
        long[] out = new long[n];
        long x = seed;
        for (int i = 0; i < n; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            out[i] = lo + Long.remainderUnsigned(x >>> 33, hi - lo + 1);
        }
        return out;
    }

    static String stem(String log) {
        return log.substring(0, log.length() - ".log".length());
    }

    static long baseOffset(String log) {
        return Long.parseLong(new File(stem(log)).getName());
    }

    @Setup(Level.Trial)
    public void setup() throws Exception {
        records = FileRecords.open(new File(log), false);
        memoryRecords = MemoryRecords.readableRecords(ByteBuffer.wrap(Files.readAllBytes(Path.of(log))));
        long base = baseOffset(log);
        offsetIndex = new OffsetIndex(new File(stem(log) + ".index"), base, 10 << 20, false);
        timeIndex = new TimeIndex(new File(stem(log) + ".timeindex"), base, 10 << 20, false);
        long first = Long.MAX_VALUE, last = -1, minTs = Long.MAX_VALUE, maxTs = Long.MIN_VALUE;
        for (FileChannelRecordBatch b : records.batches()) {
            first = Math.min(first, b.baseOffset());
            last = Math.max(last, b.lastOffset());
            minTs = Math.min(minTs, b.maxTimestamp());
            maxTs = Math.max(maxTs, b.maxTimestamp());
        }
        offsetTargets = targets(first, last, LOOKUPS, 42);
        timeTargets = targets(minTs, maxTs, LOOKUPS, 43);
        keys = new byte[APPEND_RECORDS][];
        for (int i = 0; i < APPEND_RECORDS; i++) keys[i] = String.format("key-%08d", i).getBytes();
        value = new byte[APPEND_VALUE_BYTES];
        for (int i = 0; i < value.length; i++) value[i] = (byte) ('a' + i % 26);
        appendFile = File.createTempFile("kafka-peer-append", ".log");
        appendRecords = FileRecords.open(appendFile);
        appendBuffer = ByteBuffer.allocate(1 << 20);
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        records.close();
        offsetIndex.close();
        timeIndex.close();
        appendRecords.close();
        appendFile.delete();
    }

    /** Deep iteration: every record of every batch, its key, value and headers touched. */
    @Benchmark
    public long deepIteration() {
        long sum = 0;
        for (FileChannelRecordBatch batch : records.batches()) {
            for (Record r : batch) {
                ByteBuffer k = r.key();
                ByteBuffer v = r.value();
                Header[] h = r.headers();
                sum += (k == null ? 0 : k.remaining()) + (v == null ? 0 : v.remaining()) + h.length;
            }
        }
        return sum;
    }

    /**
     * Deep iteration as Kafka's consumer runs it by default ({@code check.crcs=true}: the fetcher
     * calls {@code ensureValid()} on each batch before reading its records), the same work as
     * kafkalog's, which checks every batch's CRC32C.
     */
    @Benchmark
    public long deepIterationCheckingCrcs() {
        long sum = 0;
        for (FileChannelRecordBatch batch : records.batches()) {
            batch.ensureValid();
            for (Record r : batch) {
                ByteBuffer k = r.key();
                ByteBuffer v = r.value();
                Header[] h = r.headers();
                sum += (k == null ? 0 : k.remaining()) + (v == null ? 0 : v.remaining()) + h.length;
            }
        }
        return sum;
    }

    /**
     * Deep iteration of the segment's bytes already in memory, CRC checked per batch: what Kafka's
     * consumer does with a fetch response ({@code MemoryRecords}), without the file read.
     */
    @Benchmark
    public long memoryDeepIterationCheckingCrcs() {
        long sum = 0;
        for (MutableRecordBatch batch : memoryRecords.batches()) {
            batch.ensureValid();
            for (Record r : batch) {
                ByteBuffer k = r.key();
                ByteBuffer v = r.value();
                Header[] h = r.headers();
                sum += (k == null ? 0 : k.remaining()) + (v == null ? 0 : v.remaining()) + h.length;
            }
        }
        return sum;
    }

    @Benchmark
    public long offsetIndexLookup() {
        long sum = 0;
        for (long t : offsetTargets) sum += offsetIndex.lookup(t).position();
        return sum;
    }

    @Benchmark
    public long timeIndexLookup() {
        long sum = 0;
        for (long t : timeTargets) sum += timeIndex.lookup(t).offset();
        return sum;
    }

    /** One batch built with MemoryRecordsBuilder and appended with FileRecords.append. */
    @Benchmark
    public int buildAndAppend() throws Exception {
        if (appendRecords.sizeInBytes() > (64 << 20)) appendRecords.truncateTo(0);
        appendBuffer.clear();
        MemoryRecordsBuilder b = MemoryRecords.builder(appendBuffer, Compression.NONE, TimestampType.CREATE_TIME, 0L);
        for (int i = 0; i < APPEND_RECORDS; i++) b.append(1_700_000_000_000L + i, keys[i], value);
        return appendRecords.append(b.build());
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2 || !args[0].equals("checksum")) {
            System.err.println("usage: KafkaPeer checksum <segment.log> (the benchmarks run through org.openjdk.jmh.Main)");
            System.exit(2);
        }
        CRC32 crc = new CRC32();
        long n = 0;
        try (FileRecords fr = FileRecords.open(new File(args[1]), false)) {
            for (FileChannelRecordBatch batch : fr.batches()) {
                for (Record r : batch) {
                    if (r.key() != null) crc.update(r.key());
                    if (r.value() != null) crc.update(r.value());
                    n++;
                }
            }
        }
        System.out.println("CHECKSUM " + n + " " + crc.getValue());
    }
}
