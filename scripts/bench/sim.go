package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// simProcess is a provider simulator (`opledger provider-sim`) of one
// sample: started empty before the sample, killed after it, so that every
// sample — opledger's, the worker alone's and River's alike — meets a
// simulator that remembers no key but its own sample's, over HTTP on
// loopback from another process.
type simProcess struct {
	URL  string
	cmd  *exec.Cmd
	errs bytes.Buffer
}

// startSim starts a provider simulator on addr (a free port when empty)
// and waits until it accepts connections.
func startSim(ctx context.Context, s *settings, addr string) (*simProcess, error) {
	if s.binDir == "" {
		return nil, errors.New("no --bin directory with the opledger binary (run scripts/bench.sh)")
	}
	if addr == "" {
		var err error
		if addr, err = freePort(); err != nil {
			return nil, err
		}
	}
	p := &simProcess{URL: "http://" + addr}
	p.cmd = exec.Command(filepath.Join(s.binDir, "opledger"), "provider-sim", "--listen", addr)
	p.cmd.Env = append(os.Environ(), "OPLEDGER_LOG_LEVEL=error")
	p.cmd.Stderr = &p.errs
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); ; { // bounded wait for the listener
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return p, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			return nil, fmt.Errorf("provider-sim did not listen on %s within 30s: %s", addr, lastLines(p.errs.String(), 3))
		}
		time.Sleep(10 * time.Millisecond) // polling the listener, bounded
	}
}

// stop kills the simulator (this process's child, by its handle) and
// waits for it.
func (p *simProcess) stop() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}
