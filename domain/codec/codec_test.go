package codec_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/domain/codec/codectest"
	"opledger/domain/strictjson"
)

const v1meta = `{"schema_version":1,"actor":"worker-a","recorded_at":"2026-11-26T14:02:30Z"}`

func claimedFixture(t *testing.T) codectest.Fixture {
	t.Helper()
	f, err := codectest.FixtureOf(domain.TypeClaimed, 1)
	require.NoError(t, err)
	return f
}

// TestDecodeRefusesWhatItCannotRead: every refusal names what is wrong and
// wraps the codec's error for its kind; nothing is guessed.
func TestDecodeRefusesWhatItCannotRead(t *testing.T) {
	claimed := string(claimedFixture(t).Data)
	for _, c := range []struct {
		name, typ, data, meta string
		is                    error
		want                  string
	}{
		{"an unknown type", "RefundForced", `{}`, v1meta, codec.ErrUnknownEventType,
			`decode "RefundForced": unknown event type (written by a newer build, or not an opledger event)`},
		{"a newer version", domain.TypeClaimed, claimed, `{"schema_version":3,"recorded_at":"2026-11-26T14:02:30Z"}`, codec.ErrNewerVersion,
			"decode Claimed: schema version 3 was written by a newer build (this build reads versions 1 to 2)"},
		{"a newer version of a type at version 1", domain.TypeLeaseRenewed, `{}`, `{"schema_version":2,"recorded_at":"2026-11-26T14:02:30Z"}`, codec.ErrNewerVersion,
			"decode LeaseRenewed: schema version 2 was written by a newer build (this build reads versions 1 to 1)"},
		{"a negative version", domain.TypeClaimed, claimed, `{"schema_version":-1}`, codec.ErrMalformed, "schema_version -1 is not a version"},
		{"a member of the wrong type", domain.TypeClaimed, strings.Replace(claimed, `"lease_epoch":1`, `"lease_epoch":"1"`, 1), v1meta,
			codec.ErrMalformed, "decode Claimed v1: malformed stored event: lease_epoch: must be"},
		{"a duplicate member", domain.TypeClaimed, strings.Replace(claimed, `"attempt":1`, `"attempt":1,"attempt":2`, 1), v1meta,
			strictjson.ErrRefused, "attempt: duplicate field"},
		{"a case-variant of a member", domain.TypeClaimed, strings.Replace(claimed, `"lease_epoch"`, `"Lease_Epoch"`, 1), v1meta,
			codec.ErrMalformed, "lacks lease_epoch"},
		{"invalid UTF-8", domain.TypeClaimed, strings.Replace(claimed, "worker-a", "worker-\xff", 1), v1meta, strictjson.ErrRefused, "invalid UTF-8"},
		{"not an object", domain.TypeClaimed, `null`, v1meta, strictjson.ErrRefused, "must be one JSON object"},
		{"no data", domain.TypeClaimed, ``, v1meta, strictjson.ErrRefused, "no JSON value"},
		{"trailing data", domain.TypeClaimed, claimed + `{}`, v1meta, strictjson.ErrRefused, "more than one JSON value"},
		{"a foreign object", domain.TypeCapabilityIssued, `{"unexpected_field":true}`, v1meta, codec.ErrMalformed,
			"holds a member this build does not know (unexpected_field) and lacks capability_id, decision_id, attempt, issued_at, expires_at"},
		{"malformed metadata", domain.TypeClaimed, claimed, `{"schema_version":"1"}`, codec.ErrMalformed, "decode Claimed: metadata: malformed stored event: schema_version"},
		{"foreign metadata", domain.TypeClaimed, claimed, `{"by":"someone"}`, codec.ErrMalformed, "lacks schema_version, recorded_at"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := codec.Decode(c.typ, []byte(c.data), []byte(c.meta))
			require.ErrorIs(t, err, c.is)
			require.ErrorContains(t, err, c.want)
		})
	}
}

// TestDecodeIgnoresAnAdditiveMemberAndSaysSo: a member this build does not
// know (a newer build's optional field, at the same version) is ignored:
// the event reads as it would without it, and Decoded.Ignored names it.
func TestDecodeIgnoresAnAdditiveMemberAndSaysSo(t *testing.T) {
	f := claimedFixture(t)
	plain, err := codec.Decode(f.Type, f.Data, f.Metadata)
	require.NoError(t, err)
	require.Empty(t, plain.Ignored)

	data := strings.Replace(string(f.Data), `{`, `{"uses_left":2,`, 1)
	d, err := codec.Decode(f.Type, []byte(data), f.Metadata)
	require.NoError(t, err)
	require.Equal(t, plain.Event, d.Event)
	require.Equal(t, "data.uses_left", d.Ignored)

	meta := strings.Replace(string(f.Metadata), `{`, `{"chain":{"prev":"ab12"},`, 1)
	d, err = codec.Decode(f.Type, f.Data, []byte(meta))
	require.NoError(t, err)
	require.Equal(t, plain.Event, d.Event)
	require.Equal(t, plain.Meta, d.Meta)
	require.Equal(t, "metadata.chain", d.Ignored)
}

