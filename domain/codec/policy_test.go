package codec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/domain/codec/codectest"
	"opledger/domain/ledger"
	"opledger/eventstore/memory"
)

// The readers of earlier releases, frozen as test doubles: copies of their
// decode rules and of the event shapes they knew, so that later changes to
// the codec and to domain/events.go are held to what those readers accept
// (docs/design.md, "Event compatibility"). A frozen reader is never edited;
// when a release is cut, its reader is frozen here as the next one.

// newerThanTheFrozenReleases are the types this build writes that the
// frozen releases never knew, each with why a rolling deploy from them is
// still safe. Readers first is the rule (docs/design.md, "Event
// compatibility"); a type is listed here only when an earlier release
// never decodes it, or refuses it as written by a newer build where it
// does, so that it stops rather than misreads.
var newerThanTheFrozenReleases = map[string]string{
	domain.TypeLogRegressed: "written only in " + domain.RegressionStream + ", which no earlier release's consumer decodes: " +
		"the projector, the relays, audit verify and the log index read operation streams and " + domain.EvidenceStream + " only",
	domain.TypeLogRegressionAcknowledged: "written only in " + domain.RegressionStream + ", as LogRegressed",
	domain.TypeLostEffectEscalated: "written only after the store lost acknowledged writes (a failover to an asynchronous standby), " +
		"to hand a person an effect no execution accounts for: a frozen release meeting it refuses the operation's stream " +
		"as written by a newer build (it acts on nothing of the operation, which waits for a person anyway) and its projector " +
		"sets the event aside; it never misreads it",
}

