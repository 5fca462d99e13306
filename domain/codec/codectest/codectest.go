// Package codectest holds the golden fixtures of the event codec: every
// version of every event type, as a writer of that version stored it, and
// whole logs written by earlier builds. They are frozen: a fixture is
// written once, by the code of its version (or by hand where that code
// predates the fixtures), and never rewritten, so that every later build
// proves it still reads the history earlier builds left behind. See
// docs/design.md, "Event compatibility".
//
// Layout (embedded from testdata/):
//
//	events/<Type>/v<N>.json              one event of version N, written by the code of version N
//	events/<Type>/v<N>-<variant>.json    an older shape of version N, written by the code of an older commit
//	events/<Type>/<fixture>.reads-as.json  what a fixture older than its type's current version reads as
//	logs/<name>.jsonl                    a whole log: a header line, then one stored event per line in global order
//
// Only the reads-as files change: when a type gains a version, each of its
// older fixtures reads as the new shape, which its reads-as file states
// (TestEveryFixtureReads -update writes a missing one from what this build
// reads; review it as you would a golden file).
package codectest

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"opledger/eventstore"
)

//go:embed testdata
var testdata embed.FS

// Fixture is one stored event of one version of its type.
type Fixture struct {
	// Path is the fixture's file under testdata, e.g. "events/Claimed/v1.json".
	Path string `json:"-"`
	// Variant is what follows the version in the file name ("" for vN.json,
	// "before-lease-binding" for vN-before-lease-binding.json).
	Variant string `json:"-"`
	// WrittenBy says which code wrote the fixture, or from what it was
	// written by hand.
	WrittenBy string `json:"written_by"`
	Type      string `json:"type"`
	// SchemaVersion is the version the fixture holds (the file name's).
	SchemaVersion int    `json:"schema_version"`
	ID            string `json:"id"`
	// Metadata and Data are the stored JSON, compacted: what the writer
	// stored, byte for byte, for a fixture a writer wrote.
	Metadata json.RawMessage `json:"metadata"`
	Data     json.RawMessage `json:"data"`
	// ReadsAs, for a fixture older than its type's current version, is the
	// event in the current shape that it must read as (the sibling file
	// <fixture>.reads-as.json); nil when there is none.
	ReadsAs json.RawMessage `json:"-"`
}

// readsAsSuffix ends the name of a fixture's reads-as file.
const readsAsSuffix = ".reads-as.json"

// ReadsAsPath is the path under testdata of fixture f's reads-as file.
func (f Fixture) ReadsAsPath() string { return strings.TrimSuffix(f.Path, ".json") + readsAsSuffix }

// EventData returns the fixture as an event to append.
func (f Fixture) EventData() eventstore.EventData {
	return eventstore.EventData{ID: f.ID, Type: f.Type, Data: f.Data, Metadata: f.Metadata}
}

// Fixtures returns every event fixture, ordered by path.
func Fixtures() ([]Fixture, error) {
	paths, err := fs.Glob(testdata, "testdata/events/*/v*.json")
	if err != nil {
		return nil, err
	}
	slices.Sort(paths)
	out := make([]Fixture, 0, len(paths))
	for _, p := range paths {
		if strings.HasSuffix(p, readsAsSuffix) {
			continue
		}
		f, err := readFixture(p)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func readFixture(p string) (Fixture, error) {
	raw, err := testdata.ReadFile(p)
	if err != nil {
		return Fixture{}, err
	}
	var f Fixture
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Fixture{}, fmt.Errorf("fixture %s: %w", p, err)
	}
	f.Path = strings.TrimPrefix(p, "testdata/")
	dir, file := path.Split(f.Path)
	version, variant, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(file, "v"), ".json"), "-")
	n, err := strconv.Atoi(version)
	switch {
	case err != nil || n < 1:
		return Fixture{}, fmt.Errorf("fixture %s: the file name must be v<N>.json or v<N>-<variant>.json", p)
	case n != f.SchemaVersion:
		return Fixture{}, fmt.Errorf("fixture %s: holds schema_version %d, its name says %d", p, f.SchemaVersion, n)
	case path.Base(dir) != f.Type:
		return Fixture{}, fmt.Errorf("fixture %s: holds a %s, its directory says %s", p, f.Type, path.Base(dir))
	}
	f.Variant = variant
	if raw, err := testdata.ReadFile("testdata/" + f.ReadsAsPath()); err == nil {
		f.ReadsAs = raw
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Fixture{}, err
	}
	for _, m := range []*json.RawMessage{&f.Metadata, &f.Data, &f.ReadsAs} {
		if len(*m) == 0 {
			continue
		}
		var b bytes.Buffer
		if err := json.Compact(&b, *m); err != nil {
			return Fixture{}, fmt.Errorf("fixture %s: %w", p, err)
		}
		*m = b.Bytes()
	}
	return f, nil
}

