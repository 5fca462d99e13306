// Command bench measures opledger against baselines taken in the same run
// on the same server: every figure is sampled in rounds, each round taking
// one sample of opledger and one of its baseline one after the other (A, B,
// A, B, ...), and the medians are compared. It prints one JSON line per
// figure and writes BENCHMARKS.md. scripts/bench.sh creates the database it
// runs on and drops it afterwards; run that, not this.
//
// It is a benchmark, not a test: nothing here asserts a timing. Goals are
// printed beside the figures, and whether each was met.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

// settings are the run's knobs: --quick shrinks every size and duration.
type settings struct {
	url      string // the bench database (created by bench.sh)
	quick    bool
	rounds   int           // samples per figure and baseline (>= 5)
	sample   time.Duration // one throughput sample
	pgbench  string        // the pgbench binary
	logSize  int           // events in the log the projector and verify read
	backlog  int           // refunds per end-to-end sample
	only     []string      // figure name prefixes to run (empty: all)
	out      string        // BENCHMARKS.md to write ("" : none)
	binDir   string        // where bench.sh built opledger, loadgen and the River peer
	mdbURL   string        // the database bench.sh installed Message DB into ("": not installed)
	commands []string      // the command lines, for BENCHMARKS.md
	log      *slog.Logger
}

// figure is one line of the output.
type figure struct {
	Figure        string  `json:"figure"`
	Value         float64 `json:"value"`
	Unit          string  `json:"unit"`
	Baseline      string  `json:"baseline"`
	BaselineValue float64 `json:"baseline_value"`
	Ratio         float64 `json:"ratio"`
	Goal          string  `json:"goal"`

	// Not printed: for BENCHMARKS.md.
	met    string // "yes", "no", "" (no goal)
	spread string // the samples' range, as a noise indication
	note   string
}

func main() {
	var s settings
	flag.StringVar(&s.url, "database-url", os.Getenv("DATABASE_URL"), "the bench database [DATABASE_URL]")
	flag.BoolVar(&s.quick, "quick", false, "small sizes and short samples (about 5 minutes)")
	flag.IntVar(&s.rounds, "rounds", 5, "samples per figure and per baseline (at least 5)")
	flag.StringVar(&s.pgbench, "pgbench", "pgbench", "the pgbench binary")
	only := flag.String("only", "", "comma-separated figure name prefixes to run (default: all)")
	flag.StringVar(&s.out, "out", "", "write the report (BENCHMARKS.md) here")
	flag.StringVar(&s.binDir, "bin", "", "directory holding the built opledger and loadgen binaries (HTTP figures)")
	flag.StringVar(&s.mdbURL, "message-db-url", "", "a database holding Message DB (the append figures' peer; bench.sh installs it)")
	cmdline := flag.String("command", "", "the command line that ran this, for the report")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	if sub := flag.Arg(0); sub != "" {
		os.Exit(runSubcommand(sub, flag.Args()[1:]))
	}
	if s.url == "" {
		fmt.Fprintln(os.Stderr, "bench: DATABASE_URL or --database-url is required (scripts/bench.sh sets it)")
		os.Exit(2)
	}
	if s.rounds < 5 {
		fmt.Fprintln(os.Stderr, "bench: --rounds must be at least 5 (figures are medians of at least 5 samples)")
		os.Exit(2)
	}
	if *only != "" {
		s.only = strings.Split(*only, ",")
	}
	s.commands = []string{cmp.Or(*cmdline, strings.Join(os.Args, " "))}
	s.sample, s.logSize, s.backlog = 3*time.Second, 1_000_000, 1000
	if s.quick {
		s.sample, s.logSize, s.backlog = time.Second, 50_000, 300
	}
	s.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	machine := describeMachine(ctx, s.url)
	fmt.Fprintf(os.Stderr, "bench: %s; %d rounds, samples of %s%s\n", machine.summary(), s.rounds, s.sample, map[bool]string{true: " (--quick)"}[s.quick])

	var figures []figure
	emit := func(f figure) {
		f.met = judge(f)
		enc := json.NewEncoder(os.Stdout)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(f)
		figures = append(figures, f)
	}
	for _, g := range groups {
		if !s.wants(g.names...) {
			continue
		}
		t0 := time.Now()
		if err := g.run(ctx, &s, emit); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", g.title, err)
			emit(figure{Figure: g.names[0], Unit: "error", Goal: "", note: err.Error()})
			if ctx.Err() != nil {
				break
			}
		}
		fmt.Fprintf(os.Stderr, "bench: %s done in %s\n", g.title, time.Since(t0).Round(100*time.Millisecond))
	}
	machine.loadAfter = loadAverage()
	elapsed := time.Since(started)
	fmt.Fprintf(os.Stderr, "bench: finished in %s\n", elapsed.Round(time.Second))
	if s.out != "" {
		if err := writeReport(s.out, &s, machine, figures, elapsed); err != nil {
			fmt.Fprintf(os.Stderr, "bench: write %s: %v\n", s.out, err)
			return
		}
		fmt.Fprintf(os.Stderr, "bench: wrote %s\n", s.out)
	}
	stop()
}

