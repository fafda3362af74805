package replication

import (
	"fmt"
	"strings"
)

// maxTopicNameLen is Kafka's limit: 249, so that "<topic>-<partition>"
// plus a deletion suffix still fits a 255-byte file name.
const maxTopicNameLen = 249

// validateTopicName applies Kafka's rules (org.apache.kafka.common.internals.Topic).
func validateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: topic name is empty", ErrInvalidTopic)
	case name == "." || name == "..":
		return fmt.Errorf("%w: topic name cannot be %q", ErrInvalidTopic, name)
	case len(name) > maxTopicNameLen:
		return fmt.Errorf("%w: topic name is %d characters long, more than %d", ErrInvalidTopic, len(name), maxTopicNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: topic name %q contains a character other than ASCII alphanumerics, '.', '_' and '-'", ErrInvalidTopic, name)
		}
	}
	return nil
}

// collisionKey maps a topic name to the form under which '.' and '_'
// collide: Kafka's metric names replace '.' with '_', so "a.b" and "a_b"
// cannot both exist.
func collisionKey(name string) string {
	return strings.ReplaceAll(name, ".", "_")
}

// collidingTopic returns an existing topic in im whose name collides with
// name (differs only in '.' versus '_'), or "".
func (im *image) collidingTopic(name string) string {
	if !strings.ContainsAny(name, "._") {
		return ""
	}
	key := collisionKey(name)
	for _, n := range im.names {
		if n != name && strings.ContainsAny(n, "._") && collisionKey(n) == key {
			return n
		}
	}
	return ""
}
