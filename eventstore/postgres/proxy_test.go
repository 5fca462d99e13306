package postgres_test

import (
	"io"
	"net"
	"sync"
	"testing"
)

// tcpProxy forwards connections from a loopback port to upstream until
// Close, which drops every connection it carries and stops listening: to a
// client, the server has gone away.
type tcpProxy struct {
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, upstream string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &tcpProxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.Close)
	return p
}

// Addr is the address clients dial.
func (p *tcpProxy) Addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		server, err := net.Dial("tcp", p.upstream)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		p.wg.Go(func() { pipe(server, client) })
		p.wg.Go(func() { pipe(client, server) })
	}
}

// track registers both ends, or closes them and reports false if the proxy
// was closed meanwhile.
func (p *tcpProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies until either side ends or fails, then closes both so the
// other direction ends too.
func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src) // ends on EOF, a reset, or Close dropping the connections
	dst.Close()
	src.Close()
}

// Close stops listening, drops every connection and waits for the copying
// goroutines to end. It is idempotent.
func (p *tcpProxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
