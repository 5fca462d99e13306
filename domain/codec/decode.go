package codec

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"

	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"opledger/domain"
	"opledger/domain/strictjson"
)

// Errors wrapped by every refusal to decode.
var (
	// ErrUnknownEventType: the stored type is none this build knows: a
	// newer build's, or not an opledger event.
	ErrUnknownEventType = errors.New("unknown event type")
	// ErrNewerVersion: the stored version is newer than any this build
	// reads.
	ErrNewerVersion = errors.New("written by a newer build")
	// ErrMalformed: the stored JSON is not an event of its type and version.
	ErrMalformed = errors.New("malformed stored event")
)

// Decoded is a stored event as this build reads it.
type Decoded struct {
	// Event is the event in its current shape, upcast from the version it
	// was stored at.
	Event domain.Event
	// Meta is its metadata; Meta.SchemaVersion is the version it was stored
	// at (absent: 1).
	Meta domain.Metadata
	// Ignored names a member of the event ("data.field") or of its metadata
	// ("metadata.field") that this build does not know and ignored: written
	// by a newer build (an additive field), or tampering. Empty when the
	// event holds nothing this build does not know. What was ignored is
	// never written back.
	Ignored string
}

// Decode reads a stored event: its metadata, then its data under the
// metadata's schema version, each parsed once.
func (r *Registry) Decode(eventType string, data, metadata []byte) (Decoded, error) {
	meta, ignoredMeta, err := decodeMetadata(metadata)
	if err != nil {
		return Decoded{}, fmt.Errorf("decode %s: %w", eventType, err)
	}
	k := r.kinds[eventType]
	if k == nil {
		return Decoded{}, unknownType(eventType)
	}
	e, ignored, err := k.decode(meta.SchemaVersion, data)
	if err != nil {
		return Decoded{}, err
	}
	d := Decoded{Event: e, Meta: meta}
	switch {
	case ignored != "":
		d.Ignored = "data." + ignored
	case ignoredMeta != "":
		d.Ignored = "metadata." + ignoredMeta
	}
	return d, nil
}

// DecodeEvent reads the data of a stored event of the given type and
// schema version and upcasts it to the current shape.
func (r *Registry) DecodeEvent(eventType string, version int, data []byte) (domain.Event, error) {
	k := r.kinds[eventType]
	if k == nil {
		return nil, unknownType(eventType)
	}
	e, _, err := k.decode(version, data)
	return e, err
}

func unknownType(eventType string) error {
	return fmt.Errorf("decode %q: %w (written by a newer build, or not an opledger event)", clip(eventType), ErrUnknownEventType)
}

// DecodeMetadata reads an event's metadata. Absent metadata, and metadata
// without schema_version, are schema version 1 (what every build before
// versions were per type wrote).
func DecodeMetadata(data []byte) (domain.Metadata, error) {
	m, _, err := decodeMetadata(data)
	return m, err
}

func decodeMetadata(data []byte) (domain.Metadata, string, error) {
	if t := bytes.TrimSpace(data); len(t) == 0 || string(t) == "null" {
		return domain.Metadata{SchemaVersion: 1}, "", nil
	}
	m, fast := fastMetadata(data)
	var (
		ignored string
		err     error
	)
	if !fast {
		ignored, err = readObject(data, &m, metadataRequired)
	}
	switch {
	case err != nil:
		return domain.Metadata{}, "", fmt.Errorf("metadata: %w: %w", ErrMalformed, err)
	case m.SchemaVersion < 0:
		return domain.Metadata{}, "", fmt.Errorf("metadata: %w: schema_version %d is not a version", ErrMalformed, m.SchemaVersion)
	case m.SchemaVersion == 0:
		m.SchemaVersion = 1
	}
	return m, ignored, nil
}

// metadataRequired are the members every writer of metadata writes.
var metadataRequired = requiredMembers(reflect.TypeFor[domain.Metadata]())

// rejectUnknown is the strict first pass's option.
var rejectUnknown = json.RejectUnknownMembers(true)

// readObject decodes data, which must be one JSON object, into dst (a
// pointer to a zero struct): names exactly, no duplicate names, valid
// UTF-8, each known member of the right JSON type. Members dst's type does
// not have are ignored, and readObject returns the dotted path of the first
// one ("" when there is none); but an object holding members this build
// does not know must hold every member its writer always writes
// (required: the members of dst's type without omitempty), or it is no
// event of this type (a newer build writes them too; a fabricated or
// mangled object need not). The strict first pass is the only one for an
// event that holds nothing unknown; a refused input is read again by
// strictjson to say precisely what is wrong.
func readObject(data []byte, dst any, required []string) (string, error) {
	if i := bytes.IndexFunc(data, notSpace); i >= 0 && data[i] == '{' {
		err := json.Unmarshal(data, dst, rejectUnknown)
		if err == nil {
			return "", nil
		}
		var sem *json.SemanticError
		if errors.As(err, &sem) && errors.Is(err, json.ErrUnknownName) {
			reset(dst)
			if json.Unmarshal(data, dst) == nil {
				ignored := strictjson.FieldOf(string(sem.JSONPointer))
				if missing := missingMembers(data, required); len(missing) > 0 {
					reset(dst)
					return "", fmt.Errorf("holds a member this build does not know (%s) and lacks %s: not a stored event of this type and version",
						ignored, strings.Join(missing, ", "))
				}
				return ignored, nil
			}
		}
	}
	reset(dst)
	if err := strictjson.DecodeObject(data, dst, strictjson.Options{AllowUnknown: true}); err != nil {
		return "", err
	}
	return "", fmt.Errorf("cannot be read as one JSON object") // not reached: strictjson refuses what Unmarshal refused
}

// requiredMembers returns the JSON names of struct type t's fields that its
// writer always writes: those tagged without omitempty (or omitzero).
func requiredMembers(t reflect.Type) []string {
	if t.Kind() != reflect.Struct {
		return nil // refused by Kind.validate
	}
	var out []string
	for f := range t.Fields() {
		tag, ok := f.Tag.Lookup("json")
		if !f.IsExported() || !ok || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		optional := false
		for o := range strings.SplitSeq(opts, ",") {
			optional = optional || o == "omitempty" || o == "omitzero"
		}
		if !optional {
			out = append(out, name)
		}
	}
	return out
}

// missingMembers returns the names of required that data, one JSON object
// that decoded, does not hold at its top level. It tokenizes data once; it
// runs only for an object holding a member this build does not know.
func missingMembers(data []byte, required []string) []string {
	if len(required) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(required))
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	if _, err := dec.ReadToken(); err != nil { // '{'
		return required
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return required
		}
		seen[name.String()] = true
		if err := dec.SkipValue(); err != nil {
			return required
		}
	}
	var missing []string
	for _, r := range required {
		if !seen[r] {
			missing = append(missing, r)
		}
	}
	return missing
}

// reset zeroes what a failed pass may have filled in.
func reset(dst any) { reflect.ValueOf(dst).Elem().SetZero() }

func notSpace(r rune) bool { return r != ' ' && r != '\t' && r != '\n' && r != '\r' }

// clip bounds and escapes a stored name quoted in an error.
func clip(s string) string {
	out, _ := domain.EvidenceText(s, 2*domain.MaxIDLength)
	return out
}
