package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"opledger/domain/feed"
)

// feedPage is an answer of GET /v1/feed.
type feedPage struct {
	Entries []feed.Entry `json:"entries"`
	Next    string       `json:"next"`
	More    bool         `json:"more"`
}

// HTTPFollower reads the feed over HTTP (GET /v1/feed, long-polled) from
// where its consumer stands, and hands every entry to it.
type HTTPFollower struct {
	BaseURL string // serve's address, e.g. http://127.0.0.1:8080
	Token   string // a subscriber's bearer token
	Client  *http.Client
	Wait    time.Duration // the long-poll's wait (default 15s, at most 20s)
	Limit   int           // log events per request (default 100)
	Log     *slog.Logger
}

// maxBodyBytes bounds a feed answer read: a page of 1000 entries of well
// under 2 KiB each.
const maxBodyBytes = 4 << 20

// Run follows the feed until ctx ends. A 429 or 503 is waited out (its
// Retry-After, at most 30 s; a transport error 1 s doubling to 30 s); any
// other refusal stops it.
func (f *HTTPFollower) Run(ctx context.Context, c *Consumer) error {
	after, err := c.Position(ctx)
	if err != nil {
		return err
	}
	backoff := time.Second
	for {
		page, retry, err := f.read(ctx, after)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case retry > 0:
			f.Log.Warn("feed: waiting", "for", retry, "err", err)
			if err := sleep(ctx, retry); err != nil {
				return err
			}
			continue
		case err != nil:
			return err
		}
		if _, err := f.handle(ctx, c, page); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			f.Log.Warn("feed: handling failed; reading the page again", "err", err, "retry_in", backoff)
			if err := sleep(ctx, backoff); err != nil {
				return err
			}
			backoff = min(backoff*2, 30*time.Second)
			if after, err = c.Position(ctx); err != nil {
				return err
			}
			continue
		}
		backoff, after = time.Second, page.Next
	}
}

// handle hands a page's entries to c, each moving c's position to its own,
// then moves it to the page's next (past events that made no entry).
func (f *HTTPFollower) handle(ctx context.Context, c *Consumer, page feedPage) (handled int, err error) {
	for _, e := range page.Entries {
		if _, err := c.Handle(ctx, e, e.Position); err != nil {
			return handled, err
		}
		handled++
	}
	if page.Next != "" {
		if err := c.savePosition(ctx, c.pool, page.Next); err != nil {
			return handled, err
		}
	}
	return handled, nil
}

// read asks for one page after after. retry > 0: wait that long and ask
// again.
func (f *HTTPFollower) read(ctx context.Context, after string) (page feedPage, retry time.Duration, err error) {
	q := url.Values{"limit": {strconv.Itoa(cmp.Or(f.Limit, 100))}, "wait": {cmp.Or(f.Wait, 15*time.Second).String()}}
	if after != "" {
		q.Set("after", after)
	}
	req, err := http.NewRequestWithContext(ctx, "GET", f.BaseURL+"/v1/feed?"+q.Encode(), nil)
	if err != nil {
		return page, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+f.Token)
	client := f.Client
	if client == nil {
		client = http.DefaultClient
	}
	res, err := client.Do(req)
	if err != nil {
		return page, time.Second, fmt.Errorf("feed: %w", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxBodyBytes))
	if err != nil {
		return page, time.Second, fmt.Errorf("feed: read answer: %w", err)
	}
	switch res.StatusCode {
	case http.StatusOK:
		if err := json.Unmarshal(body, &page); err != nil {
			return page, 0, fmt.Errorf("feed: answer is not a page: %w", err)
		}
		return page, 0, nil
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		secs, _ := strconv.Atoi(res.Header.Get("Retry-After"))
		return page, min(max(time.Duration(secs)*time.Second, time.Second), 30*time.Second), fmt.Errorf("feed: %s: %s", res.Status, body)
	}
	return page, 0, fmt.Errorf("feed: %s: %s", res.Status, body)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