// frozenShapes are the JSON shapes of version 1 of every type, as the
// release that introduced schema evolution (this one) and main@f42e6e8
// before it both know them: copies of domain/events.go at f42e6e8.
var frozenShapes = map[string]func() any{
	"OperationRequested": func() any {
		return &struct {
			OperationID     string    `json:"operation_id"`
			OrderID         string    `json:"order_id"`
			AmountMinor     int64     `json:"amount_minor"`
			Currency        string    `json:"currency"`
			OrderTotalMinor int64     `json:"order_total_minor,omitempty"`
			CorrelationID   string    `json:"correlation_id"`
			RequestedBy     string    `json:"requested_by,omitempty"`
			RequestedAt     time.Time `json:"requested_at"`
			RequestKey      string    `json:"request_key,omitempty"`
			RequestHash     string    `json:"request_hash,omitempty"`
		}{}
	},
	"Decided": func() any {
		return &struct {
			DecisionID string   `json:"decision_id"`
			Verdict    string   `json:"verdict"`
			Reasons    []string `json:"reasons,omitempty"`
			Facts      struct {
				OrderRefundable bool  `json:"order_refundable"`
				ChargebackOpen  bool  `json:"chargeback_open"`
				RefundedMinor   int64 `json:"refunded_minor"`
				OrderTotalMinor int64 `json:"order_total_minor,omitempty"`
			} `json:"facts"`
			Approver       string    `json:"approver"`
			ApprovalLimit  int64     `json:"approval_limit_minor"`
			PolicyVersion  string    `json:"policy_version"`
			Attempt        int       `json:"attempt"`
			KeyPolicy      string    `json:"key_policy"`
			IdempotencyKey string    `json:"idempotency_key"`
			DecidedAt      time.Time `json:"decided_at"`
		}{}
	},
	"CapabilityIssued": func() any {
		return &struct {
			CapabilityID string    `json:"capability_id"`
			DecisionID   string    `json:"decision_id"`
			Attempt      int       `json:"attempt"`
			IssuedAt     time.Time `json:"issued_at"`
			ExpiresAt    time.Time `json:"expires_at"`
		}{}
	},
	"CapabilityRevoked": func() any {
		return &struct {
			CapabilityID string    `json:"capability_id"`
			Reason       string    `json:"reason,omitempty"`
			RevokedBy    string    `json:"revoked_by,omitempty"`
			RevokedAt    time.Time `json:"revoked_at"`
		}{}
	},
	"Claimed": func() any {
		return &struct {
			ExecutionID       string    `json:"execution_id"`
			CapabilityID      string    `json:"capability_id"`
			MessageID         string    `json:"message_id"`
			WorkerID          string    `json:"worker_id"`
			Attempt           int       `json:"attempt"`
			LeaseEpoch        int64     `json:"lease_epoch"`
			LeaseExpiresAt    time.Time `json:"lease_expires_at"`
			IdempotencyKey    string    `json:"idempotency_key"`
			ClaimedAt         time.Time `json:"claimed_at"`
			LeaseSecretDigest string    `json:"lease_secret_digest,omitempty"`
		}{}
	},
	"DeliveryDuplicated": func() any {
		return &struct {
			MessageID      string    `json:"message_id"`
			CapabilityID   string    `json:"capability_id,omitempty"`
			WorkerID       string    `json:"worker_id,omitempty"`
			ExecutionID    string    `json:"execution_id,omitempty"`
			ExecutionState string    `json:"execution_state,omitempty"`
			SeenAt         time.Time `json:"seen_at"`
		}{}
	},
	"PresentationRejected": func() any {
		return &struct {
			Status             string    `json:"status"`
			Reason             string    `json:"reason"`
			MessageID          string    `json:"message_id"`
			CapabilityID       string    `json:"capability_id,omitempty"`
			OperationID        string    `json:"operation_id"`
			WorkerID           string    `json:"worker_id,omitempty"`
			ExecutionID        string    `json:"execution_id,omitempty"`
			ExecutionAttempted bool      `json:"execution_attempted"`
			ReplaySuspected    bool      `json:"replay_suspected"`
			Detail             string    `json:"detail,omitempty"`
			RejectedAt         time.Time `json:"rejected_at"`
		}{}
	},
	"LeaseRenewed": func() any {
		return &struct {
			ExecutionID    string    `json:"execution_id"`
			LeaseEpoch     int64     `json:"lease_epoch"`
			LeaseExpiresAt time.Time `json:"lease_expires_at"`
			RenewedAt      time.Time `json:"renewed_at"`
		}{}
	},
	"OutcomeRecorded": func() any {
		return &struct {
			ExecutionID       string    `json:"execution_id"`
			LeaseEpoch        int64     `json:"lease_epoch"`
			Outcome           string    `json:"outcome"`
			ProviderReference string    `json:"provider_reference,omitempty"`
			Detail            string    `json:"detail,omitempty"`
			RecordedAt        time.Time `json:"recorded_at"`
		}{}
	},
	"OutcomeUnknown": func() any {
		return &struct {
			ExecutionID string    `json:"execution_id"`
			LeaseEpoch  int64     `json:"lease_epoch"`
			Cause       string    `json:"cause"`
			RecordedAt  time.Time `json:"recorded_at"`
		}{}
	},
	"LeaseLapsed": func() any {
		return &struct {
			ExecutionID    string    `json:"execution_id"`
			FromEpoch      int64     `json:"from_epoch"`
			ToEpoch        int64     `json:"to_epoch"`
			LeaseExpiredAt time.Time `json:"lease_expired_at"`
			LapsedAt       time.Time `json:"lapsed_at"`
		}{}
	},
	"LateOutcomeRecorded": func() any {
		return &struct {
			ExecutionID       string    `json:"execution_id"`
			StaleEpoch        int64     `json:"stale_epoch"`
			Outcome           string    `json:"outcome"`
			ProviderReference string    `json:"provider_reference,omitempty"`
			Detail            string    `json:"detail,omitempty"`
			RecordedAt        time.Time `json:"recorded_at"`
		}{}
	},
	"Reconciled": func() any {
		return &struct {
			ExecutionID       string    `json:"execution_id"`
			Outcome           string    `json:"outcome"`
			Method            string    `json:"method"`
			ProviderReference string    `json:"provider_reference,omitempty"`
			Actor             string    `json:"actor,omitempty"`
			Evidence          string    `json:"evidence,omitempty"`
			ReconciledAt      time.Time `json:"reconciled_at"`
		}{}
	},
	"Escalated": func() any {
		return &struct {
			ExecutionID string    `json:"execution_id"`
			Reason      string    `json:"reason"`
			Detail      string    `json:"detail,omitempty"`
			EscalatedAt time.Time `json:"escalated_at"`
		}{}
	},
	"WriteRefused": func() any {
		return &struct {
			ExecutionID       string    `json:"execution_id"`
			Command           string    `json:"command"`
			Reason            string    `json:"reason"`
			LeaseEpoch        int64     `json:"lease_epoch"`
			CurrentEpoch      int64     `json:"current_epoch"`
			Outcome           string    `json:"outcome,omitempty"`
			ProviderReference string    `json:"provider_reference,omitempty"`
			Detail            string    `json:"detail,omitempty"`
			RefusedAt         time.Time `json:"refused_at"`
			WorkerID          string    `json:"worker_id,omitempty"`
			SecretCheck       string    `json:"secret_check,omitempty"`
			Field             string    `json:"field,omitempty"`
			RefusalDetail     string    `json:"refusal_detail,omitempty"`
			Escaped           []string  `json:"escaped,omitempty"`
		}{}
	},
}

