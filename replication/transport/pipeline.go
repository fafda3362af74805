package transport

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// The AppendEntries pipeline of a Group (raft.AppendPipeline).

// AppendEntriesPipeline returns a pipeline on the group's connection to
// target; requests and answers keep their order.
func (g *Group) AppendEntriesPipeline(_ raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if g.closed() {
		return nil, ErrClosed
	}
	cc, err := g.m.conn(target, g.id, g.id == MetadataGroup)
	if err != nil {
		return nil, err
	}
	p := &muxPipeline{
		g:        g,
		cc:       cc,
		target:   target,
		inflight: make(chan *appendFuture, pipelineDepth),
		consumer: make(chan raft.AppendFuture, pipelineDepth),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go p.decode()
	return p, nil
}

// muxPipeline pipelines AppendEntries on one connection.
type muxPipeline struct {
	g         *Group
	cc        *clientConn
	target    raft.ServerAddress
	inflight  chan *appendFuture
	consumer  chan raft.AppendFuture
	stop      chan struct{}
	done      chan struct{} // closed when decode returns
	closeOnce sync.Once
	sentLast  atomic.Uint64 // index of the last entry sent (catchup.go)
	ackLast   atomic.Uint64 // index of the last entry acknowledged (catchup.go)
	lookArmed atomic.Bool   // a catch-up look is pending (catchup.go)

	mu      sync.Mutex
	known   followerState // protected by mu; commit.go
	knownOK bool          // protected by mu; known holds an acknowledged state
}

func (p *muxPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	f := &appendFuture{start: time.Now(), req: args, resp: resp, done: make(chan struct{})}
	if p.repeat(args, resp) {
		// Answered here (commit.go); decode hands it to raft in
		// its place among the real ones.
		p.g.m.commitRepeats.Add(1)
	} else {
		cl, err := p.cc.start(kindAppendEntries, p.g.id, args, resp)
		if err != nil {
			return nil, err
		}
		f.call = cl
	}
	if n := len(args.Entries); n > 0 {
		p.sentLast.Store(args.Entries[n-1].Index)
	}
	select {
	case p.inflight <- f:
		return f, nil
	case <-p.stop:
		return nil, raft.ErrPipelineShutdown
	case <-p.g.shutdown:
		return nil, ErrClosed
	}
}

func (p *muxPipeline) Consumer() <-chan raft.AppendFuture { return p.consumer }

func (p *muxPipeline) Close() error {
	p.closeOnce.Do(func() { close(p.stop) })
	<-p.done
	return nil
}

// decode completes the futures in order and hands them to raft.
func (p *muxPipeline) decode() {
	defer close(p.done)
	for {
		select {
		case f := <-p.inflight:
			if f.call != nil {
				f.finish(p.cc.waitOr(f.call, p.g.m.cfg.RPCTimeout, p.g.shutdown))
				p.caughtUp(f)
				p.acknowledged(f)
				p.g.noteMatch(p.target, f.req, f.resp, f.err)
			} else {
				f.finish(nil)
			}
			select {
			case p.consumer <- f:
			case <-p.stop:
				return
			}
		case <-p.stop:
			return
		}
	}
}

// appendFuture is one pipelined AppendEntries.
type appendFuture struct {
	start time.Time
	req   *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	call  *call         // nil when the pipeline answered it itself
	err   error         // set before done is closed
	done  chan struct{} // closed by finish
}

func (f *appendFuture) finish(err error) {
	f.err = err
	close(f.done)
}

func (f *appendFuture) Error() error {
	<-f.done
	return f.err
}

func (f *appendFuture) Start() time.Time                      { return f.start }
func (f *appendFuture) Request() *raft.AppendEntriesRequest   { return f.req }
func (f *appendFuture) Response() *raft.AppendEntriesResponse { return f.resp }
