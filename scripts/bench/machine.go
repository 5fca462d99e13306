package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// machine describes where the run happened, for BENCHMARKS.md.
type machine struct {
	date                  time.Time
	cpu                   string
	cores                 int
	memory                string
	postgres              string
	settings              string
	goVersion             string
	loadBefore, loadAfter string
}

func describeMachine(ctx context.Context, url string) machine {
	m := machine{date: time.Now().UTC(), cores: runtime.NumCPU(), goVersion: runtime.Version(), loadBefore: loadAverage()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if line, _, ok := strings.Cut(string(b), "\n"); ok {
			m.memory = strings.Join(strings.Fields(strings.TrimPrefix(line, "MemTotal:")), " ")
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		m.postgres = "unreachable: " + err.Error()
		return m
	}
	defer conn.Close(ctx)
	_ = conn.QueryRow(ctx, "SHOW server_version").Scan(&m.postgres)
	var parts []string
	for _, name := range []string{"shared_buffers", "synchronous_commit", "fsync", "wal_sync_method", "commit_delay", "max_connections"} {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err == nil {
			parts = append(parts, name+"="+v)
		}
	}
	m.settings = strings.Join(parts, ", ")
	return m
}

func (m machine) summary() string {
	return fmt.Sprintf("%d cores (%s), PostgreSQL %s, load average %s", m.cores, m.cpu, m.postgres, m.loadBefore)
}

// loadAverage is /proc/loadavg's first three fields: how busy the machine
// was (other processes share it).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
