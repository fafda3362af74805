// Package groupconfig is Kafka's group configs (KIP-848, KIP-932: the
// GROUP config resource, type 32) and the broker settings that give their
// defaults and bounds, with Apache Kafka 4.4's names, defaults, bounds and
// error messages.
//
// Two layers:
//
//   - Broker: the broker settings (group.share.*, group.consumer.*)
//     parsed once at start (cmd/strata/share_config.go, group_config.go).
//     WithDefaults fills Kafka's defaults, Check applies Kafka's
//     cross-checks (a default between its min and max, a heartbeat
//     interval below the session timeout).
//   - A group's overrides: a map of group config name to value, as
//     IncrementalAlterConfigs or AlterConfigs on a GROUP resource sets them.
//     Validate checks them against a Broker as Kafka's GroupConfig.validate
//     does (unknown names, types, Kafka's lower bounds, then the broker's
//     min/max); Resolve turns overrides over a Broker into the effective
//     values (Effective), cheap enough for every ShareFetch.
//
// Where the overrides live is not this package's business: replication
// keeps them in the replicated metadata (replication/metadata_group_configs.go),
// protocol validates and describes them (44, 33, 32) and resolves them for
// the share-partition leader (protocol/share_config.go); the group
// coordinator resolves membership values (session timeout, heartbeat
// interval) the same way.
//
// Group configs Kafka 4.4 defines that Strata does not serve (streams.*,
// *.assignment.interval.ms, *.assignor.offload.enable,
// streams.assignor.name) are refused as
// INVALID_CONFIG "not supported", never silently stored.
//
// Everything here is pure: no clock, no I/O, safe from any goroutine.
package groupconfig
