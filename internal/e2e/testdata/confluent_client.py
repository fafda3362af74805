"""Drive Strata with python3-confluent-kafka (librdkafka): admin, idempotent
producer in several codecs, consumer by assignment. Prints 'ok N' at the end;
any failure raises and exits non-zero."""
import sys, time
from confluent_kafka import Producer, Consumer, TopicPartition, KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic = sys.argv[1], sys.argv[2]
N = 3000
deadline = time.time() + 60

admin = AdminClient({"bootstrap.servers": bootstrap})
fs = admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
for t, f in fs.items():
    f.result(timeout=20)
md = admin.list_topics(timeout=20)
assert topic in md.topics, "created topic missing from metadata"
assert len(md.topics[topic].partitions) == 3, md.topics[topic].partitions
assert len(md.brokers) == 1, md.brokers

acked = {}
errors = []
def report(err, msg):
    if err is not None:
        errors.append(err)
    else:
        acked[(msg.partition(), msg.offset())] = (msg.key(), msg.value())

for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "compression.type": codec, "linger.ms": 5})
    for i in range(N // 5):
        p.produce(topic, key=("%s-%d" % (codec, i)).encode(), value=("value %s %d " % (codec, i)).encode() * (i % 7), on_delivery=report)
        p.poll(0)
    left = p.flush(30)
    assert left == 0, "%d messages not delivered" % left
assert not errors, errors
assert len(acked) == N, len(acked)

c = Consumer({"bootstrap.servers": bootstrap, "group.id": "py-assign", "enable.auto.commit": False,
              "auto.offset.reset": "earliest"})
c.assign([TopicPartition(topic, p, 0) for p in range(3)])
got = {}
while len(got) < N and time.time() < deadline:
    m = c.poll(1.0)
    if m is None:
        continue
    if m.error():
        if m.error().code() == KafkaError._PARTITION_EOF:
            continue
        raise Exception(m.error())
    got[(m.partition(), m.offset())] = (m.key(), m.value())
c.close()
assert got == acked, "consumed records differ from acknowledged ones (%d vs %d)" % (len(got), len(acked))
lo, hi = Consumer({"bootstrap.servers": bootstrap, "group.id": "py-wm"}).get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
assert lo == 0 and hi == sum(1 for (p, _) in acked if p == 0), (lo, hi)
print("ok", len(got))
