package audit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/eventstore"
)

// TestVerifyKnowsLeasesBoundToTheirHolder: executions claimed before leases
// were bound to their holder (no digest) are legitimate history; once the
// log holds a bound claim, an unbound claim and an executor write accepted
// for an unbound execution are I5 violations, and a malformed digest or
// secret check is S2.
func TestVerifyKnowsLeasesBoundToTheirHolder(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, store eventstore.Store) {
		digest := domain.LeaseSecretDigest("the holder's secret")
		bound := func(c domain.Claimed) domain.Claimed { c.LeaseSecretDigest = digest; return c }

		// OP-1: claimed before the upgrade, unbound: clean so far.
		legacy := newHistory(t, store, "OP-1")
		legacy.claimed()
		// OP-2: claimed after it, bound; renewed and completed by its holder: clean.
		b := newHistory(t, store, "OP-2")
		b.start()
		b.by("worker-a", "MSG-1", bound(claim(b.op, "EXE-1", "CAP-1", "MSG-1", "worker-a", 1, at(4*time.Second))))
		b.by("worker-a", "EXE-1", domain.LeaseRenewed{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseExpiresAt: at(90 * time.Second), RenewedAt: at(30 * time.Second)})
		b.by("worker-a", "EXE-1", domain.WriteRefused{ExecutionID: "EXE-1", Command: domain.CommandRecordOutcome, Reason: domain.ReasonLeaseNotHeld,
			LeaseEpoch: 1, CurrentEpoch: 1, Outcome: domain.NotApplied, SecretCheck: domain.SecretWrong, RefusedAt: at(31 * time.Second)})
		b.by("worker-a", "EXE-1", outcome("EXE-1", 1, domain.Completed, "re_2", at(32*time.Second)))
		n := legacy.next + b.next
		rep := verify(t, store, n, audit.VerifyOptions{})
		require.Empty(t, rep.Violations, "unbound history before the first bound claim, and bound history, are clean")

		// OP-1's unbound execution accepts a write after the upgrade: I5.
		legacy.by("worker-a", "EXE-1", outcome("EXE-1", 1, domain.NotApplied, "", at(40*time.Second)))
		// OP-3: a claim without a digest after bound ones: I5.
		c := newHistory(t, store, "OP-3")
		c.claimed()
		// OP-4: a malformed digest; OP-2: an unknown secret check: S2.
		d := newHistory(t, store, "OP-4")
		d.start()
		malformed := claim(d.op, "EXE-1", "CAP-1", "MSG-1", "worker-a", 1, at(5*time.Second))
		malformed.LeaseSecretDigest = "the secret itself, not a digest"
		d.by("worker-a", "MSG-1", malformed)
		b.by("worker-b", "EXE-1", domain.WriteRefused{ExecutionID: "EXE-1", Command: domain.CommandRenewLease, Reason: domain.ReasonLeaseNotHeld,
			LeaseEpoch: 1, CurrentEpoch: 1, SecretCheck: "guessed-right", RefusedAt: at(41 * time.Second)})

		rep = verify(t, store, legacy.next+b.next+c.next+d.next, audit.VerifyOptions{})
		got := map[string][]string{}
		for _, v := range rep.Violations {
			got[string(v.Operation)] = append(got[string(v.Operation)], v.Invariant+" "+v.Event)
		}
		require.Equal(t, map[string][]string{
			"OP-1": {"I5 " + domain.TypeOutcomeRecorded},
			"OP-2": {"S2 " + domain.TypeWriteRefused},
			"OP-3": {"I5 " + domain.TypeClaimed},
			"OP-4": {"S2 " + domain.TypeClaimed},
		}, got, "%+v", rep.Violations)
	})
}
