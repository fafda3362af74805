"""Reset a group's offsets the librdkafka way: a consumer that does not
subscribe commits explicit offsets (a "simple" commit, generation -1).
Usage: confluent_commit.py BOOTSTRAP GROUP TOPIC PARTITIONS OFFSET"""
import sys
from confluent_kafka import Consumer, TopicPartition

bootstrap, group, topic, parts, offset = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
res = c.commit(offsets=[TopicPartition(topic, p, offset) for p in range(parts)], asynchronous=False)
for tp in res:
    if tp.error is not None:
        raise Exception(tp.error)
got = c.committed([TopicPartition(topic, p) for p in range(parts)], timeout=20)
assert all(tp.offset == offset for tp in got), got
c.close()
print("committed %d" % parts)
