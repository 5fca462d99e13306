// Command river-peer is the River figure of scripts/bench.sh: what a team
// would run instead of opledger's worker path, a job queue on the same
// PostgreSQL. Each job makes the call opledger's worker makes for a refund
// (POST /v1/refunds to the provider simulator, form-encoded, with an
// Idempotency-Key), and the figure is jobs per second from the first insert
// to the last job's Work returning (the provider answered), as opledger's
// figures count a refund when its handler returns (its outcome recorded).
// Neither counts its queue's bookkeeping that follows: River's batched
// completion, opledger's acknowledgement. Counting River's completion
// events instead added its completer's last flush to every sample (300
// jobs took 0.30 s however fast they were worked: about 1,000 jobs/s).
//
// It is a Go module of its own so that opledger's go.mod stays free of
// River: scripts/bench.sh builds it at bench time (the module proxy serves
// River) and runs it once per sample, against a provider simulator started
// fresh for that sample, as it does for opledger's end-to-end samples.
//
// What River guarantees here: a job is inserted durably, handed to one
// worker at a time (FOR UPDATE SKIP LOCKED) until its rescue deadline
// (RescueStuckJobsAfter: then it is handed out again, the first run or
// not), retried after an error or a crash, and marked completed; completions
// are batched. What it does not: nothing is recorded before the provider
// call (a crash after the call and before completion calls again, and only
// the provider's idempotency key keeps that from a second refund), there is
// no lease fencing a stale worker, no outcome event, no capability, no
// history of who did what, no hash chain.
//
//	river-peer migrate --database-url URL --schema S
//	river-peer sample  --database-url URL --schema S --provider-url URL --jobs N --workers 32 --tag T
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// RefundArgs is a job: one refund's provider call.
type RefundArgs struct {
	OperationID    string `json:"operation_id"`
	OrderID        string `json:"order_id"`
	AmountMinor    int64  `json:"amount_minor"`
	Currency       string `json:"currency"`
	IdempotencyKey string `json:"idempotency_key"`
}

func (RefundArgs) Kind() string { return "refund" }

// RefundWorker posts the refund to the provider as opledger's Stripe
// client does (the same path, form fields and headers).
type RefundWorker struct {
	river.WorkerDefaults[RefundArgs]
	provider string
	client   *http.Client
	worked   func() // called once a job's call succeeded
}

func (w *RefundWorker) Work(ctx context.Context, job *river.Job[RefundArgs]) error {
	a := job.Args
	form := url.Values{
		"amount":                    {strconv.FormatInt(a.AmountMinor, 10)},
		"currency":                  {a.Currency},
		"order":                     {a.OrderID},
		"metadata[operation_id]":    {a.OperationID},
		"metadata[idempotency_key]": {a.IdempotencyKey},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.provider+"/v1/refunds", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Idempotency-Key", a.IdempotencyKey)
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("provider answered %d", resp.StatusCode)
	}
	w.worked()
	return nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: river-peer migrate|sample [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dbURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "the bench database")
	schema := fs.String("schema", "bench_river", "River's schema")
	providerURL := fs.String("provider-url", "", "the provider simulator")
	jobs := fs.Int("jobs", 1000, "jobs per sample")
	workers := fs.Int("workers", 32, "jobs worked at once (opledger's worker concurrency)")
	tag := fs.String("tag", "", "names this sample's operations")
	_ = fs.Parse(os.Args[2:])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		fail(err)
	}
	defer pool.Close()
	switch os.Args[1] {
	case "migrate":
		if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+*schema); err != nil {
			fail(err)
		}
		m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: *schema})
		if err != nil {
			fail(err)
		}
		if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			fail(err)
		}
	case "sample":
		rate, err := sample(ctx, pool, *schema, *providerURL, *jobs, *workers, *tag)
		if err != nil {
			fail(err)
		}
		_ = json.NewEncoder(os.Stdout).Encode(map[string]float64{"jobs_per_s": rate})
	default:
		fail(fmt.Errorf("unknown subcommand %q", os.Args[1]))
	}
}

// sample starts a client (untimed), then inserts jobs in one InsertMany
// and waits until every job's call succeeded: jobs per second from the
// insert to the last Work returning. A failed job ends the sample with its
// error.
func sample(ctx context.Context, pool *pgxpool.Pool, schema, provider string, jobs, workers int, tag string) (float64, error) {
	if provider == "" {
		return 0, errors.New("--provider-url is required")
	}
	// As many idle connections as calls at once, as opledger's provider
	// client keeps.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = workers
	transport.DialContext = (&net.Dialer{Timeout: 5 * time.Second}).DialContext
	var worked atomic.Int64
	allWorked := make(chan struct{})
	ws := river.NewWorkers()
	river.AddWorker(ws, &RefundWorker{provider: provider, client: &http.Client{Transport: transport, Timeout: 10 * time.Second},
		worked: func() {
			if worked.Add(1) == int64(jobs) {
				close(allWorked)
			}
		}})
	// Fetch tuning matches opledger's Postgres queue in the bench (polls
	// between 1 ms and 20 ms): River's default cooldown of 100 ms would cap
	// it at 32 jobs per 100 ms.
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:            schema,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           ws,
		FetchCooldown:     time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		return 0, err
	}
	failed, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: jobs + 100,
		Kinds: []river.EventKind{river.EventKindJobFailed}})
	defer unsubscribe()
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	defer func() {
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(stop)
	}()
	params := make([]river.InsertManyParams, jobs)
	for i := range params {
		op := fmt.Sprintf("OP-RIVER%s-%d", tag, i)
		params[i] = river.InsertManyParams{Args: RefundArgs{OperationID: op, OrderID: "ORD-" + op, AmountMinor: 12000,
			Currency: "eur", IdempotencyKey: "refund-" + op + "-a1"}}
	}
	t0 := time.Now()
	if _, err := client.InsertMany(ctx, params); err != nil {
		return 0, err
	}
	select {
	case <-allWorked:
		return float64(jobs) / time.Since(t0).Seconds(), nil
	case ev := <-failed:
		return 0, fmt.Errorf("job %d failed: %v", ev.Job.ID, ev.Job.Errors)
	case <-ctx.Done():
		return 0, fmt.Errorf("%d of %d jobs worked: %w", worked.Load(), jobs, ctx.Err())
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "river-peer:", err)
	os.Exit(1)
}
