package replication

// TopicNames returns the name of every topic, sorted, and the version of
// the metadata they come from (it moves with every applied metadata
// command, so callers can cache what they derive from the names -- a
// group's regex subscriptions -- until it moves). The slice is shared with
// the metadata image: never modify it.
func (q *metadataQuorum) TopicNames() ([]string, int64) {
	img := q.img.Load()
	return img.names, img.applied
}
