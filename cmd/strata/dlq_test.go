package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestDLQCommandLine: `strata dlq` refuses bad command lines with the
// configuration exit code before it connects anywhere.
func TestDLQCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"dlq"}, exitConfig, "Usage: strata dlq"},
		{[]string{"dlq", "help"}, exitOK, "redrive --group G"},
		{[]string{"dlq", "frob"}, exitConfig, `unknown command "frob"`},
		{[]string{"dlq", "inspect"}, exitConfig, "--group is required"},
		{[]string{"dlq", "redrive", "--execute"}, exitConfig, "--group is required"},
		{[]string{"dlq", "redrive", "--group", "g", "--since", "yesterday"}, exitConfig, "--since"},
		{[]string{"dlq", "list", "extra"}, exitConfig, "unexpected arguments"},
	} {
		var out, errOut bytes.Buffer
		code := run(tc.args, nil, &out, &errOut)
		if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.want) {
			t.Errorf("strata %s: code %d, output %q %q; want code %d and %q", strings.Join(tc.args, " "), code, out.String(), errOut.String(), tc.code, tc.want)
		}
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	if got, err := parseSince("2h", now); err != nil || !got.Equal(now.Add(-2*time.Hour)) {
		t.Errorf("2h: %v %v", got, err)
	}
	if got, err := parseSince("2026-12-01T09:00:00Z", now); err != nil || !got.Equal(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("RFC 3339: %v %v", got, err)
	}
	if _, err := parseSince("soon", now); err == nil {
		t.Error("soon accepted")
	}
}
