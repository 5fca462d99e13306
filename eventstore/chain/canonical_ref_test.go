// This file is the canonicalization as it stood at commit 7a8280e, before
// it was made faster, kept verbatim (names prefixed ref) as the reference
// the differential tests compare the package's with: the hash chain's
// definition depends on every byte of the canonical form, so a rewrite
// must not change one.

package chain

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// refMaxDepth bounds the nesting of arrays and objects, as maxDepth did.
const refMaxDepth = 256

func refAppendCanonical(dst, in []byte, exact bool) ([]byte, error) {
	p := refParserPool.Get().(*refParser)
	defer refParserPool.Put(p)
	p.in, p.pos, p.exact = in, 0, exact
	defer func() { p.in = nil }()
	p.skipSpace()
	out, err := p.value(dst, 0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.in) {
		return nil, p.fail("unexpected %s after the JSON value", p.describe())
	}
	return out, nil
}

// parserPool recycles parsers and their scratch buffers: canonicalizing is
// on every append's and every audit pass's path.
var refParserPool = sync.Pool{New: func() any { return &refParser{} }}

// parser reads one JSON text and writes its canonical form. An object's
// member values are canonicalized into the scratch level of its depth, then
// copied out in sorted order, so nothing is allocated per member once the
// parser's buffers have grown.
type refParser struct {
	in     []byte
	pos    int
	exact  bool
	levels []*refLevel // by object depth
	str    []byte      // a decoded string
}

// level is one object depth's scratch: its members' names and values.
type refLevel struct {
	buf     []byte // canonical refMember values, back to back
	names   []byte // decoded refMember names that had escapes
	members []refMember
}

// member is one object member: its name (in the input when raw, else in
// the level's names) and its canonical value in the level's buf.
type refMember struct {
	raw    bool
	ns, ne int
	vs, ve int
}

func (p *refParser) refLevel(depth int) *refLevel {
	for len(p.levels) <= depth {
		p.levels = append(p.levels, &refLevel{})
	}
	return p.levels[depth]
}

func (p *refParser) fail(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrNotCanonicalizable, p.pos, fmt.Sprintf(format, args...))
}

func (p *refParser) describe() string {
	if p.pos >= len(p.in) {
		return "end of input"
	}
	return strconv.QuoteRune(rune(p.in[p.pos]))
}

func (p *refParser) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *refParser) value(dst []byte, depth int) ([]byte, error) {
	if p.pos >= len(p.in) {
		return nil, p.fail("expected a value, found the end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(dst, depth+1)
	case c == '[':
		return p.array(dst, depth+1)
	case c == '"':
		start := p.pos
		raw, err := p.string()
		if err != nil {
			return nil, err
		}
		if raw {
			// No escapes: the input's bytes are already canonical (a raw
			// string holds no quote, backslash or control character).
			return append(dst, p.in[start:p.pos]...), nil
		}
		return refAppendString(dst, p.str), nil
	case c == '-' || c >= '0' && c <= '9':
		return p.number(dst)
	case p.literal("true"):
		return append(dst, "true"...), nil
	case p.literal("false"):
		return append(dst, "false"...), nil
	case p.literal("null"):
		return append(dst, "null"...), nil
	}
	return nil, p.fail("expected a value, found %s", p.describe())
}

func (p *refParser) literal(word string) bool {
	if len(p.in)-p.pos >= len(word) && string(p.in[p.pos:p.pos+len(word)]) == word {
		p.pos += len(word)
		return true
	}
	return false
}

func (p *refParser) object(dst []byte, depth int) ([]byte, error) {
	if depth > refMaxDepth {
		return nil, p.fail("nested deeper than %d levels", refMaxDepth)
	}
	p.pos++ // {
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return append(dst, "{}"...), nil
	}
	lv := p.refLevel(depth)
	lv.buf, lv.names, lv.members = lv.buf[:0], lv.names[:0], lv.members[:0]
	for {
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return nil, p.fail("expected a member name, found %s", p.describe())
		}
		start := p.pos
		raw, err := p.string()
		if err != nil {
			return nil, err
		}
		m := refMember{raw: raw, ns: start + 1, ne: p.pos - 1}
		if !raw {
			m.ns = len(lv.names)
			lv.names = append(lv.names, p.str...)
			m.ne = len(lv.names)
		}
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return nil, p.fail("expected ':' after member name %q, found %s", lv.name(p, m), p.describe())
		}
		p.pos++
		p.skipSpace()
		m.vs = len(lv.buf)
		if lv.buf, err = p.value(lv.buf, depth); err != nil {
			return nil, err
		}
		m.ve = len(lv.buf)
		lv.members = append(lv.members, m)
		p.skipSpace()
		if p.pos >= len(p.in) {
			return nil, p.fail("unterminated object")
		}
		if p.in[p.pos] == '}' {
			p.pos++
			break
		}
		if p.in[p.pos] != ',' {
			return nil, p.fail("expected ',' or '}' in an object, found %s", p.describe())
		}
		p.pos++
	}
	slices.SortFunc(lv.members, func(a, b refMember) int { return refCompareUTF16(lv.name(p, a), lv.name(p, b)) })
	dst = append(dst, '{')
	for i, m := range lv.members {
		name := lv.name(p, m)
		if i > 0 {
			if bytes.Equal(lv.name(p, lv.members[i-1]), name) {
				return nil, fmt.Errorf("%w: member name %q appears twice in one object", ErrNotCanonicalizable, name)
			}
			dst = append(dst, ',')
		}
		if m.raw {
			dst = append(dst, '"')
			dst = append(dst, name...)
			dst = append(dst, '"')
		} else {
			dst = refAppendString(dst, name)
		}
		dst = append(dst, ':')
		dst = append(dst, lv.buf[m.vs:m.ve]...)
	}
	return append(dst, '}'), nil
}

