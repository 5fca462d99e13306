package chain

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrNotCanonicalizable is wrapped by Canonicalize's errors: the input is
// not JSON, or is JSON this package refuses to hash (see Canonicalize).
var ErrNotCanonicalizable = errors.New("not canonicalizable JSON")

// maxDepth bounds the nesting of arrays and objects Canonicalize accepts, so
// hostile input cannot exhaust the stack. Events nest a few levels.
const maxDepth = 256

// Canonicalize returns the RFC 8785 (JSON Canonicalization Scheme) form of
// the JSON text in: no insignificant whitespace, object members sorted by
// the UTF-16 code units of their names, strings escaped as ECMAScript's
// JSON.stringify escapes them, numbers in ECMAScript's shortest round-trip
// form of their IEEE 754 double value.
//
// It refuses, with an error wrapping ErrNotCanonicalizable, what RFC 8785
// refuses (invalid JSON or UTF-8, lone surrogates, duplicate member names,
// numbers beyond the double range) and, being used to hash what a store
// holds, one thing more: a number whose decimal value is not the value of
// its canonical form (9007199254740993, 0.10000000000000001: more digits
// than a double keeps). Two stored numbers that are different values thus
// never share a canonical form, so a change to a number always changes the
// hash. PostgreSQL's jsonb keeps numbers as exact decimals and keeps the
// last of duplicate names: both refusals make what is hashed at append
// the same as what is recomputed from what the store returns.
func Canonicalize(in []byte) ([]byte, error) {
	return appendCanonical(nil, in, true)
}

// CanonicalizeRFC8785 is Canonicalize without the exactness rule for
// numbers: plain RFC 8785, whose numbers are whatever double the text
// rounds to. Exported for tests against the RFC's examples and for tools.
func CanonicalizeRFC8785(in []byte) ([]byte, error) {
	return appendCanonical(nil, in, false)
}

func appendCanonical(dst, in []byte, exact bool) ([]byte, error) {
	p := parserPool.Get().(*parser)
	defer parserPool.Put(p)
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
var parserPool = sync.Pool{New: func() any { return &parser{} }}

// parser reads one JSON text and writes its canonical form. An object's
// member values are canonicalized into the scratch level of its depth, then
// copied out in sorted order, so nothing is allocated per member once the
// parser's buffers have grown.
type parser struct {
	in     []byte
	pos    int
	exact  bool
	levels []*level // by object depth
	str    []byte   // a decoded string
	ascii  bool     // the last string read was ASCII
}

// level is one object depth's scratch: its members' names and values.
type level struct {
	buf     []byte // canonical member values, back to back
	names   []byte // decoded member names that had escapes
	members []member
}

// member is one object member: its name (in the input when raw, else in
// the level's names) and its canonical value in the level's buf.
type member struct {
	key    uint64 // nameKey of the name
	ns, ne int
	vs, ve int
	raw    bool
	ascii  bool // the name is ASCII
}

func (p *parser) level(depth int) *level {
	for len(p.levels) <= depth {
		p.levels = append(p.levels, &level{})
	}
	return p.levels[depth]
}

func (p *parser) fail(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrNotCanonicalizable, p.pos, fmt.Sprintf(format, args...))
}

func (p *parser) describe() string {
	if p.pos >= len(p.in) {
		return "end of input"
	}
	return strconv.QuoteRune(rune(p.in[p.pos]))
}