type frozenMetadata struct {
	SchemaVersion int       `json:"schema_version"`
	CorrelationID string    `json:"correlation_id,omitempty"`
	CausationID   string    `json:"causation_id,omitempty"`
	Actor         string    `json:"actor,omitempty"`
	RecordedAt    time.Time `json:"recorded_at"`
}

// frozenReader reads stored events as one earlier release did.
type frozenReader struct {
	name string
	// versions is the newest version of each type the release reads.
	versions map[string]int
	read     func(r frozenReader, typ string, data, meta []byte) (any, error)
}

var errFrozenNewer = errors.New("written by a newer build")

// schemaEvolutionRelease is this release's reader, frozen: every type at
// version 1; within a version, members it does not know are ignored; a
// newer version is refused as written by a newer build.
var schemaEvolutionRelease = frozenReader{
	name:     "the first release with schema evolution",
	versions: versionsOfEvery(1),
	read: func(r frozenReader, typ string, data, meta []byte) (any, error) {
		var m frozenMetadata
		if t := bytes.TrimSpace(meta); len(t) > 0 && string(t) != "null" {
			if err := jsonv2.Unmarshal(meta, &m); err != nil {
				return nil, fmt.Errorf("metadata: %w", err)
			}
		}
		m.SchemaVersion = max(m.SchemaVersion, 1)
		newest, ok := r.versions[typ]
		switch {
		case !ok:
			return nil, fmt.Errorf("decode %q: unknown event type (%w, or not an opledger event)", typ, errFrozenNewer)
		case m.SchemaVersion > newest:
			return nil, fmt.Errorf("decode %s: schema version %d was %w (this build reads versions 1 to %d)", typ, m.SchemaVersion, errFrozenNewer, newest)
		}
		v := frozenShapes[typ]()
		if err := jsonv2.Unmarshal(data, v); err != nil { // unknown members ignored
			return nil, err
		}
		return v, nil
	},
}

// mainBeforeSchemaEvolution is main@f42e6e8's reader, frozen (domain/codec.go
// there): exactly version 1 and no member it does not know. It is the
// release this one replaces in a rolling deploy.
var mainBeforeSchemaEvolution = frozenReader{
	name:     "main@f42e6e8, before schema evolution",
	versions: versionsOfEvery(1),
	read: func(r frozenReader, typ string, data, meta []byte) (any, error) {
		var m frozenMetadata
		if len(bytes.TrimSpace(meta)) > 0 {
			if err := json.Unmarshal(meta, &m); err != nil {
				return nil, fmt.Errorf("decode metadata: %w", err)
			}
		}
		if m.SchemaVersion == 0 {
			m.SchemaVersion = 1
		}
		if m.SchemaVersion != 1 {
			return nil, fmt.Errorf("decode %s: schema version %d, this build reads %d", typ, m.SchemaVersion, 1)
		}
		shape, ok := frozenShapes[typ]
		if !ok {
			return nil, fmt.Errorf("decode %q: unknown event type", typ)
		}
		v := shape()
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return nil, fmt.Errorf("decode %s: %w", typ, err)
		}
		return v, nil
	},
}

func versionsOfEvery(v int) map[string]int {
	out := map[string]int{}
	for typ := range frozenShapes {
		out[typ] = v
	}
	return out
}

