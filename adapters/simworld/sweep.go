package simworld

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"opledger/domain/simbug"
)

// SweepOptions say which schedules a sweep runs.
type SweepOptions struct {
	// Seed derives every schedule's seed (ScheduleSeed).
	Seed uint64
	// Schedules is how many to run.
	Schedules int
	// Ops, Faults and Steps are every schedule's (Steps 0: DefaultSteps).
	Ops    int
	Faults FaultSet
	Steps  int
	// Bug is planted for the whole sweep (a simbugs build only).
	Bug simbug.Bug
	// Parallel schedules at once (default GOMAXPROCS). Each schedule is
	// deterministic on its own; the summary does not depend on Parallel.
	Parallel int
	// StopAtFirst ends the sweep at the first schedule with a violation
	// (the schedules before it still all run).
	StopAtFirst bool
	// Shrink shrinks the first failing schedule, within MaxShrinkRuns runs
	// (default 300).
	Shrink        bool
	MaxShrinkRuns int
	Run           Options
}

// Summary is a sweep's outcome: the one JSON line `opledger sim` prints.
type Summary struct {
	Seed       string `json:"seed"`
	Schedules  int    `json:"schedules"`
	Operations int    `json:"operations"`
	Steps      int64  `json:"steps"`
	// Profiles counts schedules by the provider profile they drew.
	Profiles map[string]int `json:"profiles"`
	// FaultsInjected counts injections by kind over all schedules.
	FaultsInjected map[Fault]int `json:"faults_injected"`
	// Violations counts schedules with at least one violation;
	// ViolationsByCheck counts the violations by check.
	Violations        int            `json:"violations"`
	ViolationsByCheck map[string]int `json:"violations_by_check,omitempty"`
	// SettleMax and SettleStepsMax are the longest settle phase (world's
	// clock, steps) of any schedule that settled: how close the sweep came
	// to the liveness bound (SettleBound, MaxSettleSteps).
	// SecondRefundsAfterLoss counts schedules in which, after a lossy
	// failover, an operation had a second refund inside the provider's key
	// retention, one of the two escalated (finding 4 of
	// docs/simulation.md); SecondRefundExample is the first's spec.
	// LossySchedules counts schedules a store-failover-lossy struck; in
	// them, the final logs held RegressionsRecorded LogRegressed and
	// LostEffectsEscalated LostEffectEscalated events in all.
	LossySchedules         int    `json:"lossy_schedules,omitempty"`
	RegressionsRecorded    int    `json:"regressions_recorded,omitempty"`
	LostEffectsEscalated   int    `json:"lost_effects_escalated,omitempty"`
	SecondRefundsAfterLoss int    `json:"second_refunds_after_loss,omitempty"`
	SecondRefundExample    string `json:"second_refund_example,omitempty"`
	// HostilePresentations counts the presentations of hostile floods;
	// HolderWritesUnderFlood the renewals and outcomes their holders wrote
	// meanwhile (CheckHolderUnderFlood judged each).
	HostilePresentations   int    `json:"hostile_presentations,omitempty"`
	HolderWritesUnderFlood int    `json:"holder_writes_under_flood,omitempty"`
	SettleMax              string `json:"settle_max"`
	SettleStepsMax         int    `json:"settle_steps_max"`
	// TraceHash is the SHA-256 of the schedules' trace hashes, in order:
	// the same seed and options give the same hash.
	TraceHash     string   `json:"trace_hash"`
	SchedulesPerS float64  `json:"schedules_per_s"`
	Elapsed       string   `json:"elapsed"`
	First         *Failure `json:"first_violation,omitempty"`
}

// Failure is a failing schedule, shrunk when asked.
type Failure struct {
	Index      int         `json:"index"`
	Spec       string      `json:"spec"`
	Violations []Violation `json:"violations"`
	Shrunk     string      `json:"shrunk,omitempty"`
	ShrinkRuns int         `json:"shrink_runs,omitempty"`
	// Result is the (shrunk) failing schedule's run, its timeline kept.
	Result *Result `json:"-"`
}

