package protocol

// ListTransactions: v0-1 (txncoord.Coordinator.ListTransactions)
//
// Behaviour: the transactions of every __transaction_state partition this
// broker leads (clients ask every broker), filtered by state names
// (unknown names are echoed in UnknownStateFilters), producer IDs and
// (v1) DurationFilterMillis: transactions running at least that long.
//
// Version notes: v2's TransactionalIDPattern is not offered.
func init() { regKey(66, 0, 1) }
