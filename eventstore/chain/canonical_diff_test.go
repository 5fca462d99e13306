package chain

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// diffSeeds are hand-written inputs for the differential tests: the RFC's
// examples, the refusals, and names that meet at every boundary of the
// UTF-16 order.
var diffSeeds = []string{
	`{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}`,
	`{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew", "1": "One", "\ud83d\ude00": "Emoji", "\u0080": "Control", "\u00f6": "o"}`,
	"{\"\ufb33\":1,\"\U0001F600\":2,\"\ue000\":3,\"\uffff\":4,\"\U00010000\":5,\"\U0010FFFF\":6,\"\ud7ff\":7,\"a\":8}",
	" {\n\t\"b\" : [ 1 , { \"y\":true, \"x\" : null } ] ,\r\n \"a\":\"\\u00e9\\/\\t\\u001f\\u007f\\u2028\" } ",
	`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"abcdefgh1":1,"abcdefgh\u0031":2}`, `"\ud83d"`, `"\ude00"`, `"\ud83d\u0041"`,
	"\"\xff\"", "{\"\xff\":1}", "\"a\nb\"", `{} {}`, `[1,]`, `01`, `1.`, `NaN`, `{'a':1}`, `{"a":`, ``, `"\x"`, `{a:1}`,
	`{"a" 1}`, `"\u12"`, `{"":1,"\u0000":2,"\u0000\u0000":3}`, `{"abcdefgh":1,"abcdefg":2,"abcdefgh\u0000":3,"abcdefghi":4}`,
	`[9007199254740993, 0.10000000000000001, 1e400, -1e400, 1e-400, 12345678901234567890, -0, 1E2, 1e+2, 100e-2, -12.000]`,
	`{"attempt": 1, "worker_id": "worker-a", "claimed_at": "2026-11-26T14:02:13Z", "message_id": "MSG-55A", "lease_epoch": 1}`,
	strings.Repeat("[", 300) + strings.Repeat("]", 300), strings.Repeat(`{"a":`, 256) + "1" + strings.Repeat("}", 256),
}

// checkSameAsReference fails unless the package canonicalizes in exactly
// as the reference does, in both variants and after a prefix: the same
// bytes, or the same error.
func checkSameAsReference(t *testing.T, in []byte) {
	t.Helper()
	for _, exact := range []bool{true, false} {
		prefix := []byte(`{"data":`)
		got, gotErr := appendCanonical(append([]byte(nil), prefix...), in, exact)
		want, wantErr := refAppendCanonical(append([]byte(nil), prefix...), in, exact)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || string(got) != string(want) {
			t.Fatalf("exact %v, input %q:\ngot  %q, %v\nwant %q, %v", exact, in, got, gotErr, want, wantErr)
		}
	}
}

func TestCanonicalMatchesReferenceOnSeeds(t *testing.T) {
	for _, s := range diffSeeds {
		checkSameAsReference(t, []byte(s))
	}
}

// Random JSON texts, valid and corrupted, canonicalize as the reference
// canonicalizes them.
func TestCanonicalMatchesReferenceOnRandomJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(8785, 1))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	accepted := 0
	for range n {
		g := &jsonGen{rng: rng}
		g.value(0)
		in := g.out
		checkSameAsReference(t, in)
		if _, err := Canonicalize(in); err == nil {
			accepted++
		}
		// A corrupted copy: one byte replaced, dropped or duplicated.
		if len(in) > 0 {
			bad := append([]byte(nil), in...)
			i := rng.IntN(len(bad))
			switch rng.IntN(3) {
			case 0:
				bad[i] = "\"\\{}[],:0e.-u \x00\x80\xff"[rng.IntN(17)]
			case 1:
				bad = append(bad[:i], bad[i+1:]...)
			default:
				bad = append(bad[:i+1], bad[i:]...)
			}
			checkSameAsReference(t, bad)
		}
	}
	// The corpus must exercise the accepting path, not only refusals.
	t.Logf("%d of %d generated texts accepted", accepted, n)
	if accepted < n/2 {
		t.Fatalf("only %d of %d generated texts were accepted", accepted, n)
	}
}

func FuzzCanonicalMatchesReference(f *testing.F) {
	for _, s := range diffSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkSameAsReference(t, in) })
}

// jsonGen writes random JSON text: nested objects and arrays, names and
// strings across Unicode (escaped or not), numbers in many spellings,
// random insignificant whitespace.
type jsonGen struct {
	rng *rand.Rand
	out []byte
}

func (g *jsonGen) space() {
	if g.rng.IntN(4) == 0 {
		for range g.rng.IntN(3) + 1 {
			g.out = append(g.out, " \t\n\r"[g.rng.IntN(4)])
		}
	}
}

func (g *jsonGen) value(depth int) {
	g.space()
	k := g.rng.IntN(10)
	if depth >= 4 && k < 4 {
		k += 4
	}
	switch k {
	case 0, 1, 2:
		g.object(depth)
	case 3:
		g.array(depth)
	case 4, 5:
		g.string(false)
	case 6, 7:
		g.number()
	default:
		g.out = append(g.out, []string{"true", "false", "null"}[g.rng.IntN(3)]...)
	}
	g.space()
}

