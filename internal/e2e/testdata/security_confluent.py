"""Drive a secured Strata listener with confluent-kafka (librdkafka).

usage: security_confluent.py BOOTSTRAP TOPIC SECURITY_PROTOCOL CA_FILE [MECHANISM USER PASSWORD | CERT KEY]

Creates TOPIC, produces N records with an idempotent producer, consumes
them in a group and prints 'ok N'. With the password 'wrong' it expects
authentication to fail instead and prints 'refused <error>'."""
import sys, time
from confluent_kafka import Producer, Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic, proto, ca = sys.argv[1:5]
conf = {"bootstrap.servers": bootstrap, "security.protocol": proto, "ssl.ca.location": ca}
expect_refused = False
if proto.startswith("SASL"):
    mech, user, password = sys.argv[5:8]
    conf.update({"sasl.mechanisms": mech, "sasl.username": user, "sasl.password": password})
    expect_refused = password == "wrong"
else:
    cert, key = sys.argv[5:7]
    conf.update({"ssl.certificate.location": cert, "ssl.key.location": key})
if proto == "SASL_PLAINTEXT":
    del conf["ssl.ca.location"]
N = 500

if expect_refused:
    errs = []
    admin = AdminClient(dict(conf, error_cb=lambda e: errs.append(e)))
    try:
        admin.list_topics(timeout=10)
        raise AssertionError("a wrong password was accepted")
    except KafkaException as e:
        errs.append(e.args[0])
    # The authentication error reaches error_cb through poll.
    deadline = time.time() + 20
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errs) and time.time() < deadline:
        admin.poll(0.5)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errs), errs
    print("refused", [e for e in errs if e.code() == KafkaError._AUTHENTICATION][0])
    sys.exit(0)

admin = AdminClient(conf)
for t, f in admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]).items():
    f.result(timeout=20)

errors = []
def report(err, msg):
    if err is not None:
        errors.append(err)
p = Producer(dict(conf, **{"enable.idempotence": True, "acks": "all", "linger.ms": 5}))
for i in range(N):
    p.produce(topic, key=b"k%d" % i, value=b"secret value %d" % i, on_delivery=report)
    p.poll(0)
assert p.flush(30) == 0, "records not delivered"
assert not errors, errors

c = Consumer(dict(conf, **{"group.id": "sec-" + topic, "auto.offset.reset": "earliest"}))
c.subscribe([topic])
got = set()
deadline = time.time() + 60
while len(got) < N and time.time() < deadline:
    m = c.poll(1.0)
    if m is None:
        continue
    if m.error():
        raise KafkaException(m.error())
    got.add(m.key())
c.close()
assert len(got) == N, "consumed %d of %d" % (len(got), N)
print("ok", len(got))
