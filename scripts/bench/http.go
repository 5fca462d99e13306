package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
)

func init() {
	groups = append(groups, group{
		title: "HTTP",
		names: []string{"http_claimed_c50", "http_claim_p50_c50", "http_claim_p99_c50", "http_claimed_c50_vs_iteration", "http_iteration_vs_claim"},
		run:   runHTTP,
	})
}

// httpClients is scripts/load.sh's client count.
const httpClients = 50

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// serveSystem starts provider-sim and serve (the binaries bench.sh built)
// on loopback against the bench database, as scripts/load.sh does, and
// returns serve's base URL, a function that gives serve a fresh provider
// simulator at the same address (before each sample) and a function
// stopping both.
func serveSystem(ctx context.Context, s *settings) (string, func() error, func(), error) {
	if s.binDir == "" {
		return "", nil, nil, errors.New("no --bin directory with the opledger and loadgen binaries (run scripts/bench.sh)")
	}
	bin := filepath.Join(s.binDir, "opledger")
	env := append(os.Environ(), "DATABASE_URL="+s.url, "OPLEDGER_LOG_LEVEL=error")
	if out, err := exec.CommandContext(ctx, bin, "migrate").CombinedOutput(); err != nil {
		return "", nil, nil, fmt.Errorf("opledger migrate: %w: %s", err, lastLines(string(out), 3))
	}
	tokens := filepath.Join(s.binDir, "tokens")
	if err := os.WriteFile(tokens, []byte("agent bench-agent-token-0123456789 bench\nworker bench-worker-token-0123456789 bench\n"), 0o600); err != nil {
		return "", nil, nil, err
	}
	simAddr, err := freePort()
	if err != nil {
		return "", nil, nil, err
	}
	apiAddr, err := freePort()
	if err != nil {
		return "", nil, nil, err
	}
	var (
		procs []*exec.Cmd
		sp    *simProcess
	)
	stop := func() {
		for _, p := range procs { // only the processes started here, by their handles
			_ = p.Process.Kill()
			_ = p.Wait()
		}
		if sp != nil {
			sp.stop()
		}
	}
	freshSim := func() error {
		if sp != nil {
			sp.stop()
			sp = nil
		}
		var err error
		sp, err = startSim(ctx, s, simAddr)
		return err
	}
	start := func(args ...string) error {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		var errs bytes.Buffer
		cmd.Stderr = &errs
		if err := cmd.Start(); err != nil {
			return err
		}
		procs = append(procs, cmd)
		return nil
	}
	if err := freshSim(); err != nil {
		return "", nil, nil, err
	}
	if err := start("serve", "--dev", "--rate-limit", "0", "--tokens", tokens, "--listen", apiAddr, "--provider-url", "http://"+simAddr); err != nil {
		stop()
		return "", nil, nil, err
	}
	base := "http://" + apiAddr
	for deadline := time.Now().Add(30 * time.Second); ; { // bounded wait for readiness
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, nil, errors.New("serve did not become ready within 30s")
		}
		time.Sleep(100 * time.Millisecond) // polling readiness, bounded
	}
	return base, freshSim, stop, nil
}

var (
	claimedLine = regexp.MustCompile(`Claimed/s: ([0-9.]+)`)
	latencyLine = regexp.MustCompile(`claim latency p50 (\S+) p90 (\S+) p99 (\S+)`)
)

type loadRun struct{ claimed, p50, p99 float64 }

// loadgen runs scripts/loadgen against base for d.
func loadgen(ctx context.Context, s *settings, base string, d time.Duration) (loadRun, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.binDir, "loadgen"), "--api", base, "--clients", strconv.Itoa(httpClients),
		"--duration", d.String(), "--agent-token", "bench-agent-token-0123456789", "--worker-token", "bench-worker-token-0123456789")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return loadRun{}, fmt.Errorf("loadgen: %w: %s", err, lastLines(string(out), 3))
	}
	c := claimedLine.FindSubmatch(out)
	l := latencyLine.FindSubmatch(out)
	if c == nil || l == nil {
		return loadRun{}, fmt.Errorf("loadgen printed no figures: %s", lastLines(string(out), 3))
	}
	var r loadRun
	r.claimed, _ = strconv.ParseFloat(string(c[1]), 64)
	p50, err1 := time.ParseDuration(string(l[1]))
	p99, err2 := time.ParseDuration(string(l[3]))
	if err := errors.Join(err1, err2); err != nil {
		return loadRun{}, err
	}
	r.p50, r.p99 = float64(p50.Microseconds())/1000, float64(p99.Microseconds())/1000
	return r, nil
}