func (g *jsonGen) object(depth int) {
	g.out = append(g.out, '{')
	n := g.rng.IntN(10)
	if g.rng.IntN(20) == 0 {
		n = 13 + g.rng.IntN(30) // beyond an insertion sort's reach
	}
	var names []string
	for i := range n {
		if i > 0 {
			g.out = append(g.out, ',')
		}
		g.space()
		if len(names) > 0 && g.rng.IntN(40) == 0 {
			g.quoted(names[g.rng.IntN(len(names))], true) // a duplicate, maybe spelled otherwise
		} else {
			names = append(names, g.string(true))
		}
		g.space()
		g.out = append(g.out, ':')
		g.value(depth + 1)
	}
	g.space()
	g.out = append(g.out, '}')
}

func (g *jsonGen) array(depth int) {
	g.out = append(g.out, '[')
	for i := range g.rng.IntN(6) {
		if i > 0 {
			g.out = append(g.out, ',')
		}
		g.value(depth + 1)
	}
	g.space()
	g.out = append(g.out, ']')
}

// namePrefixes make names that share their first 8 bytes or more.
var namePrefixes = []string{"", "", "", "a", "id", "lease_", "abcdefgh", "abcdefghij", "correlation_", "\u00e9t\u00e9", "\ue000", "\U0001F600"}

// runeRanges are where string content is drawn from: ASCII (controls,
// quote and backslash included), two- and three-byte UTF-8, the private
// use area and specials (U+E000..U+FFFF, which UTF-16 orders after
// surrogate pairs), and characters beyond U+FFFF.
var runeRanges = [][2]rune{{0, 0x7f}, {0x20, 0x7e}, {0x20, 0x7e}, {0x80, 0x7ff}, {0x800, 0xd7ff}, {0xe000, 0xffff}, {0xfff0, 0xffff}, {0x10000, 0x10ffff}, {0x1f600, 0x1f64f}}

// string writes a random string and returns its content.
func (g *jsonGen) string(name bool) string {
	var b strings.Builder
	if name {
		b.WriteString(namePrefixes[g.rng.IntN(len(namePrefixes))])
	}
	for range g.rng.IntN(12) {
		r := runeRanges[g.rng.IntN(len(runeRanges))]
		b.WriteRune(r[0] + g.rng.Int32N(r[1]-r[0]+1))
	}
	s := b.String()
	g.quoted(s, g.rng.IntN(3) == 0)
	return s
}

// quoted writes s as a JSON string, escaping what must be and, when
// escapeMore, other characters too in every spelling JSON allows.
func (g *jsonGen) quoted(s string, escapeMore bool) {
	g.out = append(g.out, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			g.out = append(g.out, '\\', byte(r))
		case r < 0x20 || escapeMore && g.rng.IntN(3) == 0:
			g.escape(r)
		case r == '/' && escapeMore:
			g.out = append(g.out, `\/`...)
		default:
			g.out = utf8.AppendRune(g.out, r)
		}
	}
	g.out = append(g.out, '"')
}

func (g *jsonGen) escape(r rune) {
	short := map[rune]string{'\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '/': `\/`}
	if s, ok := short[r]; ok && g.rng.IntN(2) == 0 {
		g.out = append(g.out, s...)
		return
	}
	hex := "%04x"
	if g.rng.IntN(2) == 0 {
		hex = "%04X"
	}
	if r > 0xffff {
		r -= 0x10000
		g.out = fmt.Appendf(g.out, `\u`+hex+`\u`+hex, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		return
	}
	g.out = fmt.Appendf(g.out, `\u`+hex, r)
}

func (g *jsonGen) number() {
	switch g.rng.IntN(8) {
	case 0:
		g.out = strconv.AppendInt(g.out, g.rng.Int64N(2000)-1000, 10)
	case 1:
		g.out = strconv.AppendInt(g.out, g.rng.Int64()>>g.rng.IntN(63)*int64(1-2*g.rng.IntN(2)), 10)
	case 2:
		g.out = append(g.out, []string{"0", "-0", "0.0", "-0.0e0", "1E2", "1e+2", "100e-2", "1.50", "-12.000", "0.1", "0.10000000000000001",
			"9007199254740992", "9007199254740993", "1e21", "1e400", "-1e400", "1e-400", "5e-324", "1.7976931348623157e308", "2.5e-7", "0.000001",
			"123456789012345", "1234567890123456", "12345678901234567", "000"}[g.rng.IntN(25)]...)
	case 3:
		f := g.rng.NormFloat64() * []float64{1, 1e-8, 1e10, 1e25, 1e300}[g.rng.IntN(5)]
		g.out = strconv.AppendFloat(g.out, f, "eEfg"[g.rng.IntN(4)], -1, 64)
	case 4:
		f := g.rng.Float64()
		g.out = strconv.AppendFloat(g.out, f, 'g', 17, 64)
	default:
		g.out = strconv.AppendInt(g.out, g.rng.Int64N(1e6), 10)
		if g.rng.IntN(2) == 0 {
			g.out = append(g.out, '.')
			g.out = strconv.AppendInt(g.out, g.rng.Int64N(1e4), 10)
		}
		if g.rng.IntN(3) == 0 {
			g.out = append(g.out, "eE"[g.rng.IntN(2)])
			g.out = append(g.out, []string{"", "+", "-"}[g.rng.IntN(3)]...)
			g.out = strconv.AppendInt(g.out, g.rng.Int64N(30), 10)
		}
	}
}