// name is a member's decoded name.
func (lv *refLevel) name(p *refParser, m refMember) []byte {
	if m.raw {
		return p.in[m.ns:m.ne]
	}
	return lv.names[m.ns:m.ne]
}

func (p *refParser) array(dst []byte, depth int) ([]byte, error) {
	if depth > refMaxDepth {
		return nil, p.fail("nested deeper than %d levels", refMaxDepth)
	}
	p.pos++ // [
	dst = append(dst, '[')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return append(dst, ']'), nil
	}
	for first := true; ; first = false {
		if !first {
			dst = append(dst, ',')
		}
		p.skipSpace()
		var err error
		if dst, err = p.value(dst, depth); err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.in) {
			return nil, p.fail("unterminated array")
		}
		if p.in[p.pos] == ']' {
			p.pos++
			return append(dst, ']'), nil
		}
		if p.in[p.pos] != ',' {
			return nil, p.fail("expected ',' or ']' in an array, found %s", p.describe())
		}
		p.pos++
	}
}

// string reads the JSON string at p.pos (its opening quote) and leaves
// p.pos after its closing quote. raw reports a string without escapes,
// whose content is the input between the quotes; otherwise the decoded
// content is in p.str.
func (p *refParser) string() (raw bool, err error) {
	p.pos++ // "
	start := p.pos
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '"' {
			if !utf8.Valid(p.in[start:p.pos]) {
				p.pos = start
				return false, p.fail("string is not valid UTF-8")
			}
			p.pos++
			return true, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.pos++
	}
	p.str = append(p.str[:0], p.in[start:p.pos]...)
	for {
		if p.pos >= len(p.in) {
			return false, p.fail("unterminated string")
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			if !utf8.Valid(p.str) {
				return false, p.fail("string is not valid UTF-8")
			}
			return false, nil
		case c < 0x20:
			return false, p.fail("control character %#02x inside a string", c)
		case c != '\\':
			p.str = append(p.str, c)
			p.pos++
			continue
		}
		p.pos++ // backslash
		if p.pos >= len(p.in) {
			return false, p.fail("unterminated escape")
		}
		e := p.in[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			p.str = append(p.str, e)
		case 'b':
			p.str = append(p.str, '\b')
		case 'f':
			p.str = append(p.str, '\f')
		case 'n':
			p.str = append(p.str, '\n')
		case 'r':
			p.str = append(p.str, '\r')
		case 't':
			p.str = append(p.str, '\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return false, err
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 || len(p.in)-p.pos < 2 || p.in[p.pos] != '\\' || p.in[p.pos+1] != 'u' {
					return false, p.fail("lone UTF-16 surrogate \\u%04x", r)
				}
				p.pos += 2
				r2, err := p.hex4()
				if err != nil {
					return false, err
				}
				if r2 < 0xdc00 || r2 > 0xdfff {
					return false, p.fail("lone UTF-16 surrogate \\u%04x", r)
				}
				r = utf16.DecodeRune(r, r2)
			}
			p.str = utf8.AppendRune(p.str, r)
		default:
			p.pos--
			return false, p.fail("invalid escape \\%c", e)
		}
	}
}

func (p *refParser) hex4() (rune, error) {
	if p.pos+4 > len(p.in) {
		return 0, p.fail("truncated \\u escape")
	}
	var r rune
	for _, c := range p.in[p.pos : p.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, p.fail("invalid \\u escape")
		}
	}
	p.pos += 4
	return r, nil
}