// requireReadsAsWritten: the frozen reader reads what this build wrote,
// and every member it knows holds what the writer wrote (a renamed member,
// or one whose meaning or type changed in place, shows here: the samples
// set every member).
func requireReadsAsWritten(t *testing.T, r frozenReader, enc codec.Encoded) {
	t.Helper()
	v, err := r.read(r, enc.Type, enc.Data, enc.Metadata)
	require.NoError(t, err, "%s cannot read %s v%d as this build writes it", r.name, enc.Type, enc.Version)
	known, err := json.Marshal(v)
	require.NoError(t, err)
	var got, wrote map[string]any
	require.NoError(t, json.Unmarshal(known, &got))
	require.NoError(t, json.Unmarshal(enc.Data, &wrote))
	for name, value := range got {
		require.Contains(t, wrote, name, "%s reads %s.%s, which this build no longer writes: renaming or dropping a member is never allowed", r.name, enc.Type, name)
		require.Equal(t, wrote[name], value, "%s reads %s.%s differently", r.name, enc.Type, name)
	}
}

// TestThePreviousReleaseReadsWhatThisBuildWrites: readers first. Every
// type this build writes in a refund's stream, at the version it writes it
// at, is read by the previous releases' frozen readers, with every member
// they know intact. A build that raises a write version before the
// previous release reads it fails here; so does one that renames a member
// or changes its type. (An export download's stream is written at version
// 2, which the previous releases refuse: TestThePreviousReleaseRefusesTheBoundedKind.)
func TestThePreviousReleaseReadsWhatThisBuildWrites(t *testing.T) {
	// mainBeforeSchemaEvolution is a release this one may replace: in a
	// refund's stream this build writes nothing it cannot read (no member
	// added, nothing above version 1), so a rolling deploy from it is safe
	// as long as the export-download kind stays off (docs/design.md,
	// "Authority of bounded use"). When a later release adds a member, that
	// release's predecessor is schemaEvolutionRelease, and main@f42e6e8 is
	// no longer running anywhere: drop it from here then.
	for _, r := range []frozenReader{schemaEvolutionRelease, mainBeforeSchemaEvolution} {
		t.Run(r.name, func(t *testing.T) {
			for _, e := range codectest.RefundSamples() {
				if k, _ := codec.Lookup(e.EventType()); k.Write == 0 || newerThanTheFrozenReleases[k.Type] != "" {
					continue // read, not written by this build; or new since, and safe (newerThanTheFrozenReleases)
				}
				enc, err := codec.Encode(e, domain.Metadata{Actor: "worker-a", RecordedAt: time.Date(2026, 11, 26, 14, 2, 30, 0, time.UTC)})
				require.NoError(t, err)
				newest, known := r.versions[enc.Type]
				require.True(t, known, "this build writes %s, which %s does not know: a new type ships in a release that reads it before any release writes it", enc.Type, r.name)
				require.LessOrEqual(t, enc.Version, newest, "this build writes %s v%d, %s reads up to v%d: ship the reader first (Kind.Writes)", enc.Type, enc.Version, r.name, newest)
				requireReadsAsWritten(t, r, enc)
			}
		})
	}
	require.ElementsMatch(t, slices.Collect(maps.Keys(frozenShapes)), operationStreamKindNames(), "every type an operation stream holds has its frozen shape, or says why it needs none")
}

// evidenceOnlyTypes are the registered types that only evidence streams
// hold ("evidence-OP-…", "evidence-unattributed-<day>"): streams the
// previous releases do not read at all (their handler, projector, audit and
// log index read operation streams and "evidence-unattributed" only), so
// this build may write them before any release reads them. Were a previous
// release ever to meet one, it would refuse it as a newer build's, loudly
// (TestThePreviousReleaseRefusesEvidenceOnlyTypes).
func evidenceOnlyTypes() map[string]bool {
	inOperationStreams := map[string]bool{}
	for _, e := range codectest.RefundSamples() {
		inOperationStreams[e.EventType()] = true
	}
	out := map[string]bool{}
	for _, e := range codectest.Samples() {
		if !inOperationStreams[e.EventType()] && newerThanTheFrozenReleases[e.EventType()] == "" {
			out[e.EventType()] = true
		}
	}
	return out
}

func operationStreamKindNames() []string {
	only := evidenceOnlyTypes()
	var out []string
	for _, name := range kindNames() {
		if !only[name] && newerThanTheFrozenReleases[name] == "" {
			out = append(out, name)
		}
	}
	return out
}

