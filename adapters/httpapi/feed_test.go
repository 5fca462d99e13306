package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/domain"
	"opledger/domain/feed"
)

// feedPage is a 200 answer of GET /v1/feed.
type feedPage struct {
	Entries []feed.Entry `json:"entries"`
	Next    string       `json:"next"`
	More    bool         `json:"more"`
}

// feedRead reads one page of the feed as role.
func (e *env) feedRead(role httpapi.Role, query url.Values) feedPage {
	e.t.Helper()
	r := e.must(http.StatusOK, e.call(role, "GET", "/v1/feed?"+query.Encode(), nil))
	var p feedPage
	require.NoError(e.t, json.Unmarshal(r.raw, &p))
	return p
}

// feedAll reads the feed from after to its end, limit events a page.
func (e *env) feedAll(after string, limit int) []feed.Entry {
	e.t.Helper()
	var out []feed.Entry
	for range 10_000 { // bound: far more pages than any test writes
		p := e.feedRead(httpapi.RoleSubscriber, url.Values{"after": {after}, "limit": {fmt.Sprint(limit)}})
		out = append(out, p.Entries...)
		after = p.Next
		if !p.More {
			return out
		}
	}
	e.t.Fatal("the feed did not end")
	return nil
}

// feedUntil reads the feed from its start until it has n entries (it
// long-polls: the log answers an event only once every transaction on the
// server that began before it ended, which under a busy server takes a
// moment), bounded by waitBound; it returns them and the last next.
func (e *env) feedUntil(n int) ([]feed.Entry, string) {
	e.t.Helper()
	var out []feed.Entry
	next := ""
	deadline := time.Now().Add(waitBound)
	for len(out) < n {
		require.False(e.t, time.Now().After(deadline), "the feed held %d entries, not %d, after %s", len(out), n, waitBound)
		p := e.feedRead(httpapi.RoleSubscriber, url.Values{"after": {next}, "wait": {"1s"}})
		out, next = append(out, p.Entries...), p.Next
	}
	require.Len(e.t, out, n)
	return out, next
}

func feedStates(es []feed.Entry) []feed.State {
	var out []feed.State
	for _, e := range es {
		out = append(out, e.State)
	}
	return out
}

// The story over HTTP: each change of the operation is an entry with its
// amount and references and its position; pages of one event read the
// same; reading again from an older position answers the same entries
// under the same ids.
func TestFeedStory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	op, x := e.execute("feed-story")
	e.must(http.StatusOK, e.post(httpapi.RoleWorker, "/v1/executions/"+string(x)+"/outcome", map[string]any{
		"lease_epoch": 1, "lease_secret": e.secret(x), "outcome": "Completed", "provider_reference": "re_feed"}))

	all, _ := e.feedUntil(4)
	require.Equal(t, all, e.feedAll("", 100), "read again at once")
	require.Equal(t, []feed.State{feed.StateRequested, feed.StateAuthorized, feed.StateExecuting, feed.StateCompleted}, feedStates(all))
	for _, en := range all {
		require.Equal(t, op, en.OperationID)
		require.Equal(t, int64(4_500), en.AmountMinor)
		require.Equal(t, "EUR", en.Currency)
		require.Equal(t, "ORD-feed-story", en.OrderID)
		require.NotEmpty(t, en.EventID)
		require.NotEmpty(t, en.Position)
	}
	done := all[3]
	require.Equal(t, domain.Completed, done.Outcome)
	require.Equal(t, "re_feed", done.ProviderReference)
	require.Equal(t, x, done.ExecutionID)
	recs, err := e.store.ReadStream(t.Context(), op.StreamName(), done.StreamVersion, 1)
	require.NoError(t, err)
	require.Equal(t, recs[0].ID, done.EventID, "the entry's id is its event's")
	require.Equal(t, recs[0].Position.String(), done.Position)

	require.Equal(t, all, e.feedAll("", 1), "pages of one event")
	require.Equal(t, all[2:], e.feedAll(all[1].Position, 100), "resumed from an older position: the same entries again")

	analyst := e.feedRead(httpapi.RoleSubscriber, url.Values{"after": {all[3].Position}})
	require.Empty(t, analyst.Entries)
	require.Equal(t, all[3].Position, analyst.Next, "nothing read: next stays where it was")
}

// Hostile or malformed parameters are 400 naming the parameter; nothing is
// read.
func TestFeedRefusesMalformedParameters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for query, field := range map[string]string{
		"after=garbage":          "after",
		"after=1%2F2x":           "after",
		"after=%2B1%2F2":         "after",
		"after=-1%2F-1":          "after",
		"after=%00":              "after",
		"limit=0":                "limit",
		"limit=1001":             "limit",
		"limit=x":                "limit",
		"wait=21s":               "wait",
		"wait=-1s":               "wait",
		"wait=15":                "wait",
		"after=1%2F1&wait=1year": "wait",
	} {
		r := e.must(http.StatusBadRequest, e.call(httpapi.RoleSubscriber, "GET", "/v1/feed?"+query, nil))
		require.Equal(t, httpapi.CodeRequestInvalid, r.code(), query)
		require.Equal(t, field, r.field(), query)
	}
}

