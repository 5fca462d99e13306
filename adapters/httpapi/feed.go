package httpapi

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"opledger/domain/feed"
	"opledger/domain/ledger"
	"opledger/eventstore"
)

// Bounds of the operation feed.
const (
	// DefaultFeedPage and MaxFeedPage bound the log events one feed request
	// reads, and so the entries it returns.
	DefaultFeedPage = 100
	MaxFeedPage     = feed.MaxPage
	// MaxFeedWait bounds a long-poll's wait: well inside the server's
	// WriteTimeout (30 s), with room for the read after it.
	MaxFeedWait = 20 * time.Second
	// MaxFeedPollsPerToken bounds the feed requests one bearer token has
	// in flight (each may hold a connection for MaxFeedWait); beyond it
	// the request is 429 feed.too-many-polls. MaxFeedPolls bounds them
	// over every token, so that a tokens file of many subscribers cannot
	// hold more than that many of the server's connections and reads.
	MaxFeedPollsPerToken = 4
	MaxFeedPolls         = 256
)

// CodeFeedTooManyPolls: the token (or the server) has as many feed
// requests in flight as it may.
const CodeFeedTooManyPolls = "feed.too-many-polls"

// CodeRequestEnded is logged for a request whose client left before it was
// answered (a long-poll given up), with status statusClientClosed: 499, as
// nginx logs it, so that it reads as the client's doing, not the server's.
const CodeRequestEnded = "request.ended"

const statusClientClosed = 499

type feedResponse struct {
	Entries []feed.Entry `json:"entries"`
	// Next is the position to send as after= on the next request: past
	// every event this request read ("" when the log had none to read).
	Next string `json:"next"`
	// More says the read was full: read on at once, without waiting.
	More bool `json:"more"`
}

// getFeed: GET /v1/feed?after=&limit=&wait=, the operation feed from the
// global log: the entries among at most limit events after position after
// (absent: the start of the log), in the log's order. With wait (a
// duration up to MaxFeedWait, e.g. 15s) a request that finds no entry
// waits for one, then answers what it found (possibly nothing; next still
// moves past what it read).
func (s *Server) getFeed(_ http.ResponseWriter, r *http.Request, _ Principal) (reply, error) {
	q := r.URL.Query()
	var after eventstore.Position
	if text := q.Get("after"); text != "" {
		p, err := s.feed.ParsePosition(text)
		if err != nil {
			return reply{}, invalid("after", "after must be a position the feed returned (an entry's position, or next): %q is not one", clipText(text))
		}
		after = p
	}
	limit := DefaultFeedPage
	if text := q.Get("limit"); text != "" {
		n, err := strconv.Atoi(text)
		if err != nil || n < 1 || n > MaxFeedPage {
			return reply{}, invalid("limit", "limit must be 1..%d", MaxFeedPage)
		}
		limit = n
	}
	var wait time.Duration
	if text := q.Get("wait"); text != "" {
		d, err := time.ParseDuration(text)
		if err != nil || d < 0 || d > MaxFeedWait {
			return reply{}, invalid("wait", "wait must be a duration from 0s to %s, e.g. 15s", MaxFeedWait)
		}
		wait = d
	}
	release, err := s.feedPolls.take(requestInfoFrom(r.Context()).token)
	if err != nil {
		return reply{}, err
	}
	defer release()
	page, err := s.feed.Wait(r.Context(), after, limit, wait, s.draining)
	switch {
	case err != nil && r.Context().Err() != nil:
		// The client left (or the request's bound passed) while it waited:
		// nobody reads this answer; it is logged as what it was.
		return reply{}, &apiError{status: statusClientClosed, code: CodeRequestEnded, cause: err,
			message: "the request ended before the feed answered"}
	case errors.Is(err, feed.ErrNoHead):
		return reply{}, fmt.Errorf("%w: %w", ledger.ErrCorruptStream, err)
	case err != nil:
		return reply{}, err
	}
	resp := feedResponse{Entries: page.Entries, More: page.Full}
	if resp.Entries == nil {
		resp.Entries = []feed.Entry{}
	}
	if page.Next != nil {
		resp.Next = page.Next.String()
	}
	return ok(resp), nil
}

// clipText is text cut for an error message (it is escaped by %q).
func clipText(text string) string {
	const max = 64
	if len(text) > max {
		return text[:max] + "..."
	}
	return text
}

// feedPolls counts the feed requests in flight, per token and in all.
type feedPolls struct {
	mu      sync.Mutex
	total   int
	byToken map[[sha256.Size]byte]int // only tokens with a request in flight: at most MaxFeedPolls entries
}

// take counts one request of token in, or refuses it; release counts it
// out.
func (p *feedPolls) take(token [sha256.Size]byte) (release func(), err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.byToken[token] >= MaxFeedPollsPerToken:
		return nil, &apiError{status: http.StatusTooManyRequests, code: CodeFeedTooManyPolls, retryAfter: "1",
			message: fmt.Sprintf("this token has %d feed requests in flight, as many as it may: wait for one to answer", MaxFeedPollsPerToken)}
	case p.total >= MaxFeedPolls:
		return nil, &apiError{status: http.StatusTooManyRequests, code: CodeFeedTooManyPolls, retryAfter: "1",
			message: fmt.Sprintf("the server has %d feed requests in flight, as many as it takes: retry shortly", MaxFeedPolls)}
	}
	if p.byToken == nil {
		p.byToken = map[[sha256.Size]byte]int{}
	}
	p.byToken[token]++
	p.total++
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.total--
		if p.byToken[token]--; p.byToken[token] == 0 {
			delete(p.byToken, token)
		}
	}, nil
}
