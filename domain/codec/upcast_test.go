package codec_test

import (
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/codec"
)

// Pinged is a test-only event type with three versions, to prove the
// mechanism no production type needs yet (every production type is at
// version 1; see docs/design.md): version 1 stored host and port, version 2
// a target "host:port", version 3 (the current shape) adds how many times
// the target was pinged and optional tags.
type Pinged struct {
	Target   string    `json:"target"`
	Attempts int       `json:"attempts"`
	Tags     []string  `json:"tags,omitempty"`
	At       time.Time `json:"at"`
}

func (Pinged) EventType() string { return "Pinged" }

// pingedV1 and pingedV2 are frozen copies of the shapes versions 1 and 2
// wrote.
type pingedV1 struct {
	Host string    `json:"host"`
	Port int       `json:"port"`
	At   time.Time `json:"at"`
}

type pingedV2 struct {
	Target string    `json:"target"`
	At     time.Time `json:"at"`
}

// pingedV2 is also the current shape of the release before version 3.
func (pingedV2) EventType() string { return "Pinged" }

func pingedV1toV2(v pingedV1) (pingedV2, error) {
	if v.Port < 1 || v.Port > 65535 {
		return pingedV2{}, errors.New("port out of range")
	}
	return pingedV2{Target: net.JoinHostPort(v.Host, strconv.Itoa(v.Port)), At: v.At}, nil
}

func pingedV2toV3(v pingedV2) (Pinged, error) {
	return Pinged{Target: v.Target, Attempts: 1, At: v.At}, nil // a version 2 writer pinged once
}

func pingedV3toV2(p Pinged) (pingedV2, error) {
	if p.Attempts != 1 || len(p.Tags) > 0 {
		return pingedV2{}, errors.New("version 2 records one attempt and no tags")
	}
	return pingedV2{Target: p.Target, At: p.At}, nil
}

var pingedAt = time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)

const (
	pingedV1JSON = `{"host":"db.internal","port":5432,"at":"2026-11-26T14:02:10Z"}`
	pingedV2JSON = `{"target":"db.internal:5432","at":"2026-11-26T14:02:10Z"}`
	pingedV3JSON = `{"target":"db.internal:5432","attempts":3,"tags":["canary"],"at":"2026-11-26T14:02:10Z"}`
)

func metaAt(v int) []byte {
	return []byte(`{"schema_version":` + strconv.Itoa(v) + `,"recorded_at":"2026-11-26T14:02:10Z"}`)
}

// readsV3WritesV2 is the release that ships version 3's reader while
// still writing version 2: readers first.
func readsV3WritesV2(t *testing.T) *codec.Registry {
	t.Helper()
	r, err := codec.NewRegistry(codec.Event[Pinged]("a target pinged (test only)",
		codec.Upcast(pingedV1toV2), codec.UpcastDown(pingedV2toV3, pingedV3toV2)).Writes(2))
	require.NoError(t, err)
	return r
}

// TestEveryVersionIsUpcastToTheCurrentShape: versions 1, 2 and 3 of one
// type all read as the current shape, each through the upcasters from its
// version on; a version beyond the newest is refused, never misread.
func TestEveryVersionIsUpcastToTheCurrentShape(t *testing.T) {
	r := readsV3WritesV2(t)
	k, ok := r.Kind("Pinged")
	require.True(t, ok)
	require.Equal(t, 3, k.Current)
	require.Equal(t, 2, k.Write)

	for _, c := range []struct {
		version int
		data    string
		want    Pinged
	}{
		{1, pingedV1JSON, Pinged{Target: "db.internal:5432", Attempts: 1, At: pingedAt}},
		{2, pingedV2JSON, Pinged{Target: "db.internal:5432", Attempts: 1, At: pingedAt}},
		{3, pingedV3JSON, Pinged{Target: "db.internal:5432", Attempts: 3, Tags: []string{"canary"}, At: pingedAt}},
	} {
		d, err := r.Decode("Pinged", []byte(c.data), metaAt(c.version))
		require.NoError(t, err, "v%d", c.version)
		require.Equal(t, c.want, d.Event, "v%d", c.version)
		require.Equal(t, c.version, d.Meta.SchemaVersion, "the stored version stays known")
		require.Empty(t, d.Ignored)
	}

	_, err := r.Decode("Pinged", []byte(pingedV3JSON), metaAt(4))
	require.ErrorIs(t, err, codec.ErrNewerVersion)
	require.ErrorContains(t, err, "schema version 4 was written by a newer build (this build reads versions 1 to 3)")

	_, err = r.Decode("Pinged", []byte(`{"host":"db.internal","port":0,"at":"2026-11-26T14:02:10Z"}`), metaAt(1))
	require.ErrorIs(t, err, codec.ErrMalformed, "an upcaster's refusal refuses the event")
	require.ErrorContains(t, err, "upcast to v2: port out of range")

	_, err = r.Decode("Pinged", []byte(pingedV2JSON), metaAt(1))
	require.ErrorIs(t, err, codec.ErrMalformed, "version 2's data under version 1 lacks what version 1 always wrote")
	require.ErrorContains(t, err, "lacks host, port")

	_, err = r.Decode("Pinged", []byte(`{"target":7,"at":"2026-11-26T14:02:10Z"}`), metaAt(2))
	require.ErrorIs(t, err, codec.ErrMalformed)
	require.ErrorContains(t, err, "target")
}

