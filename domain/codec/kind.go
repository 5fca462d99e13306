package codec

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"opledger/domain"
)

// ErrNeedsNewerVersion is wrapped by a downcast (UpcastDown) that refuses an
// event its version cannot express but a newer version can: a kind that
// writes each event at the oldest version able to say it (WritesOldest)
// then writes it at the next version up. For any other kind, and for any
// other error, the event is refused.
var ErrNeedsNewerVersion = errors.New("needs a newer version")

// Kind is the registry's row for one event type: everything the codec
// knows of it.
type Kind struct {
	// Type is the stable name stored beside every event of the type.
	Type string
	// Doc says what the event records, in one line.
	Doc string
	// Current is the version of the Go type's shape; every older version
	// is upcast to it on reading.
	Current int
	// Write is the version this build writes. It is Current, except in a
	// release that reads a new version before any build writes it (readers
	// first), and 0 for a type this build reads but does not write yet (a
	// new type, readers first); a later release raises it. With Oldest, it
	// is the oldest version written (see WritesOldest).
	Write int
	// Oldest: each event is written at the oldest version, from Write up to
	// Current, that can express it; a downcast that cannot says so with
	// ErrNeedsNewerVersion. A newer version is then written only for the
	// events that need it (a refund's events stay version 1, an export
	// download's are version 2), and a release before it refuses exactly
	// those (docs/design.md, "Authority of bounded use").
	Oldest bool
	// GoType is the event's Go type (a struct, used by value).
	GoType reflect.Type

	// steps[i] reads version i+1 and upcasts it to version i+2.
	steps         []Step
	decodeCurrent func(data []byte) (domain.Event, string, error)
	encodeCurrent func(e domain.Event) ([]byte, error)
}

// Step is one older version of an event type: how it is read and how it
// becomes the next version.
type Step struct {
	from, to reflect.Type
	decode   func(data []byte) (any, string, error)
	encode   func(v any) ([]byte, error)
	up       func(v any) (any, error)
	down     func(v any) (any, error) // nil: the next version is never written as this one
}

// Event declares an event type whose current shape is T. history lists its
// older versions, oldest first: history[0] reads version 1 and upcasts it to
// version 2, and so on; the last step upcasts to T, whose version is
// len(history)+1. A type never changed has no history and is version 1.
func Event[T domain.Event](doc string, history ...Step) Kind {
	var zero T
	required := requiredMembers(reflect.TypeFor[T]())
	fast := newFastPlan(reflect.TypeFor[T]())
	return Kind{
		Type: zero.EventType(), Doc: doc, Current: len(history) + 1, Write: len(history) + 1,
		GoType: reflect.TypeFor[T](), steps: history,
		decodeCurrent: func(data []byte) (domain.Event, string, error) {
			v, ignored, err := readPayload[T](data, fast, required)
			return v, ignored, err
		},
		encodeCurrent: func(e domain.Event) ([]byte, error) { return json.Marshal(e.(T)) },
	}
}

// Upcast declares an older version whose shape is From (a frozen copy of the
// type as that version wrote it) and how it becomes the next version, To.
// up returns an error for a stored value that cannot be upcast; the event is
// then refused, never guessed.
func Upcast[From, To any](up func(From) (To, error)) Step {
	required := requiredMembers(reflect.TypeFor[From]())
	fast := newFastPlan(reflect.TypeFor[From]())
	return Step{
		from: reflect.TypeFor[From](), to: reflect.TypeFor[To](),
		decode: func(data []byte) (any, string, error) {
			v, ignored, err := readPayload[From](data, fast, required)
			return v, ignored, err
		},
		encode: func(v any) ([]byte, error) { return json.Marshal(v.(From)) },
		up:     func(v any) (any, error) { return up(v.(From)) },
	}
}

// UpcastDown is Upcast for a version a build still writes after it learned
// to read the next one (Kind.Write below Kind.Current): down writes a value
// of the next version as this one, and refuses one this version cannot
// express.
func UpcastDown[From, To any](up func(From) (To, error), down func(To) (From, error)) Step {
	s := Upcast(up)
	s.down = func(v any) (any, error) { return down(v.(To)) }
	return s
}

// Writes returns k writing version v instead of its current one: for the
// release that ships the reader of a new version before any build writes it
// (v below Current), or of a new type (v = 0: read, never written). Every
// event is written at v (an event v cannot say is refused).
func (k Kind) Writes(v int) Kind {
	k.Write, k.Oldest = v, false
	return k
}

// WritesOldest returns k writing each event at the oldest version, from v up
// to its current one, that can express it (Kind.Oldest): for a type whose
// newer version carries what only some events say, so that the others are
// written exactly as before. Every version from v below the current one
// needs a downcast (UpcastDown) that returns ErrNeedsNewerVersion for what
// it cannot say.
func (k Kind) WritesOldest(v int) Kind {
	k.Write, k.Oldest = v, true
	return k
}

