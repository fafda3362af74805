// Package quota is Kafka's client quotas (KIP-13, KIP-55, KIP-124,
// KIP-219, KIP-546, KIP-599): the quota entities and their configs, the
// precedence that picks the quota a request falls under, and the rate
// measurement and throttle time of Kafka's ClientQuotaManager.
//
// Entities and configs (config.go). A quota entity is a user, a client ID,
// a user and a client ID, or an IP address, each either named or the
// default (a nil name). The configs are Kafka's: producer_byte_rate,
// consumer_byte_rate, request_percentage and controller_mutation_rate for
// user and client-ID entities, connection_creation_rate for IP entities.
// A Set (immutable) holds every entity's configs; it is what the metadata
// log replicates (replication/metadata_quotas.go).
//
// Precedence. For a request from user U with client ID C, the quota of one
// config is taken from the first of these entities that sets it, as
// Kafka's DefaultQuotaCallback does:
//
//	user=U, client-id=C
//	user=U, client-id=<default>
//	user=U
//	user=<default>, client-id=C
//	user=<default>, client-id=<default>
//	user=<default>
//	client-id=C
//	client-id=<default>
//
// The entity found also decides who shares the measured rate: a quota
// whose entity names a user (U or the default) is measured per user, one
// whose entity names a client ID (C or the default) per client ID, both
// for both; so every client of user U shares U's user quota, and each
// client ID has its own rate under a client-id default.
//
// Measurement (rate.go). Kafka's Rate over a SampledStat: quota.window.num
// samples (default 11) of quota.window.size.seconds each (default 1); the
// rate is the samples' total over the time they span, counted as at least
// (num-1) windows, so a fresh client is measured over 10 s, not over its
// first millisecond. After recording a value, a rate above the quota Q
// gives the throttle time (O-Q)/Q * W: the time that, with nothing more
// recorded, brings the observed rate O over window W back to Q
// (QuotaUtils.throttleTime). controller_mutation_rate is a token bucket
// instead (KIP-599): burst Q * num * size tokens, refilled at Q per second;
// a mutation is refused while the bucket is below zero, and the throttle
// time is the time to refill it to zero.
//
// Time is an argument (milliseconds), never read inside: tests drive the
// clock (rate_test.go).
//
// Concurrency: a Set is immutable. A Manager is safe for concurrent use;
// each sensor has its own mutex, the sensor table one more (lock order:
// Manager.mu, then a sensor's mu).
package quota