// TestAReleaseWritesTheVersionItsPredecessorReads: readers first. The
// release that learns to read version 3 still writes version 2 (and refuses
// to write what version 2 cannot say); only the next release writes 3, and
// the release before refuses that, loudly, instead of misreading it.
func TestAReleaseWritesTheVersionItsPredecessorReads(t *testing.T) {
	previous, err := codec.NewRegistry(codec.Event[pingedV2]("a target pinged (test only)", codec.Upcast(pingedV1toV2)))
	require.NoError(t, err)
	current := readsV3WritesV2(t)
	next, err := codec.NewRegistry(codec.Event[Pinged]("a target pinged (test only)",
		codec.Upcast(pingedV1toV2), codec.Upcast(pingedV2toV3)))
	require.NoError(t, err)

	once := Pinged{Target: "db.internal:5432", Attempts: 1, At: pingedAt}
	enc, err := current.Encode(once, domain.Metadata{RecordedAt: pingedAt})
	require.NoError(t, err)
	require.Equal(t, 2, enc.Version)
	require.JSONEq(t, pingedV2JSON, string(enc.Data))
	require.JSONEq(t, `{"schema_version":2,"recorded_at":"2026-11-26T14:02:10Z"}`, string(enc.Metadata))
	d, err := previous.Decode(enc.Type, enc.Data, enc.Metadata)
	require.NoError(t, err, "the previous release reads what the current one writes")
	require.Equal(t, pingedV2{Target: "db.internal:5432", At: pingedAt}, d.Event)

	_, err = current.Encode(Pinged{Target: "db.internal:5432", Attempts: 3, At: pingedAt}, domain.Metadata{})
	require.ErrorContains(t, err, "encode Pinged as v2: version 2 records one attempt and no tags",
		"what the version written cannot say is refused, not dropped")

	enc, err = next.Encode(Pinged{Target: "db.internal:5432", Attempts: 3, At: pingedAt}, domain.Metadata{RecordedAt: pingedAt})
	require.NoError(t, err)
	require.Equal(t, 3, enc.Version)
	d, err = current.Decode(enc.Type, enc.Data, enc.Metadata)
	require.NoError(t, err, "the current release reads what the next writes")
	require.Equal(t, 3, d.Event.(Pinged).Attempts)
	_, err = previous.Decode(enc.Type, enc.Data, enc.Metadata)
	require.ErrorIs(t, err, codec.ErrNewerVersion, "the release before refuses version 3: why the next release waits for the current one everywhere")
}

// TestARegistryRefusesVersionsThatDoNotChain: a registry whose versions do
// not lead to the Go type, or that would write a version it cannot write,
// is refused when it is built (for the build's registry: when the program
// starts, and in every test).
func TestARegistryRefusesVersionsThatDoNotChain(t *testing.T) {
	for _, c := range []struct {
		name  string
		kinds []codec.Kind
		want  string
	}{
		{"a step upcasts to the wrong type", []codec.Kind{codec.Event[Pinged]("p", codec.Upcast(pingedV1toV2))},
			"version 1 upcasts to codec_test.pingedV2, but version 2 is codec_test.Pinged"},
		{"a write version above the current", []codec.Kind{codec.Event[Pinged]("p").Writes(2)}, "writes version 2, reads versions 1 to 1"},
		{"a negative write version", []codec.Kind{codec.Event[Pinged]("p").Writes(-1)}, "writes version -1"},
		{"an older version written without a downcast",
			[]codec.Kind{codec.Event[Pinged]("p", codec.Upcast(pingedV1toV2), codec.Upcast(pingedV2toV3)).Writes(2)},
			"writes version 2, so version 2 needs a downcast from version 3"},
		{"the oldest version written is no version",
			[]codec.Kind{codec.Event[Pinged]("p", codec.Upcast(pingedV1toV2), codec.UpcastDown(pingedV2toV3, pingedV3toV2)).WritesOldest(0)},
			"a version starts at 1"},
		{"the oldest version written without a downcast",
			[]codec.Kind{codec.Event[Pinged]("p", codec.Upcast(pingedV1toV2), codec.Upcast(pingedV2toV3)).WritesOldest(2)},
			"version 2 needs a downcast from version 3"},
		{"a type registered twice", []codec.Kind{codec.Event[Pinged]("p"), codec.Event[Pinged]("q")}, "event type Pinged registered twice"},
		{"no doc", []codec.Kind{codec.Event[Pinged]("")}, "say what the event records"},
		{"an older version read as the current type",
			[]codec.Kind{codec.Event[Pinged]("p", codec.Upcast(func(p Pinged) (Pinged, error) { return p, nil }))},
			"give it a frozen type of its own"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := codec.NewRegistry(c.kinds...)
			require.ErrorContains(t, err, c.want)
		})
	}
}

// TestANewTypeIsReadBeforeItIsWritten: readers first for a new type too. A
// release that registers it with Writes(0) reads it (a newer build may
// already write it) and refuses to write it.
func TestANewTypeIsReadBeforeItIsWritten(t *testing.T) {
	r, err := codec.NewRegistry(codec.Event[Pinged]("a target pinged (test only)",
		codec.Upcast(pingedV1toV2), codec.Upcast(pingedV2toV3)).Writes(0))
	require.NoError(t, err)
	d, err := r.Decode("Pinged", []byte(pingedV3JSON), metaAt(3))
	require.NoError(t, err)
	require.Equal(t, 3, d.Event.(Pinged).Attempts)
	_, err = r.Encode(Pinged{Target: "db.internal:5432", Attempts: 1, At: pingedAt}, domain.Metadata{})
	require.ErrorContains(t, err, "this build reads the type but does not write it yet")
}
