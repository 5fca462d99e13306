package projections_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/ledger"
)

// TestSupersededCapabilityHasNoUseLeft: a capability whose decision a later
// decision superseded can no longer be claimed (the ledger refuses it as
// capability.superseded), so neither capabilities nor capabilities_now reads
// it Issued with uses left.
func TestSupersededCapabilityHasNoUseLeft(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Now().UTC())
	o := e.request("OP-SUP", 4500)
	o.allow()
	first := o.issue()
	second := o.decide(okFacts) // the same attempt decided again: the first decision's capability is superseded
	refused := o.claim("MSG-SUP-1", first)
	require.Equal(t, domain.ReasonCapabilitySuperseded, refused.Reason, "the ledger refuses it")
	e.catchUp()

	for _, table := range []string{"capabilities", "capabilities_now"} {
		require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.`+table+` WHERE id = $1 AND state = 'Superseded' AND uses_left = 0`, string(first)),
			"%s: the superseded capability", table)
	}
	require.Equal(t, int64(0), e.count(e.schema, `SELECT uses_left FROM %s.operations WHERE id = 'OP-SUP'`))

	// A capability of the latest decision stays Issued with its use.
	e.clock.Advance(time.Second)
	c, err := e.h.IssueCapability(t.Context(), o.id, domain.IssueCapability{DecisionID: second.DecisionID}, ledger.Cause{Actor: "agent-7"})
	require.NoError(t, err)
	e.catchUp()
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.capabilities_now WHERE id = $1 AND state = 'Issued' AND uses_left = 1`, string(c.CapabilityID)))
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.capabilities WHERE id = $1 AND state = 'Superseded'`, string(first)),
		"still superseded")
}

// TestCapabilitiesNowJudgesByTheLedgersClock: the ledger's clock runs ten
// days ahead of the database's (a test clock advanced, a simulation): a
// capability the ledger holds expired reads Expired in capabilities_now,
// though the database's clock has not reached its expiry.
func TestCapabilitiesNowJudgesByTheLedgersClock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Now().UTC().Add(10*24*time.Hour))
	o := e.request("OP-CLK", 4500)
	o.allow()
	capID := o.issue()
	e.catchUp()
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.capabilities_now WHERE id = $1 AND state = 'Issued'`, string(capID)))

	e.clock.Advance(domain.DefaultCapabilityTTL + time.Minute)
	refused := o.claim("MSG-CLK-1", capID)
	require.Equal(t, domain.ReasonCapabilityExpired, refused.Reason, "the ledger holds it expired")
	e.catchUp()
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.capabilities_now WHERE id = $1 AND state = 'Expired' AND uses_left = 0`, string(capID)),
		"judged by the ledger's clock, not the database's")
}
