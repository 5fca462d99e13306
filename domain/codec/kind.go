package codec

import (
	"encoding/json"
	"fmt"
	"reflect"

	"opledger/domain"
)

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
	// new type, readers first); a later release raises it.
	Write int
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
	return Kind{
		Type: zero.EventType(), Doc: doc, Current: len(history) + 1, Write: len(history) + 1,
		GoType: reflect.TypeFor[T](), steps: history,
		decodeCurrent: func(data []byte) (domain.Event, string, error) {
			var v T
			ignored, err := readObject(data, &v, required)
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
	return Step{
		from: reflect.TypeFor[From](), to: reflect.TypeFor[To](),
		decode: func(data []byte) (any, string, error) {
			var v From
			ignored, err := readObject(data, &v, required)
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
// (v below Current), or of a new type (v = 0: read, never written).
func (k Kind) Writes(v int) Kind {
	k.Write = v
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

// encode writes e as version k.Write.
func (k *Kind) encode(e domain.Event) ([]byte, error) {
	if reflect.TypeOf(e) != k.GoType {
		return nil, fmt.Errorf("encode %s: a %T is not a %s", k.Type, e, k.GoType)
	}
	if k.Write == 0 {
		return nil, fmt.Errorf("encode %s: this build reads the type but does not write it yet (readers first: docs/design.md)", k.Type)
	}
	if k.Write == k.Current {
		return k.encodeCurrent(e)
	}
	var v any = e
	for i := k.Current - 2; i >= k.Write-1; i-- {
		var err error
		if v, err = k.steps[i].down(v); err != nil {
			return nil, fmt.Errorf("encode %s as v%d: %w", k.Type, i+1, err)
		}
	}
	return k.steps[k.Write-1].encode(v)
}
