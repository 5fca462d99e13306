package codec

import (
	"bytes"
	"encoding"
	"reflect"
	"strings"
	"time"

	json "github.com/go-json-experiment/json"
)

// fastPlan reads a payload of one struct type (an event's current shape, or
// an older version's frozen one) without the JSON library's reflection over
// each value, when it is in the shape writers and PostgreSQL's jsonb give
// it: one object of the type's members, each at most once; strings without
// escapes; integers of at most nine digits; true and false; times in UTC
// (utcTime); nested objects of the same kind; arrays of plain strings. It
// reports false for anything else (an unknown or repeated member, null, an
// escape, another number or time form, trailing bytes), and the caller
// reads the payload with readObject, which judges it. Where it reports
// true, the value is the one readObject gives
// (FuzzFastPayloadAgreesWithReadObject checks it for every registered
// shape). newFastPlan returns nil for a type with a field it cannot read:
// its payloads always go to readObject.
type fastPlan struct {
	fields []fastField
}

// fastField is one member of a fastPlan: its JSON name, the struct field it
// fills and how its value is read.
type fastField struct {
	name  string
	index int
	kind  fastKind
	sub   *fastPlan // fastStruct and fastStructPtr
}

type fastKind uint8

const (
	fastString fastKind = iota + 1
	fastInt
	fastBool
	fastTime
	fastStruct
	fastStructPtr
	fastStrings
)

var litTrue, litFalse = []byte("true"), []byte("false")

// maxFastFields bounds a plan's members (the bit set of those seen).
const maxFastFields = 64

var (
	timeType          = reflect.TypeFor[time.Time]()
	textUnmarshaler   = reflect.TypeFor[encoding.TextUnmarshaler]()
	jsonUnmarshaler   = reflect.TypeFor[json.Unmarshaler]()
	jsonUnmarshalFrom = reflect.TypeFor[json.UnmarshalerFrom]()
)

// newFastPlan returns the plan for struct type t, or nil when a field is
// of a type it does not read, a field has no json tag or an option other
// than omitempty and omitzero, a field is embedded, or a type decodes
// itself (an unmarshaler: its own rules would be skipped).
func newFastPlan(t reflect.Type) *fastPlan {
	return buildFastPlan(t, map[reflect.Type]bool{})
}

