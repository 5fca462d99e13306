package projections_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// cpuMark is the CPU time used so far by this process and by the server
// processes of the benchmark's database's sessions. CPU time, unlike wall
// time, does not stretch when other work shares the machine's cores, so it
// shows where a catch-up's cost lies on a busy machine.
type cpuMark struct {
	client   time.Duration
	backends map[int]time.Duration
	// serverKnown: every session's server process was readable (the
	// server runs on this machine, under /proc).
	serverKnown bool
}

// markCPU reads the CPU used so far.
func markCPU(ctx context.Context, pool *pgxpool.Pool) (cpuMark, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuMark{}, err
	}
	m := cpuMark{client: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), backends: map[int]time.Duration{}, serverKnown: true}
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'`)
	if err != nil {
		return cpuMark{}, err
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return cpuMark{}, err
		}
		cpu, ok := processCPU(pid)
		m.serverKnown = m.serverKnown && ok
		m.backends[pid] = cpu
	}
	return m, rows.Err()
}

// cpuSince returns the CPU this process and the database's server processes
// used since m (server < 0: not known). A session opened since m counts
// from its start; one closed since m is lost (the pool keeps its sessions
// open through a round).
func cpuSince(ctx context.Context, pool *pgxpool.Pool, m cpuMark) (client, server time.Duration, err error) {
	now, err := markCPU(ctx, pool)
	if err != nil {
		return 0, 0, err
	}
	if !m.serverKnown || !now.serverKnown {
		return now.client - m.client, -1, nil
	}
	for pid, cpu := range now.backends {
		server += cpu - m.backends[pid]
	}
	return now.client - m.client, server, nil
}

// processCPU is the user and system CPU of process pid from
// /proc/<pid>/stat (fields 14 and 15, in clock ticks of 1/100 s, Linux's
// USER_HZ).
func processCPU(pid int) (time.Duration, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(raw)
	end := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if end < 0 || end+2 > len(s) {
		return 0, false
	}
	f := strings.Fields(s[end+2:]) // from field 3, state
	if len(f) < 13 {
		return 0, false
	}
	user, err1 := strconv.ParseInt(f[11], 10, 64)
	sys, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(user+sys) * 10 * time.Millisecond, true
}
