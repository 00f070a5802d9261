// Kafka's own assignors for kafkalog's tests. One case per stdin line:
//   "<range|roundrobin> <member>:<t1>,<t2>;<member>:<t1> <topic>=<partitions>,<topic>=<partitions>"
// answers one line "<member>:<topic>/<partition>,...;<member>:..." (members in id order).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

public class AssignorReferee {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StringBuilder out = new StringBuilder();
        Node node = new Node(0, "localhost", 9092);
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            ConsumerPartitionAssignor assignor = f[0].equals("range") ? new RangeAssignor() : new RoundRobinAssignor();
            Map<String, ConsumerPartitionAssignor.Subscription> subs = new HashMap<>();
            for (String m : f[1].split(";")) {
                String[] mt = m.split(":", -1);
                List<String> topics = mt[1].isEmpty() ? new ArrayList<>() : Arrays.asList(mt[1].split(","));
                subs.put(mt[0], new ConsumerPartitionAssignor.Subscription(topics));
            }
            List<PartitionInfo> parts = new ArrayList<>();
            if (f.length > 2) {
                for (String tn : f[2].split(",")) {
                    String[] kv = tn.split("=");
                    for (int p = 0; p < Integer.parseInt(kv[1]); p++) {
                        parts.add(new PartitionInfo(kv[0], p, node, new Node[] {node}, new Node[] {node}));
                    }
                }
            }
            Cluster cluster = new Cluster("c", Collections.singletonList(node), parts, Collections.emptySet(), Collections.emptySet());
            Map<String, ConsumerPartitionAssignor.Assignment> result =
                assignor.assign(cluster, new ConsumerPartitionAssignor.GroupSubscription(subs)).groupAssignment();
            StringBuilder l = new StringBuilder();
            for (Map.Entry<String, ConsumerPartitionAssignor.Assignment> e : new TreeMap<>(result).entrySet()) {
                if (l.length() > 0) l.append(';');
                l.append(e.getKey()).append(':');
                List<String> tps = new ArrayList<>();
                for (TopicPartition tp : e.getValue().partitions()) tps.add(tp.topic() + "/" + tp.partition());
                Collections.sort(tps);
                l.append(String.join(",", tps));
            }
            out.append(l).append('\n');
        }
        System.out.print(out);
    }
}
