import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Pattern;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/** KafkaConsumer: both group protocols, regex subscriptions, seek, offsetsForTimes. */
class ConsumerScenarios {
    static void register(Map<String, StrataClient.Scenario> m) {
        m.put("consumer-classic", c -> groupResume(c, "classic"));
        m.put("consumer-848", c -> groupResume(c, "consumer"));
        m.put("consumer-pattern-848", ConsumerScenarios::pattern848);
        m.put("consumer-pattern-classic", ConsumerScenarios::patternClassic);
        m.put("consumer-seek", ConsumerScenarios::seekTimes);
        m.put("restart-commit", ConsumerScenarios::restartCommit);
        m.put("restart-resume", ConsumerScenarios::restartResume);
    }

    static final String[] PROTOCOLS = {"classic", "consumer"};

    /**
     * Before a broker restart (the Go test restarts it, then runs
     * restart-resume in a new JVM): a group of each protocol reads 300
     * records and commits.
     */
    static void restartCommit(StrataClient.Ctx c) throws Exception {
        String topic = c.n("restart");
        Admin a = c.admin();
        c.createTopic(a, topic, 3, null);
        produce(c.producer(), topic, "before", 300);
        for (String proto : PROTOCOLS) {
            KafkaConsumer<String, String> k = c.consumer("group.id", c.n("restart-" + proto), "group.protocol", proto);
            k.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> got = StrataClient.pollN(k, 300, 45, Duration.ZERO);
            k.commitSync();
            k.close(Duration.ofSeconds(10));
            c.check("read." + proto, got.size());
            StrataClient.expectEq(300, got.size(), proto + " records before the restart");
        }
    }

    /** After the broker restart: each group reads exactly the 50 records produced since. */
    static void restartResume(StrataClient.Ctx c) throws Exception {
        String topic = c.n("restart");
        produce(c.producer(), topic, "after", 50);
        for (String proto : PROTOCOLS) {
            KafkaConsumer<String, String> k = c.consumer("group.id", c.n("restart-" + proto), "group.protocol", proto);
            k.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> got = StrataClient.pollN(k, 50, 45, Duration.ofMillis(500));
            long old = got.stream().filter(r -> !r.value().startsWith("after-")).count();
            c.check("resumed." + proto, got.size());
            c.check("resumed." + proto + ".old", old);
            StrataClient.expectEq(50, got.size(), proto + " records after the restart");
            StrataClient.expectEq(0L, old, proto + " records read again after the restart");
        }
    }

    static void produce(KafkaProducer<String, String> p, String topic, String tag, int n) {
        for (int i = 0; i < n; i++) {
            p.send(new ProducerRecord<>(topic, "k" + i, tag + "-" + i));
        }
        p.flush();
    }

    /**
     * A group member (group.protocol=proto) reads 300 records of 3
     * partitions, commitSync()s and closes; 50 more are produced; a new
     * member of the same group reads exactly those 50, each at or past its
     * partition's committed offset.
     */
    static void groupResume(StrataClient.Ctx c, String proto) throws Exception {
        String topic = c.n("grp-" + proto), group = c.n("group-" + proto);
        Admin a = c.admin();
        c.createTopic(a, topic, 3, null);
        KafkaProducer<String, String> p = c.producer();
        produce(p, topic, "first", 300);
        KafkaConsumer<String, String> k1 = c.consumer("group.id", group, "group.protocol", proto);
        k1.subscribe(List.of(topic));
        List<ConsumerRecord<String, String>> first = StrataClient.pollN(k1, 300, 45, Duration.ZERO);
        Set<String> vals = new HashSet<>();
        first.forEach(r -> vals.add(r.value()));
        k1.commitSync();
        Set<TopicPartition> tps = new HashSet<>(ProducerScenarios.tps(topic, 3));
        Map<TopicPartition, OffsetAndMetadata> committed = k1.committed(tps);
        long sum = committed.values().stream().mapToLong(OffsetAndMetadata::offset).sum();
        k1.close(Duration.ofSeconds(10));
        c.check("first", first.size());
        c.check("first.distinct", vals.size());
        c.check("committed.sum", sum);
        StrataClient.expectEq(300, first.size(), "records before the restart");
        StrataClient.expectEq(300, vals.size(), "distinct records before the restart");
        StrataClient.expectEq(300L, sum, "committed offsets' sum");

        produce(p, topic, "second", 50);
        KafkaConsumer<String, String> k2 = c.consumer("group.id", group, "group.protocol", proto);
        k2.subscribe(List.of(topic));
        List<ConsumerRecord<String, String>> second = StrataClient.pollN(k2, 50, 45, Duration.ofMillis(500));
        long before = second.stream().filter(r -> r.offset() < committed.get(new TopicPartition(r.topic(), r.partition())).offset()).count();
        long notNew = second.stream().filter(r -> !r.value().startsWith("second-")).count();
        c.check("resumed", second.size());
        c.check("resumed.before_committed", before);
        c.check("resumed.old", notNew);
        StrataClient.expectEq(50, second.size(), "records after the restart");
        StrataClient.expectEq(0L, before + notNew, "records read again after the restart");
        k2.commitSync();
        Map<TopicPartition, OffsetAndMetadata> after = k2.committed(tps);
        c.check("committed.sum.after", after.values().stream().mapToLong(OffsetAndMetadata::offset).sum());
    }