// Sweep runs o.Schedules schedules and sums them up.
func Sweep(ctx context.Context, o SweepOptions) (Summary, error) {
	if o.Schedules < 1 {
		return Summary{}, fmt.Errorf("sweep: schedules %d must be at least 1", o.Schedules)
	}
	if o.Steps == 0 {
		o.Steps = DefaultSteps(o.Ops)
	}
	spec := func(i int) Spec {
		return Spec{Seed: ScheduleSeed(o.Seed, i), Ops: o.Ops, Faults: o.Faults, Steps: o.Steps, Bug: o.Bug}
	}
	if err := spec(0).Validate(); err != nil {
		return Summary{}, err
	}
	if err := plant(o.Bug); err != nil {
		return Summary{}, err
	}
	defer simbug.Plant("")
	parallel := o.Parallel
	if parallel < 1 {
		parallel = runtime.GOMAXPROCS(0)
	}
	start := time.Now()
	results := make([]*Result, o.Schedules)
	errs := make([]error, o.Schedules)
	var (
		mu      sync.Mutex
		next    int
		stopped = o.Schedules // the first failing index, when stopping at the first
		wg      sync.WaitGroup
	)
	// Bounded: each worker takes the next index until all are taken (or
	// past the first failure), so at most Schedules runs.
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				if i >= o.Schedules || i > stopped || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				mu.Unlock()
				r, err := run(ctx, spec(i), o.Run)
				mu.Lock()
				results[i], errs[i] = &r, err
				if o.StopAtFirst && (err != nil || !r.OK()) && i < stopped {
					stopped = i
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Summary{}, err
	}
	sum := Summary{
		Seed: fmt.Sprintf("%d", o.Seed), FaultsInjected: map[Fault]int{}, ViolationsByCheck: map[string]int{}, Profiles: map[string]int{},
	}
	h := sha256.New()
	for i, r := range results {
		if r == nil || i > stopped {
			break
		}
		if errs[i] != nil {
			return Summary{}, fmt.Errorf("schedule %d (%s): %w", i, spec(i), errs[i])
		}
		sum.Schedules++
		sum.Operations += r.Spec.Ops
		sum.Steps += int64(r.Steps)
		sum.Profiles[r.Profile]++
		for f, n := range r.Faults {
			sum.FaultsInjected[f] += n
		}
		h.Write([]byte(r.TraceHash))
		if r.LossyFailovers > 0 {
			sum.LossySchedules++
		}
		sum.RegressionsRecorded += r.RegressionsRecorded
		sum.LostEffectsEscalated += r.LostEffectsEscalated
		sum.HostilePresentations += r.HostilePresentations
		sum.HolderWritesUnderFlood += r.HolderWritesUnderFlood
		if len(r.SecondRefunds) > 0 {
			sum.SecondRefundsAfterLoss++
			if sum.SecondRefundExample == "" {
				sum.SecondRefundExample = r.Spec.String()
			}
		}
		if r.OK() {
			continue
		}
		sum.Violations++
		for _, v := range r.Violations {
			sum.ViolationsByCheck[v.Check]++
		}
		if sum.First == nil {
			sum.First = &Failure{Index: i, Spec: r.Spec.String(), Violations: r.Violations}
		}
	}
	var settleMax time.Duration
	for i, r := range results {
		if r == nil || i > stopped {
			break
		}
		if r.SettleSteps <= MaxSettleSteps && r.Settled <= SettleBound {
			settleMax = max(settleMax, r.Settled)
			sum.SettleStepsMax = max(sum.SettleStepsMax, r.SettleSteps)
		}
	}
	sum.SettleMax = settleMax.Round(time.Millisecond).String()
	sum.TraceHash = hex.EncodeToString(h.Sum(nil))
	elapsed := time.Since(start)
	sum.Elapsed = elapsed.Round(time.Millisecond).String()
	sum.SchedulesPerS = float64(int(float64(sum.Schedules)/elapsed.Seconds()*10)) / 10
	if f := sum.First; f != nil {
		first, _ := ParseSpec(f.Spec)
		if o.Shrink {
			shrunk, res, runs := Shrink(ctx, first, o.Run, results[f.Index].Violations, o.MaxShrinkRuns)
			f.Shrunk, f.ShrinkRuns, f.Result = shrunk.String(), runs, &res
		} else {
			opts := o.Run
			opts.Timeline = true
			res, err := run(ctx, first, opts)
			if err == nil {
				f.Result = &res
			}
		}
	}
	return sum, nil
}

// Shrink looks for a smaller schedule that still fails one of the checks
// the original failed: fewer operations, fewer fault kinds, a shorter chaos
// phase, then fault injections skipped one by one. It makes at most maxRuns
// runs (default 300) and returns the smallest failing spec found, its run
// (timeline kept) and the runs made.
func Shrink(ctx context.Context, spec Spec, opts Options, violations []Violation, maxRuns int) (Spec, Result, int) {
	if maxRuns <= 0 {
		maxRuns = 300
	}
	checks := map[string]bool{}
	for _, v := range violations {
		checks[v.Check] = true
	}
	runs := 0
	fails := func(s Spec) (Result, bool) {
		if runs >= maxRuns || ctx.Err() != nil {
			return Result{}, false
		}
		runs++
		r, err := run(ctx, s, opts)
		if err != nil {
			return r, false
		}
		for _, v := range r.Violations {
			if checks[v.Check] {
				return r, true
			}
		}
		return r, false
	}
	best := spec
	bestRes, _ := fails(spec)
	for improved := true; improved && runs < maxRuns; {
		improved = false
		for ops := 1; ops < best.Ops; ops++ {
			c := best
			c.Ops, c.Skip = ops, nil
			if r, ok := fails(c); ok {
				best, bestRes, improved = c, r, true
				break
			}
		}
		for _, f := range best.Faults.List() {
			c := best
			c.Faults = best.Faults.Without(f)
			if r, ok := fails(c); ok {
				best, bestRes, improved = c, r, true
			}
		}
		for _, steps := range []int{best.Steps / 4, best.Steps / 2, best.Steps * 3 / 4} {
			if steps >= best.Steps {
				continue
			}
			c := best
			c.Steps = steps
			if r, ok := fails(c); ok {
				best, bestRes, improved = c, r, true
				break
			}
		}
		for k := 1; k <= bestRes.Injections && runs < maxRuns; k++ {
			if best.skipped(k) {
				continue
			}
			c := best
			c.Skip = append(slices.Clone(best.Skip), k)
			slices.Sort(c.Skip)
			if r, ok := fails(c); ok {
				best, bestRes, improved = c, r, true
			}
		}
	}
	opts.Timeline = true
	if r, err := run(ctx, best, opts); err == nil {
		bestRes = r
	}
	return best, bestRes, runs
}
