package httpapi

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"opledger/domain/clock"
)

// CodeRateLimited answers a request over its token's rate: 429 with
// Retry-After.
const CodeRateLimited = "rate.limited"

// Rate limit defaults: generous for one worker fleet sharing a token, low
// enough that one runaway client cannot take the store's capacity from the
// others.
const (
	DefaultRatePerSecond = 100
	DefaultRateBurst     = 200
	// DefaultRateTracked bounds the tokens tracked at once: every token of
	// a file, twice over for reloads that replace them.
	DefaultRateTracked = 2 * MaxTokens
)

// RateLimit bounds the requests of each bearer token with a token bucket:
// Burst requests at once, refilled at PerSecond. Requests over it are 429
// rate.limited with Retry-After, before any work is done. Requests without
// a known token (401) and the open endpoints are not counted. Zero values
// take the defaults.
type RateLimit struct {
	// Off disables the limit.
	Off bool
	// PerSecond is the sustained rate per token (default DefaultRatePerSecond).
	PerSecond float64
	// Burst is how many requests a token may send at once (default
	// DefaultRateBurst).
	Burst int
	// MaxTracked bounds how many tokens' buckets are kept (default
	// DefaultRateTracked); past it, idle (full) buckets are dropped first,
	// then the least recently used.
	MaxTracked int
	// Clock refills the buckets (default the system clock).
	Clock clock.Clock
}

func (c *RateLimit) setDefaults() {
	if c.PerSecond == 0 {
		c.PerSecond = DefaultRatePerSecond
	}
	if c.Burst == 0 {
		c.Burst = DefaultRateBurst
	}
	if c.MaxTracked == 0 {
		c.MaxTracked = DefaultRateTracked
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
}

func (c *RateLimit) validate() error {
	if c.Off {
		return nil
	}
	if c.PerSecond < 0 || math.IsNaN(c.PerSecond) || math.IsInf(c.PerSecond, 0) || c.Burst < 1 || c.MaxTracked < 1 {
		return errors.New("httpapi config: RateLimit needs a positive PerSecond, Burst and MaxTracked (or Off)")
	}
	return nil
}

// limiter is the buckets of RateLimit. Safe for concurrent use.
type limiter struct {
	cfg     RateLimit
	mu      sync.Mutex
	buckets map[[sha256.Size]byte]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time // refilled up to
	used   time.Time // last request, for dropping the least recently used
}

func newLimiter(cfg RateLimit) *limiter {
	return &limiter{cfg: cfg, buckets: map[[sha256.Size]byte]*bucket{}}
}

// allow takes one request from key's bucket; when empty it says how long
// until the next request would be allowed.
func (l *limiter) allow(key [sha256.Size]byte) (bool, time.Duration) {
	if l.cfg.Off {
		return true, 0
	}
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, found := l.buckets[key]
	if !found {
		l.makeRoom(now)
		b = &bucket{tokens: float64(l.cfg.Burst), last: now}
		l.buckets[key] = b
	}
	b.refill(now, l.cfg)
	b.used = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.cfg.PerSecond * float64(time.Second))
	return false, wait
}

func (b *bucket) refill(now time.Time, cfg RateLimit) {
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(float64(cfg.Burst), b.tokens+elapsed.Seconds()*cfg.PerSecond)
		b.last = now
	}
}

// makeRoom drops buckets until one more fits: the full ones (a new bucket
// starts full, so dropping them changes nothing), else the least recently
// used. Called with mu held; O(MaxTracked), only when the map is full.
func (l *limiter) makeRoom(now time.Time) {
	if len(l.buckets) < l.cfg.MaxTracked {
		return
	}
	var oldest [sha256.Size]byte
	var oldestAt time.Time
	for k, b := range l.buckets {
		b.refill(now, l.cfg)
		if b.tokens >= float64(l.cfg.Burst) {
			delete(l.buckets, k)
			continue
		}
		if oldestAt.IsZero() || b.used.Before(oldestAt) {
			oldest, oldestAt = k, b.used
		}
	}
	if len(l.buckets) >= l.cfg.MaxTracked {
		delete(l.buckets, oldest)
	}
}

// tracked is how many buckets are kept (for tests).
func (l *limiter) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// rateLimited is the answer to a request over its token's rate.
func rateLimited(who Principal, wait time.Duration, cfg RateLimit) *apiError {
	secs := max(1, int64(math.Ceil(wait.Seconds())))
	return &apiError{status: http.StatusTooManyRequests, code: CodeRateLimited, retryAfter: strconv.FormatInt(secs, 10),
		message: fmt.Sprintf("token of %s %s is over its rate (%g requests per second, bursts of %d): retry after %d s",
			who.Role, who.Name, cfg.PerSecond, cfg.Burst, secs)}
}

// TakeRequest counts one request of token against its rate, as every
// request of the API is counted, and says whether it may go on and, if
// not, how long until it may: for handlers mounted beside the API (the
// console) whose requests carry the token another way. An unknown token is
// not counted (its request is refused as unauthenticated anyway).
func (s *Server) TakeRequest(token string) (allowed bool, retryAfter time.Duration) {
	who, digest, known := s.cfg.Tokens.authenticate(token)
	if !known {
		return true, 0
	}
	allowed, wait := s.limiter.allow(digest)
	if !allowed {
		s.cfg.Metrics.rateLimited.WithLabelValues(string(who.Role)).Inc()
		return false, max(wait, time.Second)
	}
	return true, 0
}
