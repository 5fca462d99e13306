package codec

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// payloadShape is one shape the registry reads: a kind's current type or
// one of its older versions'.
type payloadShape struct {
	name     string // "Claimed v1"
	typ      reflect.Type
	fast     *fastPlan
	required []string
}

func payloadShapes() []payloadShape {
	var out []payloadShape
	for _, k := range events.order {
		for v := 1; v <= k.Current; v++ {
			t := k.GoType
			if v < k.Current {
				t = k.steps[v-1].from
			}
			out = append(out, payloadShape{name: k.Type + " v" + strconv.Itoa(v), typ: t, fast: newFastPlan(t), required: requiredMembers(t)})
		}
	}
	return out
}

// agree reads data as shape s with the fast path and, when it reads,
// requires readObject to read the same value ignoring nothing. It reports
// whether the fast path read.
func (s payloadShape) agree(t *testing.T, data []byte) bool {
	t.Helper()
	if s.fast == nil {
		return false
	}
	got := reflect.New(s.typ)
	if !s.fast.read(data, got.Elem()) {
		return false
	}
	want := reflect.New(s.typ)
	ignored, err := readObject(data, want.Interface(), s.required)
	require.NoError(t, err, "%s: the fast path read %q", s.name, data)
	require.Empty(t, ignored, "%s: %q", s.name, data)
	require.Equal(t, want.Interface(), got.Interface(), "%s: %q", s.name, data)
	return true
}

// fixturePayloads returns codectest's stored fixtures' data by shape name,
// compact and as jsonb's text spaces it.
func fixturePayloads(t testing.TB) map[string][][]byte {
	paths, err := filepath.Glob("codectest/testdata/events/*/v*.json")
	require.NoError(t, err)
	out := map[string][][]byte{}
	for _, p := range paths {
		if strings.HasSuffix(p, ".reads-as.json") {
			continue
		}
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		var f struct {
			Type          string          `json:"type"`
			SchemaVersion int             `json:"schema_version"`
			Data          json.RawMessage `json:"data"`
		}
		require.NoError(t, json.Unmarshal(raw, &f), p)
		var compact bytes.Buffer
		require.NoError(t, json.Compact(&compact, f.Data), p)
		spaced := strings.NewReplacer(`":`, `": `, `,"`, `, "`).Replace(compact.String())
		name := f.Type + " v" + strconv.Itoa(f.SchemaVersion)
		out[name] = append(out[name], compact.Bytes(), []byte(spaced), f.Data)
	}
	require.NotEmpty(t, out)
	return out
}

// TestFastPayloadReadsEveryFixture: every shape but those with arrays of
// objects has a plan, and the plan reads that shape's stored fixtures (as
// written, and as jsonb spaces them) to what readObject reads, but for
// those holding an escape.
func TestFastPayloadReadsEveryFixture(t *testing.T) {
	fixtures := fixturePayloads(t)
	var noPlan []string
	for _, s := range payloadShapes() {
		if s.fast == nil {
			noPlan = append(noPlan, s.name)
			continue
		}
		require.NotEmpty(t, fixtures[s.name], "%s has no fixture", s.name)
		for _, data := range fixtures[s.name] {
			escaped := bytes.ContainsRune(data, '\\') // readObject's
			require.Equal(t, !escaped, s.agree(t, data), "%s: %s", s.name, data)
		}
	}
	require.ElementsMatch(t, []string{"RefusalsSummarized v1", "LogRegressed v1"}, noPlan)
}

