package codectest_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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

// encodeAt writes e as version v of its type (the current version, or the
// one this build writes).
func encodeAt(k codec.Kind, e domain.Event, v int) (data, meta []byte, err error) {
	r, err := codec.NewRegistry(k.Writes(v))
	if err != nil {
		return nil, nil, err
	}
	enc, err := r.Encode(e, fixtureMetadata)
	return enc.Data, enc.Metadata, err
}

// decode is how this build reads a stored event.
func decode(typ string, data, meta []byte) (domain.Event, domain.Metadata, error) {
	d, err := codec.Decode(typ, data, meta)
	return d.Event, d.Meta, err
}

// TestGolden: every sample, written by this build, is byte for byte the
// fixture of the version this build writes it at (and, written as its
// type's current version, the fixture of that version), and the fixture
// reads back as the sample. With -update it first writes the fixtures that
// are missing (a new type, a new version), never one that exists.
func TestGolden(t *testing.T) {
	for _, sample := range codectest.Samples() {
		t.Run(sample.EventType(), func(t *testing.T) {
			k, ok := codec.Lookup(sample.EventType())
			require.True(t, ok, "the sample's type is not registered")
			written := k.Write
			if k.Write > 0 {
				_, written, _, _, _ = encode(sample) // Kind.Oldest: the version that can say it
			}
			for _, version := range slices.Compact([]int{written, k.Current}) {
				if version == 0 {
					continue // read, not written yet: its current version is checked
				}
				data, meta, err := encodeAt(k, sample, version)
				require.NoError(t, err)
				f, err := codectest.FixtureOf(k.Type, version)
				if errors.Is(err, codectest.ErrNoFixture) && *update {
					writeFixture(t, k.Type, version, data, meta)
					continue // embedded at the next build: the next run checks it
				}
				require.NoError(t, err, "run go test ./domain/codec/codectest -run TestGolden -update to write it")
				require.Equal(t, string(f.Data), string(data), "this build writes %s v%d as the fixture holds it", k.Type, version)
				require.Equal(t, string(f.Metadata), string(meta))
				if version == k.Current {
					back, m, err := decode(f.Type, f.Data, f.Metadata)
					require.NoError(t, err)
					require.Equal(t, sample, back)
					require.Equal(t, version, m.SchemaVersion)
				}
			}
			if k.Write > 0 {
				_, version, _, _, err := encode(sample)
				require.NoError(t, err)
				if k.Oldest {
					require.GreaterOrEqual(t, version, k.Write)
				} else {
					require.Equal(t, k.Write, version)
				}
			}
		})
	}
}

// TestARefundIsWrittenAsBeforeKinds: the types that gained a version for
// operation kinds write a refund's event as version 1, byte for byte the
// fixture the builds before kinds wrote: a refund stream is what it was,
// so the previous release reads every one (domain/codec/policy_test.go).
func TestARefundIsWrittenAsBeforeKinds(t *testing.T) {
	for _, sample := range codectest.RefundSamples() {
		k, _ := codec.Lookup(sample.EventType())
		if !k.Oldest {
			continue
		}
		t.Run(k.Type, func(t *testing.T) {
			f, err := codectest.FixtureOf(k.Type, 1)
			require.NoError(t, err)
			typ, version, data, meta, err := encode(sample)
			require.NoError(t, err)
			require.Equal(t, k.Type, typ)
			require.Equal(t, 1, version)
			require.Equal(t, string(f.Data), string(data), "a refund's %s is version 1 as the builds before kinds wrote it", k.Type)
			require.Equal(t, string(f.Metadata), string(meta))
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
				if f.ReadsAs == nil && *update {
					out, err := json.MarshalIndent(e, "", "  ")
					require.NoError(t, err)
					path := filepath.Join("testdata", f.ReadsAsPath())
					require.NoError(t, os.WriteFile(path, append(out, '\n'), 0o644))
					t.Logf("wrote %s from what this build reads: review it, then run the test again", path)
					return
				}
				require.NotNil(t, f.ReadsAs, "%s is older than %s's current version %d: it needs %s, what it reads as (-update writes it from this build's reading: review it)", f.Path, f.Type, k.Current, f.ReadsAsPath())
				want := reflect.New(k.GoType)
				require.NoError(t, json.Unmarshal(f.ReadsAs, want.Interface()))
				require.Equal(t, want.Elem().Interface(), e, "what %s reads as", f.Path)
			}
			if data, _, err := encodeAt(k, e, f.SchemaVersion); err == nil && f.SchemaVersion == k.Current {
				require.Equal(t, string(f.Data), string(data), "written again at its version, it is what was stored")
			}
			if typ, version, data, _, err := encode(e); k.Oldest && err == nil && version == f.SchemaVersion {
				require.Equal(t, f.Type, typ)
				require.Equal(t, string(f.Data), string(data), "this build writes what it read as it was stored")
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
