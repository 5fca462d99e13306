package projections_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/projections"
)

// The read models agree with the model: every operation's row, executions
// and capabilities say what folding its stream with domain.Evolve says.
func TestProjectionAgreesWithDomain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	ops := e.world()
	// Small batches: rows are loaded, folded and written back many times.
	e.waitVisible()
	p := e.projector(func(c *projections.Config) { c.BatchSize = 3 })
	n, err := p.CatchUp(t.Context())
	require.NoError(t, err)
	require.Positive(t, n)
	require.Equal(t, e.lastEvent(), e.checkpoint(e.schema).Text)

	for _, o := range ops {
		s, err := e.h.Load(t.Context(), o.id)
		require.NoError(t, err)
		e.requireOperationMatches(s)
	}
	require.Equal(t, int64(len(ops)), e.count(e.schema, `SELECT count(*) FROM %s.operations`))

	// Deliveries: first result fixed, later presentations counted.
	e.requireDelivery("MSG-A1", "OP-A", "Claimed", 2)
	e.requireDelivery("MSG-A2", "OP-A", "AlreadyConsumed", 2)
	e.requireDelivery("MSG-B2", "OP-B", "OperationNotExecutable", 1)
	e.requireDelivery("MSG-F1", "OP-F", "Expired", 1)
	e.requireDelivery("MSG-X", "OP-NOPE", "Invalid", 2)
	e.requireDelivery("MSG-X3", "OP-X", "OperationNotExecutable", 1)
	e.requireDelivery("MSG-Y2", "OP-Y", "AlreadyConsumed", 1)

	// Bounded use: uses counted per capability and per operation.
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.operations WHERE id = 'OP-X' AND kind = 'export-download' AND export_id = 'EXP-OP-X' AND order_id IS NULL AND amount_minor IS NULL AND currency IS NULL AND uses_left = 1 AND state = 'Authorized'`))
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.capabilities WHERE operation_id = 'OP-X' AND uses = 3 AND uses_claimed = 2 AND uses_left = 1 AND state = 'Issued'`))
	require.Equal(t, int64(2), e.count(e.schema, `SELECT count(*) FROM %s.executions WHERE operation_id = 'OP-X' AND use IN (1, 2) AND state = 'Completed'`))
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.capabilities WHERE operation_id = 'OP-Y' AND uses = 1 AND uses_claimed = 1 AND uses_left = 0 AND state = 'Consumed'`))
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.operations WHERE id = 'OP-Y' AND uses_left = 0 AND state = 'NotApplied'`))
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.evidence WHERE replay_suspected AND message_id = 'MSG-Y2' AND NOT execution_attempted`))
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.capabilities_now WHERE operation_id = 'OP-X' AND state = 'Expired' AND uses_left = 0`),
		"an expired capability has no use left")
	require.Zero(t, e.count(e.schema, `SELECT count(*) FROM %s.operations WHERE kind = 'refund' AND (order_id IS NULL OR amount_minor IS NULL OR currency IS NULL)`))

	// Evidence: every rejection, duplicate and refused write, once.
	require.Equal(t, e.countEvents(domain.TypePresentationRejected, domain.TypeDeliveryDuplicated, domain.TypeWriteRefused),
		e.count(e.schema, `SELECT count(*) FROM %s.evidence`))
	require.Equal(t, int64(2), e.count(e.schema, `SELECT count(*) FROM %s.evidence WHERE stream_id LIKE 'evidence-unattributed-%%' AND operation_id = 'OP-NOPE'`))
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.evidence WHERE replay_suspected AND message_id = 'MSG-A2' AND NOT execution_attempted`))
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.evidence WHERE kind = 'WriteRefused' AND operation_id = 'OP-C' AND lease_epoch = 7 AND current_epoch = 2 AND actor = 'worker-z' AND execution_attempted IS NULL`))
	require.Zero(t, e.count(e.schema, `SELECT count(*) FROM %s.evidence WHERE kind <> 'WriteRefused' AND execution_attempted IS DISTINCT FROM false`),
		"no refused presentation attempted an execution")

	// Reconciliations and escalations.
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.reconciliations WHERE kind = 'Reconciled' AND operation_id = 'OP-B' AND outcome = 'Completed' AND method = 'provider-lookup' AND provider_reference = 're_B' AND actor = 'reconciler'`))
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.reconciliations WHERE kind = 'Escalated' AND operation_id = 'OP-C' AND reason = 'provider lookup inconclusive' AND outcome IS NULL`))
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.reconciliations WHERE kind = 'LateOutcomeRecorded' AND operation_id = 'OP-G' AND outcome = 'Completed'`))
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.executions WHERE operation_id = 'OP-C' AND state = 'Escalated' AND escalated_at IS NOT NULL AND unknown_since IS NOT NULL`))

	// Capabilities: Revoked stored; Expired derived by capabilities_now.
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.capabilities WHERE operation_id = 'OP-F' AND state = 'Revoked' AND revoke_reason = 'customer withdrew'`))
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.capabilities WHERE operation_id = 'OP-F' AND state = 'Issued'`))
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.capabilities_now WHERE operation_id = 'OP-F' AND state = 'Expired'`),
		"the log's clock is in the past of now(): the issued capability has expired")
}

func (e *env) requireOperationMatches(s *domain.Operation) {
	e.t.Helper()
	ctx := e.t.Context()
	var (
		state, verdict, cur    string
		attempt, executions    int
		version                int64
		createdAt, updatedAt   time.Time
		orderID, correlationID string
		amount                 int64
		kind, exportID         string
		usesLeft               int
	)
	err := e.pool.QueryRow(ctx, e.q(e.schema, `SELECT state, coalesce(verdict, ''), coalesce(current_execution_id, ''), attempt,
