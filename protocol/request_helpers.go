package protocol

import (
	"context"
	"time"
)

// Small pieces several handlers share.

// requestTimeout bounds ctx by a request's TimeoutMillis; zero or negative
// leaves it as it is (the connection's own bounds still apply). Always
// call the returned cancel.
func requestTimeout(ctx context.Context, millis int32) (context.Context, context.CancelFunc) {
	if millis <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, time.Duration(millis)*time.Millisecond)
}

// nullableString is s, or nil (null on the wire) when s is empty: a
// broker's rack, for instance.
func nullableString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
