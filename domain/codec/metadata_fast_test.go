package codec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
)

// metadataSeeds are metadata as writers write it (compact, and with the
// spaces jsonb's text puts after a colon and a comma) and near misses the
// fast path must leave to readObject.
var metadataSeeds = []string{
	`{"schema_version":1,"correlation_id":"COR-1","causation_id":"MSG-1","actor":"worker w1","recorded_at":"2026-12-02T16:00:00.123456789Z"}`,
	`{"actor": "principal:ops", "causation_id": "idem-9", "recorded_at": "2026-12-02T16:00:00.5Z", "correlation_id": "c", "schema_version": 2}`,
	`{"recorded_at":"2026-12-02T16:00:00Z"}`,
	`{}`, ` { } `, `{"schema_version":0}`, `{"schema_version":-0}`, `{"schema_version":-3}`,
	`{"schema_version":01}`, `{"schema_version":1.0}`, `{"schema_version":1e0}`, `{"schema_version":1234567890}`,
	`{"schema_version":"1"}`, `{"schema_version":null}`, `{"actor":null}`, `{"actor":1}`,
	`{"actor":"a","actor":"b"}`, `{"actor":"a\u0062"}`, `{"act\u006fr":"a"}`, `{"Actor":"a"}`, `{"actor":"é"}`,
	"{\"actor\":\"\xff\"}", "{\"actor\":\"a\tb\"}", `{"extra":1,"schema_version":1,"recorded_at":"2026-12-02T16:00:00Z"}`,
	`{"recorded_at":"2026-12-02T16:00:00+01:00"}`, `{"recorded_at":"2026-12-02t16:00:00z"}`, `{"recorded_at":"2026-13-02T16:00:00Z"}`,
	`{"recorded_at":"2026-12-02T24:00:00Z"}`, `{"recorded_at":"2026-12-02T16:00:00.Z"}`, `{"recorded_at":"2026-12-02T16:00:00.1234567891Z"}`,
	`{"recorded_at":"2026-02-30T16:00:00Z"}`, `{"recorded_at":"2026-12-02T16:00:00,5Z"}`, `{"recorded_at":"2026-12-02 16:00:00Z"}`,
	`{"recorded_at":"2024-02-29T00:00:00Z"}`, `{"recorded_at":"2023-02-29T00:00:00Z"}`, `{"recorded_at":"0000-01-01T00:00:00Z"}`,
	`{"recorded_at":"9999-12-31T23:59:59.999999999Z"}`, `{"recorded_at":"2026-12-02T16:00:60Z"}`, `{"recorded_at":"2026-00-02T16:00:00Z"}`,
	`{"recorded_at":"2026-12-00T16:00:00Z"}`, `{"recorded_at":"2026-12-02T16:60:00Z"}`, `{"recorded_at":"2026-12-02T16:00:00.000000001Z"}`,
	`{"actor":"a"} x`, `{"actor":"a"}}`, `{"actor":"a",}`, `{"actor" "a"}`, `{"actor":"a"`, `{`, `[]`, `null`, `"x"`,
}

// TestFastMetadataReadsWhatWritersWrite: the fast path takes the metadata
// this build writes and jsonb's text of it, and reads what readObject reads.
func TestFastMetadataReadsWhatWritersWrite(t *testing.T) {
	at := time.Date(2026, 12, 2, 16, 0, 0, 123456000, time.UTC)
	m := domain.Metadata{CorrelationID: "COR-1", CausationID: "MSG-1", Actor: `principal "ops" ünïcode`, RecordedAt: at}
	written, err := EncodeMetadata(m, 1)
	require.NoError(t, err)
	m.Actor = "principal ops ünïcode" // the quotes are escaped: readObject's
	for _, data := range []string{
		string(written),
		`{"actor": "principal ops ünïcode", "causation_id": "MSG-1", "recorded_at": "2026-12-02T16:00:00.123456Z", "correlation_id": "COR-1", "schema_version": 1}`,
	} {
		got, ok := fastMetadata([]byte(data))
		if data == string(written) {
			require.False(t, ok, "an escaped quote is readObject's: %s", data)
			continue
		}
		require.True(t, ok, data)
		want := m
		want.SchemaVersion = 1
		require.Equal(t, want, got)
	}
	for _, data := range metadataSeeds[:3] {
		_, ok := fastMetadata([]byte(data))
		require.True(t, ok, data)
	}
}

// FuzzFastMetadataAgreesWithReadObject: whatever the fast path reads,
// readObject reads too, to the same metadata, ignoring nothing.
func FuzzFastMetadataAgreesWithReadObject(f *testing.F) {
	for _, s := range metadataSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := fastMetadata(data)
		if !ok {
			require.Equal(t, domain.Metadata{}, got)
			return
		}
		var want domain.Metadata
		ignored, err := readObject(data, &want, metadataRequired)
		require.NoError(t, err, "%q", data)
		require.Empty(t, ignored, "%q", data)
		require.Equal(t, want, got, "%q", data)
	})
}
