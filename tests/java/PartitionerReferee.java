// Kafka's own partition choice for kafkalog's tests: reads lines on stdin, answers one line each.
//   "K <hex key> <n1,n2,...>"  ->  "<Utils.murmur2> <BuiltInPartitioner.partitionForKey(key, n)>..."
//   "R <partitions> <count>"   ->  the partitions a fresh RoundRobinPartitioner picks for <count> records
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.apache.kafka.clients.producer.RoundRobinPartitioner;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.utils.Utils;

public class PartitionerReferee {
    static byte[] hex(String s) {
        if (s.equals("-")) return new byte[0];
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StringBuilder out = new StringBuilder();
        Node node = new Node(0, "localhost", 9092);
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            if (f[0].equals("K")) {
                byte[] key = hex(f[1]);
                out.append(Utils.murmur2(key));
                for (String n : f[2].split(",")) {
                    out.append(' ').append(BuiltInPartitioner.partitionForKey(key, Integer.parseInt(n)));
                }
            } else if (f[0].equals("R")) {
                int n = Integer.parseInt(f[1]);
                int count = Integer.parseInt(f[2]);
                List<PartitionInfo> parts = new ArrayList<>();
                for (int p = 0; p < n; p++) parts.add(new PartitionInfo("t", p, node, new Node[] {node}, new Node[] {node}));
                Cluster cluster = new Cluster("c", Collections.singletonList(node), parts, Collections.emptySet(), Collections.emptySet());
                RoundRobinPartitioner rr = new RoundRobinPartitioner();
                for (int i = 0; i < count; i++) {
                    if (i > 0) out.append(' ');
                    out.append(rr.partition("t", null, null, null, null, cluster));
                }
            }
            out.append('\n');
        }
        System.out.print(out);
    }
}