execution_count, version, created_at, updated_at, coalesce(order_id, ''), correlation_id, coalesce(amount_minor, 0), kind,
coalesce(export_id, ''), uses_left FROM %s.operations WHERE id = $1`), string(s.ID)).
		Scan(&state, &verdict, &cur, &attempt, &executions, &version, &createdAt, &updatedAt, &orderID, &correlationID, &amount,
			&kind, &exportID, &usesLeft)
	require.NoError(e.t, err, s.ID)
	require.Equal(e.t, string(s.Status()), state, "%s state", s.ID)
	require.Equal(e.t, s.Version, version, "%s version", s.ID)
	require.True(e.t, s.CreatedAt.Equal(createdAt), "%s created_at", s.ID)
	require.True(e.t, s.UpdatedAt.Equal(updatedAt), "%s updated_at: %s vs %s", s.ID, s.UpdatedAt, updatedAt)
	require.Equal(e.t, s.OrderID, orderID)
	require.Equal(e.t, string(s.CorrelationID), correlationID)
	require.Equal(e.t, s.AmountMinor, amount)
	require.Equal(e.t, string(s.Kind), kind)
	require.Equal(e.t, s.ExportID, exportID)
	left := 0
	if d, ok := s.LatestDecision(); ok {
		for _, c := range s.Capabilities {
			if c.DecisionID == d.ID {
				left += c.UsesLeft()
			}
		}
	}
	require.Equal(e.t, left, usesLeft, "%s uses left", s.ID)
	require.Len(e.t, s.Executions, executions, "%s executions", s.ID)
	if d, ok := s.LatestDecision(); ok {
		require.Equal(e.t, string(d.Verdict), verdict)
		require.Equal(e.t, d.Attempt, attempt)
	} else {
		require.Empty(e.t, verdict)
		require.Zero(e.t, attempt)
	}
	if x := s.CurrentExecution(); x != nil {
		require.Equal(e.t, string(x.ID), cur)
	} else {
		require.Empty(e.t, cur)
	}
	for _, x := range s.Executions {
		var (
			st, ref, capID, msg, key string
			epoch                    int64
			att, use                 int
			lease, started           time.Time
			ended                    *time.Time
		)
		err := e.pool.QueryRow(ctx, e.q(e.schema, `SELECT state, coalesce(provider_reference, ''), capability_id, message_id, idempotency_key,
