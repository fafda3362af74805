package protocol

import (
	"context"
	"net"
)

// clientInfo is the identity of the connection a request came on, for the
// handlers that record it (JoinGroup: DescribeGroups shows each member's
// client ID and host).
type clientInfo struct {
	id   string // the request header's client ID ("" when null)
	host string // Kafka's form: "/" + remote IP
}

type clientInfoKey struct{}

func withClient(ctx context.Context, id *string, remote net.Addr) context.Context {
	ci := clientInfo{}
	if id != nil {
		ci.id = *id
	}
	if remote != nil {
		host := remote.String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		ci.host = "/" + host
	}
	return context.WithValue(ctx, clientInfoKey{}, ci)
}

func clientFrom(ctx context.Context) clientInfo {
	ci, _ := ctx.Value(clientInfoKey{}).(clientInfo)
	return ci
}
