package main

import (
	"time"
)

// txnSettings are the broker settings of the transaction coordinator and
// of producer state, with Kafka's names and defaults.
var txnSettings = []setting{
	{"transaction.state.log.num.partitions", "50", "Partitions of __transaction_state, used when it is created."},
	{"transaction.state.log.replication.factor", "3", "Replication factor of __transaction_state, capped at the number of brokers."},
	{"transaction.state.log.segment.bytes", "104857600", "segment.bytes of __transaction_state."},
	{"transaction.max.timeout.ms", "900000", "Largest transaction.timeout.ms a producer may ask for."},
	{"transactional.id.expiration.ms", "604800000", "An idle transactional ID (no transaction open) is forgotten after this long."},
	{"transaction.abort.timed.out.transaction.cleanup.interval.ms", "10000", "How often open transactions are checked against their timeout."},
	{"transaction.remove.expired.transaction.cleanup.interval.ms", "3600000", "How often transactional IDs are checked against transactional.id.expiration.ms."},
	{"transaction.version", "2", "Level of the transaction.version feature finalized for clients (Kafka's kafka-features): 2 = KIP-890 part 2 (implicit partition adds, an epoch bump per transaction), 1 = the KIP-98 protocol."},
	{"producer.id.expiration.ms", "86400000", "A producer with no open transaction and no write for this long is forgotten by each partition."},
	{"producer.id.expiration.check.interval.ms", "600000", "How often partitions look for expired producers."},
}

// parseTxnSettings fills cfg.Txns and the producer-expiry settings.
func parseTxnSettings(merged map[string]rawValue, cfg *Config) error {
	num := func(name string, lo, hi int64) (int64, error) { return intSetting(merged, name, lo, hi) }
	ms := func(name string, lo int64) (time.Duration, error) {
		n, err := num(name, lo, 1<<62/int64(time.Millisecond))
		return time.Duration(n) * time.Millisecond, err
	}
	x := &cfg.Txns
	var err error
	var n int64
	if n, err = num("transaction.state.log.num.partitions", 1, 50000); err != nil {
		return err
	}
	x.NumPartitions = int32(n)
	if n, err = num("transaction.state.log.replication.factor", 1, 1<<15-1); err != nil {
		return err
	}
	x.ReplicationFactor = int16(n)
	if x.SegmentBytes, err = num("transaction.state.log.segment.bytes", 1<<10, 1<<31-1); err != nil {
		return err
	}
	if n, err = num("transaction.version", 1, 2); err != nil {
		return err
	}
	x.TransactionVersion = int16(n)
	if x.MaxTimeout, err = ms("transaction.max.timeout.ms", 1); err != nil {
		return err
	}
	if x.IDExpiration, err = ms("transactional.id.expiration.ms", 1); err != nil {
		return err
	}
	if x.AbortTimedOutInterval, err = ms("transaction.abort.timed.out.transaction.cleanup.interval.ms", 1); err != nil {
		return err
	}
	if x.RemoveExpiredInterval, err = ms("transaction.remove.expired.transaction.cleanup.interval.ms", 1); err != nil {
		return err
	}
	if cfg.ProducerIDExpiration, err = ms("producer.id.expiration.ms", 1); err != nil {
		return err
	}
	if cfg.ProducerIDExpirationCheck, err = ms("producer.id.expiration.check.interval.ms", 1); err != nil {
		return err
	}
	return nil
}
