package client

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"
)

// Sends configures how an executor sends its one request: the same key and
// body on every send, at most MaxSends of them. Zero values take defaults.
type Sends struct {
	// HTTPClient sends (default http.DefaultClient's transport; redirects
	// are never followed).
	HTTPClient *http.Client
	// MaxSends bounds the sends of one call (default 3, at most 10).
	MaxSends int
	// SendTimeout bounds one send (default 10s).
	SendTimeout time.Duration
	// Backoff is the pause before the second send, doubled before each
	// next (default 200ms).
	Backoff time.Duration
}

// maxSendsLimit bounds MaxSends: a resend is cheap for the provider only
// while its key is remembered, and each is one more request in flight.
const maxSendsLimit = 10

// maxProviderAnswer bounds an answer read from the provider.
const maxProviderAnswer = 1 << 20

// sent is one send, classified.
type sent struct {
	Result
	status    int  // 0 when no answer arrived
	replayed  bool // the provider marked the answer a replay of the key's saved result
	retryable bool // sending the same request again is sensible after this
}

// call makes the sends of one call to target and concludes them: at most
// MaxSends, backing off, until one is Completed or not worth sending again,
// never starting one once ctx is done.
func (s Sends) call(ctx context.Context, target string, header http.Header, body []byte, classify func(status int, h http.Header, body []byte) sent) Result {
	hc := *cmp.Or(s.HTTPClient, http.DefaultClient) // a copy: the caller's client is not modified
	hc.Timeout = 0                                  // the per-send timeout is the request's context
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	maxSends := min(cmp.Or(s.MaxSends, 3), maxSendsLimit)
	backoff := cmp.Or(s.Backoff, 200*time.Millisecond)
	var sends []sent
	stop := ""
	for i := 1; i <= maxSends; i++ {
		if i > 1 {
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff *= 2
		}
		if err := ctx.Err(); err != nil {
			stop = "no further send: " + context.Cause(ctx).Error()
			break
		}
		r := s.exchange(ctx, &hc, target, header, body, classify)
		sends = append(sends, r)
		if r.Outcome == Completed || !r.retryable {
			break
		}
		if i == maxSends {
			stop = fmt.Sprintf("gave up after %d sends", i)
		}
	}
	return conclude(sends, stop)
}

// exchange is one send under SendTimeout, classified.
func (s Sends) exchange(ctx context.Context, hc *http.Client, target string, header http.Header, body []byte,
	classify func(int, http.Header, []byte) sent) sent {
	sendCtx, cancel := context.WithTimeout(ctx, cmp.Or(s.SendTimeout, 10*time.Second))
	defer cancel()
	var gotConn atomic.Bool
	sendCtx = httptrace.WithClientTrace(sendCtx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) }})
	req, err := http.NewRequestWithContext(sendCtx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return sent{Result: Result{Outcome: NotApplied, Detail: "request not built, nothing sent: " + err.Error()}}
	}
	req.GetBody = nil // no transparent resend by the transport: every send is one of ours
	req.Header = header.Clone()
	resp, err := hc.Do(req)
	if err != nil {
		var opErr *net.OpError
		switch {
		case !gotConn.Load() && errors.As(err, &opErr) && opErr.Op == "dial":
			return sent{Result: Result{Outcome: NotApplied, Detail: "connection not established, nothing sent: " + err.Error()}, retryable: ctx.Err() == nil}
		case ctx.Err() != nil:
			return sent{Result: Result{Outcome: Unknown, Detail: "cancelled mid-request (" + context.Cause(ctx).Error() + "): " + err.Error()}}
		default:
			return sent{Result: Result{Outcome: Unknown, Detail: "no answer: " + err.Error()}, retryable: true}
		}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxProviderAnswer+1))
	if err != nil || len(data) > maxProviderAnswer {
		return sent{Result: Result{Outcome: Unknown, Detail: fmt.Sprintf("HTTP %d, answer unreadable or over %d bytes: %v", resp.StatusCode, maxProviderAnswer, err)},
			status: resp.StatusCode, retryable: err != nil && ctx.Err() == nil}
	}
	return classify(resp.StatusCode, resp.Header, data)
}

// conclude classifies the whole call from its sends: the first Completed
// ends it; otherwise the last send decides, except that a NotApplied after
// an earlier Unknown send is Unknown unless the provider marked it a replay
// of the key's saved answer (the earlier send may have reached it, and a
// fresh rejection of a resend proves nothing about that one). No send at
// all is NotApplied. The last provider reference seen is kept.
func conclude(sends []sent, stop string) Result {
	if len(sends) == 0 {
		return Result{Outcome: NotApplied, Detail: strings.TrimSuffix("not sent: "+stop, ": ")}
	}
	last := sends[len(sends)-1]
	res := Result{Outcome: last.Outcome, Detail: fmt.Sprintf("send %d: %s", len(sends), last.Detail)}
	for _, s := range sends {
		res.ProviderReference = cmp.Or(s.ProviderReference, res.ProviderReference)
	}
	if last.Outcome == NotApplied && !last.replayed {
		for i, s := range sends[:len(sends)-1] {
			if s.Outcome == Unknown {
				res.Outcome = Unknown
				res.Detail += fmt.Sprintf("; but send %d may have reached the provider: %s", i+1, s.Detail)
				break
			}
		}
	}
	if stop != "" {
		res.Detail += "; " + stop
	}
	return res
}

// quote bounds a provider's words for a detail (escaped when recorded).
func quote(msg string) string {
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return fmt.Sprintf("%q", msg)
}
