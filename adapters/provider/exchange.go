package provider

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"

	"opledger/domain"
)

// sendTrace records how far one send got; its hooks run on transport
// goroutines.
type sendTrace struct {
	gotConn      atomic.Bool // a connection was handed to this request
	wroteRequest atomic.Bool // the whole request was written
}

func (t *sendTrace) hooks() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { t.gotConn.Store(true) },
		WroteRequest: func(httptrace.WroteRequestInfo) { t.wroteRequest.Store(true) },
	}
}

func (t *sendTrace) progress() string {
	switch {
	case t.wroteRequest.Load():
		return "request written"
	case t.gotConn.Load():
		return "connected, request possibly partly written"
	default:
		return "no connection traced"
	}
}

// exchanged is one HTTP exchange: a complete response, or fail when none
// could be read.
type exchanged struct {
	status int
	header http.Header
	body   []byte
	fail   *sendResult
}

// exchange sends one request under the per-send timeout and reads the whole
// response (at most maxResponseBytes). The transport cannot resend it: the
// request has no GetBody.
func (c *Client) exchange(ctx context.Context, method, target string, body []byte, header http.Header) exchanged {
	sendCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	trace := &sendTrace{}
	sendCtx = httptrace.WithClientTrace(sendCtx, trace.hooks())

	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(sendCtx, method, target, rd)
	if err != nil {
		return exchanged{fail: &sendResult{outcome: domain.NotApplied, detail: "request not built, nothing sent: " + err.Error()}}
	}
	req.GetBody = nil // no transparent resend by the transport: every send is the client's own
	req.Header = header.Clone()

	resp, err := c.http.Do(req)
	if err != nil {
		r := classifyTransportError(ctx, err, trace)
		return exchanged{fail: &r}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return exchanged{fail: &sendResult{outcome: domain.Unknown, status: resp.StatusCode, retryable: ctx.Err() == nil,
			detail: fmt.Sprintf("HTTP %d, body unreadable: %v", resp.StatusCode, err)}}
	}
	if len(data) > maxResponseBytes {
		return exchanged{fail: &sendResult{outcome: domain.Unknown, status: resp.StatusCode,
			detail: fmt.Sprintf("HTTP %d, body larger than %d bytes", resp.StatusCode, maxResponseBytes)}}
	}
	return exchanged{status: resp.StatusCode, header: resp.Header, body: data}
}
