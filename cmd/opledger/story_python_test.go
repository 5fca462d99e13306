package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pyWorker is one process of the Python example worker
// (clients/python/examples/refund_worker.py): messages go in on its stdin,
// one JSON line each, and what it did comes out on its stdout, one line per
// message. The test is its queue.
type pyWorker struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan map[string]any
}

func (s *system) startPythonWorker(t *testing.T, py, id string) *pyWorker {
	t.Helper()
	cmd := exec.Command(py, filepath.Join("examples", "refund_worker.py"))
	cmd.Dir = pythonDir
	cmd.Env = s.pythonEnv("OPLEDGER_URL=http://"+s.api, "OPLEDGER_TOKEN="+workerToken, "OPLEDGER_WORKER_ID="+id,
		"PROVIDER_URL=http://"+s.sim)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	logf, err := os.Create(filepath.Join(t.TempDir(), id+".log"))
	require.NoError(t, err)
	cmd.Stderr = logf
	require.NoError(t, cmd.Start())
	w := &pyWorker{t: t, cmd: cmd, in: in, lines: make(chan map[string]any, 16)}
	go func() {
		defer close(w.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil {
				w.lines <- line
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("%s log:\n%s", id, tail(string(b), 4000))
		}
	})
	return w
}

// deliver hands the worker one message, as the team's queue would.
func (w *pyWorker) deliver(msg, op, token string) {
	w.t.Helper()
	line, err := json.Marshal(map[string]string{"message_id": msg, "operation_id": op, "capability": token})
	require.NoError(w.t, err)
	_, err = w.in.Write(append(line, '\n'))
	require.NoError(w.t, err)
}

// handled is the worker's line for the next message it finished.
func (w *pyWorker) handled() map[string]any {
	w.t.Helper()
	select {
	case line, ok := <-w.lines:
		require.True(w.t, ok, "the worker exited")
		return line
	case <-time.After(clientWaitBound):
		w.t.Fatal("the worker handled nothing in time")
		return nil
	}
}

// recycle kills the process at once, as a host recycling it would: nothing
// after this point is recorded by it.
func (w *pyWorker) recycle() {
	w.t.Helper()
	require.NoError(w.t, w.cmd.Process.Kill())
	_ = w.cmd.Wait()
}

// TestStoryWithAPythonWorker is the README's story ("The story it is built
// around") with the worker written in Python over HTTP, against real serve
// (its sweeper and reconciler on), provider-sim and PostgreSQL: one refund
// on the provider's ledger, whatever is redelivered or resubmitted.
//
// The downstream consumer of the operation feed (issue 23's inbox) rides
// along this test: it starts after newSystemWith, before Thursday, and its
// table is checked after Friday.
func TestStoryWithAPythonWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	py := python3(t)
	t.Parallel()
	s := newSystemWith(t, "--reconcile-interval", "100ms")
	// The support portal's service follows the operation feed with its inbox.
	portal := s.startFeedConsumer(t)

	// Thursday 14:02: an agent approves a 120.00 refund on ORD-8841.
	op, token := s.approve("story-python")

	// Worker A claims it and calls the provider with the claim's key; the
	// provider creates the refund but the answer never arrives, and the host
	// recycles the process before it records anything.
	s.armFault(t, "hold-response", op)
	a := s.startPythonWorker(t, py, "worker-a")
	a.deliver("MSG-55A", op, token)
	s.waitReceived(t, op, 1)
	a.recycle()

	// The queue redelivers MSG-55A to worker B: a DuplicateDelivery, recorded,
	// acknowledged, and nothing sent: worker A might still be alive.
	b := s.startPythonWorker(t, py, "worker-b")
	b.deliver("MSG-55A", op, token)
	dup := b.handled()
	require.Equal(t, "DuplicateDelivery", dup["status"], dup)
	require.Equal(t, true, dup["ack"])

	// A minute later the lease lapses: the sweeper marks the execution
	// Unknown, and the reconciler finds the refund at the provider by our
	// operation id, under the claim's key, and records Completed.
	require.Equal(t, 200, s.call("POST", "/v1/test-clock", operatorToken, map[string]any{"advance": "2m"}).status)
	s.waitExecution(t, op, func(x map[string]any) bool { return x["state"] == "Completed" })

	// Friday: an operator's "resubmit all" sends a copy under a new message
	// id: the capability is spent, the copy refused as a replay, recorded,
	// and acknowledged; so is one more redelivery of the original.
	require.Equal(t, 200, s.call("POST", "/v1/test-clock", operatorToken, map[string]any{"advance": "25h"}).status)
	b.deliver("MSG-77C", op, token)
	replay := b.handled()
	require.Equal(t, "AlreadyConsumed", replay["status"], replay)
	require.Equal(t, "capability.already-consumed", replay["reason"])
	require.Equal(t, true, replay["replay_suspected"])
	require.Equal(t, true, replay["ack"])
	b.deliver("MSG-55A", op, token)
	require.Equal(t, "DuplicateDelivery", b.handled()["status"])

	// One refund, and one request for it: the reconciler only looked.
	requests, refunds := s.simLedger(op)
	require.Equal(t, 1, refunds, "one refund on the provider's ledger")
	require.Equal(t, 1, requests, "worker A's request only: nothing was sent again")
	require.Eventually(t, func() bool {
		r := s.call("GET", "/v1/evidence?operation_id="+op, auditorToken, nil)
		list, _ := r.body["evidence"].([]any)
		return len(list) == 3 // two duplicate deliveries, one replay refused
	}, clientWaitBound, 20*time.Millisecond, "the ledger shows why")

	// Downstream, one row in the portal's table for the one refund; and
	// still one after the feed is read again from its start.
	portal.requireOneRefund(op)
	portal.rewind()
	portal.requireOneRefund(op)
}