func (p *parser) skipSpace() {
	for p.pos < len(p.in) && p.in[p.pos] <= ' ' {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(dst []byte, depth int) ([]byte, error) {
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
		return appendString(dst, p.str), nil
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

func (p *parser) literal(word string) bool {
	if len(p.in)-p.pos >= len(word) && string(p.in[p.pos:p.pos+len(word)]) == word {
		p.pos += len(word)
		return true
	}
	return false
}

func (p *parser) object(dst []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, p.fail("nested deeper than %d levels", maxDepth)
	}
	p.pos++ // {
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return append(dst, "{}"...), nil
	}
	lv := p.level(depth)
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
		m := member{raw: raw, ascii: p.ascii, ns: start + 1, ne: p.pos - 1}
		if !raw {
			m.ns = len(lv.names)
			lv.names = append(lv.names, p.str...)
			m.ne = len(lv.names)
		}
		m.key = nameKey(lv.name(p, m))
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
	lv.sort(p)
	dst = append(dst, '{')
	for i, m := range lv.members {
		name := lv.name(p, m)
		if i > 0 {
			if prev := lv.members[i-1]; prev.key == m.key && bytes.Equal(lv.name(p, prev), name) {
				return nil, fmt.Errorf("%w: member name %q appears twice in one object", ErrNotCanonicalizable, name)
			}
			dst = append(dst, ',')
		}
		if m.raw {
			dst = append(dst, '"')
			dst = append(dst, name...)
			dst = append(dst, '"')
		} else {
			dst = appendString(dst, name)
		}
		dst = append(dst, ':')
		dst = append(dst, lv.buf[m.vs:m.ve]...)
	}
	return append(dst, '}'), nil
}

// insertionSortMax is the most members sort orders by insertion: objects
// in events have a handful, for which it is the cheapest sort.
const insertionSortMax = 12

// sort orders the level's members by name, as RFC 8785 requires.
func (lv *level) sort(p *parser) {
	ms := lv.members
	if len(ms) > insertionSortMax {
		slices.SortFunc(ms, func(a, b member) int { return lv.compare(p, &a, &b) })
		return
	}
	for i := 1; i < len(ms); i++ {
		m := ms[i]
		j := i
		for ; j > 0 && lv.compare(p, &m, &ms[j-1]) < 0; j-- {
			ms[j] = ms[j-1]
		}
		ms[j] = m
	}
}

// compare orders two members by the UTF-16 code units of their names.
// Where either name is ASCII, that is the order of their bytes: the byte
// orders of UTF-8 and UTF-16 differ only where a character above U+FFFF
// meets one in U+E000..U+FFFF, and the first byte where the names differ
// is an ASCII byte (or one name ends there). Keys that differ decide it.
func (lv *level) compare(p *parser, a, b *member) int {
	if a.ascii || b.ascii {
		if a.key != b.key {
			return cmp.Compare(a.key, b.key)
		}
		return bytes.Compare(lv.name(p, *a), lv.name(p, *b))
	}
	return compareUTF16(lv.name(p, *a), lv.name(p, *b))
}

// nameKey is a name's first 8 bytes as a big-endian integer, zero-padded:
// keys that differ are in the byte order of their names.
func nameKey(name []byte) uint64 {
	if len(name) >= 8 {
		return binary.BigEndian.Uint64(name)
	}
	var k uint64
	for i, c := range name {
		k |= uint64(c) << (56 - 8*i)
	}
	return k
}

// name is a member's decoded name.
func (lv *level) name(p *parser, m member) []byte {
	if m.raw {
		return p.in[m.ns:m.ne]
	}
	return lv.names[m.ns:m.ne]
}

func (p *parser) array(dst []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, p.fail("nested deeper than %d levels", maxDepth)
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
// content is in p.str. p.ascii reports whether the content is ASCII.
func (p *parser) string() (raw bool, err error) {
	p.pos++ // "
	start := p.pos
	content := p.in[start:]
	var seen byte // every byte of the content, ORed
	n := 0
	for n < len(content) && !stringStop[content[n]] {
		seen |= content[n]
		n++
	}
	p.pos += n
	if n < len(content) && content[n] == '"' {
		p.ascii = seen < utf8.RuneSelf
		if !p.ascii && !utf8.Valid(content[:n]) {
			p.pos = start
			return false, p.fail("string is not valid UTF-8")
		}
		p.pos++
		return true, nil
	}
	p.str = append(p.str[:0], content[:n]...)
	for {
		if p.pos >= len(p.in) {
			return false, p.fail("unterminated string")
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			p.ascii = isASCII(p.str)
			if !p.ascii && !utf8.Valid(p.str) {
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

// stringStop marks the bytes a string's content cannot hold as they are:
// the quote, the backslash and the control characters.
var stringStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// isASCII reports whether s holds only ASCII characters.
func isASCII(s []byte) bool {
	for _, c := range s {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func (p *parser) hex4() (rune, error) {
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
func appendString[S ~string | ~[]byte](dst []byte, s S) []byte {
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
func compareUTF16(a, b []byte) int {
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
			ua, ub := firstUnit(ra), firstUnit(rb)
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

func firstUnit(r rune) rune {
	if r < 0x10000 {
		return r
	}
	hi, _ := utf16.EncodeRune(r)
	return hi
}

// number reads the number at p.pos and writes its canonical form.
func (p *parser) number(dst []byte) ([]byte, error) {
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
	canonical := formatNumber(f)
	if p.exact && !sameDecimal(text, canonical) {
		p.pos = start
		return nil, p.fail("number %s has more precision than a double keeps (it would hash as %s): store it as a string", text, canonical)
	}
	return append(dst, canonical...), nil
}

func (p *parser) digits() bool {
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
func formatNumber(f float64) string {
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
func sameDecimal(a, b string) bool {
	na, ok1 := normalizeDecimal(a)
	nb, ok2 := normalizeDecimal(b)
	return ok1 && ok2 && na == nb
}

// decimal is a number's value as sign, significant digits (no leading or
// trailing zeros) and the power of ten of the last digit; zero has no
// digits and no sign.
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

// normalizeDecimal reads a syntactically valid JSON number. It refuses
// exponents of more than 9 digits (no double needs them).
func normalizeDecimal(s string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	mantissa, exponent, _ := strings.Cut(strings.ToLower(s), "e")
	var exp int64
	if exponent != "" {
		digits := strings.TrimLeft(strings.TrimLeft(exponent, "+-"), "0")
		if len(digits) > 9 {
			return decimal{}, false
		}
		e, err := strconv.ParseInt(strings.TrimPrefix(exponent, "+"), 10, 64)
		if err != nil {
			return decimal{}, false
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
		return decimal{}, true
	}
	d.digits, d.exp = trimmed, exp
	return d, true
}