// TestAbsentMetadataIsVersionOne: what every build wrote before versions
// were per type.
func TestAbsentMetadataIsVersionOne(t *testing.T) {
	f := claimedFixture(t)
	for _, meta := range []string{``, ` `, `null`, `{"recorded_at":"2026-11-26T14:02:30Z"}`, `{"schema_version":0,"recorded_at":"2026-11-26T14:02:30Z"}`} {
		d, err := codec.Decode(f.Type, f.Data, []byte(meta))
		require.NoError(t, err, "%q", meta)
		require.Equal(t, 1, d.Meta.SchemaVersion, "%q", meta)
	}
}

// TestEncodeStampsEachTypesWriteVersion: the metadata carries the version
// the event was written at: the type's write version, or, for a type that
// writes each event at the oldest version able to say it, version 1 for a
// refund's and version 2 for an export download's; an unregistered type is
// refused.
func TestEncodeStampsEachTypesWriteVersion(t *testing.T) {
	for _, samples := range [][]domain.Event{codectest.Samples(), codectest.RefundSamples()} {
		for _, e := range samples {
			enc, err := codec.Encode(e, domain.Metadata{Actor: "a"})
			require.NoError(t, err)
			k, ok := codec.Lookup(e.EventType())
			require.True(t, ok)
			want := k.Write
			if k.Oldest {
				want = 1
				if kindOfSample(e) == domain.KindExportDownload {
					want = 2
				}
			}
			require.Equal(t, want, enc.Version, "%s", k.Type)
			m, err := codec.DecodeMetadata(enc.Metadata)
			require.NoError(t, err)
			require.Equal(t, want, m.SchemaVersion)
		}
	}
	_, err := codec.Encode(Pinged{}, domain.Metadata{})
	require.ErrorIs(t, err, codec.ErrUnknownEventType)
	_, err = codec.Encode(nil, domain.Metadata{})
	require.Error(t, err)
}

func kindOfSample(e domain.Event) domain.OperationKind {
	switch ev := e.(type) {
	case domain.OperationRequested:
		return ev.Kind
	case domain.Decided:
		return ev.Kind
	case domain.CapabilityIssued:
		return ev.Kind
	case domain.Claimed:
		return ev.Kind
	}
	return ""
}

// TestAVersionTwoEventIsWrittenOnlyWhenItMustBe: a downcast that cannot
// say an event (ErrNeedsNewerVersion) moves it up one version for a kind
// that writes the oldest version able to say it; any other refusal, and
// any refusal for a kind that writes one version, refuses the event.
func TestAVersionTwoEventIsWrittenOnlyWhenItMustBe(t *testing.T) {
	for _, e := range []domain.Event{
		domain.CapabilityIssued{CapabilityID: "CAP-1", DecisionID: "DEC-1", Attempt: 1},
		domain.CapabilityIssued{CapabilityID: "CAP-1", DecisionID: "DEC-1", Kind: domain.KindRefund, Attempt: 1, Uses: 1},
	} {
		enc, err := codec.Encode(e, domain.Metadata{})
		require.NoError(t, err)
		require.Equal(t, 1, enc.Version, "a refund's capability, stated or not")
		require.NotContains(t, string(enc.Data), "uses")
	}
	three := domain.CapabilityIssued{CapabilityID: "CAP-1", DecisionID: "DEC-1", Kind: domain.KindRefund, Attempt: 1, Uses: 3}
	enc, err := codec.Encode(three, domain.Metadata{})
	require.NoError(t, err)
	require.Equal(t, 2, enc.Version, "three uses is never written as version 1, whatever the kind says")
	d, err := codec.Decode(enc.Type, enc.Data, enc.Metadata)
	require.NoError(t, err)
	require.Equal(t, three, d.Event)

	k, _ := codec.Lookup(domain.TypeCapabilityIssued)
	one, err := codec.NewRegistry(k.Writes(1))
	require.NoError(t, err)
	_, err = one.Encode(three, domain.Metadata{})
	require.ErrorIs(t, err, codec.ErrNeedsNewerVersion, "a kind that writes version 1 only refuses what version 1 cannot say")
	require.ErrorContains(t, err, "encode CapabilityIssued as v1: version 1 is single-use authority, not 3 uses")
}
