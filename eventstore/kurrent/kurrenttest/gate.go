package kurrenttest

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Mode is what a Gate does with connections.
type Mode int

const (
	// Serving forwards every connection to the target.
	Serving Mode = iota
	// Refusing listens on nothing: connection attempts are refused and the
	// connections that were open are cut.
	Refusing
	// Blackholing accepts connections and never answers them; the
	// connections that were open stop carrying bytes (a network partition:
	// what was sent is delivered if the gate serves again).
	Blackholing
)

func (m Mode) String() string {
	switch m {
	case Serving:
		return "serving"
	case Refusing:
		return "refusing"
	case Blackholing:
		return "blackholing"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// dialTimeout bounds connecting to the target for one accepted connection.
const dialTimeout = 5 * time.Second

// copyBuffer is the size of the buffer each direction of a connection is
// copied through.
const copyBuffer = 32 << 10

// Gate is a TCP front for a server on loopback whose behaviour tests switch
// at will. Its address stays the same across modes. It is safe for
// concurrent use.
type Gate struct {
	target string
	addr   string

	mu    sync.Mutex
	mode  Mode
	ln    net.Listener // nil while refusing
	pipes map[*pipe]struct{}
	held  map[net.Conn]struct{} // connections accepted while blackholing
	thaw  chan struct{}         // closed when blackholing ends
	shut  bool
	wg    sync.WaitGroup // accept loops and copiers
}

// NewGate listens on a free loopback port and forwards to target
// ("host:port").
func NewGate(target string) (*Gate, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("kurrenttest: gate: %w", err)
	}
	g := &Gate{target: target, addr: ln.Addr().String(), pipes: map[*pipe]struct{}{}, held: map[net.Conn]struct{}{}}
	g.serve(ln)
	return g, nil
}

// Addr is the gate's address, "127.0.0.1:port".
func (g *Gate) Addr() string { return g.addr }

// Mode reports what the gate does now.
func (g *Gate) Mode() Mode {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mode
}

// Rewrite returns connection string u with its host replaced by the gate's
// address. u must name a single host.
func (g *Gate) Rewrite(u string) (string, error) {
	parsed, err := url.Parse(u)
	if err != nil || strings.Contains(parsed.Host, ",") || parsed.Host == "" {
		return "", fmt.Errorf("kurrenttest: gate: %q is not a single-host connection string", redact(u))
	}
	parsed.Host = g.addr
	return parsed.String(), nil
}

// Refuse closes the listener (connection attempts are refused) and cuts
// every open connection.
func (g *Gate) Refuse() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln != nil {
		_ = g.ln.Close()
		g.ln = nil
	}
	g.dropAllLocked()
	g.setModeLocked(Refusing)
}

// Blackhole makes the gate accept connections and never answer them, and
// freezes the open ones.
func (g *Gate) Blackhole() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.listenLocked(); err != nil {
		return err
	}
	g.setModeLocked(Blackholing)
	return nil
}

// Resume makes the gate forward again. Connections accepted while
// blackholing are closed; frozen ones carry on.
func (g *Gate) Resume() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.listenLocked(); err != nil {
		return err
	}
	for c := range g.held {
		_ = c.Close()
		delete(g.held, c)
	}
	g.setModeLocked(Serving)
	return nil
}

// Close stops the gate and waits for its goroutines.
func (g *Gate) Close() {
	g.mu.Lock()
	g.shut = true
	if g.ln != nil {
		_ = g.ln.Close()
		g.ln = nil
	}
	g.dropAllLocked()
	g.setModeLocked(Refusing)
	g.mu.Unlock()
	g.wg.Wait()
}

// setModeLocked switches mode, thawing frozen copiers when blackholing ends.
func (g *Gate) setModeLocked(m Mode) {
	if g.mode == Blackholing && m != Blackholing {
		close(g.thaw)
	}
	if g.mode != Blackholing && m == Blackholing {
		g.thaw = make(chan struct{})
	}
	g.mode = m
}

func (g *Gate) listenLocked() error {
	if g.shut {
		return fmt.Errorf("kurrenttest: gate closed")
	}
	if g.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", g.addr)
	if err != nil {
		return fmt.Errorf("kurrenttest: gate: listen again on %s: %w", g.addr, err)
	}
	g.serve(ln)
	return nil
}

func (g *Gate) dropAllLocked() {
	for p := range g.pipes {
		p.close()
		delete(g.pipes, p)
	}
	for c := range g.held {
		_ = c.Close()
		delete(g.held, c)
	}
}

// serve runs ln's accept loop; it ends when ln is closed.
func (g *Gate) serve(ln net.Listener) {
	g.ln = ln
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			g.admit(c)
		}
	}()
}

// admit decides what happens to an accepted connection.
func (g *Gate) admit(c net.Conn) {
	g.mu.Lock()
	switch {
	case g.shut || g.mode == Refusing:
		g.mu.Unlock()
		_ = c.Close()
		return
	case g.mode == Blackholing:
		g.held[c] = struct{}{}
		g.mu.Unlock()
		return
	}
	g.wg.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.wg.Done()
		upstream, err := net.DialTimeout("tcp", g.target, dialTimeout)
		if err != nil {
			_ = c.Close()
			return
		}
		p := &pipe{g: g, a: c, b: upstream, done: make(chan struct{})}
		g.mu.Lock()
		if g.shut || g.mode == Refusing {
			g.mu.Unlock()
			_ = c.Close()
			_ = upstream.Close()
			return
		}
		g.pipes[p] = struct{}{}
		g.wg.Add(2)
		g.mu.Unlock()
		go p.copy(upstream, c)
		go p.copy(c, upstream)
	}()
}

// waitOpen blocks while the gate blackholes, and reports whether bytes may
// flow on p (false once p or the gate is closed).
func (g *Gate) waitOpen(p *pipe) bool {
	g.mu.Lock()
	// Bounded by mode changes: each round waits for blackholing to end.
	for g.mode == Blackholing {
		thaw := g.thaw
		g.mu.Unlock()
		select {
		case <-thaw:
		case <-p.done:
			return false
		}
		g.mu.Lock()
	}
	open := !g.shut && g.mode == Serving
	g.mu.Unlock()
	return open
}

// pipe is one forwarded connection.
type pipe struct {
	g    *Gate
	a, b net.Conn
	once sync.Once
	done chan struct{}
}

// copy moves bytes from src to dst until either side fails or the pipe is
// closed; while the gate blackholes, bytes read are held back.
func (p *pipe) copy(dst, src net.Conn) {
	defer p.g.wg.Done()
	defer p.forget()
	buf := make([]byte, copyBuffer)
	// Bounded by the connection: the loop ends when src or dst fails.
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.g.waitOpen(p) {
				p.close()
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				p.close()
				return
			}
		}
		if err != nil {
			p.close()
			return
		}
	}
}

// close closes both connections; safe to call under g.mu and more than once.
func (p *pipe) close() {
	p.once.Do(func() {
		_ = p.a.Close()
		_ = p.b.Close()
		close(p.done)
	})
}

// forget removes p from the gate's open pipes.
func (p *pipe) forget() {
	p.g.mu.Lock()
	delete(p.g.pipes, p)
	p.g.mu.Unlock()
}

// redact hides a connection string's password.
func redact(u string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return "(unparseable connection string)"
	}
	if parsed.User == nil {
		return u
	}
	if _, ok := parsed.User.Password(); ok {
		parsed.User = url.UserPassword(parsed.User.Username(), "***")
	}
	return parsed.String()
}
