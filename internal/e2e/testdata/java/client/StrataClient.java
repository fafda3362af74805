import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java client against Strata: one JVM runs the scenarios named on
 * the command line (internal/e2e/java_client_test.go starts it).
 *
 * <pre>
 * java StrataClient BOOTSTRAP PREFIX REPLICATION_FACTOR PARALLELISM SCENARIO...
 * </pre>
 *
 * Every topic, group and transactional ID a scenario creates starts with
 * PREFIX. Output, one line each, for the Go test to assert on:
 *
 * <pre>
 * CHECK scenario key=value     a measured value (count, offset, state)
 * RESULT scenario ok millis    the scenario passed its own assertions
 * RESULT scenario FAIL reason  it did not (the stack trace goes to stderr)
 * </pre>
 *
 * The exit code is 0 only when every scenario passed.
 */
public class StrataClient {
    final String bootstrap;
    final String prefix;
    final short rf;

    StrataClient(String bootstrap, String prefix, short rf) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
        this.rf = rf;
    }

    interface Scenario {
        void run(Ctx c) throws Exception;
    }

    static final Map<String, Scenario> SCENARIOS = new LinkedHashMap<>();

    static {
        ProducerScenarios.register(SCENARIOS);
        ConsumerScenarios.register(SCENARIOS);
        AdminScenarios.register(SCENARIOS);
        ShareScenarios.register(SCENARIOS);
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            System.err.println("usage: StrataClient BOOTSTRAP PREFIX RF PARALLELISM SCENARIO...  (scenarios: " + SCENARIOS.keySet() + ")");
            System.exit(2);
        }
        StrataClient sc = new StrataClient(args[0], args[1], Short.parseShort(args[2]));
        int parallel = Integer.parseInt(args[3]);
        List<String> names = new ArrayList<>();
        for (int i = 4; i < args.length; i++) {
            if (!SCENARIOS.containsKey(args[i])) {
                System.err.println("unknown scenario " + args[i] + "; known: " + SCENARIOS.keySet());
                System.exit(2);
            }
            names.add(args[i]);
        }
        AtomicInteger failed = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(parallel);
        List<Future<?>> fs = new ArrayList<>();
        for (String name : names) {
            fs.add(pool.submit(() -> {
                Ctx c = new Ctx(sc, name);
                long start = System.nanoTime();
                try {
                    SCENARIOS.get(name).run(c);
                    out("RESULT " + name + " ok " + (System.nanoTime() - start) / 1_000_000);
                } catch (Throwable e) {
                    failed.incrementAndGet();
                    System.err.println("scenario " + name + " failed:");
                    e.printStackTrace();
                    out("RESULT " + name + " FAIL " + String.valueOf(e).replace('\n', ' '));
                } finally {
                    c.closeAll();
                }
            }));
        }
        for (Future<?> f : fs) {
            f.get();
        }
        pool.shutdown();
        pool.awaitTermination(10, TimeUnit.SECONDS);
        System.out.flush();
        // Client threads (a consumer removed from its group, ...) must not
        // keep the JVM alive.
        Runtime.getRuntime().halt(failed.get() == 0 ? 0 : 1);
    }

    static synchronized void out(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /** One scenario's context: names, client factories, checks. */
    static class Ctx {
        final StrataClient sc;
        final String name;
        final List<AutoCloseable> closers = new ArrayList<>();

        Ctx(StrataClient sc, String name) {
            this.sc = sc;
            this.name = name;
        }

        /** A name unique to this run: PREFIX-suffix. */
        String n(String suffix) {
            return sc.prefix + "-" + suffix;
        }

        short rf() {
            return sc.rf;
        }

        void check(String key, Object value) {
            out("CHECK " + name + " " + key + "=" + value);
        }

        void info(String msg) {
            out("INFO " + name + " " + msg);
        }

        <T extends AutoCloseable> T closeLater(T c) {
            synchronized (closers) {
                closers.add(c);
            }
            return c;
        }

        void closeAll() {
            List<AutoCloseable> cs;
            synchronized (closers) {
                cs = new ArrayList<>(closers);
                closers.clear();
            }
            for (int i = cs.size() - 1; i >= 0; i--) {
                try {
                    AutoCloseable c = cs.get(i);
                    if (c instanceof KafkaConsumer) {
                        ((KafkaConsumer<?, ?>) c).close(Duration.ofSeconds(5));
                    } else if (c instanceof KafkaShareConsumer) {
                        ((KafkaShareConsumer<?, ?>) c).close(Duration.ofSeconds(5));
                    } else if (c instanceof KafkaProducer) {
                        ((KafkaProducer<?, ?>) c).close(Duration.ofSeconds(5));
                    } else {
                        c.close();
                    }
                } catch (Exception e) {
                    // already closed, or the scenario failed anyway
                }
            }
        }

        Properties base() {
            Properties p = new Properties();
            p.put("bootstrap.servers", sc.bootstrap);
            p.put("client.id", n(name));
            return p;
        }

        Admin admin() {
            Properties p = base();
            p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
            p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
            return closeLater(Admin.create(p));
        }

        KafkaProducer<String, String> producer(String... kv) {
            Properties p = base();
            p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            p.put(ProducerConfig.ACKS_CONFIG, "all");
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
            p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
            p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
            put(p, kv);
            return closeLater(new KafkaProducer<>(p));
        }

        /** A consumer; with group.id absent it is used with assign(). */
        KafkaConsumer<String, String> consumer(String... kv) {
            Properties p = base();
            p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            put(p, kv);
            return closeLater(new KafkaConsumer<>(p));
        }

        static void put(Properties p, String... kv) {
            for (int i = 0; i + 1 < kv.length; i += 2) {
                p.put(kv[i], kv[i + 1]);
            }
        }

        void createTopic(Admin a, String topic, int partitions, Map<String, String> configs) throws Exception {
            NewTopic nt = new NewTopic(topic, partitions, rf());
            if (configs != null) {
                nt.configs(configs);
            }
            a.createTopics(List.of(nt)).all().get(30, TimeUnit.SECONDS);
            waitFor("topic " + topic + " has leaders", 30, () -> {
                try {
                    var d = a.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                    return d.partitions().size() == partitions && d.partitions().stream().allMatch(pi -> pi.leader() != null && pi.leader().id() >= 0);
                } catch (Exception e) {
                    return false;
                }
            });
        }
    }

    static void expect(boolean cond, String what) {
        if (!cond) {
            throw new AssertionError(what);
        }
    }

    static void expectEq(Object want, Object got, String what) {
        if (want == null ? got != null : !want.equals(got)) {
            throw new AssertionError(what + ": got " + got + ", want " + want);
        }
    }

    /** Polls cond every 50 ms until it holds, failing after seconds. */
    static void waitFor(String what, int seconds, BooleanSupplier cond) throws InterruptedException {
        long deadline = System.nanoTime() + seconds * 1_000_000_000L;
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + seconds + " s waiting for: " + what);
            }
            Thread.sleep(50);
        }
    }

    /**
     * Polls until want records arrived (failing after seconds), then polls
     * once more for extra: more records than want are returned, so callers
     * can check there were none.
     */
    static List<ConsumerRecord<String, String>> pollN(KafkaConsumer<String, String> c, int want, int seconds, Duration extra) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.nanoTime() + seconds * 1_000_000_000L;
        while (got.size() < want) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + seconds + " s with " + got.size() + " of " + want + " records");
            }
            c.poll(Duration.ofMillis(200)).forEach(got::add);
        }
        if (!extra.isZero()) {
            c.poll(extra).forEach(got::add);
        }
        return got;
    }

    /** Reads the partitions from their beginning to their end offsets (the LSO under read_committed). */
    static List<ConsumerRecord<String, String>> readAll(KafkaConsumer<String, String> c, Collection<TopicPartition> tps, int seconds) {
        c.assign(tps);
        c.seekToBeginning(tps);
        Map<TopicPartition, Long> end = c.endOffsets(tps);
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.nanoTime() + seconds * 1_000_000_000L;
        while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + seconds + " s reading to " + end + " (" + got.size() + " records)");
            }
            c.poll(Duration.ofMillis(200)).forEach(got::add);
        }
        return got;
    }
}
