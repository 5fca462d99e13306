package simworld

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"syscall"
	"time"

	"opledger/adapters/provider/sim"
	"opledger/domain"
)

// network is one process's connection to the provider: an http.RoundTripper
// that hands each request to the provider simulator in process, so the real
// provider client (its resends, its classification) runs without sockets.
// It injects the faults a network has (refused connection, a request or an
// answer lost, latency past the send timeout) and arms the simulator's own
// faults for the request about to reach it. Requests take no time on the
// world's clock unless a fault delays them.
type network struct {
	w    *World
	p    *process
	name string
	// current is the thread sending.
	current func() *thread
	// sendTimeout is the client's per-send timeout, on the world's clock.
	sendTimeout time.Duration
	// sender names the execution a creation request under key is sent for.
	sender func(op, key string) domain.ExecutionID
}

// Errors a client sees.
var (
	errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	errReset   = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
)

func errTimeout(d time.Duration) error {
	return fmt.Errorf("simulated send timeout after %s: %w", d, context.DeadlineExceeded)
}

// RoundTrip implements http.RoundTripper.
func (n *network) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		_ = req.Body.Close()
	}
	if n.p.dead.Load() {
		return nil, errRefused
	}
	what, op, key := n.w.sim.Describe(req, body)
	trace := httptrace.ContextClientTrace(ctx)
	if n.w.inject(n.p, FaultNetDialRefused, "%s %s", n.name, what) {
		return nil, errRefused
	}
	if trace != nil && trace.GotConn != nil {
		trace.GotConn(httptrace.GotConnInfo{})
	}
	t := n.current()
	sent := n.w.clock.Now()
	timeoutAt := sent.Add(n.sendTimeout)
	if err := n.transit(ctx, t, "request in transit: "+what, timeoutAt); err != nil {
		return nil, err
	}
	if trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{})
	}
	if n.w.inject(n.p, FaultNetLostRequest, "%s %s", n.name, what) {
		return nil, errReset
	}
	if req.Method == http.MethodPost {
		n.w.armProviderFault(n.p, op, key, what)
		// The simulator numbers creation requests as they arrive, from 1:
		// this is request n.w.posts, sent for this execution.
		n.w.posts++
		n.w.sentFor[int64(n.w.posts)] = n.sender(op, key)
	}
	resp, err := n.deliver(ctx, t, req, body, what, timeoutAt)
	if err != nil {
		return nil, err
	}
	if n.w.inject(n.p, FaultNetLostResponse, "%s %s (HTTP %d)", n.name, what, resp.StatusCode) {
		return nil, errReset
	}
	if err := n.transit(ctx, t, "answer in transit: "+what, timeoutAt); err != nil {
		return nil, err
	}
	return resp, nil
}

// transit delays a request or an answer when net-slow strikes: the thread
// parks until the latency has passed, or the send times out first.
func (n *network) transit(ctx context.Context, t *thread, label string, timeoutAt time.Time) error {
	if !n.w.inject(n.p, FaultNetSlow, "%s %s", n.name, label) {
		return nil
	}
	latency := n.w.rng.between(500*time.Millisecond, 2*n.sendTimeout)
	w, err := n.w.s.gate(ctx, t, &park{label: label, openable: true, readyAt: n.w.clock.Now().Add(latency), due: timeoutAt})
	switch {
	case err != nil:
		return err
	case w == wakeTimeout:
		return errTimeout(n.sendTimeout)
	}
	return nil
}

// deliver runs the simulator's handler for the request. A response the
// simulator holds parks the thread until the scheduler releases it or the
// send times out (the client leaves, which ends the hold).
func (n *network) deliver(ctx context.Context, t *thread, req *http.Request, body []byte, what string, timeoutAt time.Time) (*http.Response, error) {
	hctx, leave := context.WithCancel(context.WithoutCancel(ctx))
	defer leave()
	hreq, err := http.NewRequestWithContext(hctx, req.Method, req.URL.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header = req.Header.Clone()
	hreq.RequestURI = req.URL.RequestURI()
	rec := &recorder{header: http.Header{}}
	var held <-chan struct{}
	if n.w.sim.HeldCount() == 0 {
		held = n.w.sim.Held() // at most one response is held at a time (armProviderFault)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil && r != http.ErrAbortHandler {
				panic(r)
			}
		}()
		n.w.sim.ServeHTTP(rec, hreq)
	}()
	select {
	case <-done:
	case <-held:
		w, err := n.w.s.gate(ctx, t, &park{label: "response held by the provider: " + what, held: true, due: timeoutAt})
		if w != wakeGo {
			leave() // the client goes away: the hold ends, nobody is answered
			<-done
			if w == wakeTimeout {
				return nil, errTimeout(n.sendTimeout)
			}
			return nil, err
		}
		<-done
	}
	if rec.hijacked {
		return nil, errReset
	}
	return rec.response(req), nil
}

// recorder is the handler's side of an exchange: an http.ResponseWriter
// that can be hijacked (the simulator closes connections that way).
type recorder struct {
	header   http.Header
	status   int
	body     bytes.Buffer
	hijacked bool
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// Hijack implements http.Hijacker: the connection the handler then closes
// is what the client sees as a reset.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	r.hijacked = true
	c := closedConn{}
	return c, bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c)), nil
}

func (r *recorder) response(req *http.Request) *http.Response {
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	return &http.Response{
		Status: strconv.Itoa(status) + " " + http.StatusText(status), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: r.header, Body: io.NopCloser(bytes.NewReader(r.body.Bytes())), ContentLength: int64(r.body.Len()),
		Request: req,
	}
}

// closedConn is a hijacked connection: reads and writes fail, Close works.
type closedConn struct{}

var errClosedConn = errors.New("simulated connection closed")

func (closedConn) Read([]byte) (int, error)         { return 0, errClosedConn }
func (closedConn) Write([]byte) (int, error)        { return 0, errClosedConn }
func (closedConn) Close() error                     { return nil }
func (closedConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (closedConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (closedConn) SetDeadline(time.Time) error      { return nil }
func (closedConn) SetReadDeadline(time.Time) error  { return nil }
func (closedConn) SetWriteDeadline(time.Time) error { return nil }

// providerFaults maps the world's provider fault kinds to the simulator's.
var providerFaults = []struct {
	fault Fault
	kind  sim.FaultKind
}{
	{FaultProviderDrop, sim.FaultDropConnectionBeforeRead},
	{FaultProviderDelay, sim.FaultDelay},
	{FaultProviderReject, sim.FaultRejectValidation},
	{FaultProvider5xxBefore, sim.Fault5xxBeforeCommit},
	{FaultProvider5xxAfter, sim.Fault5xxAfterCommit},
	{FaultProviderLoseResponse, sim.FaultLoseResponseAfterCommit},
	{FaultProviderHold, sim.FaultHoldResponse},
	{FaultProviderDecline, sim.FaultDecline},
}