lease_epoch, attempt, lease_expires_at, started_at, ended_at, use FROM %s.executions WHERE id = $1 AND operation_id = $2`), string(x.ID), string(s.ID)).
			Scan(&st, &ref, &capID, &msg, &key, &epoch, &att, &lease, &started, &ended, &use)
		require.NoError(e.t, err, x.ID)
		require.Equal(e.t, string(x.State), st, "%s state", x.ID)
		require.Equal(e.t, x.ProviderReference, ref)
		require.Equal(e.t, string(x.CapabilityID), capID)
		require.Equal(e.t, string(x.MessageID), msg)
		require.Equal(e.t, string(x.IdempotencyKey), key)
		require.Equal(e.t, x.LeaseEpoch, epoch, "%s epoch", x.ID)
		require.Equal(e.t, x.Attempt, att)
		require.Equal(e.t, x.Use, use, "%s use", x.ID)
		require.True(e.t, x.LeaseExpiresAt.Equal(lease), "%s lease", x.ID)
		require.True(e.t, x.StartedAt.Equal(started))
		if x.EndedAt.IsZero() {
			require.Nil(e.t, ended, "%s ended_at", x.ID)
		} else {
			require.NotNil(e.t, ended, "%s ended_at", x.ID)
			require.True(e.t, x.EndedAt.Equal(*ended))
		}
	}
	require.Equal(e.t, int64(len(s.Capabilities)), e.count(e.schema, `SELECT count(*) FROM %s.capabilities WHERE operation_id = $1`, string(s.ID)))
	for _, c := range s.Capabilities {
		var (
			st, by   string
			consumed *time.Time
			expires  time.Time
			att      int
			uses     int
			claimed  int
			left     int
		)
		err := e.pool.QueryRow(ctx, e.q(e.schema, `SELECT state, coalesce(consumed_by_message_id, ''), consumed_at, expires_at, attempt,
uses, uses_claimed, uses_left FROM %s.capabilities WHERE id = $1`), string(c.ID)).Scan(&st, &by, &consumed, &expires, &att, &uses, &claimed, &left)
		require.NoError(e.t, err, c.ID)
		require.Equal(e.t, string(c.State), st, "%s state", c.ID)
		require.Equal(e.t, string(c.ConsumedBy), by)
		require.Equal(e.t, c.Attempt, att)
		require.True(e.t, c.ExpiresAt.Equal(expires))
		require.Equal(e.t, !c.ConsumedAt.IsZero(), consumed != nil)
		require.Equal(e.t, []int{c.Uses, c.Claims, c.UsesLeft()}, []int{uses, claimed, left}, "%s uses, claimed, left", c.ID)
	}
}

func (e *env) requireDelivery(msg, opID, result string, times int64) {
	e.t.Helper()
	var (
		got  string
		seen int64
	)
	err := e.pool.QueryRow(e.t.Context(), e.q(e.schema, `SELECT result, times_seen FROM %s.deliveries WHERE message_id = $1 AND operation_id = $2`), msg, opID).Scan(&got, &seen)
	require.NoError(e.t, err, "delivery %s on %s", msg, opID)
	require.Equal(e.t, result, got, "delivery %s on %s", msg, opID)
	require.Equal(e.t, times, seen, "delivery %s on %s seen", msg, opID)
}

// countEvents counts the log's events of the given types.
func (e *env) countEvents(types ...string) int64 {
	e.t.Helper()
	return e.countCatalog(`SELECT count(*) FROM `+pgx.Identifier{e.store.Schema()}.Sanitize()+`.events WHERE event_type = ANY($1)`, types)
}

// Handlers are idempotent: with the checkpoint moved back (a restored
// backup, an operator's mistake), events folded already are folded again
// without changing a row, and the rest are applied once.
func TestReapplyingEventsIsIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	e.world()
	e.catchUp()
	events, err := e.store.ReadAll(t.Context(), nil, 100_000)
	require.NoError(t, err)
	back := len(events) / 3
	_, err = e.pool.Exec(t.Context(), e.q(e.schema, `UPDATE %s.projection_checkpoints SET position = $1, events_applied = $2`),
		events[back-1].Position.String(), back)
	require.NoError(t, err)
	e.catchUp()
	require.Equal(t, int64(len(events)), e.checkpoint(e.schema).EventsApplied)
	e.requireRebuildEquals()
}