// TestThePreviousReleaseRefusesEvidenceOnlyTypes: the types written to
// evidence streams only are evidence (domain.IsEvidence), and both previous
// releases refuse them as unknown rather than skip them.
func TestThePreviousReleaseRefusesEvidenceOnlyTypes(t *testing.T) {
	only := evidenceOnlyTypes()
	require.Equal(t, map[string]bool{domain.TypeRefusalsSummarized: true}, only)
	for _, e := range codectest.Samples() {
		if !only[e.EventType()] {
			continue
		}
		require.True(t, domain.IsEvidence(e), e.EventType())
		enc, err := codec.Encode(e, domain.Metadata{RecordedAt: time.Date(2026, 11, 26, 14, 2, 30, 0, time.UTC)})
		require.NoError(t, err)
		_, err = schemaEvolutionRelease.read(schemaEvolutionRelease, enc.Type, enc.Data, enc.Metadata)
		require.ErrorContains(t, err, "unknown event type (written by a newer build")
		_, err = mainBeforeSchemaEvolution.read(mainBeforeSchemaEvolution, enc.Type, enc.Data, enc.Metadata)
		require.ErrorContains(t, err, "unknown event type")
	}
}

// TestThePreviousReleaseMeetsANewerWritersEvents: what the policy promises
// the previous release when a newer build writes. An additive member (same
// version) is read past by the release with schema evolution, and refused
// by main@f42e6e8, whose reader knew no such rule (which is why this
// release, whose writer adds nothing, must be everywhere before a release
// adds a member); a newer version is refused by both, with an error that
// says so, never misread.
func TestThePreviousReleaseMeetsANewerWritersEvents(t *testing.T) {
	for _, e := range codectest.RefundSamples() {
		if k, _ := codec.Lookup(e.EventType()); k.Write == 0 || newerThanTheFrozenReleases[k.Type] != "" {
			continue // read, not written by this build; or unknown to the frozen readers (below)
		}
		t.Run(e.EventType(), func(t *testing.T) {
			enc, err := codec.Encode(e, domain.Metadata{RecordedAt: time.Date(2026, 11, 26, 14, 2, 30, 0, time.UTC)})
			require.NoError(t, err)

			additive := bytes.Replace(enc.Data, []byte(`{`), []byte(`{"added_by_a_newer_build":"x",`), 1)
			want, err := schemaEvolutionRelease.read(schemaEvolutionRelease, enc.Type, enc.Data, enc.Metadata)
			require.NoError(t, err)
			got, err := schemaEvolutionRelease.read(schemaEvolutionRelease, enc.Type, additive, enc.Metadata)
			require.NoError(t, err, "an additive member is read past")
			require.Equal(t, want, got)
			_, err = mainBeforeSchemaEvolution.read(mainBeforeSchemaEvolution, enc.Type, additive, enc.Metadata)
			require.ErrorContains(t, err, `unknown field "added_by_a_newer_build"`)

			newer := bytes.Replace(enc.Metadata, []byte(`"schema_version":1`), []byte(`"schema_version":2`), 1)
			_, err = schemaEvolutionRelease.read(schemaEvolutionRelease, enc.Type, enc.Data, newer)
			require.ErrorIs(t, err, errFrozenNewer)
			require.ErrorContains(t, err, "schema version 2 was written by a newer build")
			_, err = mainBeforeSchemaEvolution.read(mainBeforeSchemaEvolution, enc.Type, enc.Data, newer)
			require.ErrorContains(t, err, "schema version 2, this build reads 1")

			// This build's reader is the next release's previous one: it
			// holds to the same rules.
			d, err := codec.Decode(enc.Type, additive, enc.Metadata)
			require.NoError(t, err)
			require.Equal(t, e, d.Event)
			require.Equal(t, "data.added_by_a_newer_build", d.Ignored)
			k, _ := codec.Lookup(enc.Type)
			beyond := bytes.Replace(enc.Metadata, []byte(`"schema_version":1`), []byte(fmt.Sprintf(`"schema_version":%d`, k.Current+1)), 1)
			_, err = codec.Decode(enc.Type, enc.Data, beyond)
			require.ErrorIs(t, err, codec.ErrNewerVersion)
		})
	}
	_, err := schemaEvolutionRelease.read(schemaEvolutionRelease, "UseClaimed", []byte(`{}`), nil)
	require.ErrorContains(t, err, `decode "UseClaimed": unknown event type (written by a newer build`, "a new type is refused, not skipped")
}

