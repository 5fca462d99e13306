// Command opledger is the one binary of the operation ledger:
//
//	opledger serve         HTTP API, projector, sweeper, reconciler, relay
//	opledger worker        the worker role against a transport
//	opledger provider-sim  the Stripe-style provider simulator
//	opledger migrate       apply the database schema
//	opledger audit         replay, verify and diff the ledger's history
//	opledger projections   rebuild read models
//	opledger dlq           inspect and resubmit dead letters
//	opledger set-aside     list and release the loops' set-aside items
//	opledger demo          the seed's Thursday/Friday story, end to end
//	opledger sim           deterministic simulation: seeded fault schedules, checked
//
// Every command reads its settings from the environment (DATABASE_URL,
// PROVIDER_URL, ...) and a flag of the same meaning overrides it; `opledger
// <command> --help` lists both.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand. run returns the process exit code.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) {
	commands[name] = command{summary: summary, run: run}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "opledger: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: opledger <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-13s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nEvery setting comes from the environment and a flag of the same meaning overrides it.\nRun 'opledger <command> --help' for its flags and variables.")
}

// flags builds a command's flag set that prints errors and help to stderr.
func flags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("opledger "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: opledger %s %s\n\nflags (each defaults to the environment variable named in brackets):\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args; it reports the exit code to use when parsing ended the
// command (help asked for: 0; bad flags: 2).
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

// env returns the environment variable's value, or def.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// newLogger logs JSON to stderr at the level named by OPLEDGER_LOG_LEVEL.
func newLogger(stderr io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(env("OPLEDGER_LOG_LEVEL", "info"))); err != nil {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
}

// fail prints a one-line error naming what went wrong and returns exit code 1.
func fail(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "opledger %s: %v\n", cmd, err)
	return 1
}

// newQuietLogger logs warnings and errors only: for commands whose own
// output tells the story.
func newQuietLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError + 4}))
}
