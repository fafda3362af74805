package main

import "testing"

func TestParseDevCommand(t *testing.T) {
	for _, c := range []struct {
		line, verb string
		id         int
		bad        bool
	}{
		{line: "restart 2", verb: "restart", id: 2},
		{line: "  r 3 ", verb: "restart", id: 3},
		{line: "k 1", verb: "kill", id: 1},
		{line: "stop 2", verb: "stop", id: 2},
		{line: "s", verb: "status"},
		{line: "status", verb: "status"},
		{line: "status 2", bad: true},
		{line: "restart", bad: true},
		{line: "restart two", bad: true},
		{line: "restart 1 2", bad: true},
		{line: "reboot 1", bad: true},
		{line: "", bad: true},
	} {
		verb, id, err := parseDevCommand(c.line)
		if (err != nil) != c.bad || verb != c.verb || id != c.id {
			t.Errorf("%q: %q %d %v", c.line, verb, id, err)
		}
	}
}
