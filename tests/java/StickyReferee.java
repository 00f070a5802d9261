// Kafka's choice of partition for records without a key (KIP-794's sticky partitioning), for
// kafkalog's tests. Kafka 4.x's classes: compiled and run against the 4.4 jars only.
//   "S <batch.size> <count> <value length>[,<value length>...]"  ->  the partitions of <count>
//   records (value lengths taken in turn), null keys, no headers, all timestamped 1000, appended to
//   Kafka's own RecordAccumulator for a topic of 1000 partitions. No sender drains it, as when
//   linger.ms has not run out, and its random draws are made 0, 1, 2, ... so every switch shows as
//   a new partition. In the package of the accumulator to reach its partitioner's draw.
package org.apache.kafka.clients.producer.internals;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.common.utils.internals.LogContext;

public class StickyReferee {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StringBuilder out = new StringBuilder();
        Node node = new Node(0, "localhost", 9092);
        List<PartitionInfo> parts = new ArrayList<>();
        for (int p = 0; p < 1000; p++) parts.add(new PartitionInfo("t", p, node, new Node[] {node}, new Node[] {node}));
        Cluster cluster = new Cluster("c", Collections.singletonList(node), parts, Collections.emptySet(), Collections.emptySet());
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            // As KafkaProducer takes batch.size (0 turns batching off).
            int batchSize = Math.max(1, Integer.parseInt(f[1]));
            int count = Integer.parseInt(f[2]);
            String[] lens = f[3].split(",");
            Metrics metrics = new Metrics();
            BufferPool pool = new BufferPool(256L << 20, batchSize, metrics, Time.SYSTEM, "producer-metrics");
            RecordAccumulator accumulator = new RecordAccumulator(new LogContext(), batchSize, Compression.NONE,
                    Integer.MAX_VALUE, 100L, 1000L, Integer.MAX_VALUE, metrics, "producer-metrics", Time.SYSTEM, null, pool) {
                @Override
                BuiltInPartitioner createBuiltInPartitioner(LogContext logContext, String topic, int stickyBatchSize,
                                                            boolean rackAware, String rack) {
                    return new BuiltInPartitioner(logContext, topic, stickyBatchSize, rackAware, rack) {
                        private int draws = 0;

                        @Override
                        int randomPartition() {
                            return draws++;
                        }
                    };
                }
            };
            int[] partition = new int[1];
            RecordAccumulator.AppendCallbacks callbacks = new RecordAccumulator.AppendCallbacks() {
                @Override
                public void setPartition(int p) {
                    partition[0] = p;
                }

                @Override
                public void onCompletion(RecordMetadata metadata, Exception exception) {
                }
            };
            for (int i = 0; i < count; i++) {
                byte[] value = new byte[Integer.parseInt(lens[i % lens.length])];
                accumulator.append("t", RecordMetadata.UNKNOWN_PARTITION, 1000L, null, value, new Header[0], callbacks,
                        1000L, 0L, cluster);
                if (i > 0) out.append(' ');
                out.append(partition[0]);
            }
            out.append('\n');
        }
        System.out.print(out);
    }
}