// TestThePreviousReleaseRefusesTheBoundedKind: an export download's
// events that state its kind and use counts are written at version 2, and
// both previous releases refuse every one of them, never reading a
// capability of three uses as single-use authority: the release with
// schema evolution says "written by a newer build", main@f42e6e8 that it
// reads version 1 only. The refund's are read (above). This is why the
// kind is refused by the API until an operator enables it, once every
// reader runs this release.
func TestThePreviousReleaseRefusesTheBoundedKind(t *testing.T) {
	n := 0
	for _, e := range codectest.Samples() {
		k, _ := codec.Lookup(e.EventType())
		if !k.Oldest {
			continue
		}
		n++
		t.Run(k.Type, func(t *testing.T) {
			enc, err := codec.Encode(e, domain.Metadata{RecordedAt: time.Date(2026, 11, 26, 14, 2, 30, 0, time.UTC)})
			require.NoError(t, err)
			require.Equal(t, 2, enc.Version, "an export download's %s states what version 1 cannot", k.Type)
			_, err = schemaEvolutionRelease.read(schemaEvolutionRelease, enc.Type, enc.Data, enc.Metadata)
			require.ErrorIs(t, err, errFrozenNewer)
			require.ErrorContains(t, err, "schema version 2 was written by a newer build (this build reads versions 1 to 1)")
			_, err = mainBeforeSchemaEvolution.read(mainBeforeSchemaEvolution, enc.Type, enc.Data, enc.Metadata)
			require.ErrorContains(t, err, "schema version 2, this build reads 1")
			// Stripped of its version, it would be misread: which is why
			// the version is what the previous release is held to.
			_, err = schemaEvolutionRelease.read(schemaEvolutionRelease, enc.Type, enc.Data, []byte(`{"schema_version":1,"recorded_at":"2026-11-26T14:02:30Z"}`))
			require.NoError(t, err, "version 1's reader ignores kind and uses: only the version keeps it from acting on part of the event")
		})
	}
	require.Equal(t, 4, n, "OperationRequested, Decided, CapabilityIssued and Claimed state the kind")
}

func kindNames() []string {
	var out []string
	for _, k := range codec.Kinds() {
		out = append(out, k.Type)
	}
	return out
}

// TestTheFrozenReleasesRefuseTypesNewSinceThem: a type this build writes
// that the frozen releases never knew is refused by both as unknown,
// never read as something else; and each is listed with its reason.
func TestTheFrozenReleasesRefuseTypesNewSinceThem(t *testing.T) {
	for typ, why := range newerThanTheFrozenReleases {
		_, known := codec.Lookup(typ)
		require.True(t, known, "%s is listed but not registered", typ)
		require.NotEmpty(t, why)
		require.NotContains(t, frozenShapes, typ, "%s has a frozen shape: it is not new", typ)
		for _, r := range []frozenReader{schemaEvolutionRelease, mainBeforeSchemaEvolution} {
			_, err := r.read(r, typ, []byte(`{}`), []byte(`{"schema_version":1,"recorded_at":"2026-11-26T14:02:30Z"}`))
			require.ErrorContains(t, err, "unknown event type", "%s of %s", typ, r.name)
		}
	}
}

// TestFrozenShapesAreTheFixtures: the frozen shapes are the version 1 the
// fixtures hold (a check on the doubles themselves): every member of every
// v1 fixture is one the frozen shape knows.
func TestFrozenShapesAreTheFixtures(t *testing.T) {
	fixtures, err := codectest.Fixtures()
	require.NoError(t, err)
	only := evidenceOnlyTypes()
	for _, f := range fixtures {
		if f.SchemaVersion != 1 || only[f.Type] || newerThanTheFrozenReleases[f.Type] != "" {
			continue
		}
		_, err := mainBeforeSchemaEvolution.read(mainBeforeSchemaEvolution, f.Type, f.Data, f.Metadata)
		require.NoError(t, err, f.Path)
	}
}

