"""librdkafka's share consumer (confluent-kafka-python's ShareConsumer)
against Strata: consumes a share group in explicit acknowledgement mode,
accepting every record but those whose value starts with "reject" (REJECT)
or "release" (RELEASE on first delivery, accepted when it comes back),
until `want` distinct records are done. Prints one JSON line.

usage: confluent_share.py BOOTSTRAP TOPIC GROUP WANT
"""
import json
import sys
import time

from confluent_kafka import AcknowledgeType, ShareConsumer

bootstrap, topic, group, want = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = ShareConsumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "share.acknowledgement.mode": "explicit",
})
c.subscribe([topic])
done = {}        # (partition, offset) -> outcome
deliveries = 0
released_once = set()
deadline = time.time() + 60
errors = []
while len(done) < want and time.time() < deadline:
    msgs = c.poll(1.0)
    for m in msgs:
        if m.error():
            errors.append(str(m.error()))
            continue
        deliveries += 1
        key = (m.partition(), m.offset())
        v = m.value().decode()
        if v.startswith("reject"):
            c.acknowledge(m, AcknowledgeType.REJECT)
            done[key] = "rejected"
        elif v.startswith("release") and key not in released_once:
            released_once.add(key)
            c.acknowledge(m, AcknowledgeType.RELEASE)
        else:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
            done[key] = "accepted"
    if msgs:
        c.commit_sync()
c.close()
print(json.dumps({
    "done": len(done),
    "accepted": sum(1 for o in done.values() if o == "accepted"),
    "rejected": sum(1 for o in done.values() if o == "rejected"),
    "released": len(released_once),
    "deliveries": deliveries,
    "errors": errors[:5],
}))
