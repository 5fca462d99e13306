package provider

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"opledger/domain"
	"opledger/domain/simbug"
)

// Client is the provider adapter behind domain.Provider: one client for
// every provider, speaking to each through its wire adapter (the profile's
// API). It is safe for concurrent use.
type Client struct {
	cfg     Config
	http    *http.Client
	baseURL string // escaped, without a trailing slash, query or fragment
	wire    wire
	profile domain.ProviderProfile
	log     *slog.Logger
}

var _ domain.Provider = (*Client)(nil)

// New validates cfg, fills its defaults and returns a client.
func New(cfg Config) (*Client, error) {
	cfg.setDefaults()
	if cfg.Profile.API == APIExports {
		return nil, fmt.Errorf("provider client config: profile %s is the export-delivery service's: use NewExportClient", cfg.Profile.Name)
	}
	w, err := newWire(cfg.Profile)
	if err != nil {
		if _, verr := cfg.validate(); verr != nil {
			return nil, verr
		}
		return nil, fmt.Errorf("provider client config: %w", err)
	}
	return newClient(cfg, w, "provider-client")
}

// newClient validates cfg (its defaults filled) and returns a client
// speaking through w.
func newClient(cfg Config, w wire, component string) (*Client, error) {
	base, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	hc := *cfg.HTTPClient // a copy: the caller's client is not modified
	hc.Timeout = 0        // the per-send timeout is applied through the request context
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{
		cfg:     cfg,
		http:    &hc,
		baseURL: baseURL(base),
		wire:    w,
		profile: cfg.Profile,
		log:     cfg.Logger.With("component", component, "provider", base.Host, "profile", cfg.Profile.Name),
	}, nil
}

// Profile is the profile the client speaks by.
func (c *Client) Profile() domain.ProviderProfile { return c.profile }

// target is path (escaped, with its query) under the base URL.
func (c *Client) target(path string) string { return c.baseURL + path }

// CreateRefund asks the provider to refund req and classifies what happened;
// it never returns a bare error (see the package doc for the tables). It
// sends at most MaxAttempts times, always with req.IdempotencyKey and the
// same body, and starts no send once ctx is done.
func (c *Client) CreateRefund(ctx context.Context, req domain.RefundRequest) domain.RefundResult {
	if err := validateRefundRequest(req); err != nil {
		return domain.RefundResult{Outcome: domain.NotApplied, Detail: "not sent: " + err.Error()}
	}
	if err := c.wire.validate(req); err != nil {
		return domain.RefundResult{Outcome: domain.NotApplied, Detail: "not sent: " + err.Error()}
	}
	path, wireHeader, body := c.wire.create(req)
	header := c.baseHeader()
	for k, vs := range wireHeader {
		header[k] = vs
	}
	target := c.target(path)
	sends, stop := c.sendAll(ctx, Send{Kind: SendCreate, OperationID: req.OperationID, IdempotencyKey: req.IdempotencyKey}, func(attempt int) sendResult {
		if simbug.On(simbug.FreshKeyPerResend) && attempt > 1 {
			c.plantFreshKey(header, req, attempt)
		}
		return c.sendCreate(ctx, req, target, body, header)
	})
	result := conclude(sends, stop)
	c.log.LogAttrs(ctx, slog.LevelInfo, "refund request classified",
		slog.String("operation_id", string(req.OperationID)), slog.String("idempotency_key", string(req.IdempotencyKey)),
		slog.Int("sends", len(sends)), slog.String("outcome", string(result.Outcome)),
		slog.String("reference", result.ProviderReference), slog.String("detail", result.Detail))
	return result
}

// sendAll makes the sends of one call: send at most MaxAttempts times,
// backing off between sends, until one is Completed or not worth
// resending, never starting one once ctx is done; each is reported as s.
// It returns the sends and, when it stopped for another reason than an
// answer, why (for conclude).
func (c *Client) sendAll(ctx context.Context, s Send, send func(attempt int) sendResult) ([]sendResult, string) {
	sends := make([]sendResult, 0, c.cfg.MaxAttempts)
	stop := ""
	for attempt := 1; attempt <= c.cfg.MaxAttempts; attempt++ {
		if attempt > 1 {
			if err := c.wait(ctx, c.backoff(attempt-1)); err != nil {
				stop = "no further send: " + err.Error()
				break
			}
		}
		if err := ctx.Err(); err != nil {
			stop = "no further send: " + err.Error()
			break
		}
		start := c.cfg.Now()
		r := send(attempt)
		sent := s
		sent.Attempt, sent.Outcome, sent.StatusCode, sent.Replayed, sent.Retryable, sent.Detail = attempt, r.outcome, r.status, r.replayed, r.retryable, r.detail
		sent.Latency = c.cfg.Now().Sub(start)
		c.report(ctx, sent)
		sends = append(sends, r)
		if r.outcome == domain.Completed || !r.retryable {
			break
		}
		if attempt == c.cfg.MaxAttempts {
			stop = fmt.Sprintf("gave up after %d sends", attempt)
		}
	}
	return sends, stop
}

