package replication

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateTopicName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"orders", true},
		{"a.b_c-D9", true},
		{strings.Repeat("x", 249), true},
		{strings.Repeat("x", 250), false},
		{"", false},
		{".", false},
		{"..", false},
		{"...", true},
		{"with space", false},
		{"slash/", false},
		{"ü", false},
		{"nul\x00", false},
	}
	for _, tt := range tests {
		err := validateTopicName(tt.name)
		if tt.ok != (err == nil) {
			t.Errorf("%q: err = %v", tt.name, err)
		}
		if err != nil && !errors.Is(err, ErrInvalidTopic) {
			t.Errorf("%q: %v does not wrap ErrInvalidTopic", tt.name, err)
		}
	}
}

func TestCollidingTopic(t *testing.T) {
	im := newImage()
	im.withTopics(func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo) {
		topics["a.b"] = &TopicInfo{Name: "a.b"}
		topics["plain"] = &TopicInfo{Name: "plain"}
	})
	for name, want := range map[string]string{"a_b": "a.b", "a.b": "", "a-b": "", "plain": "", "x_y": ""} {
		if got := im.collidingTopic(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}
