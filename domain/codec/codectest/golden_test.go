package codectest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/domain/codec/codectest"
)

var update = flag.Bool("update", false, "write the golden fixtures that do not exist yet (existing ones are frozen and never rewritten)")

// writtenBy names the code that writes new fixtures.
const writtenBy = "opledger domain/codec.Encode, the registry's codec (codectest TestGolden -update)"

// fixtureMetadata is the metadata the fixtures are written with.
var fixtureMetadata = domain.Metadata{CorrelationID: "COR-2210", CausationID: "MSG-55A", Actor: "worker-a",
	RecordedAt: time.Date(2026, 11, 26, 14, 2, 30, 0, time.UTC)}

// encode is how this build writes an event and its metadata.
func encode(e domain.Event) (typ string, version int, data, meta []byte, err error) {
	enc, err := codec.Encode(e, fixtureMetadata)
	return enc.Type, enc.Version, enc.Data, enc.Metadata, err
}

// decode is how this build reads a stored event.
func decode(typ string, data, meta []byte) (domain.Event, domain.Metadata, error) {
	d, err := codec.Decode(typ, data, meta)
	return d.Event, d.Meta, err
}

// TestGolden: every sample, written by this build, is byte for byte the
// fixture of the version this build writes, and that fixture reads back as
// the sample. With -update it first writes the fixtures that are missing
// (a new type, a new version), never one that exists.
func TestGolden(t *testing.T) {
	for _, sample := range codectest.Samples() {
		t.Run(sample.EventType(), func(t *testing.T) {
			typ, version, data, meta, err := encode(sample)
			require.NoError(t, err)
			f, err := codectest.FixtureOf(typ, version)
			if errors.Is(err, codectest.ErrNoFixture) && *update {
				writeFixture(t, typ, version, data, meta)
				return // embedded at the next build: the next run checks it
			}
			require.NoError(t, err, "run go test ./domain/codec/codectest -run TestGolden -update to write it")
			require.Equal(t, string(f.Data), string(data), "this build writes %s v%d as the fixture holds it", typ, version)
			require.Equal(t, string(f.Metadata), string(meta))
			back, m, err := decode(f.Type, f.Data, f.Metadata)
			require.NoError(t, err)
			require.Equal(t, sample, back)
			require.Equal(t, version, m.SchemaVersion)
		})
	}
}

func writeFixture(t *testing.T, typ string, version int, data, meta []byte) {
	t.Helper()
	path := filepath.Join("testdata", "events", typ, fmt.Sprintf("v%d.json", version))
	_, err := os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist, "%s exists: fixtures are frozen, never rewritten", path)
	f := codectest.Fixture{WrittenBy: writtenBy, Type: typ, SchemaVersion: version,
		ID:       uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprintf("opledger-fixture:%s/v%d", typ, version))).String(),
		Metadata: meta, Data: data}
	out, err := json.MarshalIndent(f, "", "  ")
	require.NoError(t, err)
	var check bytes.Buffer
	require.NoError(t, json.Compact(&check, out))
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, append(out, '\n'), 0o644))
	t.Logf("wrote %s: run the test again to check it", path)
}

// TestEveryFixtureReads: every fixture, the hand-written older shapes
// included, reads, and written again at its version it is what was stored
// (an older shape's absent fields stay absent).
func TestEveryFixtureReads(t *testing.T) {
	fixtures, err := codectest.Fixtures()
	require.NoError(t, err)
	require.NotEmpty(t, fixtures)
	for _, f := range fixtures {
		t.Run(f.Path, func(t *testing.T) {
			e, m, err := decode(f.Type, f.Data, f.Metadata)
			require.NoError(t, err)
			require.Equal(t, f.SchemaVersion, m.SchemaVersion)
			k, ok := codec.Lookup(f.Type)
			require.True(t, ok)
			if f.SchemaVersion < k.Current {
				require.NotEmpty(t, f.Expect, "%s is older than %s's current version %d: give it an \"expect\" member, what it reads as", f.Path, f.Type, k.Current)
				want := reflect.New(k.GoType)
				require.NoError(t, json.Unmarshal(f.Expect, want.Interface()))
				require.Equal(t, want.Elem().Interface(), e, "what %s reads as", f.Path)
			}
			_, version, data, _, err := encode(e)
			require.NoError(t, err)
			if version == f.SchemaVersion {
				require.Equal(t, string(f.Data), string(data))
			}
		})
	}
}

// TestEveryVersionHasAFixture: every version of every registered type,
// from 1 to the current one, has a fixture written by its writer.
func TestEveryVersionHasAFixture(t *testing.T) {
	for _, k := range codec.Kinds() {
		for v := 1; v <= k.Current; v++ {
			_, err := codectest.FixtureOf(k.Type, v)
			require.NoError(t, err, "%s v%d: run go test ./domain/codec/codectest -run TestGolden -update (with the build that writes v%d)", k.Type, v, v)
		}
	}
}

// TestEveryLogReads: every event of every log fixture reads.
func TestEveryLogReads(t *testing.T) {
	names, err := codectest.Logs()
	require.NoError(t, err)
	require.NotEmpty(t, names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			h, events, err := codectest.Log(name)
			require.NoError(t, err)
			require.Equal(t, name, h.Log)
			for i, e := range events {
				_, _, err := decode(e.Type, e.Data, e.Metadata)
				require.NoError(t, err, "event %d (%s@%d)", i, e.Stream, e.Version)
			}
		})
	}
}
