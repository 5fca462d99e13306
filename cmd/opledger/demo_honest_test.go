package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/eventstore/postgres/pgtest"
)

// A DATABASE_URL that is given and fails is the demo's error, naming it
// without its password: no private cluster, no memory store instead.
func TestDemoRefusesAGivenDatabaseItCannotReach(t *testing.T) {
	dead := "postgres://demo:hunter2@" + freeAddr(t) + "/postgres?sslmode=disable"
	for _, c := range []struct {
		name, env string
		args      []string
		named     string
	}{
		{"flag", "", []string{"demo", "--database-url", dead}, "(--database-url)"},
		{"variable", dead, []string{"demo"}, "(DATABASE_URL)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("DATABASE_URL", c.env)
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), c.args, &stdout, &stderr)
			require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			require.Contains(t, stderr.String(), "cannot connect to PostgreSQL at postgres://demo:xxxxx@")
			require.Contains(t, stderr.String(), c.named)
			require.Contains(t, stderr.String(), "connection refused")
			require.NotContains(t, stderr.String()+stdout.String(), "hunter2")
			require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %s", stderr.String())
			require.NotContains(t, stdout.String(), "private cluster")
			require.NotContains(t, stdout.String(), "in-memory")
			require.NotContains(t, stdout.String(), "== the story")
		})
	}
}

// --kafka with brokers that do not answer fails at once, naming them.
func TestDemoNamesUnreachableKafka(t *testing.T) {
	t.Parallel()
	dead := freeAddr(t)
	var stdout, stderr bytes.Buffer
	began := time.Now()
	code := run(t.Context(), []string{"demo", "--database-url", pgtest.URL(), "--kafka", "--kafka-brokers", dead}, &stdout, &stderr)
	require.Equal(t, 1, code)
	require.Contains(t, stderr.String(), "cannot reach Kafka ("+dead+")")
	require.Less(t, time.Since(began), kafkaDialTimeout+5*time.Second, "within seconds, not the courier's minute")
	require.NotContains(t, stdout.String(), "== the story")
}

// The demo refuses a store it would not use.
func TestDemoRefusesKurrent(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	require.Equal(t, 1, run(t.Context(), []string{"demo", "--store", "kurrent"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), `--store "kurrent": the demo runs on the PostgreSQL store (or --memory) only`)
	require.Empty(t, stdout.String())
}

// shellWords splits a printed command line: words, and 'single-quoted'
// words.
func shellWords(t *testing.T, line string) []string {
	var words []string
	for rest := strings.TrimSpace(line); rest != ""; rest = strings.TrimLeft(rest, " ") {
		if rest[0] == '\'' {
			end := strings.IndexByte(rest[1:], '\'')
			require.GreaterOrEqual(t, end, 0, "unterminated quote in %q", line)
			words, rest = append(words, rest[1:1+end]), rest[2+end:]
			continue
		}
		word, after, _ := strings.Cut(rest, " ")
		words, rest = append(words, word), after
	}
	return words
}

// demo --keep leaves its schemas with the read models caught up (Friday's
// refused copy is in the evidence) and prints commands that read them as
// printed: audit replay and verify with the store's schema flag, SQL on the
// read models, and the DROP that cleans up.
func TestDemoKeepPrintsCommandsThatWork(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"demo", "--keep", "--database-url", pgtest.URL()}, &stdout, &stderr)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	out := stdout.String()
	if base := regexp.MustCompile(`opledger_demo_\d+_\d+_\d+`).FindString(out); base != "" { // kept: dropped here whatever happens below
		t.Cleanup(func() { dropSchemas(pgtest.URL(), base+"_store", base, base+"_transport") })
	}
	folded := regexp.MustCompile(`the read models have caught up: (\d+) events folded`).FindStringSubmatch(out)
	require.NotNil(t, folded, out)
	require.Contains(t, out, "events: "+folded[1]+" (", "the read models hold every event verify checked")
	_, kept, ok := strings.Cut(out, "== kept (--keep)")
	require.True(t, ok, out)
	conn, err := pgx.Connect(t.Context(), pgtest.URL())
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))

	var commands, queries int
	dropped := false
	for _, line := range strings.Split(kept, "\n") {
		words := shellWords(t, line)
		switch {
		case len(words) > 1 && words[0] == "opledger":
			commands++
			var o, e bytes.Buffer
			code := run(t.Context(), words[1:], &o, &e)
			switch words[2-1] {
			case "audit":
				if words[2] == "replay" {
					require.Equal(t, 0, code, "%s\n%s", line, e.String())
					require.Contains(t, o.String(), "Operation OP-4471: 8 events")
				} else {
					require.Equal(t, 1, code, "verify finds the demonstration's forgery: %s\n%s", line, e.String())
					require.Contains(t, o.String(), "H1 hash-chain-intact")
				}
			case "projections":
				require.Equal(t, 0, code, "%s\n%s", line, e.String())
				require.Regexp(t, `opledger_demo_\S+\s+live\s+`+folded[1]+` `, o.String())
			default:
				t.Fatalf("an unexpected command: %s", line)
			}
		case len(words) == 4 && words[0] == "psql":
			require.Equal(t, pgtest.URL(), words[1], "psql gets the demo's database")
			require.Equal(t, "-c", words[2])
			if strings.HasPrefix(words[3], "DROP") {
				_, err := conn.Exec(t.Context(), words[3])
				require.NoError(t, err, line)
				dropped = true
				continue
			}
			queries++
			rows, err := conn.Query(t.Context(), words[3])
			require.NoError(t, err, line)
			var text strings.Builder
			for rows.Next() {
				vals, err := rows.Values()
				require.NoError(t, err)
				fmt.Fprintln(&text, vals...)
			}
			require.NoError(t, rows.Err())
			if strings.Contains(words[3], ".evidence") {
				require.Contains(t, text.String(), "delivery.duplicate", "Thursday's duplicate")
				require.Contains(t, text.String(), "capability.already-consumed", "Friday's refused copy")
			} else {
				require.Contains(t, text.String(), "OP-4471 Completed 1")
			}
		}
	}
	require.Equal(t, 3, commands, kept)
	require.Equal(t, 2, queries, kept)
	require.True(t, dropped, kept)
	base := regexp.MustCompile(`opledger_demo_\d+_\d+_\d+`).FindString(out)
	require.Zero(t, demoSchemas(t, conn, base), "the printed DROP removes all three")
}

