package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Standby says whether a private cluster has a streaming standby, and how
// the primary's commits wait for it.
type Standby int

const (
	// NoStandby: the primary alone.
	NoStandby Standby = iota
	// SyncStandby: one standby named in synchronous_standby_names
	// (synchronous_commit on): a commit is acknowledged once the standby
	// flushed it.
	SyncStandby
	// AsyncStandby: one standby, synchronous_standby_names empty (the
	// PostgreSQL default): a commit is acknowledged on the primary alone.
	AsyncStandby
)

// StandbyName is the standby's application_name.
const StandbyName = "standby1"

// clusterTimeout bounds each command that starts, promotes or stops a
// private server (initdb, pg_basebackup, pg_ctl -w).
const clusterTimeout = 60 * time.Second

// Cluster is a private PostgreSQL primary, with a streaming standby when
// asked, started from the system's binaries (/usr/lib/postgresql/*/bin)
// in tb's temporary directory on free loopback ports, as the postgres user
// when the test runs as root (the server refuses root). For tests of
// replication and failover; everything else uses the shared server (URL).
// Both servers are stopped when tb ends.
type Cluster struct {
	tb      testing.TB
	bin     string
	cred    *syscall.Credential
	Primary *Server
	Standby *Server // nil with NoStandby
}

// Server is one server of a Cluster.
type Server struct {
	c    *Cluster
	Port int
	Data string
	log  string
}

// StartCluster initdb's and starts a primary and, unless standby is
// NoStandby, a standby streaming from it (pg_basebackup), and waits until
// the standby streams. fsync is off: these servers hold test data only.
func StartCluster(tb testing.TB, standby Standby) *Cluster {
	tb.Helper()
	c := &Cluster{tb: tb, bin: postgresBin(tb)}
	dir, err := os.MkdirTemp("", "pgtest-cluster-")
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			tb.Fatalf("pgtest: running as root and there is no postgres user to run the server as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			tb.Fatalf("pgtest: %v", err)
		}
	}
	c.Primary = &Server{c: c, Port: freePort(tb), Data: filepath.Join(dir, "primary"), log: filepath.Join(dir, "primary.log")}
	c.run("initdb", "-D", c.Primary.Data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	conf := "wal_level = replica\nmax_wal_senders = 5\nfsync = off\nlisten_addresses = '127.0.0.1'\n" +
		fmt.Sprintf("unix_socket_directories = '%s'\n", dir)
	if standby == SyncStandby {
		conf += "synchronous_standby_names = '" + StandbyName + "'\n"
	}
	c.appendFile(filepath.Join(c.Primary.Data, "postgresql.conf"), conf)
	c.appendFile(filepath.Join(c.Primary.Data, "pg_hba.conf"), "host replication all 127.0.0.1/32 trust\n")
	tb.Cleanup(c.Primary.Stop)
	c.Primary.Start()
	if standby == NoStandby {
		return c
	}
	s := &Server{c: c, Port: freePort(tb), Data: filepath.Join(dir, "standby"), log: filepath.Join(dir, "standby.log")}
	c.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(c.Primary.Port), "-U", "postgres", "-D", s.Data, "-X", "stream", "--no-sync")
	c.appendFile(filepath.Join(s.Data, "postgresql.conf"), fmt.Sprintf(
		"primary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=%s'\n", c.Primary.Port, StandbyName))
	c.appendFile(filepath.Join(s.Data, "standby.signal"), "")
	c.Standby = s
	tb.Cleanup(s.Stop)
	s.Start()
	want := "async"
	if standby == SyncStandby {
		want = "sync"
	}
	c.waitStreaming(want)
	return c
}

// URL is the primary's URL.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
}

// Start starts the server and waits until it accepts connections.
func (s *Server) Start() {
	s.c.tb.Helper()
	s.c.run("pg_ctl", "-D", s.Data, "-o", "-p "+strconv.Itoa(s.Port), "-l", s.log, "-w", "-t", "60", "start")
}

// Stop stops the server (immediate: the test is over), if it runs.
func (s *Server) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	_, _ = s.c.command(ctx, "pg_ctl", "-D", s.Data, "-m", "immediate", "-w", "-t", "60", "stop").CombinedOutput()
}

// Promote makes a standby the primary and waits until it is.
func (s *Server) Promote() {
	s.c.tb.Helper()
	s.c.run("pg_ctl", "-D", s.Data, "-w", "-t", "60", "promote")
}

// URL is a multi-host URL over the primary and the standby with
// target_session_attrs=read-write, as a deployment with a standby gives
// DATABASE_URL: a connection goes to whichever accepts writes.
func (c *Cluster) URL() string {
	if c.Standby == nil {
		return c.Primary.URL()
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		c.Primary.Port, c.Standby.Port)
}

// waitStreaming polls the primary's pg_stat_replication, bounded, until the
// standby streams in syncState (a standby streams a moment before the
// primary counts it as synchronous).
func (c *Cluster) waitStreaming(syncState string) {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	conn := connect(ctx, c.tb, c.Primary.URL())
	defer conn.Close(context.WithoutCancel(ctx))
	for {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming' AND sync_state = $2",
			StandbyName, syncState).Scan(&n)
		if err == nil && n == 1 {
			return
		}
		select {
		case <-ctx.Done():
			c.tb.Fatalf("pgtest: the standby never streamed (err %v); see %s", err, c.Standby.log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd
}

func (c *Cluster) run(name string, args ...string) {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if out, err := c.command(ctx, name, args...).CombinedOutput(); err != nil {
		c.tb.Fatalf("pgtest: %s %v: %v\n%s", name, args, err, out)
	}
}

func (c *Cluster) appendFile(path, text string) {
	c.tb.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err == nil {
		_, err = f.WriteString(text)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		c.tb.Fatalf("pgtest: %v", err)
	}
}

// postgresBin is the newest /usr/lib/postgresql/*/bin with initdb, pg_ctl
// and pg_basebackup.
func postgresBin(tb testing.TB) string {
	tb.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, d := range dirs {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "pg_ctl")) && isFile(filepath.Join(d, "pg_basebackup")) {
			return d
		}
	}
	tb.Fatalf("pgtest: no PostgreSQL binaries (initdb, pg_ctl, pg_basebackup) in /usr/lib/postgresql/*/bin")
	return ""
}

func majorOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isFile(p string) bool { st, err := os.Stat(p); return err == nil && !st.IsDir() }

func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