// validate checks that k's versions chain from 1 to its Go type.
func (k Kind) validate() error {
	switch {
	case k.Type == "" || k.GoType == nil || k.decodeCurrent == nil:
		return fmt.Errorf("codec: a kind must be declared with Event[T]")
	case k.GoType.Kind() != reflect.Struct:
		return fmt.Errorf("codec: %s: the Go type %s is not a struct", k.Type, k.GoType)
	case k.Doc == "":
		return fmt.Errorf("codec: %s: say what the event records (Doc)", k.Type)
	case k.Write < 0 || k.Write > k.Current:
		return fmt.Errorf("codec: %s: writes version %d, reads versions 1 to %d", k.Type, k.Write, k.Current)
	case k.Oldest && k.Write < 1:
		return fmt.Errorf("codec: %s: writes the oldest version that can say each event, from version %d: a version starts at 1", k.Type, k.Write)
	}
	for i, s := range k.steps {
		next := k.GoType
		if i+1 < len(k.steps) {
			next = k.steps[i+1].from
		}
		if s.to != next {
			return fmt.Errorf("codec: %s: version %d upcasts to %s, but version %d is %s", k.Type, i+1, s.to, i+2, next)
		}
		if s.from.Kind() != reflect.Struct {
			return fmt.Errorf("codec: %s: version %d's shape %s is not a struct", k.Type, i+1, s.from)
		}
		if s.from == k.GoType {
			return fmt.Errorf("codec: %s: version %d is read as the current type %s: give it a frozen type of its own", k.Type, i+1, s.from)
		}
		if k.Write > 0 && i+1 >= k.Write && s.down == nil {
			return fmt.Errorf("codec: %s: writes version %d, so version %d needs a downcast from version %d (UpcastDown)", k.Type, k.Write, i+1, i+2)
		}
	}
	return nil
}

// decode reads data stored as version v and upcasts it to the current
// shape. It returns the JSON path of a member it ignored, if any.
func (k *Kind) decode(v int, data []byte) (domain.Event, string, error) {
	switch {
	case v == k.Current:
		e, ignored, err := k.decodeCurrent(data)
		if err != nil {
			return nil, "", fmt.Errorf("decode %s v%d: %w: %w", k.Type, v, ErrMalformed, err)
		}
		return e, ignored, nil
	case v > k.Current:
		return nil, "", fmt.Errorf("decode %s: schema version %d was %w (this build reads versions 1 to %d)", k.Type, v, ErrNewerVersion, k.Current)
	case v < 1:
		return nil, "", fmt.Errorf("decode %s: %w: schema version %d is not a version", k.Type, ErrMalformed, v)
	}
	val, ignored, err := k.steps[v-1].decode(data)
	if err != nil {
		return nil, "", fmt.Errorf("decode %s v%d: %w: %w", k.Type, v, ErrMalformed, err)
	}
	for i := v - 1; i < len(k.steps); i++ {
		if val, err = k.steps[i].up(val); err != nil {
			return nil, "", fmt.Errorf("decode %s v%d: %w: upcast to v%d: %w", k.Type, v, ErrMalformed, i+2, err)
		}
	}
	return val.(domain.Event), ignored, nil
}

// encode writes e as version k.Write (with Oldest: as the oldest version
// from k.Write up that can express it) and returns the version written.
func (k *Kind) encode(e domain.Event) ([]byte, int, error) {
	if reflect.TypeOf(e) != k.GoType {
		return nil, 0, fmt.Errorf("encode %s: a %T is not a %s", k.Type, e, k.GoType)
	}
	if k.Write == 0 {
		return nil, 0, fmt.Errorf("encode %s: this build reads the type but does not write it yet (readers first: docs/design.md)", k.Type)
	}
	if k.Write == k.Current {
		data, err := k.encodeCurrent(e)
		return data, k.Current, err
	}
	var v any = e // of version i+2 at each step
	for i := k.Current - 2; i >= k.Write-1; i-- {
		down, err := k.steps[i].down(v)
		if err != nil {
			if k.Oldest && errors.Is(err, ErrNeedsNewerVersion) {
				return k.encodeAt(i+2, e, v)
			}
			return nil, 0, fmt.Errorf("encode %s as v%d: %w", k.Type, i+1, err)
		}
		v = down
	}
	return k.encodeAt(k.Write, e, v)
}

// encodeAt writes v, of version ver (e itself when ver is the current one).
func (k *Kind) encodeAt(ver int, e domain.Event, v any) ([]byte, int, error) {
	if ver == k.Current {
		data, err := k.encodeCurrent(e)
		return data, ver, err
	}
	data, err := k.steps[ver-1].encode(v)
	return data, ver, err
}
