package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Config configures a Client. Zero values take the defaults named.
type Config struct {
	// BaseURL is serve's address, e.g. http://127.0.0.1:8080. Required.
	BaseURL string
	// Token is a bearer token of role worker. Required; never logged.
	Token string
	// WorkerID names this worker as the lease owner: 1..128 printable ASCII
	// characters without spaces. Required.
	WorkerID string
	// HTTPClient sends the API's requests (default: a client whose
	// requests time out after RequestTimeout).
	HTTPClient *http.Client
	// RequestTimeout bounds one request to serve (default 10s).
	RequestTimeout time.Duration
	// LeaseDuration is asked for at claim and at every renewal (default
	// 60s, 1s..3600s, whole seconds). The lease keeper renews every third
	// of it.
	LeaseDuration time.Duration
	// RetryBackoff is the first pause before sending an executor write
	// again after a 503, a 429 or no answer (default 100ms); it doubles up
	// to RetryBackoffMax (default 1s). A Retry-After longer than the pause
	// lengthens it, up to RetryBackoffMax.
	RetryBackoff, RetryBackoffMax time.Duration
	// Logger (default slog.Default()). The lease secret and the token are
	// never logged.
	Logger *slog.Logger
	// Now and After are the clock (default time.Now and time.After); tests
	// substitute them.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
}

// Client speaks serve's HTTP API as a worker: claim, renew, record. It is
// safe for concurrent use.
type Client struct {
	cfg  Config
	base string // without a trailing slash
	http *http.Client
	log  *slog.Logger
}

// maxLeaseDuration is the API's bound on lease_seconds.
const maxLeaseDuration = time.Hour

// New validates cfg, fills its defaults and returns a Client.
func New(cfg Config) (*Client, error) {
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, 10*time.Second)
	cfg.LeaseDuration = cmp.Or(cfg.LeaseDuration, 60*time.Second)
	cfg.RetryBackoff = cmp.Or(cfg.RetryBackoff, 100*time.Millisecond)
	cfg.RetryBackoffMax = cmp.Or(cfg.RetryBackoffMax, time.Second)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: cfg.RequestTimeout}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	u, err := url.Parse(cfg.BaseURL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, fmt.Errorf("client config: BaseURL %q must be an http or https URL", cfg.BaseURL)
	case cfg.Token == "":
		return nil, errors.New("client config: Token is required (a worker's bearer token)")
	case !validWorkerID(cfg.WorkerID):
		return nil, fmt.Errorf("client config: WorkerID %q must be 1..128 printable ASCII characters without spaces", cfg.WorkerID)
	case cfg.LeaseDuration < time.Second || cfg.LeaseDuration > maxLeaseDuration || cfg.LeaseDuration%time.Second != 0:
		return nil, fmt.Errorf("client config: LeaseDuration %s must be whole seconds in [1s, %s]", cfg.LeaseDuration, maxLeaseDuration)
	case cfg.RetryBackoff <= 0 || cfg.RetryBackoffMax < cfg.RetryBackoff:
		return nil, fmt.Errorf("client config: RetryBackoff %s must be positive and at most RetryBackoffMax %s", cfg.RetryBackoff, cfg.RetryBackoffMax)
	}
	u.RawQuery, u.Fragment = "", ""
	return &Client{cfg: cfg, base: strings.TrimSuffix(u.String(), "/"), http: cfg.HTTPClient,
		log: cfg.Logger.With("component", "opledger-client", "worker", cfg.WorkerID)}, nil
}

func validWorkerID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// WorkerID is the lease owner this client claims as.
func (c *Client) WorkerID() string { return c.cfg.WorkerID }

// maxAnswerBytes bounds an answer read from serve: its largest documented
// answer (a page of events) is far smaller.
const maxAnswerBytes = 4 << 20

// do sends one request and decodes a 2xx answer into out. Any other answer
// is an *Error; no answer wraps ErrNoAnswer. The body is sent as the same
// bytes on every call with the same argument.
func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "opledger-go-client")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w: %w", method, path, ErrNoAnswer, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil || len(raw) > maxAnswerBytes {
		return fmt.Errorf("%s %s: HTTP %d, answer unreadable or larger than %d bytes: %w: %v", method, path, resp.StatusCode, maxAnswerBytes, ErrNoAnswer, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return answerError(resp, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: HTTP %d: %w: %v", method, path, resp.StatusCode, errUnexpectedResponse, err)
	}
	return nil
}

// answerError reads an error answer; one that is not the API's shape (a
// proxy's page, say) keeps its status with code "http.<status>".
func answerError(resp *http.Response, raw []byte) *Error {
	var env struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	}
	e := &Error{StatusCode: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
		e.RetryAfter = time.Duration(secs) * time.Second
	}
	if json.Unmarshal(raw, &env) == nil && env.Error != nil && env.Error.Code != "" {
		e.Code, e.Message, e.Field = env.Error.Code, env.Error.Message, env.Error.Field
		return e
	}
	e.Code = "http." + strconv.Itoa(resp.StatusCode)
	e.Message = strings.TrimSpace(string(raw[:min(len(raw), 200)]))
	return e
}

// retryable reports whether an executor write answered err may be sent
// again: a 503, a 429, or no answer at all. Never a 409, never another 4xx.
func retryable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Temporary()
	}
	return errors.Is(err, ErrNoAnswer)
}

// pauseFor is the wait before the next send after err, at backoff.
func (c *Client) pauseFor(err error, backoff time.Duration) time.Duration {
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > backoff {
		return min(e.RetryAfter, c.cfg.RetryBackoffMax)
	}
	return backoff
}

// wait waits d, or less when ctx ends first (then it reports false).
func (c *Client) wait(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-c.cfg.After(d):
		return ctx.Err() == nil
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // the bodies are structs of strings, integers and booleans
		panic(fmt.Sprintf("client: encode %T: %v", v, err))
	}
	return b
}