// A long-poll answers the first entry appended while it waits.
func TestFeedLongPoll(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.create("feed-before")
	_, next := e.feedUntil(1)
	require.NotEmpty(t, next)

	got := make(chan feedPage, 1)
	go func() { got <- rawFeed(e, httpapi.RoleSubscriber, url.Values{"after": {next}, "wait": {"20s"}}) }()
	op := e.create("feed-while-waiting")
	p := <-got // bounded: the server answers within MaxFeedWait
	require.Len(t, p.Entries, 1, "%+v", p)
	require.Equal(t, op, p.Entries[0].OperationID)
	require.Equal(t, feed.StateRequested, p.Entries[0].State)
}

// rawFeed is a feed read off the test's goroutine (no require): a zero page
// on any failure. A 429 is asked again, for at most waitBound.
func rawFeed(e *env, role httpapi.Role, q url.Values) feedPage {
	deadline := time.Now().Add(waitBound)
	for time.Now().Before(deadline) {
		req, err := http.NewRequestWithContext(e.t.Context(), "GET", e.srv.URL+"/v1/feed?"+q.Encode(), nil)
		if err != nil {
			return feedPage{}
		}
		req.Header.Set("Authorization", "Bearer "+tokenOf[role])
		res, err := e.srv.Client().Do(req)
		if err != nil {
			return feedPage{}
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusTooManyRequests {
			time.Sleep(2 * time.Millisecond) // polling interval, bounded above
			continue
		}
		var p feedPage
		if res.StatusCode != http.StatusOK || json.Unmarshal(raw, &p) != nil {
			return feedPage{}
		}
		return p
	}
	return feedPage{}
}

// A token has at most MaxFeedPollsPerToken feed requests in flight; the
// next is 429 feed.too-many-polls with Retry-After, another token is
// served meanwhile, and once the long-polls answer the token is served
// again.
func TestFeedBoundsPollsPerToken(t *testing.T) {
	t.Parallel()
	const analyst = "analyst-token-0123456789"
	tokens, err := httpapi.ParseTokens(strings.NewReader(tokenFile+"analyst "+analyst+" ana\n"), "tokens")
	require.NoError(t, err)
	e := newEnv(t, func(c *httpapi.Config) { c.Tokens = tokens })
	var polls sync.WaitGroup
	woken := make(chan int, httpapi.MaxFeedPollsPerToken)
	for range httpapi.MaxFeedPollsPerToken { // each asks again when the probes below took its place
		polls.Go(func() { woken <- len(rawFeed(e, httpapi.RoleSubscriber, url.Values{"wait": {"20s"}}).Entries) })
	}
	var refused response
	waitFor(t, "the long-polls to be in flight", func() bool {
		refused = e.call(httpapi.RoleSubscriber, "GET", "/v1/feed", nil)
		return refused.status == http.StatusTooManyRequests
	})
	require.Equal(t, httpapi.CodeFeedTooManyPolls, refused.code())
	require.Equal(t, "1", refused.header.Get("Retry-After"))
	e.must(http.StatusOK, e.call("", "GET", "/v1/feed", nil, "Authorization", "Bearer "+analyst))

	e.create("feed-wakes-them") // every long-poll answers it
	polls.Wait()
	close(woken)
	for n := range woken {
		require.Equal(t, 1, n, "each long-poll answered the entry")
	}
	e.must(http.StatusOK, e.call(httpapi.RoleSubscriber, "GET", "/v1/feed", nil))
}

// Operations appended concurrently while a reader follows the feed in
// small pages: the reader misses none and sees none twice, in the log's
// order (the log's ReadAll never answers an event while an earlier one may
// still commit).
func TestFeedGapFreeUnderConcurrentAppends(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	const writers, each = 4, 15
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				_, err := e.h.RequestOperation(t.Context(), domain.RequestOperation{
					OperationID: domain.OperationID(fmt.Sprintf("OP-GAP-%d-%d", w, i)), Kind: domain.KindRefund,
					OrderID: "ORD-1", AmountMinor: 100, Currency: "EUR", OrderTotalMinor: 1000, CorrelationID: "COR-GAP",
				}, ledgerCause)
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	// Follow while they write, in pages of 3 log events, until every
	// operation was seen (bounded): a gap would leave one missing for ever
	// (the reader never reads before its position again), a repeat would
	// show as one too many.
	var followed []feed.Entry
	next := ""
	deadline := time.Now().Add(waitBound)
	for len(followed) < writers*each {
		require.False(t, time.Now().After(deadline), "followed %d of %d entries within %s", len(followed), writers*each, waitBound)
		p := e.feedRead(httpapi.RoleSubscriber, url.Values{"after": {next}, "limit": {"3"}, "wait": {"50ms"}})
		followed, next = append(followed, p.Entries...), p.Next
	}
	wg.Wait()
	require.Len(t, followed, writers*each)
	require.Equal(t, e.feedAll("", 1000), followed, "followed while appending = read once afterwards")
}

// A server shutting down (StopWaiting, which NewHTTPServer registers with
// Shutdown) answers its long-polls at once with what they read, so that
// Shutdown need not wait them out: a 20 s long-poll answers inside a client
// bound of 10 s.
func TestFeedLongPollsAnswerOnShutdown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.create("feed-shutdown")
	_, next := e.feedUntil(1)
	got := make(chan int, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/feed?wait=20s&after="+url.QueryEscape(next), nil)
		req.Header.Set("Authorization", "Bearer "+tokenOf[httpapi.RoleSubscriber])
		res, err := e.srv.Client().Do(req)
		if err != nil {
			got <- 0
			return
		}
		res.Body.Close()
		got <- res.StatusCode
	}()
	e.api.StopWaiting()
	require.Equal(t, http.StatusOK, <-got, "answered before the client's bound")
}
