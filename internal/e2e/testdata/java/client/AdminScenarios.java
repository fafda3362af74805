import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

/** Admin: topics, partitions, configs, offsets, leaders, reassignments, cluster, groups, transactions. */
class AdminScenarios {
    static void register(Map<String, StrataClient.Scenario> m) {
        m.put("admin-topics", AdminScenarios::topics);
        m.put("admin-configs", AdminScenarios::configs);
        m.put("admin-group-configs", AdminScenarios::groupConfigs);
        m.put("admin-offsets", AdminScenarios::offsets);
        m.put("admin-elect", AdminScenarios::elect);
        m.put("admin-cluster", AdminScenarios::cluster);
        m.put("admin-reassign", AdminScenarios::reassign);
        m.put("admin-groups", AdminScenarios::groups);
        m.put("admin-txn", AdminScenarios::txn);
    }

    static <T> T get(KafkaFuture<T> f) throws Exception {
        return f.get(30, TimeUnit.SECONDS);
    }

    /** The simple name of the cause of f's failure, or "ok". */
    static String errorOf(KafkaFuture<?> f) throws Exception {
        try {
            f.get(30, TimeUnit.SECONDS);
            return "ok";
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof org.apache.kafka.common.errors.ApiException)) {
                e.printStackTrace(); // a client-side failure: show where
            }
            return e.getCause().getClass().getSimpleName();
        }
    }

    static TopicDescription describe(Admin a, String topic) throws Exception {
        return get(a.describeTopics(List.of(topic)).allTopicNames()).get(topic);
    }

    static void topics(StrataClient.Ctx c) throws Exception {
        Admin a = c.admin();
        String t = c.n("adm-topic"), v = c.n("adm-validate");
        get(a.createTopics(List.of(new NewTopic(t, 2, c.rf()).configs(Map.of("retention.ms", "3600000")))).all());
        c.check("validate_only", errorOf(a.createTopics(List.of(new NewTopic(v, 1, c.rf())), new CreateTopicsOptions().validateOnly(true)).all()));
        c.check("create.again", errorOf(a.createTopics(List.of(new NewTopic(t, 2, c.rf()))).all()));
        Set<String> names = get(a.listTopics().names());
        c.check("listed", names.contains(t));
        c.check("listed.validate_only", names.contains(v));
        StrataClient.waitFor("ISR of " + t + " complete", 30, () -> {
            try {
                return describe(a, t).partitions().stream().allMatch(p -> p.leader() != null && p.isr().size() == c.rf());
            } catch (Exception e) {
                return false;
            }
        });
        TopicDescription d = describe(a, t);
        c.check("partitions", d.partitions().size());
        c.check("replicas", d.partitions().get(0).replicas().size());
        c.check("isr", d.partitions().get(0).isr().size());
        c.check("internal", d.isInternal());
        c.check("topic_id.set", d.topicId() != null && !d.topicId().toString().equals("AAAAAAAAAAAAAAAAAAAAAA"));

        get(a.createPartitions(Map.of(t, NewPartitions.increaseTo(4))).all());
        StrataClient.waitFor("4 partitions with leaders", 30, () -> {
            try {
                TopicDescription dd = describe(a, t);
                return dd.partitions().size() == 4 && dd.partitions().stream().allMatch(p -> p.leader() != null);
            } catch (Exception e) {
                return false;
            }
        });
        c.check("partitions.after", describe(a, t).partitions().size());
        c.check("partitions.decrease", errorOf(a.createPartitions(Map.of(t, NewPartitions.increaseTo(3))).all()));

        get(a.deleteTopics(List.of(t)).all());
        StrataClient.waitFor("topic gone from listTopics", 30, () -> {
            try {
                return !get(a.listTopics().names()).contains(t);
            } catch (Exception e) {
                return false;
            }
        });
        c.check("deleted.describe", errorOf(a.describeTopics(List.of(t)).allTopicNames()));
        c.check("delete.unknown", errorOf(a.deleteTopics(List.of(c.n("no-such-topic"))).all()));
    }

    static String entry(Admin a, ConfigResource r, String name) throws Exception {
        Config cfg = get(a.describeConfigs(List.of(r)).all()).get(r);
        ConfigEntry e = cfg.get(name);
        return e == null ? "absent" : e.value() + "/" + e.source();
    }

    /**
     * entry once it differs from prev (within 10 s): a cluster-wide change
     * reaches the other brokers through the metadata log, as in KRaft.
     */
    static String changed(Admin a, ConfigResource r, String name, String prev) throws Exception {
        long deadline = System.nanoTime() + 10_000_000_000L;
        String v = entry(a, r, name);
        while (v.equals(prev) && System.nanoTime() < deadline) {
            Thread.sleep(50);
            v = entry(a, r, name);
        }
        return v;
    }

    static AlterConfigOp op(String k, String v, AlterConfigOp.OpType t) {
        return new AlterConfigOp(new ConfigEntry(k, v), t);
    }

    static void alter(Admin a, ConfigResource r, AlterConfigOp... ops) throws Exception {
        get(a.incrementalAlterConfigs(Map.of(r, List.of(ops))).all());
    }

    /** describeConfigs / incrementalAlterConfigs on a topic, one broker and the cluster default. */
    static void configs(StrataClient.Ctx c) throws Exception {
        Admin a = c.admin();
        String t = c.n("cfg");
        c.createTopic(a, t, 1, Map.of("retention.ms", "3600000"));
        ConfigResource tr = new ConfigResource(ConfigResource.Type.TOPIC, t);
        c.check("topic.retention.ms", entry(a, tr, "retention.ms"));
        alter(a, tr, op("retention.ms", "7200000", AlterConfigOp.OpType.SET),
                op("cleanup.policy", "compact", AlterConfigOp.OpType.APPEND),
                op("max.message.bytes", "200000", AlterConfigOp.OpType.SET));
        c.check("topic.retention.ms.set", entry(a, tr, "retention.ms"));
        c.check("topic.cleanup.policy.append", entry(a, tr, "cleanup.policy"));
        c.check("topic.max.message.bytes", entry(a, tr, "max.message.bytes"));
        alter(a, tr, op("retention.ms", null, AlterConfigOp.OpType.DELETE),
                op("cleanup.policy", "delete", AlterConfigOp.OpType.SUBTRACT));
        c.check("topic.retention.ms.delete", entry(a, tr, "retention.ms"));
        c.check("topic.cleanup.policy.subtract", entry(a, tr, "cleanup.policy"));
        c.check("topic.invalid", errorOf(a.incrementalAlterConfigs(Map.of(tr, List.of(op("retention.ms", "soon", AlterConfigOp.OpType.SET)))).all()));

        Node node = get(a.describeCluster().nodes()).iterator().next();
        ConfigResource br = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(node.id()));
        ConfigResource def = new ConfigResource(ConfigResource.Type.BROKER, "");
        String key = "log.cleaner.delete.retention.ms";
        c.check("broker.num.partitions", entry(a, br, "num.partitions"));
        String v0 = entry(a, br, key);
        alter(a, br, op(key, "3600001", AlterConfigOp.OpType.SET));
        String v1 = changed(a, br, key, v0);
        c.check("broker.set", v1);
        alter(a, def, op(key, "3600002", AlterConfigOp.OpType.SET));
        c.check("default.set", changed(a, def, key, "absent"));
        alter(a, br, op(key, null, AlterConfigOp.OpType.DELETE));
        String v2 = changed(a, br, key, v1);
        c.check("broker.after_delete", v2);
        alter(a, def, op(key, null, AlterConfigOp.OpType.DELETE));
        c.check("broker.after_default_delete", changed(a, br, key, v2));
        c.check("broker.static", errorOf(a.incrementalAlterConfigs(Map.of(br, List.of(op("num.partitions", "3", AlterConfigOp.OpType.SET)))).all()));
    }

    /** describeConfigs / incrementalAlterConfigs on a GROUP resource (KIP-848's group configs). */
    static void groupConfigs(StrataClient.Ctx c) throws Exception {
        Admin a = c.admin();
        ConfigResource gr = new ConfigResource(ConfigResource.Type.GROUP, c.n("cfg-group"));
        alter(a, gr, op("consumer.session.timeout.ms", "50000", AlterConfigOp.OpType.SET));
        c.check("group.session", entry(a, gr, "consumer.session.timeout.ms"));
        alter(a, gr, op("consumer.session.timeout.ms", null, AlterConfigOp.OpType.DELETE));
        c.check("group.session.delete", entry(a, gr, "consumer.session.timeout.ms"));
    }

    /** listOffsets earliest/latest/timestamp/max-timestamp, deleteRecords. */
    static void offsets(StrataClient.Ctx c) throws Exception {
        Admin a = c.admin();
        String t = c.n("offs");
        c.createTopic(a, t, 1, null);
        TopicPartition tp = new TopicPartition(t, 0);
        long t0 = (System.currentTimeMillis() / 1000 - 3600) * 1000;
        KafkaProducer<String, String> p = c.producer();
        for (int i = 0; i < 10; i++) {
            long ts = i == 7 ? t0 + 100_000 : t0 + i * 1000L;
            p.send(new ProducerRecord<>(t, 0, ts, null, "o-" + i));
        }
        p.flush();
        Map<String, OffsetSpec> specs = new TreeMap<>();
        specs.put("earliest", OffsetSpec.earliest());
        specs.put("latest", OffsetSpec.latest());
        specs.put("timestamp", OffsetSpec.forTimestamp(t0 + 2500));
        specs.put("max_timestamp", OffsetSpec.maxTimestamp());
        specs.put("timestamp.after", OffsetSpec.forTimestamp(t0 + 200_000));
        for (Map.Entry<String, OffsetSpec> e : specs.entrySet()) {
            ListOffsetsResultInfo info = get(a.listOffsets(Map.of(tp, e.getValue())).partitionResult(tp));
            c.check("list." + e.getKey(), info.offset());
            if (e.getKey().contains("timestamp") && info.offset() >= 0) {
                c.check("list." + e.getKey() + ".ts", info.timestamp() - t0);
            }
        }
        long low = get(a.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(tp)).lowWatermark();
        c.check("delete.low_watermark", low);
        c.check("list.earliest.after_delete", get(a.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp)).offset());
        c.check("delete.past_end", errorOf(a.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(11))).all()));
        KafkaConsumer<String, String> k = c.consumer();
        k.assign(List.of(tp));
        k.seekToBeginning(List.of(tp));
        c.check("consume.first_after_delete", StrataClient.pollN(k, 1, 30, Duration.ZERO).get(0).offset());
    }

    static void elect(StrataClient.Ctx c) throws Exception {
        Admin a = c.admin();
        String t = c.n("elect");
        c.createTopic(a, t, 2, null);
        Set<TopicPartition> tps = Set.of(new TopicPartition(t, 0), new TopicPartition(t, 1));
        Map<TopicPartition, Optional<Throwable>> res = get(a.electLeaders(ElectionType.PREFERRED, tps).partitions());
        Map<String, Integer> outcomes = new TreeMap<>();
        for (Optional<Throwable> o : res.values()) {
            outcomes.merge(o.map(e -> e.getClass().getSimpleName()).orElse("ok"), 1, Integer::sum);
        }
        c.check("preferred", outcomes);
        c.check("preferred.count", res.size());
        for (Optional<Throwable> o : res.values()) {
            StrataClient.expect(o.isEmpty() || o.get().getClass().getSimpleName().equals("ElectionNotNeededException"), "electLeaders: " + o);
        }
        if (c.rf() >= 3) {
            reorderAndElect(c, a);
        }
        Map<TopicPartition, Optional<Throwable>> unknown = get(a.electLeaders(ElectionType.PREFERRED, Set.of(new TopicPartition(c.n("no-such"), 0))).partitions());
        c.check("unknown", unknown.values().iterator().next().map(e -> e.getClass().getSimpleName()).orElse("ok"));
    }

    /**
     * A reassignment that only reorders the replicas makes another one the
     * preferred leader; electLeaders(PREFERRED) then moves the leadership
     * to it.
     */
    static void reorderAndElect(StrataClient.Ctx c, Admin a) throws Exception {
        String t = c.n("elect-reorder");
        c.createTopic(a, t, 1, null);
        TopicPartition tp = new TopicPartition(t, 0);
        StrataClient.waitFor("ISR of " + t + " complete", 30, () -> {
            try {
                return describe(a, t).partitions().get(0).isr().size() == c.rf();
            } catch (Exception e) {
                return false;
            }
        });
        var pi = describe(a, t).partitions().get(0);
        int leader = pi.leader().id();
        List<Integer> order = new ArrayList<>();
        pi.replicas().forEach(n -> order.add(n.id()));
        int first = order.stream().filter(id -> id != leader).findFirst().get();
        order.remove(Integer.valueOf(first));
        order.add(0, first);
        get(a.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(order)))).all());
        StrataClient.waitFor("replicas reordered to " + order, 30, () -> {
            try {
                List<Integer> now = new ArrayList<>();
                describe(a, t).partitions().get(0).replicas().forEach(n -> now.add(n.id()));
                return now.equals(order) && get(a.listPartitionReassignments(Set.of(tp)).reassignments()).isEmpty();
            } catch (Exception e) {
                return false;
            }
        });
        Optional<Throwable> res = get(a.electLeaders(ElectionType.PREFERRED, Set.of(tp)).partitions()).get(tp);
        c.check("reorder.elect", res.map(e -> e.getClass().getSimpleName()).orElse("ok"));
        StrataClient.waitFor("leader moved to the new first replica " + first, 30, () -> {
            try {
                var p = describe(a, t).partitions().get(0);
                return p.leader() != null && p.leader().id() == first;
            } catch (Exception e) {
                return false;
            }
        });
        c.check("reorder.leader_is_first", true);
        KafkaProducer<String, String> p = c.producer();
        p.send(new ProducerRecord<>(t, 0, null, "after-election")).get(30, TimeUnit.SECONDS);
        c.check("reorder.records", StrataClient.readAll(c.consumer(), List.of(tp), 30).size());
    }

    static void cluster(StrataClient.Ctx c) throws Exception {
        Admin a = c.admin();
        DescribeClusterResult r = a.describeCluster();
        Collection<Node> nodes = get(r.nodes());
        Node ctl = get(r.controller());
        String id = get(r.clusterId());
        c.check("nodes", nodes.size());
        c.check("controller.known", ctl != null && nodes.stream().anyMatch(n -> n.id() == ctl.id()));
        c.check("cluster_id.set", id != null && !id.isEmpty());
        var features = get(a.describeFeatures().featureMetadata());
        c.check("feature.transaction.version", features.finalizedFeatures().containsKey("transaction.version")
                ? features.finalizedFeatures().get("transaction.version").maxVersionLevel() : -1);
    }

    /**
     * listPartitionReassignments; with 3 brokers or more, a replica of a
     * replication factor 1 topic moves to another broker and keeps its
     * records.
     */
    static void reassign(StrataClient.Ctx c) throws Exception {
        Admin a = c.admin();
        List<Node> nodes = new ArrayList<>(get(a.describeCluster().nodes()));
        String t = c.n("move");
        get(a.createTopics(List.of(new NewTopic(t, 1, (short) 1))).all());
        TopicPartition tp = new TopicPartition(t, 0);
        StrataClient.waitFor("leader of " + t, 30, () -> {
            try {
                return describe(a, t).partitions().get(0).leader() != null;
            } catch (Exception e) {
                return false;
            }
        });
        // This partition's reassignments only: other scenarios run
        // alongside (admin-elect reorders its own partition's replicas).
        c.check("in_progress", get(a.listPartitionReassignments(Set.of(tp)).reassignments()).size());
        c.check("cancel.none", errorOf(a.alterPartitionReassignments(Map.of(tp, Optional.empty())).all()));
        if (nodes.size() < 3) {
            return;
        }
        KafkaProducer<String, String> p = c.producer();
        for (int i = 0; i < 10; i++) {
            p.send(new ProducerRecord<>(t, 0, null, "before-" + i));
        }
        p.flush();
        int from = describe(a, t).partitions().get(0).replicas().get(0).id();
        int to = nodes.stream().mapToInt(Node::id).filter(id -> id != from).min().getAsInt();
        get(a.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(List.of(to))))).all());
        StrataClient.waitFor("the replica moved to " + to, 60, () -> {
            try {
                var pi = describe(a, t).partitions().get(0);
                return get(a.listPartitionReassignments(Set.of(tp)).reassignments()).isEmpty()
                        && pi.replicas().size() == 1 && pi.replicas().get(0).id() == to
                        && pi.leader() != null && pi.leader().id() == to;
            } catch (Exception e) {
                return false;
            }
        });
        c.check("moved", true);
        for (int i = 0; i < 10; i++) {
            p.send(new ProducerRecord<>(t, 0, null, "after-" + i));
        }
        p.flush();
        c.check("records", StrataClient.readAll(c.consumer(), List.of(tp), 30).size());
    }

    static ConsumerGroupDescription describeGroup(Admin a, String g) throws Exception {
        return get(a.describeConsumerGroups(List.of(g)).all()).get(g);
    }

    static Map<Integer, Long> groupOffsets(Admin a, String g) throws Exception {
        Map<Integer, Long> m = new TreeMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : get(a.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata()).entrySet()) {
            if (e.getValue() != null) {
                m.put(e.getKey().partition(), e.getValue().offset());
            }
        }
        return m;
    }

    static Optional<GroupListing> listed(Admin a, String g) throws Exception {
        return get(a.listGroups().all()).stream().filter(l -> l.groupId().equals(g)).findFirst();
    }

    /** Consumer group admin over a classic and a consumer (KIP-848) group. */
    static void groups(StrataClient.Ctx c) throws Exception {
        Admin a = c.admin();
        String t = c.n("gadm"), g = c.n("gadm-classic"), g848 = c.n("gadm-848");
        c.createTopic(a, t, 2, null);
        KafkaProducer<String, String> p = c.producer();
        for (int i = 0; i < 20; i++) {
            p.send(new ProducerRecord<>(t, i % 2, null, "g-" + i));
        }
        p.flush();
        KafkaConsumer<String, String> k = c.consumer("group.id", g, "group.protocol", "classic");
        k.subscribe(List.of(t));
        StrataClient.pollN(k, 20, 45, Duration.ZERO);
        k.commitSync();
        KafkaConsumer<String, String> k848 = c.consumer("group.id", g848, "group.protocol", "consumer");
        k848.subscribe(List.of(t));
        StrataClient.pollN(k848, 20, 45, Duration.ZERO);
        k848.commitSync();

        Optional<GroupListing> l = listed(a, g), l848 = listed(a, g848);
        c.check("list.classic", l.map(x -> x.type().map(Object::toString).orElse("?") + "/" + x.protocol() + "/" + x.groupState().map(Object::toString).orElse("?")).orElse("absent"));
        c.check("list.consumer", l848.map(x -> x.type().map(Object::toString).orElse("?") + "/" + x.protocol() + "/" + x.groupState().map(Object::toString).orElse("?")).orElse("absent"));
        @SuppressWarnings("deprecation")
        boolean inOld = get(a.listConsumerGroups().all()).stream().anyMatch(x -> x.groupId().equals(g));
        c.check("list_consumer_groups.classic", inOld);
        ConsumerGroupDescription d = describeGroup(a, g);
        c.check("describe.classic", d.type() + "/" + d.groupState() + "/members=" + d.members().size()
                + "/assigned=" + d.members().stream().mapToInt(m -> m.assignment().topicPartitions().size()).sum());
        ConsumerGroupDescription d848 = describeGroup(a, g848);
        c.check("describe.consumer", d848.type() + "/" + d848.groupState() + "/members=" + d848.members().size()
                + "/assigned=" + d848.members().stream().mapToInt(m -> m.assignment().topicPartitions().size()).sum()
                + "/epoch=" + d848.groupEpoch().isPresent());
        c.check("offsets.classic", groupOffsets(a, g));
        c.check("offsets.consumer", groupOffsets(a, g848));
        c.check("delete.non_empty", errorOf(a.deleteConsumerGroups(List.of(g)).all()));
        c.check("alter.non_empty", errorOf(a.alterConsumerGroupOffsets(g, Map.of(new TopicPartition(t, 0), new OffsetAndMetadata(1))).all()));

        get(a.removeMembersFromConsumerGroup(g, new RemoveMembersFromConsumerGroupOptions()).all());
        StrataClient.waitFor("classic group empty after removeMembers", 30, () -> {
            try {
                return describeGroup(a, g).members().isEmpty();
            } catch (Exception e) {
                return false;
            }
        });
        c.check("removed.state", describeGroup(a, g).groupState());
        k.close(Duration.ZERO);
        k848.close(Duration.ofSeconds(10));
        StrataClient.waitFor("consumer group empty after close", 30, () -> {
            try {
                return describeGroup(a, g848).members().isEmpty();
            } catch (Exception e) {
                return false;
            }
        });

        get(a.alterConsumerGroupOffsets(g, Map.of(new TopicPartition(t, 0), new OffsetAndMetadata(3))).all());
        c.check("offsets.altered", groupOffsets(a, g));
        get(a.alterConsumerGroupOffsets(g848, Map.of(new TopicPartition(t, 1), new OffsetAndMetadata(4))).all());
        c.check("offsets.altered.consumer", groupOffsets(a, g848));
        get(a.deleteConsumerGroupOffsets(g, Set.of(new TopicPartition(t, 1))).all());
        c.check("offsets.after_delete", groupOffsets(a, g));
        get(a.deleteConsumerGroups(List.of(g, g848)).all());
        c.check("deleted.listed", listed(a, g).isPresent() || listed(a, g848).isPresent());
        c.check("deleted.describe", errorOf(a.describeConsumerGroups(List.of(g)).all()));
        c.check("delete.unknown", errorOf(a.deleteConsumerGroups(List.of(c.n("no-such-group"))).all()));
    }

    /**
     * listTransactions / describeTransactions / describeProducers on an open
     * transaction, then abortTransaction (markers written by the admin
     * client) frees the last stable offset.
     */
    static void txn(StrataClient.Ctx c) throws Exception {
        Admin a = c.admin();
        String t = c.n("tadm"), id = c.n("tadm-id");
        c.createTopic(a, t, 1, null);
        TopicPartition tp = new TopicPartition(t, 0);
        KafkaProducer<String, String> p = c.producer("transactional.id", id, "transaction.timeout.ms", "60000");
        p.initTransactions();
        p.beginTransaction();
        for (int i = 0; i < 5; i++) {
            p.send(new ProducerRecord<>(t, 0, null, "open-" + i));
        }
        p.flush();
        Optional<TransactionListing> tl = get(a.listTransactions().all()).stream().filter(x -> x.transactionalId().equals(id)).findFirst();
        c.check("list", tl.map(x -> x.state().toString()).orElse("absent"));
        TransactionDescription td = get(a.describeTransactions(List.of(id)).description(id));
        c.check("describe.state", td.state());
        c.check("describe.partitions", td.topicPartitions());
        c.check("describe.timeout", td.transactionTimeoutMs());
        List<ProducerState> ps = get(a.describeProducers(List.of(tp)).partitionResult(tp)).activeProducers();
        c.check("producers", ps.size());
        ProducerState st = ps.get(0);
        c.check("producer.matches", st.producerId() == td.producerId() && st.producerEpoch() == td.producerEpoch());
        c.check("producer.txn_start", st.currentTransactionStartOffset().orElse(-1));
        c.check("producer.coordinator_epoch", st.coordinatorEpoch().isPresent());
        KafkaConsumer<String, String> rc = c.consumer("isolation.level", "read_committed");
        c.check("lso.open", rc.endOffsets(List.of(tp)).get(tp));
        c.check("list.latest.read_committed", get(a.listOffsets(Map.of(tp, OffsetSpec.latest()),
                new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).partitionResult(tp)).offset());
        c.check("list.latest.read_uncommitted", get(a.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp)).offset());

        get(a.abortTransaction(new AbortTransactionSpec(tp, st.producerId(), (short) st.producerEpoch(), st.coordinatorEpoch().orElse(0))).all());
        StrataClient.waitFor("LSO past the aborted transaction", 30, () -> rc.endOffsets(List.of(tp)).get(tp) == 6);
        c.check("lso.aborted", rc.endOffsets(List.of(tp)).get(tp));
        c.check("producer.txn_start.aborted", get(a.describeProducers(List.of(tp)).partitionResult(tp)).activeProducers().get(0).currentTransactionStartOffset().orElse(-1));
        c.check("read_committed.after_abort", StrataClient.readAll(rc, List.of(tp), 30).size());
        p.close(Duration.ZERO);
    }
}
