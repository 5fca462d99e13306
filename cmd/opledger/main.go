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
//	opledger doctor        check a deployment before it takes traffic
//	opledger demo          the seed's Thursday/Friday story, end to end
//	opledger sim           deterministic simulation: seeded fault schedules, checked
//	opledger keys          the key ring that signs capability tokens
//	opledger tokens        bearer tokens and the lines of the tokens file
//	opledger version       the build: module version, VCS revision, Go version
//
// Every command reads its settings from the environment (DATABASE_URL,
// PROVIDER_URL, ...) and a flag of the same meaning overrides it; `opledger
// <command> --help` lists both. Each setting is defined once, in
// internal/settings, and README.md's configuration table is checked
// against it.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
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
	// SIGINT and SIGTERM end the command's context with the signal as its
	// cause; later ones are caught and ignored, so that cleaning up is not
	// cut short.
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() { cancel(signalled{<-sigs}) }()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	os.Exit(code)
}

// signalled is the cause of a context a signal ended.
type signalled struct{ os.Signal }

func (s signalled) Error() string { return "stopped by " + s.String() }

// exitCode is the shell's code for a death by the signal: 128 + its number.
func (s signalled) exitCode() int {
	if n, ok := s.Signal.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 130
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = append([]string{"version"}, args[1:]...)
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
	fmt.Fprintln(w, "\nEvery setting comes from the environment and a flag of the same meaning overrides it.\n"+
		"Run 'opledger <command> --help' for its flags and variables, 'opledger version' for the build.")
}

// fail prints err as the command's error, each of its lines (errors.Join
// puts one setting's error on each) prefixed with the command, and returns
// exit code 1.
func fail(stderr io.Writer, cmd string, err error) int {
	for _, line := range strings.Split(strings.TrimRight(err.Error(), "\n"), "\n") {
		fmt.Fprintf(stderr, "opledger %s: %s\n", cmd, strings.TrimSpace(line))
	}
	return 1
}