func buildFastPlan(t reflect.Type, visiting map[reflect.Type]bool) *fastPlan {
	if t.Kind() != reflect.Struct || decodesItself(t) || visiting[t] {
		return nil
	}
	visiting[t] = true
	defer delete(visiting, t)
	p := &fastPlan{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return nil // the decoder promotes an embedded struct's fields
		}
		if !f.IsExported() {
			continue
		}
		tag, ok := f.Tag.Lookup("json")
		if !ok {
			return nil
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		if name == "" || strings.ContainsAny(name, `"\`) {
			return nil
		}
		for o := range strings.SplitSeq(opts, ",") {
			if o != "" && o != "omitempty" && o != "omitzero" {
				return nil
			}
		}
		ff := fastField{name: name, index: i}
		ft := f.Type
		switch {
		case ft == timeType:
			ff.kind = fastTime
		case decodesItself(ft):
			return nil
		case ft.Kind() == reflect.String:
			ff.kind = fastString
		case ft.Kind() == reflect.Int || ft.Kind() == reflect.Int64:
			ff.kind = fastInt
		case ft.Kind() == reflect.Bool:
			ff.kind = fastBool
		case ft.Kind() == reflect.Struct:
			ff.kind, ff.sub = fastStruct, buildFastPlan(ft, visiting)
		case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
			ff.kind, ff.sub = fastStructPtr, buildFastPlan(ft.Elem(), visiting)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.String && !decodesItself(ft.Elem()):
			ff.kind = fastStrings
		default:
			return nil
		}
		if (ff.kind == fastStruct || ff.kind == fastStructPtr) && ff.sub == nil {
			return nil
		}
		p.fields = append(p.fields, ff)
	}
	if len(p.fields) > maxFastFields {
		return nil
	}
	return p
}

// decodesItself reports whether t, or a pointer to it, has its own JSON or
// text decoding.
func decodesItself(t reflect.Type) bool {
	for _, u := range []reflect.Type{t, reflect.PointerTo(t)} {
		if u.Implements(textUnmarshaler) || u.Implements(jsonUnmarshaler) || u.Implements(jsonUnmarshalFrom) {
			return true
		}
	}
	return false
}

// read fills v (a settable zero struct of the plan's type) from data, which
// must be one object and nothing after it but whitespace. On false, v may
// be partly filled: the caller discards it.
func (p *fastPlan) read(data []byte, v reflect.Value) bool {
	q, ok := p.object(data, skipSpace(data, 0), v)
	return ok && skipSpace(data, q) == len(data)
}

// object reads the object at p into v and returns the index after it.
func (p *fastPlan) object(data []byte, at int, v reflect.Value) (int, bool) {
	if at >= len(data) || data[at] != '{' {
		return 0, false
	}
	at = skipSpace(data, at+1)
	if at < len(data) && data[at] == '}' {
		return at + 1, true
	}
	var seen uint64
	for {
		name, q, ok := plainString(data, at)
		if !ok {
			return 0, false
		}
		i := p.field(name)
		if i < 0 || seen&(1<<i) != 0 {
			return 0, false
		}
		seen |= 1 << i
		at = skipSpace(data, q)
		if at >= len(data) || data[at] != ':' {
			return 0, false
		}
		if at, ok = p.fields[i].value(data, skipSpace(data, at+1), v.Field(p.fields[i].index)); !ok {
			return 0, false
		}
		var more bool
		if at, more, ok = afterValue(data, at, '}'); !ok || !more {
			return at, ok
		}
	}
}

// field returns the index in p.fields of the member named name, or -1.
func (p *fastPlan) field(name []byte) int {
	for i := range p.fields {
		if p.fields[i].name == string(name) {
			return i
		}
	}
	return -1
}

// value reads the member's value at `at` into fv and returns the index
// after it.
func (f *fastField) value(data []byte, at int, fv reflect.Value) (int, bool) {
	switch f.kind {
	case fastString:
		s, q, ok := plainString(data, at)
		if ok {
			fv.SetString(string(s))
		}
		return q, ok
	case fastInt:
		n, q, ok := plainInt(data, at)
		if ok {
			fv.SetInt(int64(n))
		}
		return q, ok
	case fastBool:
		switch {
		case bytes.HasPrefix(data[at:], litTrue):
			fv.SetBool(true)
			return at + 4, true
		case bytes.HasPrefix(data[at:], litFalse):
			return at + 5, true
		}
		return 0, false
	case fastTime:
		s, q, ok := plainString(data, at)
		if !ok {
			return 0, false
		}
		t, ok := utcTime(s)
		if ok {
			*fv.Addr().Interface().(*time.Time) = t
		}
		return q, ok
	case fastStruct:
		return f.sub.object(data, at, fv)
	case fastStructPtr:
		nv := reflect.New(fv.Type().Elem())
		q, ok := f.sub.object(data, at, nv.Elem())
		if ok {
			fv.Set(nv)
		}
		return q, ok
	case fastStrings:
		return readStrings(data, at, fv)
	}
	return 0, false
}

// readStrings reads an array of plain strings at `at` into fv (a slice of a
// string kind): an empty array is an empty slice, as the JSON decoder
// gives.
func readStrings(data []byte, at int, fv reflect.Value) (int, bool) {
	if at >= len(data) || data[at] != '[' {
		return 0, false
	}
	out := reflect.MakeSlice(fv.Type(), 0, 4)
	at = skipSpace(data, at+1)
	if at < len(data) && data[at] == ']' {
		fv.Set(out)
		return at + 1, true
	}
	elem := reflect.New(fv.Type().Elem()).Elem()
	for {
		s, q, ok := plainString(data, at)
		if !ok {
			return 0, false
		}
		elem.SetString(string(s))
		out = reflect.Append(out, elem)
		var more bool
		if at, more, ok = afterValue(data, q, ']'); !ok || !more {
			if ok {
				fv.Set(out)
			}
			return at, ok
		}
	}
}

// readPayload reads data as a T: through fast when it has a plan and the
// payload is in its shape, otherwise with readObject.
func readPayload[T any](data []byte, fast *fastPlan, required []string) (T, string, error) {
	var v T
	if fast != nil && fast.read(data, reflect.ValueOf(&v).Elem()) {
		return v, "", nil
	}
	var strict T
	ignored, err := readObject(data, &strict, required)
	return strict, ignored, err
}
