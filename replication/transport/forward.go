package transport

import (
	"time"

	"github.com/hashicorp/raft"
)

// Forwarded requests: a broker-level request (not raft's) sent to the
// Mux of another broker, whose forward handler answers it (metadata
// writes sent to the controller).

// maxForwardsInFlight bounds concurrent forwarded requests per Mux.
const maxForwardsInFlight = 64

// SetForwardHandler sets the handler of requests other brokers Forward to
// this one. It runs on its own goroutine per request (at most
// maxForwardsInFlight at once) and may block.
func (m *Mux) SetForwardHandler(fn func(req []byte) ([]byte, error)) {
	m.fwdMu.Lock()
	m.fwd = fn
	m.fwdMu.Unlock()
}

// Forward sends req to the Mux at target and returns its handler's answer.
func (m *Mux) Forward(target raft.ServerAddress, req []byte, timeout time.Duration) ([]byte, error) {
	cc, err := m.conn(target, "", true)
	if err != nil {
		return nil, err
	}
	var resp rawMsg
	cl, err := cc.start(kindForward, "", &rawMsg{b: req}, &resp)
	if err != nil {
		return nil, err
	}
	if err := cc.wait(cl, timeout); err != nil {
		return nil, err
	}
	return resp.b, nil
}

func (m *Mux) handleForward(f frame, w *frameWriter, peer string) error {
	var req rawMsg
	if err := decodeRPC(f.body, &req); err != nil {
		return err
	}
	if m.cfg.CheckForward != nil {
		if err := m.cfg.CheckForward(peer, req.b); err != nil {
			m.framesRefused.Add(1)
			m.logger.Warn("raft transport: forwarded request refused", "node", peer, "err", err)
			return w.writeError(f.reqID, nil, err.Error())
		}
	}
	m.fwdMu.Lock()
	fn := m.fwd
	m.fwdMu.Unlock()
	if fn == nil {
		return w.writeError(f.reqID, nil, "no forward handler")
	}
	select {
	case m.fwdSem <- struct{}{}:
	default:
		return w.writeError(f.reqID, nil, "too many forwarded requests")
	}
	reqID := f.reqID
	m.fwdWG.Add(1)
	go func() {
		defer m.fwdWG.Done()
		defer func() { <-m.fwdSem }()
		var resp []byte
		err := m.guard("forwarded request", func() error {
			var err error
			resp, err = fn(req.b)
			return err
		})
		if err != nil {
			w.writeError(reqID, nil, err.Error())
			return
		}
		w.writeMsg(kindResponse, reqID, nil, &rawMsg{b: resp})
	}()
	return nil
}
