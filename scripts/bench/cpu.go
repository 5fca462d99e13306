package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// sampleWatch says, under BENCH_DEBUG, where an end-to-end sample's time
// went: how many messages were being handled on average (fewer than the
// concurrency: the handlers waited for work), how long one handling took,
// how busy the machine's cores were (near 100 %: the figure is CPU-bound,
// and every statement or allocation of any part slows the rest), the CPU
// of this process, and the server processes' CPU by application_name (one
// per pool: api, worker, transport).
type sampleWatch struct {
	pool             *pgxpool.Pool
	t0               time.Time
	busy0, total0    float64
	self0            time.Duration
	server0          map[string]time.Duration
	handling, handed atomic.Int64
}

func watchSample(ctx context.Context, pool *pgxpool.Pool) *sampleWatch {
	w := &sampleWatch{pool: pool, server0: serverCPU(ctx, pool)}
	w.busy0, w.total0 = machineJiffies()
	w.self0 = selfCPU()
	w.t0 = time.Now()
	return w
}

// handled counts one handling that took d.
func (w *sampleWatch) handled(d time.Duration) {
	w.handling.Add(int64(d))
	w.handed.Add(1)
}

func (w *sampleWatch) report(ctx context.Context, what string, n int) {
	elapsed := time.Since(w.t0)
	busy, total := machineJiffies()
	server := serverCPU(ctx, w.pool)
	var parts []string
	for app, d := range server {
		parts = append(parts, app+" "+(d-w.server0[app]).String())
	}
	sort.Strings(parts)
	fmt.Fprintf(os.Stderr, "%s %d in %s: in flight %.1f, handling %s, machine busy %.0f%%, bench process CPU %s, server CPU %s\n",
		what, n, elapsed.Round(time.Millisecond), float64(w.handling.Load())/float64(elapsed),
		(time.Duration(w.handling.Load()) / time.Duration(max(1, w.handed.Load()))).Round(10*time.Microsecond),
		100*(busy-w.busy0)/(total-w.total0), (selfCPU() - w.self0).Round(time.Millisecond), strings.Join(parts, ", "))
}

// machineJiffies is /proc/stat's busy (all but idle and iowait) and total
// CPU time of every core.
func machineJiffies() (busy, total float64) {
	b, _ := os.ReadFile("/proc/stat")
	line, _, _ := strings.Cut(string(b), "\n")
	for i, v := range strings.Fields(line)[1:] {
		x, _ := strconv.ParseFloat(v, 64)
		total += x
		if i != 3 && i != 4 {
			busy += x
		}
	}
	return busy, total
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the CPU time of the server processes of pool's database, by
// application_name (/proc/<pid>/stat's utime and stime, in ticks of 10 ms).
func serverCPU(ctx context.Context, pool *pgxpool.Pool) map[string]time.Duration {
	out := map[string]time.Duration{}
	rows, err := pool.Query(ctx, `SELECT pid, application_name FROM pg_stat_activity WHERE datname = current_database() AND application_name <> ''`)
	if err != nil {
		return out
	}
	defer rows.Close()
	for rows.Next() {
		var (
			pid int
			app string
		)
		if rows.Scan(&pid, &app) != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		s := string(raw)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		user, _ := strconv.ParseInt(f[11], 10, 64)
		sys, _ := strconv.ParseInt(f[12], 10, 64)
		out[app] += time.Duration(user+sys) * 10 * time.Millisecond
	}
	return out
}
