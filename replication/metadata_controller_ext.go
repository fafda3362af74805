package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Requests to the controller for the layers above: a package registers a
// handler by name (HandleControllerRequests) on every broker, and any
// broker asks the current controller (AskController) over the Mux's
// forwarding, or itself when it is the controller. The controller's
// handler keeps whatever cluster-wide view it needs in memory: it is
// lost when the controller changes (the share groups' dead-letter flood
// guard sums its brokers' counts this way).

// ErrNoControllerHandler: the controller (or the broker asked) has no
// handler of that name (an older binary in a rolling upgrade).
var ErrNoControllerHandler = errors.New("replication: the controller has no handler for the request")

// HandleControllerRequests registers fn to answer requests named name
// when this broker is the controller.
func (q *metadataQuorum) HandleControllerRequests(name string, fn func(payload []byte) ([]byte, error)) {
	q.extMu.Lock()
	defer q.extMu.Unlock()
	if q.ext == nil {
		q.ext = map[string]func([]byte) ([]byte, error){}
	}
	q.ext[name] = fn
}

func (q *metadataQuorum) extHandler(name string) func([]byte) ([]byte, error) {
	q.extMu.Lock()
	defer q.extMu.Unlock()
	return q.ext[name]
}

// AskController sends payload to the controller's handler named name and
// returns its answer. Payloads and answers are JSON.
func (q *metadataQuorum) AskController(ctx context.Context, name string, payload []byte) ([]byte, error) {
	if q.raft.State() == raft.Leader {
		fn := q.extHandler(name)
		if fn == nil {
			return nil, fmt.Errorf("%w: %s", ErrNoControllerHandler, name)
		}
		return fn(payload)
	}
	timeout := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	resp, err := q.forward(forwardRequest{Ext: name, Payload: payload}, timeout)
	if err != nil {
		return nil, err
	}
	if len(resp.Payload) == 0 {
		// An older controller takes the request for an empty metadata
		// command and refuses it; or the handler failed (Msg).
		return nil, fmt.Errorf("%w: %s: %s", ErrNoControllerHandler, name, resp.Msg)
	}
	return resp.Payload, nil
}

// AskBroker sends payload to the handler named name on broker node
// (a metadata voter or a broker-only node), controller or not, and
// returns its answer.
func (q *metadataQuorum) AskBroker(ctx context.Context, node int32, name string, payload []byte) ([]byte, error) {
	if node == q.cfg.NodeID {
		fn := q.extHandler(name)
		if fn == nil {
			return nil, fmt.Errorf("%w: %s", ErrNoControllerHandler, name)
		}
		return fn(payload)
	}
	addr, err := q.peerAddr(node) // a voter's, or a broker-only node's registered one
	if err != nil {
		return nil, err
	}
	timeout := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	req, err := json.Marshal(forwardRequest{Ext: name, Payload: payload, ExtAny: true})
	if err != nil {
		return nil, err
	}
	out, err := q.mux.Forward(addr, req, timeout)
	if err != nil {
		return nil, fmt.Errorf("broker %d: %w", node, err)
	}
	var resp forwardResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("broker %d: bad answer: %w", node, err)
	}
	if resp.Err != "" {
		return nil, sentinelError(resp.Err, resp.Msg)
	}
	if len(resp.Payload) == 0 {
		return nil, fmt.Errorf("%w: %s on broker %d: %s", ErrNoControllerHandler, name, node, resp.Msg)
	}
	return resp.Payload, nil
}

// handleExt answers a forwarded Ext request: on the controller, or on
// any broker with any (AskBroker).
func (q *metadataQuorum) handleExt(name string, payload []byte, any bool) forwardResponse {
	var resp forwardResponse
	if !any && q.raft.State() != raft.Leader {
		err := fmt.Errorf("%w: leadership moved", ErrNotController)
		resp.Err, resp.Msg = sentinelName(err), err.Error()
		return resp
	}
	fn := q.extHandler(name)
	if fn == nil {
		resp.Msg = ErrNoControllerHandler.Error() + ": " + name
		return resp
	}
	out, err := fn(payload)
	if err != nil {
		resp.Msg = err.Error()
		return resp
	}
	if !json.Valid(out) {
		resp.Msg = "the handler's answer is not JSON"
		return resp
	}
	resp.Payload = out
	return resp
}

// DeleteTopicEnabled is delete.topic.enable.
func (q *metadataQuorum) DeleteTopicEnabled() bool { return q.cfg.DeleteTopicEnable }