// LogHeader is the first line of a log fixture.
type LogHeader struct {
	Log       string `json:"log"`
	WrittenBy string `json:"written_by"`
	Events    int    `json:"events"`
}

// LogEvent is one stored event of a log fixture.
type LogEvent struct {
	Stream   string          `json:"stream"`
	Version  int64           `json:"version"`
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Metadata json.RawMessage `json:"metadata"`
	Data     json.RawMessage `json:"data"`
}

// EventData returns the event as an event to append.
func (e LogEvent) EventData() eventstore.EventData {
	return eventstore.EventData{ID: e.ID, Type: e.Type, Data: e.Data, Metadata: e.Metadata}
}

// Logs returns the names of the log fixtures (logs/<name>.jsonl), sorted.
func Logs() ([]string, error) {
	paths, err := fs.Glob(testdata, "testdata/logs/*.jsonl")
	if err != nil {
		return nil, err
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = strings.TrimSuffix(path.Base(p), ".jsonl")
	}
	slices.Sort(names)
	return names, nil
}

// Log returns the header and the events of log fixture name, in the
// global order they were written in.
func Log(name string) (LogHeader, []LogEvent, error) {
	raw, err := testdata.ReadFile("testdata/logs/" + name + ".jsonl")
	if err != nil {
		return LogHeader{}, nil, err
	}
	lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
	var h LogHeader
	if err := strictUnmarshal(lines[0], &h); err != nil {
		return LogHeader{}, nil, fmt.Errorf("log %s: header: %w", name, err)
	}
	events := make([]LogEvent, 0, len(lines)-1)
	for i, line := range lines[1:] {
		var e LogEvent
		if err := strictUnmarshal(line, &e); err != nil {
			return LogHeader{}, nil, fmt.Errorf("log %s: line %d: %w", name, i+2, err)
		}
		events = append(events, e)
	}
	if len(events) != h.Events {
		return LogHeader{}, nil, fmt.Errorf("log %s: %d events, the header says %d", name, len(events), h.Events)
	}
	return h, events, nil
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Streams returns the number of events of each stream of a log.
func Streams(events []LogEvent) map[string]int64 {
	out := map[string]int64{}
	for _, e := range events {
		out[e.Stream]++
	}
	return out
}

// AppendLog appends a log fixture's events to store one by one, in their
// global order, each at the version it was stored at: the store ends up
// with the same streams, and the same global order, as the log's writer
// left. One append per event keeps the order; a log is small (the bound is
// the fixture's length).
func AppendLog(ctx context.Context, store eventstore.Store, events []LogEvent) error {
	for i, e := range events {
		expected := eventstore.NoStream()
		if e.Version > 0 {
			expected = eventstore.Exact(e.Version - 1)
		}
		if _, err := store.Append(ctx, e.Stream, expected, []eventstore.EventData{e.EventData()}); err != nil {
			return fmt.Errorf("append log event %d (%s@%d): %w", i, e.Stream, e.Version, err)
		}
	}
	return nil
}

// ErrNoFixture is returned by FixtureOf when no fixture matches.
var ErrNoFixture = errors.New("codectest: no such fixture")

// FixtureOf returns the fixture of type typ and version v without variant.
func FixtureOf(typ string, v int) (Fixture, error) {
	f, err := readFixture(fmt.Sprintf("testdata/events/%s/v%d.json", typ, v))
	if errors.Is(err, fs.ErrNotExist) {
		return Fixture{}, fmt.Errorf("%w: events/%s/v%d.json", ErrNoFixture, typ, v)
	}
	return f, err
}
