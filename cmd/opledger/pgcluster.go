package main

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
	"time"
)

// privateCluster is a throwaway PostgreSQL cluster the demo starts from the
// system's PostgreSQL binaries in a temporary directory, when no server is
// reachable. Run as root, it runs the server as the "postgres" user (the
// server refuses root). Stop removes it.
type privateCluster struct {
	dir  string
	bin  string
	port int
	cred *syscall.Credential
	url  string
}

// findPostgresBin returns the newest /usr/lib/postgresql/*/bin holding
// initdb and pg_ctl, or the directory of initdb on PATH.
func findPostgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if fileExists(filepath.Join(d, "initdb")) && fileExists(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no initdb/pg_ctl found (looked in /usr/lib/postgresql/*/bin and PATH)")
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// startPrivateCluster initdb's and starts a cluster on a free loopback port.
func startPrivateCluster(ctx context.Context) (*privateCluster, error) {
	bin, err := findPostgresBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "opledger-demo-pg-")
	if err != nil {
		return nil, err
	}
	c := &privateCluster{dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root and there is no 'postgres' user to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	data := filepath.Join(dir, "data")
	if out, err := c.run(ctx, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		c.remove()
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", c.port, dir)
	if out, err := c.run(ctx, "pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "30", "start"); err != nil {
		c.remove()
		return nil, fmt.Errorf("pg_ctl start: %v: %s", err, out)
	}
	c.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
	return c, nil
}

func (c *privateCluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd.CombinedOutput()
}

// stop stops the server and removes its directory.
func (c *privateCluster) stop() {
	_, _ = c.run(context.Background(), "pg_ctl", "-D", filepath.Join(c.dir, "data"), "-m", "fast", "-w", "-t", "30", "stop")
	c.remove()
}

func (c *privateCluster) remove() { _ = os.RemoveAll(c.dir) }
