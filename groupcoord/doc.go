// Package groupcoord will own consumer groups (classic and KIP-848), offset
// commits, share groups (KIP-932) and transaction coordinator state, all
// persisted in internal compacted topics. Not built yet: see the groups and
// transactions issues.
package groupcoord