// plantFreshKey is the planted bug simbug.FreshKeyPerResend (reached only
// in a -tags simbugs build): the resend carries a key of its own.
func (c *Client) plantFreshKey(header http.Header, req domain.RefundRequest, attempt int) {
	req.IdempotencyKey = domain.IdempotencyKey(fmt.Sprintf("%s-r%d", req.IdempotencyKey, attempt))
	_, fresh, _ := c.wire.create(req)
	for k, vs := range fresh {
		header[k] = vs
	}
}

func (c *Client) sendCreate(ctx context.Context, req domain.RefundRequest, target string, body []byte, header http.Header) sendResult {
	x := c.exchange(ctx, http.MethodPost, target, body, header)
	if x.fail != nil {
		return *x.fail
	}
	return c.wire.classify(req, x.status, x.header, x.body)
}

// conclude classifies the whole call from its sends (package doc, "the
// whole call").
func conclude(sends []sendResult, stop string) domain.RefundResult {
	if len(sends) == 0 {
		return domain.RefundResult{Outcome: domain.NotApplied, Detail: notSentDetail(stop)}
	}
	last := sends[len(sends)-1]
	res := domain.RefundResult{Outcome: last.outcome, Detail: fmt.Sprintf("send %d: %s", len(sends), last.detail)}
	for _, s := range sends {
		if s.reference != "" {
			res.ProviderReference = s.reference
		}
	}
	if last.outcome == domain.NotApplied && !last.replayed {
		for i, s := range sends[:len(sends)-1] {
			if s.outcome == domain.Unknown {
				res.Outcome = domain.Unknown
				res.Detail += fmt.Sprintf("; but send %d may have reached the provider: %s", i+1, s.detail)
				break
			}
		}
	}
	if stop != "" {
		res.Detail += "; " + stop
	}
	return res
}

func notSentDetail(stop string) string {
	if stop == "" {
		return "not sent"
	}
	return "not sent: " + stop
}

// backoff is the wait before resend n (n >= 1): BackoffMin doubled n-1
// times, capped at BackoffMax, with jitter in [d/2, d].
func (c *Client) backoff(n int) time.Duration {
	d := c.cfg.BackoffMin
	for i := 1; i < n && d < c.cfg.BackoffMax; i++ { // n <= MaxAttemptsLimit
		d *= 2
	}
	d = min(d, c.cfg.BackoffMax)
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// wait waits d, or less if ctx ends first (then it returns ctx's error).
func (c *Client) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-c.cfg.After(d):
		return ctx.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) report(ctx context.Context, s Send) {
	c.log.LogAttrs(ctx, slog.LevelDebug, "provider send",
		slog.String("kind", string(s.Kind)), slog.String("operation_id", string(s.OperationID)),
		slog.String("idempotency_key", string(s.IdempotencyKey)), slog.Int("attempt", s.Attempt),
		slog.String("outcome", string(s.Outcome)), slog.Int("status", s.StatusCode), slog.Bool("replayed", s.Replayed),
		slog.Bool("retryable", s.Retryable), slog.Duration("latency", s.Latency), slog.String("detail", s.Detail))
	if c.cfg.Observer != nil {
		c.cfg.Observer.ObserveSend(ctx, s)
	}
}

func (c *Client) baseHeader() http.Header {
	h := http.Header{}
	h.Set("Accept", "application/json")
	h.Set("User-Agent", "opledger-provider-client")
	if c.cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	return h
}

func baseURL(base *url.URL) string {
	u := *base
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	return strings.TrimSuffix(u.String(), "/")
}

// validateRefundRequest refuses what no provider can be sent; each wire
// adds its own limits.
func validateRefundRequest(req domain.RefundRequest) error {
	switch {
	case req.IdempotencyKey == "":
		return fmt.Errorf("invalid refund request: empty idempotency key")
	case req.OperationID == "":
		return fmt.Errorf("invalid refund request: empty operation id")
	case req.OrderID == "":
		return fmt.Errorf("invalid refund request: empty order id")
	case req.AmountMinor <= 0:
		return fmt.Errorf("invalid refund request: amount %d is not positive", req.AmountMinor)
	case len(req.Currency) != 3:
		return fmt.Errorf("invalid refund request: currency %q is not a three-letter code", req.Currency)
	}
	return nil
}