// TestThePreviousReleaseReadsEveryRefundStreamAndRefusesAnExportDownloads:
// streams written by this build's command handler — a refund claimed,
// completed and presented again, an export download of three uses with use
// 1 claimed and completed and use 2 claimed — read by the previous releases' frozen readers: every event of
// the refund's stream reads; the export download's stream is refused at its
// first event, and every event stating its kind or uses is refused as
// written by a newer build, never read as a refund's.
func TestThePreviousReleaseReadsEveryRefundStreamAndRefusesAnExportDownloads(t *testing.T) {
	ctx := t.Context()
	store := memory.New(nil)
	h, err := ledger.New(ledger.Config{Store: store})
	require.NoError(t, err)
	by := ledger.Cause{Actor: "agent-7"}
	_, err = h.RequestOperation(ctx, domain.RequestOperation{OperationID: "OP-4471", OrderID: "ORD-8841", AmountMinor: 12000, Currency: "EUR",
		OrderTotalMinor: 24000, CorrelationID: "COR-2210"}, by)
	require.NoError(t, err)
	_, refundCap, err := h.DecideAndIssue(ctx, "OP-4471", domain.Decide{Approver: "agent-7", ApprovalLimitMinor: 50000,
		Facts: domain.Facts{OrderRefundable: true}}, domain.IssueCapability{}, by)
	require.NoError(t, err)
	_, err = h.RequestOperation(ctx, domain.RequestOperation{OperationID: "OP-5120", Kind: domain.KindExportDownload, ExportID: "EXP-7781",
		CorrelationID: "COR-5120"}, by)
	require.NoError(t, err)
	_, exportCap, err := h.DecideAndIssue(ctx, "OP-5120", domain.Decide{Approver: "agent-7", ExportFacts: domain.ExportFacts{ExportReady: true}, Uses: 3},
		domain.IssueCapability{}, by)
	require.NoError(t, err)
	for op, c := range map[domain.OperationID]domain.CapabilityID{"OP-4471": refundCap.CapabilityID, "OP-5120": exportCap.CapabilityID} {
		out, err := h.Claim(ctx, op, domain.Claim{MessageID: "MSG-1", CapabilityID: c, WorkerID: "worker-a"})
		require.NoError(t, err)
		require.Equal(t, domain.StatusClaimed, out.Status)
		require.NoError(t, h.RecordOutcome(ctx, op, domain.RecordOutcome{ExecutionID: out.ExecutionID, LeaseEpoch: 1, LeaseSecret: out.LeaseSecret,
			Outcome: domain.Completed, ProviderReference: "ref-1"}, by))
		_, err = h.Claim(ctx, op, domain.Claim{MessageID: "MSG-2", CapabilityID: c, WorkerID: "worker-b"})
		require.NoError(t, err)
	}
	for _, r := range []frozenReader{schemaEvolutionRelease, mainBeforeSchemaEvolution} {
		t.Run(r.name, func(t *testing.T) {
			refund, err := store.ReadStream(ctx, "operation-OP-4471", 0, 100)
			require.NoError(t, err)
			require.Len(t, refund, 5, "requested, decided, issued, claimed, recorded: the refused MSG-2 is in the evidence stream")
			evidence, err := store.ReadStream(ctx, "evidence-OP-4471", 0, 100)
			require.NoError(t, err)
			require.Len(t, evidence, 1)
			refund = append(refund, evidence...) // a previous release reads the type, were it to meet it
			for _, rec := range refund {
				_, err := r.read(r, rec.Type, rec.Data, rec.Metadata)
				require.NoError(t, err, "%s@%d", rec.Type, rec.Version)
			}
			export, err := store.ReadStream(ctx, "operation-OP-5120", 0, 100)
			require.NoError(t, err)
			refused := 0
			for _, rec := range export {
				_, err := r.read(r, rec.Type, rec.Data, rec.Metadata)
				switch rec.Type {
				case domain.TypeOperationRequested, domain.TypeDecided, domain.TypeCapabilityIssued, domain.TypeClaimed:
					require.Error(t, err, "%s@%d is refused", rec.Type, rec.Version)
					if r.name == schemaEvolutionRelease.name {
						require.ErrorContains(t, err, "written by a newer build")
					}
					refused++
				default:
					require.NoError(t, err, "%s@%d carries nothing of the kind", rec.Type, rec.Version)
				}
			}
			require.Equal(t, 5, refused, "requested, decided, issued, and the claims of uses 1 and 2")
			_, err = r.read(r, export[0].Type, export[0].Data, export[0].Metadata)
			require.Error(t, err, "the stream's first event: an older handler cannot fold the stream at all")
		})
	}
}
