"""A python3-confluent-kafka (librdkafka) group consumer: subscribes to a
topic in a consumer group (assignment strategy as given: eager range or
cooperative-sticky), reads until it has `want` records (or the
deadline), commits synchronously and leaves. Prints 'consumed N'."""
import sys, time
from confluent_kafka import Consumer, KafkaError, KafkaException

bootstrap, topic, group, want = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
idle = float(sys.argv[5]) if len(sys.argv) > 5 else 0
strategy = sys.argv[6] if len(sys.argv) > 6 else "range,roundrobin"
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
              "heartbeat.interval.ms": 200, "partition.assignment.strategy": strategy})
def commit():
    # Nothing consumed since the last commit (or since the partitions
    # came) is not an error.
    try:
        c.commit(asynchronous=False)
    except KafkaException as e:
        if e.args[0].code() != KafkaError._NO_OFFSET:
            raise

# Commit what was read before giving partitions up in a rebalance.
c.subscribe([topic], on_revoke=lambda consumer, parts: commit())
n = 0
deadline = time.time() + 30
last = time.time()
while time.time() < deadline and n < want:
    m = c.poll(0.2)
    if m is None:
        if idle and n >= 0 and time.time() - last > idle:
            break
        continue
    if m.error():
        if m.error().code() == KafkaError._PARTITION_EOF:
            continue
        raise Exception(m.error())
    n += 1
    last = time.time()
commit()
c.close()
print("consumed %d" % n)