// TestFastPayloadLeavesTheRestToReadObject: what the fast path does not
// read, readObject reads and judges as before.
func TestFastPayloadLeavesTheRestToReadObject(t *testing.T) {
	shape := func(name string) payloadShape {
		for _, s := range payloadShapes() {
			if s.name == name {
				return s
			}
		}
		t.Fatalf("no shape %s", name)
		return payloadShape{}
	}
	decided, escalated := shape("Decided v1"), shape("Escalated v1")
	for _, c := range []struct {
		s    payloadShape
		data string
	}{
		{escalated, `{"execution_id":"E","reason":"r","extra":1,"escalated_at":"2026-12-02T16:00:00Z"}`},
		{escalated, `{"execution_id":"E","execution_id":"F","reason":"r","escalated_at":"2026-12-02T16:00:00Z"}`},
		{escalated, `{"execution_id":null,"reason":"r","escalated_at":"2026-12-02T16:00:00Z"}`},
		{escalated, `{"execution_id":"E\u0031","reason":"r","escalated_at":"2026-12-02T16:00:00Z"}`},
		{escalated, `{"execution_id":"E","reason":"r","escalated_at":"2026-12-02T17:00:00+01:00"}`},
		{escalated, `{"Execution_id":"E","reason":"r","escalated_at":"2026-12-02T16:00:00Z"}`},
		{escalated, `{"execution_id":"E","reason":"r","escalated_at":"2026-12-02T16:00:00Z"} {}`},
		{decided, `{"decision_id":"D","verdict":"approve","facts":{"order_refundable":true,"chargeback_open":false,"refunded_minor":0,"x":1},"approver":"","approval_limit_minor":0,"policy_version":"p","attempt":1,"key_policy":"per-attempt","idempotency_key":"k","decided_at":"2026-12-02T16:00:00Z"}`},
		{decided, `{"decision_id":"D","reasons":["a",1],"verdict":"approve","facts":{},"approver":"","approval_limit_minor":0,"policy_version":"p","attempt":1.0,"key_policy":"per-attempt","idempotency_key":"k","decided_at":"2026-12-02T16:00:00Z"}`},
	} {
		require.False(t, c.s.agree(t, []byte(c.data)), "%s: %s", c.s.name, c.data)
	}
	// Read: an empty array is an empty slice, absent is nil; nested objects.
	for _, data := range []string{
		`{"decision_id":"D","reasons":[],"verdict":"deny","facts":{"order_refundable":true,"chargeback_open":true,"refunded_minor":12,"order_total_minor":99},"approver":"a","approval_limit_minor":5,"policy_version":"p","attempt":2,"key_policy":"per-attempt","idempotency_key":"k","decided_at":"2026-12-02T16:00:00.5Z"}`,
		`{"decision_id":"D","reasons":["over limit", "chargeback"],"facts":{}}`,
		`{}`,
	} {
		require.True(t, decided.agree(t, []byte(data)), data)
	}
}

// TestFastPlanRefusesTypesItCannotRead: a field that decodes itself, an
// embedded struct, a map or an unknown tag option leaves the type to
// readObject.
func TestFastPlanRefusesTypesItCannotRead(t *testing.T) {
	type inner struct {
		A string `json:"a"`
	}
	require.Nil(t, newFastPlan(reflect.TypeFor[struct {
		D selfDecoding `json:"d"`
	}]()))
	require.Nil(t, newFastPlan(reflect.TypeFor[struct {
		inner
	}]()))
	require.Nil(t, newFastPlan(reflect.TypeFor[struct {
		M map[string]string `json:"m"`
	}]()))
	require.Nil(t, newFastPlan(reflect.TypeFor[struct {
		N int64 `json:"n,string"`
	}]()))
	require.Nil(t, newFastPlan(reflect.TypeFor[struct {
		N string
	}]()))
	require.NotNil(t, newFastPlan(reflect.TypeFor[struct {
		I  inner     `json:"i"`
		P  *inner    `json:"p,omitempty"`
		T  time.Time `json:"t"`
		SS []string  `json:"ss,omitzero"`
	}]()))
}

type selfDecoding string

func (s *selfDecoding) UnmarshalText(b []byte) error { *s = selfDecoding(bytes.ToUpper(b)); return nil }

// FuzzFastPayloadAgreesWithReadObject: whatever the fast path reads, for
// any registered shape, readObject reads too, to the same value, ignoring
// nothing.
func FuzzFastPayloadAgreesWithReadObject(f *testing.F) {
	shapes := payloadShapes()
	index := map[string]int{}
	for i, s := range shapes {
		index[s.name] = i
	}
	for name, payloads := range fixturePayloads(f) {
		for _, data := range payloads {
			f.Add(uint8(index[name]), data)
		}
	}
	for _, s := range []string{`{}`, `{"facts":null}`, `{"reasons":[]}`, `{"reasons":["a","b"]}`, `{"export_facts":{}}`, `{"attempt":-0}`, `{"attempt":01}`, `{"execution_attempted":true}`, `{"execution_attempted":truex}`} {
		f.Add(uint8(index["Decided v2"]), []byte(s))
		f.Add(uint8(index["PresentationRejected v1"]), []byte(s))
	}
	f.Fuzz(func(t *testing.T, shape uint8, data []byte) {
		shapes[int(shape)%len(shapes)].agree(t, data)
	})
}
