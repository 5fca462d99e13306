package harness_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/adapters/harness"
	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/recovery"
	"opledger/domain/worker"
	"opledger/eventstore"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
)

// childEnv switches the test binary into the child worker of
// TestWorkerKilledAfterClaim.
const childEnv = "OPLEDGER_HARNESS_CHILD_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(runChildWorker())
	}
	os.Exit(m.Run())
}

// runChildWorker is a real worker process: it claims and calls the provider,
// on the wall clock, and is killed while the provider holds its response.
func runChildWorker() int {
	ctx := context.Background()
	store, err := postgres.Open(ctx, postgres.Config{URL: os.Getenv("CHILD_DATABASE_URL"), Schema: os.Getenv("CHILD_SCHEMA")})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	h, err := ledger.New(ledger.Config{Store: store})
	if err != nil {
		return 3
	}
	client, err := provider.New(provider.Config{BaseURL: os.Getenv("CHILD_PROVIDER_URL"), MaxAttempts: 1, Timeout: 50 * time.Second})
	if err != nil {
		return 3
	}
	wk, err := worker.New(worker.Config{ID: "worker-child", Ledger: h, Provider: client, ProviderTimeout: 50 * time.Second})
	if err != nil {
		return 3
	}
	_, err = wk.Handle(ctx, worker.Delivery{MessageID: "MSG-55A", OperationID: op, CapabilityID: domain.CapabilityID(os.Getenv("CHILD_CAPABILITY"))})
	fmt.Fprintln(os.Stderr, "child: handled, which it should not have lived to do:", err)
	return 4
}

// 8. A worker killed after its claim (a real process, SIGKILL): the
// capability stays consumed; the execution becomes Unknown only after the
// lease expires; reconciliation then finds the refund.
func TestWorkerKilledAfterClaim(t *testing.T) {
	t.Parallel()
	url, schema := pgtest.Schema(t)
	store := pgtest.OpenMigrated(t, url, schema)
	// The child runs on the wall clock; the world's clock starts there too.
	w, err := harness.New(harness.Options{Store: store, Start: time.Now().UTC(), ClientAttempts: 1})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	ctx := t.Context()
	r, err := w.Approve(ctx, op, "ORD-8841", 12000)
	require.NoError(t, err)
	require.NoError(t, w.Sim.Arm(sim.Fault{Kind: sim.FaultHoldResponse}))

	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"=1", "CHILD_DATABASE_URL="+url, "CHILD_SCHEMA="+schema,
		"CHILD_PROVIDER_URL="+w.SimURL, "CHILD_CAPABILITY="+string(r.Capability))
	child.Stderr = os.Stderr
	require.NoError(t, child.Start())
	select {
	case <-w.Sim.Held(): // the child claimed and its request is at the provider
	case <-time.After(60 * time.Second):
		_ = child.Process.Kill()
		t.Fatal("child worker never reached the provider")
	}
	require.NoError(t, child.Process.Kill()) // SIGKILL
	_ = child.Wait()

	st, err := w.State(ctx, op)
	require.NoError(t, err)
	require.Equal(t, domain.CapConsumed, st.Capabilities[r.Capability].State, "the capability stays consumed")
	require.Equal(t, domain.ExecExecuting, st.Executions[0].State)
	n, err := w.Sweeper.SweepOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "not Unknown while the lease runs")

	w.Clock.Advance(domain.DefaultLeaseDuration + time.Second)
	require.Equal(t, 1, untilNonZero(t, func() int {
		n, err := w.Sweeper.SweepOnce(ctx)
		require.NoError(t, err)
		return n
	}))
	st, err = w.State(ctx, op)
	require.NoError(t, err)
	require.Equal(t, domain.ExecUnknown, st.Executions[0].State)

	w.Sim.Release()
	var steps []recovery.Step
	untilNonZero(t, func() int {
		steps, err = w.Reconciler.ReconcileOnce(ctx)
		require.NoError(t, err)
		return len(steps)
	})
	require.Len(t, steps, 1)
	require.Equal(t, "completed", string(steps[0].Verdict))
	l := w.Sim.Ledger().ByOperation[string(op)]
	require.Equal(t, 1, l.RequestsReceived)
	require.Equal(t, 1, l.RefundsCreated)
}

// deadStore is a Postgres store whose server cannot be reached.
func deadStore(t *testing.T) eventstore.Store {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cfg, err := pgxpool.ParseConfig("postgres://postgres@" + addr + "/postgres?sslmode=disable&connect_timeout=2")
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s, err := postgres.New(pool, "")
	require.NoError(t, err)
	return s
}
