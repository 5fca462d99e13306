package main

import (
	"context"
	crand "crypto/rand"

	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"opledger/adapters/simworld"
	"opledger/cmd/opledger/internal/settings"
	"opledger/domain/simbug"
)

func init() {
	register("sim", "deterministic simulation: seeded fault schedules over the real roles, checked after each", runSim)
}

func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newFlags("sim", "[--seed S] [--schedules N] [--ops K] [--faults LIST] [--store memory|postgres] | --replay SPEC", stderr)
	f.Bind(settings.SimSeed, settings.SimStore, settings.DatabaseURL)
	fs := f.Local()
	schedules := fs.Int("schedules", 1000, "schedules to run")
	ops := fs.Int("ops", 4, "refund operations per schedule")
	steps := fs.Int("steps", 0, "scheduler steps of each schedule's chaos phase (0: 40 + 30 per operation)")
	faults := fs.String("faults", "all", "fault kinds a schedule may inject: all, none, a comma list; 'store-*' takes a prefix, '-kind' removes one")
	replay := fs.String("replay", "", "run the one schedule SPEC (as a violation report prints it) and print its timeline")
	timeline := fs.Bool("timeline", false, "with --replay: print the timeline even when the schedule passes")
	plantText := fs.String("plant", "", "plant a known bug for the sweep (a binary built with -tags simbugs only): "+bugNames())
	parallel := fs.Int("parallel", 0, "schedules at once (0: one per CPU)")
	noShrink := fs.Bool("no-shrink", false, "report the first violation as found, without shrinking it")
	if code, ok := f.Parse(args); !ok {
		return code
	}
	if len(f.Args()) > 0 {
		return fail(stderr, "sim", fmt.Errorf("unexpected argument %q", f.Arg(0)))
	}
	seedText, store, dbURL := f.Text(settings.SimSeed), f.Text(settings.SimStore), f.Text(settings.DatabaseURL)
	var opts simworld.Options
	storeFlag := ""
	switch store {
	case "memory":
	case "postgres":
		factory, closeStores, err := simworld.PostgresStores(ctx, dbURL)
		if err != nil {
			return fail(stderr, "sim", err)
		}
		defer closeStores()
		opts.Store, storeFlag = factory, " --store postgres"
	default:
		return fail(stderr, "sim", f.Invalid(settings.SimStore, "want memory or postgres"))
	}
	if *replay != "" {
		return simReplay(ctx, *replay, *timeline, opts, storeFlag, stdout, stderr)
	}
	set, err := simworld.ParseFaults(*faults)
	if err != nil {
		return fail(stderr, "sim", err)
	}
	bug := simbug.Bug(*plantText)
	if bug != "" && !simbug.Known(bug) {
		return fail(stderr, "sim", fmt.Errorf("--plant %q: unknown bug (known: %s)", bug, bugNames()))
	}
	if bug != "" && !simbug.Enabled {
		return fail(stderr, "sim", errors.New("--plant needs a binary built with -tags simbugs (go run -tags simbugs ./cmd/opledger sim ...)"))
	}
	seed, err := simSeed(seedText)
	if err != nil {
		return fail(stderr, "sim", err)
	}
	fmt.Fprintf(stderr, "opledger sim: seed %d, %d schedules of %d operations, faults %s\n", seed, *schedules, *ops, *faults)
	sum, err := simworld.Sweep(ctx, simworld.SweepOptions{
		Seed: seed, Schedules: *schedules, Ops: *ops, Faults: set, Steps: *steps, Bug: bug,
		Parallel: *parallel, Shrink: !*noShrink, Run: opts,
	})
	if err != nil {
		return fail(stderr, "sim", err)
	}
	if f := sum.First; f != nil {
		spec := f.Spec
		if f.Shrunk != "" {
			spec = f.Shrunk
			fmt.Fprintf(stderr, "\nschedule %d failed: %s\nshrunk in %d runs to %s:\n\n", f.Index, f.Spec, f.ShrinkRuns, f.Shrunk)
		} else {
			fmt.Fprintf(stderr, "\nschedule %d failed: %s\n\n", f.Index, f.Spec)
		}
		if f.Result != nil {
			writeSimTimeline(stderr, *f.Result)
		}
		fmt.Fprintf(stderr, "\nreplay: %s\n\n", replayCommand(spec, storeFlag))
	}
	if err := json.NewEncoder(stdout).Encode(sum); err != nil {
		return fail(stderr, "sim", err)
	}
	if sum.Violations > 0 {
		return 1
	}
	return 0
}

// simReplay runs one schedule and prints its timeline and result.
func simReplay(ctx context.Context, text string, timeline bool, opts simworld.Options, storeFlag string, stdout, stderr io.Writer) int {
	spec, err := simworld.ParseSpec(text)
	if err != nil {
		return fail(stderr, "sim", err)
	}
	opts.Timeline = true
	res, err := simworld.Run(ctx, spec, opts)
	if err != nil {
		return fail(stderr, "sim", err)
	}
	if timeline || !res.OK() {
		writeSimTimeline(stdout, res)
	}
	out := map[string]any{
		"spec": spec.String(), "profile": res.Profile, "workers": res.Workers, "steps": res.Steps,
		"settle_steps": res.SettleSteps, "virtual": res.Virtual.String(), "faults_injected": res.Faults,
		"violations": res.Violations, "trace_hash": res.TraceHash,
	}
	if err := json.NewEncoder(stdout).Encode(out); err != nil {
		return fail(stderr, "sim", err)
	}
	if !res.OK() {
		fmt.Fprintf(stderr, "replay: %s\n", replayCommand(spec.String(), storeFlag))
		return 1
	}
	return 0
}

func writeSimTimeline(w io.Writer, res simworld.Result) {
	fmt.Fprintf(w, " step      time   (schedule %s, %s, %d workers)\n", res.Spec, res.Profile, res.Workers)
	for _, l := range res.Timeline {
		fmt.Fprintln(w, l)
	}
}

// replayCommand is the one line that replays spec.
func replayCommand(spec, storeFlag string) string {
	if strings.Contains(spec, ".b") {
		return "go run -tags simbugs ./cmd/opledger sim" + storeFlag + " --replay " + spec
	}
	return "opledger sim" + storeFlag + " --replay " + spec
}

// simSeed parses a seed, or draws one.
func simSeed(text string) (uint64, error) {
	if text == "" {
		var b [8]byte
		_, _ = crand.Read(b[:])
		return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 | uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56>>1, nil
	}
	seed, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("--seed %q: want a decimal number", text)
	}
	return seed, nil
}

func bugNames() string {
	names := make([]string, len(simbug.All))
	for i, b := range simbug.All {
		names[i] = string(b)
	}
	return strings.Join(names, ", ")
}