func demoSchemas(t *testing.T, conn *pgx.Conn, base string) int {
	t.Helper()
	require.NotEmpty(t, base)
	var n int
	require.NoError(t, conn.QueryRow(context.WithoutCancel(t.Context()),
		`SELECT count(*) FROM pg_namespace WHERE nspname = $1 OR nspname LIKE $1 || '\_%'`, base).Scan(&n))
	return n
}

// gate is a TCP proxy to PostgreSQL that can be frozen: while frozen it
// forwards nothing, so that what talks through it waits, deterministically.
type gate struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	open   chan struct{} // closed while traffic flows
}

func newGate(t *testing.T, target string) *gate {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := &gate{ln: ln, target: target, open: make(chan struct{})}
	close(g.open)
	t.Cleanup(func() { g.thaw(); _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go g.serve(c)
		}
	}()
	return g
}

func (g *gate) serve(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", g.target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	pump := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				g.mu.Lock()
				open := g.open
				g.mu.Unlock()
				<-open
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}
	go pump(up, c)
	go pump(c, up)
	<-done
}

func (g *gate) freeze() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

func (g *gate) thaw() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// The demo stopped mid-story — by SIGINT, by SIGTERM, or by its stdout
// closing (demo | head -2) — drops its schemas and exits with the signal's
// code. Its database goes through a gate frozen once it has said where it
// runs, and opened again once it has said it is stopping: the story cannot
// end before the stop arrives, and the cleanup can reach the database.
func TestDemoCleansUpWhenStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts real processes")
	}
	t.Parallel()
	u, err := url.Parse(pgtest.URL())
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		stop func(cmd *exec.Cmd, stdout io.Closer) error
		code int
	}{
		{"SIGINT", func(cmd *exec.Cmd, _ io.Closer) error { return cmd.Process.Signal(syscall.SIGINT) }, 130},
		{"SIGTERM", func(cmd *exec.Cmd, _ io.Closer) error { return cmd.Process.Signal(syscall.SIGTERM) }, 143},
		{"stdout closed", func(_ *exec.Cmd, stdout io.Closer) error { return stdout.Close() }, 141},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := newGate(t, u.Host)
			through := *u
			through.Host = g.ln.Addr().String()
			cmd := exec.Command(binary(t), "demo", "--database-url", through.String())
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			stderrPipe, err := cmd.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			errLines := make(chan string, 100)
			var stderr strings.Builder
			go func() {
				sc := bufio.NewScanner(stderrPipe)
				for sc.Scan() {
					errLines <- sc.Text()
				}
				close(errLines)
			}()
			lines := bufio.NewReader(stdout)
			first, err := lines.ReadString('\n')
			require.NoError(t, err)
			base := regexp.MustCompile(`opledger_demo_\d+_\d+_\d+`).FindString(first)
			require.NotEmpty(t, base, first)
			g.freeze()
			require.NoError(t, c.stop(cmd, stdout))
			if c.name == "stdout closed" {
				g.thaw() // closed already: the demo's next line fails, and it stops
			} else {
				go func() { _, _ = io.Copy(io.Discard, lines) }()
			}
			for line := range errLines { // ends when the demo exits
				fmt.Fprintln(&stderr, line)
				if strings.Contains(line, "stopping and cleaning up") {
					g.thaw()
				}
			}
			err = cmd.Wait()
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "exit: %v; stderr: %s", err, stderr.String())
			require.Equal(t, c.code, exit.ExitCode(), stderr.String())
			require.Contains(t, stderr.String(), "dropped what it made")
			conn, err := pgx.Connect(t.Context(), pgtest.URL())
			require.NoError(t, err)
			defer conn.Close(context.WithoutCancel(t.Context()))
			require.Zero(t, demoSchemas(t, conn, base), "no schema of %s is left", base)
		})
	}
}
