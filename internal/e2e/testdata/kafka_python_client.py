"""Drive Strata with python3-kafka (kafka-python 2.0, which still sends old
request versions such as Metadata v1 and Fetch v4..v10): produce, then
consume by assignment. Prints 'ok N'."""
import sys, time
from kafka import KafkaProducer, KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

bootstrap, topic = sys.argv[1], sys.argv[2]
N = 2000
admin = KafkaAdminClient(bootstrap_servers=bootstrap)
admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
assert topic in admin.list_topics()

p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="gzip")
futures = [p.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2) for i in range(N)]
p.flush(30)
acked = {}
for i, f in enumerate(futures):
    md = f.get(timeout=10)
    acked[(md.partition, md.offset)] = b"v%d" % i
p.close()

c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
c.assign(tps)
c.seek_to_beginning(*tps)
got = {}
deadline = time.time() + 60
while len(got) < N and time.time() < deadline:
    for tp, msgs in c.poll(timeout_ms=1000).items():
        for m in msgs:
            got[(m.partition, m.offset)] = m.value
c.close()
assert got == acked, "consumed %d records, %d acknowledged" % (len(got), len(acked))
print("ok", len(got))
