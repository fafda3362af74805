import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Share groups (KIP-932): KafkaShareConsumer with explicit acknowledgement
 * (ACCEPT, RELEASE, REJECT, RENEW) and the Admin client's share group
 * calls. The Go test starts the brokers with a 2 s record lock
 * (group.share.record.lock.duration.ms).
 */
class ShareScenarios {
    static void register(Map<String, StrataClient.Scenario> m) {
        m.put("share-consumer", ShareScenarios::consumer);
        m.put("share-admin", ShareScenarios::admin);
    }

    static KafkaShareConsumer<String, String> shareConsumer(StrataClient.Ctx c, String group, String... kv) {
        Properties p = c.base();
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        StrataClient.Ctx.put(p, kv);
        return c.closeLater(new KafkaShareConsumer<>(p));
    }

    /** share.auto.offset.reset=earliest for group g (a GROUP config resource). */
    static void earliest(Admin a, String g) throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, g);
        AdminScenarios.get(a.incrementalAlterConfigs(Map.of(r, List.of(new AlterConfigOp(
                new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET)))).all());
    }

    static final int RENEWALS = 8;

    /**
     * 30 records, each value naming what the consumer does with it: accept,
     * release (once: it comes back with delivery count 2, then is
     * accepted), reject (it never comes back) and renew (held past the lock
     * duration by RENEWALS renewals, then accepted, never redelivered).
     */
    /**
     * Notes the values acknowledged in a commit whose result for their
     * partition is an error (InvalidRecordStateException: the lock lapsed
     * before the acknowledgement arrived).
     */
    static void lapsed(StrataClient.Ctx c, Map<TopicIdPartition, Optional<KafkaException>> res, List<String> values, Set<String> lapsed) {
        for (Optional<KafkaException> e : res.values()) {
            if (e.isPresent()) {
                c.info("acknowledgement refused for " + values + ": " + e.get());
                lapsed.addAll(values);
            }
        }
    }

    static void consumer(StrataClient.Ctx c) throws Exception {
        Admin a = c.admin();
        String t = c.n("share"), g = c.n("share-g");
        c.createTopic(a, t, 1, null);
        earliest(a, g);
        KafkaProducer<String, String> p = c.producer();
        int n = 30;
        for (int i = 0; i < n; i++) {
            String what = i == 3 ? "release" : i == 7 ? "reject" : i == 11 ? "renew" : "accept";
            p.send(new ProducerRecord<>(t, 0, null, what + "-" + i));
        }
        p.flush();

        KafkaShareConsumer<String, String> k = shareConsumer(c, g, "share.acknowledgement.mode", "explicit");
        k.subscribe(List.of(t));
        Map<String, Integer> accepted = new TreeMap<>();
        List<Short> releaseCounts = new ArrayList<>();
        int rejected = 0, renewals = 0;
        // Values whose acknowledgement the broker refused (their lock had
        // lapsed: a 2 s lock on a loaded machine): KIP-932 delivers those
        // again, so they may come back; nothing else may.
        Set<String> lapsed = new TreeSet<>(), redelivered = new TreeSet<>();
        long renewFirst = 0, renewHeld = 0, renewLast = 0, renewGap = 0;
        short renewCount = 0;
        Optional<Integer> lock = Optional.empty();
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (accepted.size() < n - 1 || rejected == 0) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after 60 s: accepted " + accepted.size() + ", rejected " + rejected + ", renewals " + renewals);
            }
            ConsumerRecords<String, String> recs = k.poll(Duration.ofMillis(200));
            if (recs.isEmpty()) {
                continue;
            }
            if (lock.isEmpty()) {
                lock = k.acquisitionLockTimeoutMs();
            }
            ConsumerRecord<String, String> held = null;
            List<String> acked = new ArrayList<>();
            for (ConsumerRecord<String, String> r : recs) {
                short dc = r.deliveryCount().orElse((short) -1);
                acked.add(r.value());
                String v = r.value();
                if (v.startsWith("release-")) {
                    releaseCounts.add(dc);
                    k.acknowledge(r, dc == 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
                    if (dc != 1) {
                        accepted.merge(v, 1, Integer::sum);
                    }
                } else if (v.startsWith("reject-")) {
                    rejected++;
                    k.acknowledge(r, AcknowledgeType.REJECT);
                } else if (v.startsWith("renew-")) {
                    if (renewFirst == 0) {
                        renewFirst = renewLast = System.nanoTime();
                    }
                    renewCount = dc;
                    held = r;
                } else {
                    if (dc != 1) {
                        redelivered.add(v);
                    }
                    accepted.merge(v, 1, Integer::sum);
                    k.acknowledge(r, AcknowledgeType.ACCEPT);
                }
            }
            lapsed(c, k.commitSync(), acked, lapsed);
            if (held != null) {
                if (renewals < RENEWALS) {
                    // Processing that takes a while: together the renewals
                    // hold the record well past the 2 s lock.
                    Thread.sleep(300);
                    renewals++;
                    k.acknowledge(held, AcknowledgeType.RENEW);
                    renewGap = Math.max(renewGap, (System.nanoTime() - renewLast) / 1_000_000);
                    renewLast = System.nanoTime();
                } else {
                    renewHeld = (System.nanoTime() - renewFirst) / 1_000_000;
                    accepted.merge(held.value(), 1, Integer::sum);
                    k.acknowledge(held, AcknowledgeType.ACCEPT);
                }
                lapsed(c, k.commitSync(), List.of(held.value()), lapsed);
            }
        }
        // Nothing comes back: not the rejected record, not one accepted.
        int extra = 0;
        for (ConsumerRecord<String, String> r : k.poll(Duration.ofMillis(500))) {
            c.info("extra record " + r.value() + " at " + r.offset() + ", delivery count " + r.deliveryCount().orElse((short) -1) + (lapsed.contains(r.value()) ? " (its acknowledgement was refused: lock lapsed)" : ""));
            if (!lapsed.contains(r.value())) {
                extra++;
            }
        }
        redelivered.removeAll(lapsed);
        k.close(Duration.ofSeconds(10));

        int lockMs = lock.orElse(-1);
        c.check("lock_ms", lockMs);
        c.check("accepted", accepted.size());
        c.check("accepted.once", accepted.entrySet().stream().allMatch(e -> e.getValue() == 1 || lapsed.contains(e.getKey())));
        c.check("redelivered", redelivered.size());
        c.check("release.delivery_counts", releaseCounts);
        c.check("rejected", rejected);
        c.check("renew.renewals", renewals);
        c.check("renew.delivery_count", renewCount);
        c.check("renew.held_past_lock", lockMs > 0 && renewHeld > lockMs);
        c.check("extra", extra);
        c.info("renewed record held " + renewHeld + " ms (lock " + lockMs + " ms), at most " + renewGap + " ms from one renewal to the next");
        StrataClient.expectEq(n - 1, accepted.size(), "records accepted");
        StrataClient.expect(renewHeld > lockMs, "renewed record held " + renewHeld + " ms, not past the " + lockMs + " ms lock");
    }

    static Optional<GroupListing> listed(Admin a, String g, ListGroupsOptions o) throws Exception {
        return AdminScenarios.get(a.listGroups(o).all()).stream().filter(l -> l.groupId().equals(g)).findFirst();
    }

    static ShareGroupDescription describe(Admin a, String g) throws Exception {
        return AdminScenarios.get(a.describeShareGroups(List.of(g)).all()).get(g);
    }

    /** Each partition's start offset and lag: {partition=start/lag}. */
    static String offsets(Admin a, String g) throws Exception {
        Map<Integer, String> m = new TreeMap<>();
        Map<TopicPartition, SharePartitionOffsetInfo> got = AdminScenarios.get(
                a.listShareGroupOffsets(Map.of(g, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(g));
        for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : got.entrySet()) {
            SharePartitionOffsetInfo i = e.getValue();
            m.put(e.getKey().partition(), i == null ? "null" : i.startOffset() + "/" + i.lag().map(String::valueOf).orElse("?"));
        }
        return m.toString();
    }

    static void waitEmpty(Admin a, String g) throws Exception {
        StrataClient.waitFor("share group " + g + " empty", 30, () -> {
            try {
                return describe(a, g).members().isEmpty();
            } catch (Exception e) {
                return false;
            }
        });
    }

    static String offsetsWhen(Admin a, String g, String want) throws Exception {
        long deadline = System.nanoTime() + 15_000_000_000L;
        String got = offsets(a, g);
        while (!got.equals(want) && System.nanoTime() < deadline) {
            Thread.sleep(50);
            got = offsets(a, g);
        }
        return got;
    }

    /**
     * Share group admin: listGroups filtered to share groups,
     * describeShareGroups, listShareGroupOffsets (start offset and lag),
     * alterShareGroupOffsets (refused while a member is active, then a new
     * member reads from the new start), deleteShareGroupOffsets,
     * deleteShareGroups.
     */
    static void admin(StrataClient.Ctx c) throws Exception {
        Admin a = c.admin();
        String t = c.n("shadm"), g = c.n("shadm-g");
        c.createTopic(a, t, 2, null);
        earliest(a, g);
        KafkaProducer<String, String> p = c.producer();
        for (int i = 0; i < 20; i++) {
            p.send(new ProducerRecord<>(t, i % 2, null, "s-" + i));
        }
        p.flush();
        KafkaShareConsumer<String, String> k = shareConsumer(c, g);
        k.subscribe(List.of(t));
        int got = 0;
        long deadline = System.nanoTime() + 45_000_000_000L;
        while (got < 20) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after 45 s with " + got + " of 20 records");
            }
            got += k.poll(Duration.ofMillis(200)).count();
            k.commitSync(); // implicit mode: what the last poll returned is accepted
        }

        Optional<GroupListing> l = listed(a, g, ListGroupsOptions.forShareGroups());
        c.check("list.share", l.map(x -> x.type().map(Object::toString).orElse("?") + "/" + x.protocol() + "/"
                + x.groupState().map(Object::toString).orElse("?")).orElse("absent"));
        c.check("list.consumer_filter", listed(a, g, ListGroupsOptions.forConsumerGroups()).isPresent());
        ShareGroupDescription d = describe(a, g);
        c.check("describe", d.groupState() + "/members=" + d.members().size()
                + "/assigned=" + d.members().stream().mapToInt(m -> m.assignment().topicPartitions().size()).sum()
                + "/epoch=" + (d.groupEpoch() > 0) + "/coordinator=" + (d.coordinator() != null && d.coordinator().id() >= 0));
        c.check("offsets", offsetsWhen(a, g, "{0=10/0, 1=10/0}"));
        TopicPartition tp0 = new TopicPartition(t, 0);
        c.check("alter.non_empty", AdminScenarios.errorOf(a.alterShareGroupOffsets(g, Map.of(tp0, 4L)).all()));
        c.check("delete_offsets.non_empty", AdminScenarios.errorOf(a.deleteShareGroupOffsets(g, Set.of(t)).all()));
        c.check("delete.non_empty", AdminScenarios.errorOf(a.deleteShareGroups(List.of(g)).all()));

        k.close(Duration.ofSeconds(10));
        waitEmpty(a, g);
        c.check("closed.state", describe(a, g).groupState());
        AdminScenarios.get(a.alterShareGroupOffsets(g, Map.of(tp0, 4L)).all());
        c.check("offsets.altered", offsetsWhen(a, g, "{0=4/6, 1=10/0}"));

        // A new member reads partition 0 again from offset 4.
        KafkaShareConsumer<String, String> k2 = shareConsumer(c, g);
        k2.subscribe(List.of(t));
        Map<Integer, List<Long>> again = new TreeMap<>();
        int n = 0;
        deadline = System.nanoTime() + 45_000_000_000L;
        while (n < 6) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after 45 s with " + again + " of 6 records read again");
            }
            for (ConsumerRecord<String, String> r : k2.poll(Duration.ofMillis(200))) {
                again.computeIfAbsent(r.partition(), x -> new ArrayList<>()).add(r.offset());
                n++;
            }
            k2.commitSync();
        }
        for (ConsumerRecord<String, String> r : k2.poll(Duration.ofMillis(500))) {
            again.computeIfAbsent(r.partition(), x -> new ArrayList<>()).add(r.offset());
        }
        k2.commitSync();
        c.check("reread", again);
        c.check("offsets.reread", offsetsWhen(a, g, "{0=10/0, 1=10/0}"));
        k2.close(Duration.ofSeconds(10));
        waitEmpty(a, g);

        AdminScenarios.get(a.deleteShareGroupOffsets(g, Set.of(t)).all());
        c.check("offsets.after_delete", offsets(a, g));
        AdminScenarios.get(a.deleteShareGroups(List.of(g)).all());
        c.check("deleted.listed", listed(a, g, ListGroupsOptions.forShareGroups()).isPresent());
        c.check("deleted.describe", AdminScenarios.errorOf(a.describeShareGroups(List.of(g)).all()));
        c.check("delete.unknown", AdminScenarios.errorOf(a.deleteShareGroups(List.of(c.n("no-such-share-group"))).all()));
    }
}