// group is a set of figures measured together (they share a setup).
type group struct {
	title string
	names []string // the figures it emits, for --only
	run   func(ctx context.Context, s *settings, emit func(figure)) error
}

// groups in the order they run. Each file adds its own.
var groups []group

func (s *settings) wants(names ...string) bool {
	if len(s.only) == 0 {
		return true
	}
	for _, n := range names {
		for _, p := range s.only {
			if strings.HasPrefix(n, p) {
				return true
			}
		}
	}
	return false
}

// interleave takes rounds samples of a and of b, alternating (a, b, a, b,
// ...), and returns both lists.
func interleave(ctx context.Context, rounds int, a, b func(ctx context.Context) (float64, error)) (as, bs []float64, err error) {
	all, err := interleaveN(ctx, rounds, a, b)
	if err != nil {
		return nil, nil, err
	}
	return all[0], all[1], nil
}

// interleaveN takes rounds samples of every f in turn (f0, f1, f2, f0, f1,
// ...) and returns each one's list: a figure, its baseline and a peer
// measured moments apart.
func interleaveN(ctx context.Context, rounds int, fs ...func(ctx context.Context) (float64, error)) ([][]float64, error) {
	out := make([][]float64, len(fs))
	for range rounds {
		for i, f := range fs {
			x, err := f(ctx)
			if err != nil {
				if i > 0 {
					return nil, fmt.Errorf("baseline %d: %w", i, err)
				}
				return nil, err
			}
			out[i] = append(out[i], x)
		}
	}
	return out, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread is the samples' range relative to their median, in percent.
func spread(xs []float64) string {
	if len(xs) == 0 {
		return ""
	}
	m := median(xs)
	if m == 0 {
		return ""
	}
	return fmt.Sprintf("±%.0f%%", 50*(slices.Max(xs)-slices.Min(xs))/m)
}

// rateFigure is a higher-is-better figure against a higher-is-better
// baseline: ratio = ours / baseline.
func rateFigure(name, unit, baseline, goal string, ours, base []float64) figure {
	f := figure{Figure: name, Value: round(median(ours)), Unit: unit, Baseline: baseline, BaselineValue: round(median(base)), Goal: goal}
	if f.BaselineValue > 0 {
		f.Ratio = round3(median(ours) / median(base))
	}
	f.spread = spread(ours) + " / " + spread(base)
	return f
}

func round(x float64) float64 {
	switch {
	case x >= 100:
		return float64(int64(x + 0.5))
	case x >= 1:
		return float64(int64(x*100+0.5)) / 100
	}
	return float64(int64(x*10000+0.5)) / 10000
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// judge reads a goal such as "ratio >= 0.8", "value <= 256" or
// "value >= 1500 && ratio >= 0.8" and says whether f meets it.
func judge(f figure) string {
	if f.Goal == "" || f.Unit == "error" {
		return ""
	}
	for _, clause := range strings.Split(f.Goal, "&&") {
		var what, op string
		var want float64
		if _, err := fmt.Sscanf(strings.TrimSpace(clause), "%s %s %g", &what, &op, &want); err != nil {
			return "?"
		}
		got := f.Value
		if what == "ratio" {
			got = f.Ratio
		}
		ok := (op == ">=" && got >= want) || (op == "<=" && got <= want)
		if !ok {
			return "no"
		}
	}
	return "yes"
}

// runSubcommand runs a piece of the benchmark in a process of its own (so
// that its memory is its own): bench verify ...
func runSubcommand(name string, args []string) int {
	switch name {
	case "verify":
		return verifySubcommand(args)
	}
	fmt.Fprintf(os.Stderr, "bench: unknown subcommand %q\n", name)
	return 2
}

var _ = runtime.NumCPU