// runHTTP: scripts/load.sh's run (50 HTTP clients, each create, decide,
// claim, outcome, and a replayed presentation) against serve, beside the
// in-process Claim at 50 goroutines.
func runHTTP(ctx context.Context, s *settings, emit func(figure)) error {
	base, freshSim, stop, err := serveSystem(ctx, s)
	if err != nil {
		return err
	}
	defer stop()
	store, err := openStore(ctx, s, storeSchema, 20)
	if err != nil {
		return err
	}
	defer store.Close()
	pool, err := seedClaimable(ctx, s, store, "ZH", claimPoolSize(s, 8))
	if err != nil {
		return err
	}
	h, err := ledger.New(ledger.Config{Store: store, Clock: clock.NewManual(benchStart), Logger: quietLogger()})
	if err != nil {
		return err
	}
	d := 2 * time.Second
	if !s.quick {
		d = 10 * time.Second
	}
	var runs []loadRun
	iterations := 0
	all, err := interleaveN(ctx, s.rounds,
		func(ctx context.Context) (float64, error) {
			if err := freshSim(); err != nil {
				return 0, err
			}
			r, err := loadgen(ctx, s, base, d)
			runs = append(runs, r)
			return r.claimed, err
		},
		func(ctx context.Context) (float64, error) { return claimRate(ctx, h, pool, httpClients, s.sample) },
		func(ctx context.Context) (float64, error) {
			iterations++
			return iterationRate(ctx, h, fmt.Sprintf("IT%d", iterations), httpClients, s.sample)
		})
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	ours, base2 := all[0], all[1]
	f := rateFigure("http_claimed_c50", "Claimed/s", "in-process Claim c50", "ratio >= 0.3", ours, base2)
	f.note = fmt.Sprintf("scripts/loadgen, %d clients, %s per sample, against serve with provider-sim (every role running)", httpClients, d)
	emit(f)
	it := rateFigure("http_claimed_c50_vs_iteration", "Claimed/s", "in-process loadgen iteration c50", "", ours, all[2])
	it.note = "the part HTTP adds: the same five commands per Claimed as loadgen's iteration (create, decide and issue, claim, outcome, " +
		"a replayed presentation: four appends and a refusal) run in process by 50 goroutines on the ledger, no HTTP, no token signing; " +
		"http_claimed_c50's baseline is the claim alone"
	emit(it)
	ceiling := rateFigure("http_iteration_vs_claim", "Claimed/s", "in-process Claim c50", "", all[2], base2)
	ceiling.note = "the most http_claimed_c50's ratio can reach whatever HTTP costs: loadgen's five commands per Claimed, run in process with no HTTP, over the claim alone"
	emit(ceiling)
	var p50, p99 []float64
	for _, r := range runs {
		p50, p99 = append(p50, r.p50), append(p99, r.p99)
	}
	emit(figure{Figure: "http_claim_p50_c50", Value: round(median(p50)), Unit: "ms", spread: spread(p50)})
	p := figure{Figure: "http_claim_p99_c50", Value: round(median(p99)), Unit: "ms", Goal: "value <= 25", spread: spread(p99)}
	if m, q := median(ours), median(p99); m > 0 && q > 0 {
		mean := 1000 * httpClients / (iterationRequests * m)
		p.note = fmt.Sprintf("%d clients in a closed loop of %d requests per Claimed: a request's mean time is clients / requests per second (Little's law), %.1f ms at this run's %.0f Claimed/s, and the p99 %.1f × that; "+
			"with the same spread a p99 of 25 ms needs about %.0f Claimed/s", httpClients, iterationRequests, mean, m, q/mean, m*q/25)
	}
	emit(p)
	return nil
}

// iterationRequests is the requests of one loadgen iteration: create,
// decide and issue, claim, outcome, a replayed presentation.
const iterationRequests = 5

// iterationRate runs clients goroutines each doing loadgen's iteration in
// process for d — request, decide and issue, claim, record the outcome,
// present the capability again (refused: already consumed) — and returns
// Claimed per second.
func iterationRate(ctx context.Context, h *ledger.Handler, tag string, clients int, d time.Duration) (float64, error) {
	var (
		done     atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	start := time.Now()
	by := ledger.Cause{Actor: "bench"}
	for c := range clients {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				op := domain.OperationID(fmt.Sprintf("OP-%s-%d-%d", tag, c, i))
				err := func() error {
					if _, err := h.RequestOperation(ctx, domain.RequestOperation{OperationID: op, OrderID: "ORD-" + string(op), AmountMinor: 1000,
						Currency: "EUR", OrderTotalMinor: 5000, CorrelationID: domain.CorrelationID("COR-" + string(op)), RequestedBy: "load"}, by); err != nil {
						return err
					}
					_, issued, err := h.DecideAndIssue(ctx, op, domain.Decide{Approver: "load", ApprovalLimitMinor: 5000,
						Facts: domain.Facts{OrderRefundable: true}}, domain.IssueCapability{}, by)
					if err != nil {
						return err
					}
					out, err := h.Claim(ctx, op, domain.Claim{MessageID: domain.MessageID("MSG-" + string(op)), CapabilityID: issued.CapabilityID, WorkerID: "load"})
					if err == nil && out.Status != domain.StatusClaimed {
						err = fmt.Errorf("claim %s: %s", op, out.Status)
					}
					if err != nil {
						return err
					}
					if err := h.RecordOutcome(ctx, op, domain.RecordOutcome{ExecutionID: out.ExecutionID, LeaseEpoch: 1, LeaseSecret: out.LeaseSecret,
						Outcome: domain.Completed, ProviderReference: "re_" + string(op)}, by); err != nil {
						return err
					}
					again, err := h.Claim(ctx, op, domain.Claim{MessageID: domain.MessageID("MSG-R-" + string(op)), CapabilityID: issued.CapabilityID, WorkerID: "load"})
					if err == nil && again.Status != domain.StatusAlreadyConsumed {
						err = fmt.Errorf("replay %s: %s", op, again.Status)
					}
					return err
				}()
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}
