// Kafka's own assignors for kafkalog's tests. One case per stdin line:
//   "<range|roundrobin> <member>:<t1>,<t2>;<member>:<t1> <topic>=<partitions>,<topic>=<partitions>"
// answers one line "<member>:<topic>/<partition>,...;<member>:..." (members in id order).
//   "cooperative-sticky <member>:<topics>:<owned t/p,...>;... <topics>" runs Kafka's
// CooperativeStickyAssignor as a group does: the first rebalance (partitions changing owner are
// revoked, not yet given), then a second one with what each member owns after it; answers the
// second's assignment.
//   "cooperative-sticky-once ..." (same fields) answers the first rebalance alone, what
// CooperativeStickyAssignor.assign returns with partitions changing owner held back.
//   "sticky <member>:<topics>:<owned t/p,...>;... <topics>" runs Kafka's eager StickyAssignor once,
// each member's previous assignment in its subscription's user data, as its consumer sends it.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import java.util.Optional;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
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
            boolean once = f[0].equals("cooperative-sticky-once");
            boolean sticky = f[0].equals("cooperative-sticky") || once;
            boolean eagerSticky = f[0].equals("sticky");
            ConsumerPartitionAssignor assignor = sticky ? new CooperativeStickyAssignor()
                : eagerSticky ? new StickyAssignor()
                : f[0].equals("range") ? new RangeAssignor() : new RoundRobinAssignor();
            Map<String, ConsumerPartitionAssignor.Subscription> subs = new HashMap<>();
            Map<String, List<String>> topicsOf = new HashMap<>();
            for (String m : f[1].split(";")) {
                String[] mt = m.split(":", -1);
                List<String> topics = mt[1].isEmpty() ? new ArrayList<>() : Arrays.asList(mt[1].split(","));
                topicsOf.put(mt[0], topics);
                List<TopicPartition> owned = new ArrayList<>();
                if (mt.length > 2 && !mt[2].isEmpty()) {
                    for (String tp : mt[2].split(",")) {
                        int slash = tp.lastIndexOf('/');
                        owned.add(new TopicPartition(tp.substring(0, slash), Integer.parseInt(tp.substring(slash + 1))));
                    }
                }
                if (eagerSticky) {
                    // The member's own StickyAssignor encodes what it was given last time.
                    StickyAssignor memberAssignor = new StickyAssignor();
                    memberAssignor.onAssignment(new ConsumerPartitionAssignor.Assignment(owned),
                        new ConsumerGroupMetadata("g", 1, mt[0], Optional.empty()));
                    // and, as a consumer does since KIP-792, its owned partitions
                    // and generation in the subscription itself.
                    subs.put(mt[0], new ConsumerPartitionAssignor.Subscription(
                        topics, memberAssignor.subscriptionUserData(new HashSet<>(topics)), owned, 1,
                        Optional.empty()));
                    continue;
                }
                subs.put(mt[0], sticky
                    ? new ConsumerPartitionAssignor.Subscription(topics, null, owned, 1, Optional.empty())
                    : new ConsumerPartitionAssignor.Subscription(topics));
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
            if (sticky && !once) {
                // The second rebalance: members own what the first gave them.
                Map<String, ConsumerPartitionAssignor.Subscription> again = new HashMap<>();
                for (Map.Entry<String, ConsumerPartitionAssignor.Assignment> e : result.entrySet()) {
                    again.put(e.getKey(), new ConsumerPartitionAssignor.Subscription(
                        topicsOf.get(e.getKey()), null, e.getValue().partitions(), 2, Optional.empty()));
                }
                result = assignor.assign(cluster, new ConsumerPartitionAssignor.GroupSubscription(again)).groupAssignment();
            }
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