    /**
     * subscribe(SubscriptionPattern) (KIP-848, regex resolved by the
     * broker): two matching topics of three are read; a matching topic
     * created afterwards joins the assignment.
     */
    static void pattern848(StrataClient.Ctx c) throws Exception {
        patternCommon(c, "consumer");
    }

    /** subscribe(java.util.regex.Pattern) with the classic protocol (regex resolved by the client). */
    static void patternClassic(StrataClient.Ctx c) throws Exception {
        patternCommon(c, "classic");
    }

    static void patternCommon(StrataClient.Ctx c, String proto) throws Exception {
        String base = c.n("rx" + proto);
        Admin a = c.admin();
        for (String s : new String[]{"-a", "-b", "x-c"}) {
            c.createTopic(a, base + s, 1, null);
        }
        KafkaProducer<String, String> p = c.producer();
        produce(p, base + "-a", "a", 10);
        produce(p, base + "-b", "b", 10);
        produce(p, base + "x-c", "c", 10);
        String regex = Pattern.quote(base) + "-.*";
        KafkaConsumer<String, String> k = c.consumer("group.id", c.n("group-rx-" + proto), "group.protocol", proto, "metadata.max.age.ms", "1000");
        if (proto.equals("consumer")) {
            k.subscribe(new SubscriptionPattern(base + "-.*"));
        } else {
            k.subscribe(Pattern.compile(regex));
        }
        List<ConsumerRecord<String, String>> got = StrataClient.pollN(k, 20, 45, Duration.ofMillis(300));
        Set<String> topics = new TreeSet<>();
        got.forEach(r -> topics.add(r.topic().substring(base.length())));
        c.check("initial", got.size());
        c.check("initial.topics", String.join(",", topics));
        StrataClient.expectEq(20, got.size(), "records of the matching topics");
        StrataClient.expectEq("-a,-b", String.join(",", topics), "topics read");
        // A classic member's eager rebalance revokes every partition: the
        // committed offsets are where it resumes.
        k.commitSync();

        c.createTopic(a, base + "-new", 2, null);
        produce(p, base + "-new", "new", 10);
        List<ConsumerRecord<String, String>> more = StrataClient.pollN(k, 10, 45, Duration.ofMillis(300));
        long fromNew = more.stream().filter(r -> r.topic().equals(base + "-new")).count();
        c.check("new", more.size());
        c.check("new.from_new_topic", fromNew);
        StrataClient.expectEq(10L, fromNew, "records of the topic created after subscribing");
        StrataClient.expectEq(10, more.size(), "records after the new topic");
    }

    /**
     * assign + seek/seekToBeginning/seekToEnd, beginningOffsets/endOffsets
     * and offsetsForTimes over records with timestamps T0 + i s.
     */
    static void seekTimes(StrataClient.Ctx c) throws Exception {
        String topic = c.n("seek");
        Admin a = c.admin();
        c.createTopic(a, topic, 1, null);
        long t0 = (System.currentTimeMillis() / 1000 - 3600) * 1000;
        KafkaProducer<String, String> p = c.producer();
        for (int i = 0; i < 100; i++) {
            p.send(new ProducerRecord<>(topic, 0, t0 + i * 1000L, null, "seek-" + i));
        }
        p.flush();
        TopicPartition tp = new TopicPartition(topic, 0);
        KafkaConsumer<String, String> k = c.consumer();
        k.assign(List.of(tp));
        k.seek(tp, 42);
        ConsumerRecord<String, String> r = StrataClient.pollN(k, 1, 30, Duration.ZERO).get(0);
        c.check("seek.offset", r.offset());
        c.check("seek.value", r.value());
        c.check("seek.timestamp", r.timestamp() - t0);
        k.seekToBeginning(List.of(tp));
        c.check("position.beginning", k.position(tp));
        k.seekToEnd(List.of(tp));
        c.check("position.end", k.position(tp));
        c.check("beginning", k.beginningOffsets(List.of(tp)).get(tp));
        c.check("end", k.endOffsets(List.of(tp)).get(tp));
        Map<TopicPartition, Long> q = new HashMap<>();
        q.put(tp, t0 + 5500);
        OffsetAndTimestamp ot = k.offsetsForTimes(q).get(tp);
        c.check("times.offset", ot.offset());
        c.check("times.timestamp", ot.timestamp() - t0);
        q.put(tp, t0 + 1_000_000);
        c.check("times.after_last", k.offsetsForTimes(q).get(tp));
        q.put(tp, t0 - 1_000_000);
        c.check("times.before_first", k.offsetsForTimes(q).get(tp).offset());
        k.seek(tp, ot.offset());
        c.check("seek.times.value", StrataClient.pollN(k, 1, 30, Duration.ZERO).get(0).value());
        StrataClient.expectEq(42L, r.offset(), "offset after seek(42)");
        StrataClient.expectEq(6L, ot.offset(), "offsetsForTimes(T0+5.5s)");
    }
}
