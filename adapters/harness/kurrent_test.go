package harness_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/harness"
	"opledger/eventstore"
	"opledger/eventstore/kurrent"
	"opledger/eventstore/kurrent/kurrenttest"
)

// The execution scenarios on the KurrentDB backend, against the in-process
// test server (eventstore/kurrent/kurrenttest; a real KurrentDB is not
// available in CI): the store `opledger serve --store kurrent` uses, with
// opledger's own stream categories. Every scenario of scenarios_test.go
// runs here too; the SIGKILLed child worker (killed_worker_test.go), which
// needs a Postgres schema it can hand to a child process, stays on Postgres.

// onKurrent gives each scenario a fresh test server; the other instance is
// a second store with a client of its own.
var onKurrent = backend{
	open: func(t *testing.T) (eventstore.Store, func() eventstore.Store) {
		srv := kurrenttest.Start(t)
		open := func() eventstore.Store { return openKurrent(t, srv.URL()) }
		return open(), open
	},
	// dead is a store whose server refuses connections after it connected.
	dead: func(t *testing.T) eventstore.Store {
		srv := kurrenttest.Start(t)
		s := openKurrent(t, srv.URL())
		srv.Refuse()
		return s
	},
}

func openKurrent(t *testing.T, url string) eventstore.Store {
	t.Helper()
	s, err := kurrent.Open(t.Context(), kurrent.Config{URL: url})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func TestReplayedCapabilityRejectedBeforeProviderOnKurrent(t *testing.T) {
	testReplayedCapabilityRejectedBeforeProvider(t, onKurrent)
}

func TestReplayAfterProviderPrunedKeyCannotRefundAgainOnKurrent(t *testing.T) {
	testReplayAfterProviderPrunedKeyCannotRefundAgain(t, onKurrent)
}

func TestSecondCapabilityWhileUnknownOpensNothingOnKurrent(t *testing.T) {
	testSecondCapabilityWhileUnknownOpensNothing(t, onKurrent)
}

func TestThursdayAndFridayOnKurrent(t *testing.T) {
	testThursdayAndFriday(t, onKurrent)
}

func TestRacingWorkersSeparateClientsOnKurrent(t *testing.T) {
	testRacingWorkersSeparatePools(t, onKurrent)
}

func TestStoreUnreachableNoRequestOnKurrent(t *testing.T) {
	testStoreUnreachableNoRequest(t, onKurrent)
}

func TestLostResponseIsUnknownAndRedeliveryDoesNotResendOnKurrent(t *testing.T) {
	testLostResponseIsUnknownAndRedeliveryDoesNotResend(t, onKurrent)
}

func TestDuplicateWhileHeldLeavesExecutingOnKurrent(t *testing.T) {
	testDuplicateWhileHeldLeavesExecuting(t, onKurrent)
}

func TestStaleWorkerLateResultResolvesOnlyItsOwnExecutionOnKurrent(t *testing.T) {
	testStaleWorkerLateResultResolvesOnlyItsOwnExecution(t, onKurrent)
}

func TestLostLeaseStopsFurtherSendsOnKurrent(t *testing.T) {
	testLostLeaseStopsFurtherSends(t, onKurrent)
}

func TestKeyIdenticalOnEveryResendOnKurrent(t *testing.T) {
	testKeyIdenticalOnEveryResend(t, onKurrent)
}

func TestNotAppliedThenNewDecisionOnKurrent(t *testing.T) {
	testNotAppliedThenNewDecision(t, onKurrent)
}

// TestBothStoriesOnKurrent: the refund story, then three downloads of an
// export, on the KurrentDB test server.
func TestBothStoriesOnKurrent(t *testing.T) {
	t.Parallel()
	store, _ := onKurrent.open(t)
	w, err := harness.New(harness.Options{Store: store, ClientAttempts: 1})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	var out bytes.Buffer
	_, err = harness.RunStory(t.Context(), w, &out, harness.DirectCourier{})
	require.NoError(t, err, out.String())
	requireExportStory(t, w, &out)
}
