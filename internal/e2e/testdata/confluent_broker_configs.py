"""Dynamic broker configs the librdkafka way (AdminClient.alter_configs,
the legacy AlterConfigs, and describe_configs with synonyms).
Usage: confluent_broker_configs.py BOOTSTRAP"""
import sys
from confluent_kafka.admin import AdminClient, ConfigResource

a = AdminClient({"bootstrap.servers": sys.argv[1]})


def done(fs):
    return {k: f.result(timeout=30) for k, f in fs.items()}


def broker(name, **configs):
    return ConfigResource("broker", name, set_config=configs)


# (This client refuses an empty resource name, so the cluster-wide
# default is not reachable from it.)
done(a.alter_configs([broker("1", **{"log.retention.ms": "300000", "log.segment.bytes": "4096"})]))

cfg = list(done(a.describe_configs([ConfigResource("broker", "1")])).values())[0]
for name in ("log.retention.ms", "log.segment.bytes", "num.partitions"):
    e = cfg[name]
    print("%s=%s source=%s read_only=%s" % (name, e.value, e.source, e.is_read_only))
print("synonyms: " + ",".join("%s=%s" % (s.name, s.value) for s in cfg["log.retention.ms"].synonyms.values()))

try:
    done(a.alter_configs([broker("1", **{"num.partitions": "3"})]))
    print("num.partitions: accepted")
except Exception as ex:  # KafkaException carrying INVALID_REQUEST
    print("num.partitions: refused %s" % ex.args[0].name())