// appendString writes s as ECMAScript's JSON.stringify does: quotes,
// backslashes and the control characters below U+0020 escaped (the short
// forms where they exist, else \u00xx in lowercase hex), all else as is.
func refAppendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785
// sorts member names. It differs from byte order only where a character
// above U+FFFF (a surrogate pair) meets one in U+E000..U+FFFF.
func refCompareUTF16(a, b []byte) int {
	for len(a) > 0 && len(b) > 0 {
		if a[0] < utf8.RuneSelf && b[0] < utf8.RuneSelf {
			if a[0] != b[0] {
				return int(a[0]) - int(b[0])
			}
			a, b = a[1:], b[1:]
			continue
		}
		ra, na := utf8.DecodeRune(a)
		rb, nb := utf8.DecodeRune(b)
		if ra != rb {
			ua, ub := refFirstUnit(ra), refFirstUnit(rb)
			if ua != ub {
				return int(ua) - int(ub)
			}
			// Both are surrogate pairs with the same high surrogate.
			_, la := utf16.EncodeRune(ra)
			_, lb := utf16.EncodeRune(rb)
			return int(la) - int(lb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

func refFirstUnit(r rune) rune {
	if r < 0x10000 {
		return r
	}
	hi, _ := utf16.EncodeRune(r)
	return hi
}

// number reads the number at p.pos and writes its canonical form.
func (p *refParser) number(dst []byte) ([]byte, error) {
	start := p.pos
	if p.in[p.pos] == '-' {
		p.pos++
	}
	integerOnly := true
	switch {
	case p.pos < len(p.in) && p.in[p.pos] == '0':
		p.pos++
	case p.pos < len(p.in) && p.in[p.pos] >= '1' && p.in[p.pos] <= '9':
		for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			p.pos++
		}
	default:
		return nil, p.fail("invalid number")
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		integerOnly = false
		p.pos++
		if !p.digits() {
			return nil, p.fail("invalid number: no digit after the decimal point")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		integerOnly = false
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if !p.digits() {
			return nil, p.fail("invalid number: no digit in the exponent")
		}
	}
	text := string(p.in[start:p.pos])
	// Fast path: integers of up to 15 digits are doubles exactly and are
	// their own canonical form (but "-0" is "0").
	if integerOnly && len(strings.TrimPrefix(text, "-")) <= 15 {
		if text == "-0" {
			return append(dst, '0'), nil
		}
		return append(dst, text...), nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) {
		p.pos = start
		return nil, p.fail("number %s is outside the range of an IEEE 754 double", text)
	}
	canonical := refFormatNumber(f)
	if p.exact && !refSameDecimal(text, canonical) {
		p.pos = start
		return nil, p.fail("number %s has more precision than a double keeps (it would hash as %s): store it as a string", text, canonical)
	}
	return append(dst, canonical...), nil
}

func (p *refParser) digits() bool {
	start := p.pos
	for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
		p.pos++
	}
	return p.pos > start
}

// formatNumber is ECMAScript's Number::toString for a finite double, as
// RFC 8785 section 3.2.2.3 requires: the shortest digits that round-trip,
// in fixed notation for 1e-6 <= |f| < 1e21 and exponential otherwise
// (with no zero-padded exponent); negative zero is "0".
func refFormatNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	abs := math.Abs(f)
	format := byte('e')
	if abs >= 1e-6 && abs < 1e21 {
		format = 'f'
	}
	s := strconv.FormatFloat(f, format, -1, 64)
	if i := strings.IndexByte(s, 'e'); i > 0 && i+2 < len(s) && s[i+2] == '0' {
		s = s[:i+2] + s[i+3:] // Go writes "1e+09"; ECMAScript "1e+9"
	}
	return s
}

// sameDecimal reports whether two JSON number texts have the same decimal
// value, exactly.
func refSameDecimal(a, b string) bool {
	na, ok1 := refNormalizeDecimal(a)
	nb, ok2 := refNormalizeDecimal(b)
	return ok1 && ok2 && na == nb
}

// decimal is a number's value as sign, significant digits (no leading or
// trailing zeros) and the power of ten of the last digit; zero has no
// digits and no sign.
type refDecimal struct {
	neg    bool
	digits string
	exp    int64
}

// normalizeDecimal reads a syntactically valid JSON number. It refuses
// exponents of more than 9 digits (no double needs them).
func refNormalizeDecimal(s string) (refDecimal, bool) {
	var d refDecimal
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	mantissa, exponent, _ := strings.Cut(strings.ToLower(s), "e")
	var exp int64
	if exponent != "" {
		digits := strings.TrimLeft(strings.TrimLeft(exponent, "+-"), "0")
		if len(digits) > 9 {
			return refDecimal{}, false
		}
		e, err := strconv.ParseInt(strings.TrimPrefix(exponent, "+"), 10, 64)
		if err != nil {
			return refDecimal{}, false
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mantissa, ".")
	digits := intPart + frac
	exp -= int64(len(frac))
	digits = strings.TrimLeft(digits, "0")
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	if trimmed == "" {
		return refDecimal{}, true
	}
	d.digits, d.exp = trimmed, exp
	return d, true
}
