// Package raftconf holds Strata's settings for hashicorp/raft, shared by
// the metadata quorum and the partition groups: New sets every field of a
// raft.Config explicitly (hashicorp's DefaultConfig is tuned for one group
// per process), Timing and its two presets set the cost of an idle group
// against how fast a dead leader is replaced (replication/doc.go, "Raft
// timing"), and NewLogger turns raft's hclog lines into the broker's slog
// records, re-levelled so that normal operation does not log at WARN.
package raftconf
