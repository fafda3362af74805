package protocol

// DescribeTransactions: v0 (txncoord.Coordinator.DescribeTransactions)
//
// Behaviour: per transactional ID its state (Kafka's names: Empty,
// Ongoing, PrepareCommit, ...), producer ID and epoch, timeout, start
// time and partitions; TRANSACTIONAL_ID_NOT_FOUND for an unknown one,
// NOT_COORDINATOR when another broker coordinates it.
func init() { regKey(65, 0, 0) }
