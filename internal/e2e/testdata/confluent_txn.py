"""Transactions with python3-confluent-kafka (librdkafka): a transactional
producer commits one transaction and aborts another, a read_committed
consumer sees only the committed records and a read_uncommitted one sees
both; a second producer with the same transactional.id fences the first.
Prints 'ok' at the end; any failure raises and exits non-zero."""
import sys, time
from confluent_kafka import Producer, Consumer, TopicPartition, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic = sys.argv[1], sys.argv[2]
admin = AdminClient({"bootstrap.servers": bootstrap})
for t, f in admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]).items():
    f.result(timeout=20)

def producer(txn_id):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 20000})
    p.init_transactions(20)
    return p

p = producer("py-txn")
p.begin_transaction()
for i in range(100):
    p.produce(topic, key=b"c%d" % i, value=b"committed %d" % i, partition=i % 2)
p.commit_transaction(20)

p.begin_transaction()
for i in range(50):
    p.produce(topic, key=b"a%d" % i, value=b"aborted %d" % i, partition=i % 2)
p.flush(20)
p.abort_transaction(20)

p.begin_transaction()
for i in range(100, 120):
    p.produce(topic, key=b"c%d" % i, value=b"committed %d" % i, partition=i % 2)
p.commit_transaction(20)

def consume(isolation, want):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "py-txn-" + isolation, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": isolation, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(2)])
    got, eof, deadline = [], set(), time.time() + 30
    while len(eof) < 2 and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
                continue
            raise Exception(m.error())
        eof.discard(m.partition())
        got.append(m.value())
    c.close()
    assert len(got) == want, "%s: %d records, want %d" % (isolation, len(got), want)
    return got

committed = consume("read_committed", 120)
assert all(v.startswith(b"committed") for v in committed), "read_committed saw aborted records"
everything = consume("read_uncommitted", 170)
assert sum(1 for v in everything if v.startswith(b"aborted")) == 50

# Fencing: a new instance with the same transactional.id fences the old one.
p.begin_transaction()
p.produce(topic, value=b"zombie", partition=0)
p.flush(20)
p2 = producer("py-txn")
fenced = False
try:
    p.produce(topic, value=b"zombie 2", partition=0)
    p.commit_transaction(20)
except KafkaException as e:
    fenced = e.args[0].fatal() or e.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
assert fenced, "the first producer was not fenced"
p2.begin_transaction()
p2.produce(topic, key=b"c-final", value=b"committed final", partition=1)
p2.commit_transaction(20)
committed = consume("read_committed", 121)
assert b"zombie" not in committed and b"zombie 2" not in committed
print("ok")
