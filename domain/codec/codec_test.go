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
		{"a newer version", domain.TypeClaimed, claimed, `{"schema_version":2,"recorded_at":"2026-11-26T14:02:30Z"}`, codec.ErrNewerVersion,
			"decode Claimed: schema version 2 was written by a newer build (this build reads versions 1 to 1)"},
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
// the event was written at; an unregistered type is refused.
func TestEncodeStampsEachTypesWriteVersion(t *testing.T) {
	for _, e := range codectest.Samples() {
		enc, err := codec.Encode(e, domain.Metadata{Actor: "a"})
		require.NoError(t, err)
		k, ok := codec.Lookup(e.EventType())
		require.True(t, ok)
		require.Equal(t, k.Write, enc.Version)
		m, err := codec.DecodeMetadata(enc.Metadata)
		require.NoError(t, err)
		require.Equal(t, k.Write, m.SchemaVersion)
	}
	_, err := codec.Encode(Pinged{}, domain.Metadata{})
	require.ErrorIs(t, err, codec.ErrUnknownEventType)
	_, err = codec.Encode(nil, domain.Metadata{})
	require.Error(t, err)
}
