import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

import static java.util.stream.Collectors.toList;

/** KafkaProducer: idempotent, every compression type, transactions. */
class ProducerScenarios {
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};

    static void register(Map<String, StrataClient.Scenario> m) {
        m.put("produce-idempotent", ProducerScenarios::idempotent);
        m.put("produce-compression", ProducerScenarios::compression);
        m.put("txn", ProducerScenarios::txn);
        m.put("txn-offsets", ProducerScenarios::txnOffsets);
    }

    static List<TopicPartition> tps(String topic, int n) {
        List<TopicPartition> l = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            l.add(new TopicPartition(topic, i));
        }
        return l;
    }

    /**
     * acks=all with enable.idempotence=true: 300 records over 3 partitions,
     * offsets dense per partition, read back once each. The Go test reads
     * the topic again with franz-go (values and producer ID).
     */
    static void idempotent(StrataClient.Ctx c) throws Exception {
        String topic = c.n("idem");
        Admin a = c.admin();
        c.createTopic(a, topic, 3, null);
        KafkaProducer<String, String> p = c.producer("max.in.flight.requests.per.connection", "5");
        List<Future<RecordMetadata>> fs = new ArrayList<>();
        for (int i = 0; i < 300; i++) {
            fs.add(p.send(new ProducerRecord<>(topic, "k" + i, "idem-" + i)));
        }
        p.flush();
        Map<Integer, List<Long>> offs = new HashMap<>();
        for (Future<RecordMetadata> f : fs) {
            RecordMetadata md = f.get(30, TimeUnit.SECONDS);
            offs.computeIfAbsent(md.partition(), k -> new ArrayList<>()).add(md.offset());
        }
        boolean dense = true;
        for (List<Long> l : offs.values()) {
            l.sort(null);
            for (int i = 0; i < l.size(); i++) {
                dense &= l.get(i) == i;
            }
        }
        c.check("acked", fs.size());
        c.check("dense", dense);
        StrataClient.expect(dense, "offsets per partition not 0..n-1: " + offs);
        List<ConsumerRecord<String, String>> got = StrataClient.readAll(c.consumer(), tps(topic, 3), 30);
        Set<String> vals = new HashSet<>();
        for (ConsumerRecord<String, String> r : got) {
            vals.add(r.value());
        }
        c.check("read", got.size());
        c.check("distinct", vals.size());
        StrataClient.expectEq(300, got.size(), "records read");
        StrataClient.expectEq(300, vals.size(), "distinct values");
    }

    /**
     * One producer per compression type, 100 records each into one
     * partition, read back in order. The Go test checks each batch's codec
     * with franz-go.
     */
    static void compression(StrataClient.Ctx c) throws Exception {
        String topic = c.n("comp");
        Admin a = c.admin();
        c.createTopic(a, topic, 1, null);
        String pad = " the quick brown fox jumps over the lazy dog".repeat(4);
        for (String codec : CODECS) {
            KafkaProducer<String, String> p = c.producer("compression.type", codec, "linger.ms", "50", "batch.size", "1000000");
            for (int i = 0; i < 100; i++) {
                p.send(new ProducerRecord<>(topic, 0, null, codec + "-" + i + pad));
            }
            p.flush();
            p.close(Duration.ofSeconds(10));
        }
        List<ConsumerRecord<String, String>> got = StrataClient.readAll(c.consumer(), tps(topic, 1), 30);
        StrataClient.expectEq(500, got.size(), "records read");
        for (int i = 0; i < got.size(); i++) {
            String want = CODECS[i / 100] + "-" + (i % 100) + pad;
            StrataClient.expectEq(want, got.get(i).value(), "record " + i);
            StrataClient.expectEq((long) i, got.get(i).offset(), "offset of record " + i);
        }
        for (String codec : CODECS) {
            c.check("read." + codec, got.stream().filter(r -> r.value().startsWith(codec + "-")).count());
        }
    }

    /**
     * A transactional producer commits 10, aborts 10 and commits 10:
     * read_committed sees the 20 committed, read_uncommitted all 30; the end
     * offset counts the three markers.
     */
    static void txn(StrataClient.Ctx c) throws Exception {
        String topic = c.n("txn");
        Admin a = c.admin();
        c.createTopic(a, topic, 1, null);
        KafkaProducer<String, String> p = c.producer("transactional.id", c.n("txn-id"));
        p.initTransactions();
        String[] phases = {"commit1", "abort", "commit2"};
        for (String phase : phases) {
            p.beginTransaction();
            for (int i = 0; i < 10; i++) {
                p.send(new ProducerRecord<>(topic, 0, null, phase + "-" + i));
            }
            if (phase.equals("abort")) {
                p.flush();
                p.abortTransaction();
            } else {
                p.commitTransaction();
            }
        }
        List<TopicPartition> tp = tps(topic, 1);
        List<ConsumerRecord<String, String>> rc = StrataClient.readAll(c.consumer("isolation.level", "read_committed"), tp, 30);
        List<ConsumerRecord<String, String>> ru = StrataClient.readAll(c.consumer("isolation.level", "read_uncommitted"), tp, 30);
        long end = c.consumer().endOffsets(tp).get(tp.get(0));
        long abortedSeen = rc.stream().filter(r -> r.value().startsWith("abort-")).count();
        c.check("read_committed", rc.size());
        c.check("read_committed.aborted", abortedSeen);
        c.check("read_uncommitted", ru.size());
        c.check("end", end);
        StrataClient.expectEq(20, rc.size(), "read_committed records");
        StrataClient.expectEq(0L, abortedSeen, "aborted records under read_committed");
        StrataClient.expectEq(30, ru.size(), "read_uncommitted records");
        StrataClient.expectEq(33L, end, "end offset (30 records, 3 markers)");
        List<String> vals = rc.stream().map(ConsumerRecord::value).collect(toList());
        StrataClient.expectEq("commit1-0", vals.get(0), "first committed value");
        StrataClient.expectEq("commit2-9", vals.get(19), "last committed value");
    }

    /**
     * Consume-transform-produce: a group=consumer (KIP-848) consumer reads
     * 20 records; a transaction writes 10 results with
     * sendOffsetsToTransaction(10) and commits, a second writes the rest with
     * offset 20 and aborts. The group's committed offset is 10 and the
     * output holds 10 committed records.
     */
    static void txnOffsets(StrataClient.Ctx c) throws Exception {
        String in = c.n("eos-in"), out = c.n("eos-out"), group = c.n("eos-group");
        Admin a = c.admin();
        c.createTopic(a, in, 1, null);
        c.createTopic(a, out, 1, null);
        KafkaProducer<String, String> seed = c.producer();
        for (int i = 0; i < 20; i++) {
            seed.send(new ProducerRecord<>(in, 0, null, "in-" + i));
        }
        seed.flush();
        KafkaConsumer<String, String> cons = c.consumer("group.id", group, "group.protocol", "consumer", "isolation.level", "read_committed");
        cons.subscribe(List.of(in));
        List<ConsumerRecord<String, String>> got = StrataClient.pollN(cons, 20, 30, Duration.ZERO);
        StrataClient.expectEq(20, got.size(), "input records");
        KafkaProducer<String, String> p = c.producer("transactional.id", c.n("eos-txn"));
        p.initTransactions();
        TopicPartition tin = new TopicPartition(in, 0);
        for (int half = 0; half < 2; half++) {
            p.beginTransaction();
            for (int i = half * 10; i < half * 10 + 10; i++) {
                p.send(new ProducerRecord<>(out, 0, null, got.get(i).value().toUpperCase()));
            }
            p.sendOffsetsToTransaction(Map.of(tin, new OffsetAndMetadata(half * 10 + 10)), cons.groupMetadata());
            if (half == 0) {
                p.commitTransaction();
            } else {
                p.flush();
                p.abortTransaction();
            }
        }
        long committed = a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS).get(tin).offset();
        OffsetAndMetadata viaConsumer = cons.committed(java.util.Set.of(tin)).get(tin);
        List<ConsumerRecord<String, String>> outRecs = StrataClient.readAll(c.consumer("isolation.level", "read_committed"), tps(out, 1), 30);
        c.check("committed", committed);
        c.check("committed.consumer", viaConsumer == null ? -1 : viaConsumer.offset());
        c.check("output", outRecs.size());
        StrataClient.expectEq(10L, committed, "group offset after commit then abort");
        StrataClient.expectEq(10, outRecs.size(), "committed output records");
        StrataClient.expectEq("IN-9", outRecs.get(9).value(), "last output value");
    }
}
