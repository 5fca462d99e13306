package chain_test

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/eventstore/chain"
)

// RFC 8785 section 3.2.2: the example object, canonicalized.
func TestCanonicalizeRFC8785Example(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	got, err := chain.CanonicalizeRFC8785([]byte(in))
	require.NoError(t, err)
	require.Equal(t, want, string(got))

	// The exact variant refuses 333333333.33333329 (a double keeps fewer digits).
	_, err = chain.Canonicalize([]byte(in))
	require.ErrorIs(t, err, chain.ErrNotCanonicalizable)
	require.ErrorContains(t, err, "333333333.33333329")
}

// RFC 8785 section 3.2.3: members sorted by UTF-16 code units.
func TestCanonicalizeRFC8785Sorting(t *testing.T) {
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\"," +
		"\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
	for _, canon := range []func([]byte) ([]byte, error){chain.Canonicalize, chain.CanonicalizeRFC8785} {
		got, err := canon([]byte(in))
		require.NoError(t, err)
		require.Equal(t, want, string(got))
	}
}

// RFC 8785 appendix B: IEEE 754 doubles and their canonical text.
func TestCanonicalizeRFC8785Numbers(t *testing.T) {
	cases := []struct{ bits, want string }{
		{"0000000000000000", "0"},
		{"8000000000000000", "0"},
		{"0000000000000001", "5e-324"},
		{"8000000000000001", "-5e-324"},
		{"7fefffffffffffff", "1.7976931348623157e+308"},
		{"ffefffffffffffff", "-1.7976931348623157e+308"},
		{"4340000000000000", "9007199254740992"},
		{"c340000000000000", "-9007199254740992"},
		{"4430000000000000", "295147905179352830000"},
		{"44b52d02c7e14af5", "9.999999999999997e+22"},
		{"44b52d02c7e14af6", "1e+23"},
		{"44b52d02c7e14af7", "1.0000000000000001e+23"},
		{"444b1ae4d6e2ef4e", "999999999999999700000"},
		{"444b1ae4d6e2ef4f", "999999999999999900000"},
		{"444b1ae4d6e2ef50", "1e+21"},
		{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
		{"3eb0c6f7a0b5ed8d", "0.000001"},
		{"41b3de4355555553", "333333333.3333332"},
		{"41b3de4355555554", "333333333.33333325"},
		{"41b3de4355555555", "333333333.3333333"},
		{"41b3de4355555556", "333333333.3333334"},
		{"41b3de4355555557", "333333333.33333343"},
		{"becbf647612f3696", "-0.0000033333333333333333"},
		{"43143ff3c1cb0959", "1424953923781206.2"},
	}
	for _, tc := range cases {
		raw, err := hex.DecodeString(tc.bits)
		require.NoError(t, err)
		f := math.Float64frombits(binary.BigEndian.Uint64(raw))
		// Any text that parses to the double canonicalizes to the RFC's form.
		text := strconv.FormatFloat(f, 'g', 17, 64)
		got, err := chain.CanonicalizeRFC8785([]byte(text))
		require.NoError(t, err, tc.bits)
		require.Equal(t, tc.want, string(got), "%s given as %s", tc.bits, text)
		// The RFC's own text is exact: the strict variant keeps it.
		got, err = chain.Canonicalize([]byte(tc.want))
		require.NoError(t, err, tc.want)
		require.Equal(t, tc.want, string(got))
	}
}

// The exact variant keeps numbers whose decimal value is their canonical
// form's, in any spelling, and refuses the rest.
func TestCanonicalizeExactNumbers(t *testing.T) {
	keep := map[string]string{
		"12000": "12000", "-0": "0", "1.50": "1.5", "1E2": "100", "1e+2": "100", "100e-2": "1",
		"0.1": "0.1", "9007199254740992": "9007199254740992", "123456789012345": "123456789012345",
		"2.5e-7": "2.5e-7", "1e21": "1e+21", "-12.000": "-12",
	}
	for in, want := range keep {
		got, err := chain.Canonicalize([]byte(in))
		require.NoError(t, err, in)
		require.Equal(t, want, string(got), in)
	}
	for _, in := range []string{"9007199254740993", "0.10000000000000001", "1e400", "-1e400", "1e-400", "12345678901234567890"} {
		_, err := chain.Canonicalize([]byte(in))
		require.ErrorIs(t, err, chain.ErrNotCanonicalizable, in)
	}
}

func TestCanonicalizeRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"duplicate name":     `{"a":1,"a":2}`,
		"duplicate escaped":  `{"a":1,"\u0061":2}`,
		"lone high":          `"\ud83d"`,
		"lone low":           `"\ude00"`,
		"high then non-low":  `"\ud83d\u0041"`,
		"invalid UTF-8":      "\"\xff\"",
		"raw control":        "\"a\nb\"",
		"trailing":           `{} {}`,
		"trailing comma":     `[1,]`,
		"leading zero":       `01`,
		"bare dot":           `1.`,
		"NaN":                `NaN`,
		"single quotes":      `{'a':1}`,
		"unterminated":       `{"a":`,
		"empty":              ``,
		"bad escape":         `"\x"`,
		"unquoted name":      `{a:1}`,
		"missing colon":      `{"a" 1}`,
		"nested beyond 256":  string(repeat('[', 300)) + string(repeat(']', 300)),
		"truncated u escape": `"\u12"`,
	} {
		_, err := chain.Canonicalize([]byte(in))
		require.ErrorIs(t, err, chain.ErrNotCanonicalizable, name)
	}
}

func TestCanonicalizeWhitespaceAndEscapes(t *testing.T) {
	in := " {\n\t\"b\" : [ 1 , { \"y\":true, \"x\" : null } ] ,\r\n \"a\":\"\\u00e9\\/\\t\\u001f\\u007f\\u2028\" } "
	got, err := chain.Canonicalize([]byte(in))
	require.NoError(t, err)
	require.Equal(t, "{\"a\":\"é/\\t\\u001f\u007f\u2028\",\"b\":[1,{\"x\":null,\"y\":true}]}", string(got))
}

func repeat(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

// FuzzCanonicalize: the canonical form is a fixed point, valid JSON with
// the same meaning as its input, and whatever encoding/json re-encodes
// from it canonicalizes back to it (as jsonb's normalization must).
func FuzzCanonicalize(f *testing.F) {
	for _, seed := range []string{`{"b":1,"a":[true,null,"x\u00e9"]}`, `[1.5e3,-0,{"\ud83d\ude00":{}}]`, `"\t\"\\"`, `{"z":{"y":{"x":[]}}}`, `12`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := chain.Canonicalize(in)
		if err != nil {
			return
		}
		again, err := chain.Canonicalize(out)
		require.NoError(t, err)
		require.Equal(t, string(out), string(again), "a fixed point")
		var v any
		require.NoError(t, json.Unmarshal(out, &v), "valid JSON: %s", out)
		var w any
		require.NoError(t, json.Unmarshal(in, &w))
		require.Equal(t, w, v, "same meaning")
		re, err := json.Marshal(v)
		require.NoError(t, err)
		if back, err := chain.Canonicalize(re); err == nil {
			require.Equal(t, string(out), string(back), "re-encoded by encoding/json: %s", re)
		}
	})
}
