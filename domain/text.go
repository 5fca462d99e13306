package domain

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Free text (reasons, details, approvers, provider references, worker ids)
// is hostile until checked. CheckText is the one rule every edge and every
// command applies, so that nothing the store could not hold (PostgreSQL's
// jsonb refuses NUL) and nothing a terminal or log viewer would interpret
// (control characters, invalid UTF-8) ever reaches an event.

// CheckText refuses s when it is longer than max bytes, when required and
// empty, when it is not valid UTF-8, or when it holds a control character
// (C0 including NUL, tab and newline; DEL; C1) or a Unicode format character
// that reorders or hides text (bidi overrides, zero-width joiners). The
// refusal is command.invalid and names field.
func CheckText(field, s string, max int, required bool) *Refusal {
	if required && s == "" {
		return refuseField(field, "%s is required", field)
	}
	if len(s) > max {
		return refuseField(field, "%s is %d bytes long, at most %d", field, len(s), max)
	}
	if i, what := firstBadRune(s); i >= 0 {
		return refuseField(field, "%s holds %s at byte %d: free text must be printable UTF-8", field, what, i)
	}
	return nil
}

// firstBadRune returns the byte offset of the first rune CheckText refuses
// and a description of it, or -1.
func firstBadRune(s string) (int, string) {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return i, "invalid UTF-8"
			}
		case r == 0:
			return i, "a NUL character"
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return i, fmt.Sprintf("control character %U", r)
		case unicode.Is(unicode.Cf, r):
			return i, fmt.Sprintf("format character %U", r)
		}
	}
	return -1, ""
}

// EvidenceText makes hostile text safe to keep as evidence: every rune
// CheckText would refuse is replaced by its Go escape (\x00, \u202e, or
// \xff for a byte that is not UTF-8), and the result is cut to at most max
// bytes on a rune boundary. altered reports whether anything was escaped or
// cut, so the evidence can say so. Text CheckText accepts comes back as is.
func EvidenceText(s string, max int) (safe string, altered bool) {
	if i, _ := firstBadRune(s); i < 0 && len(s) <= max {
		return s, false
	}
	var b strings.Builder
	for i, w := 0, 0; i < len(s); i += w {
		r, size := utf8.DecodeRuneInString(s[i:])
		w = size
		var piece string
		switch {
		case r == utf8.RuneError && size <= 1:
			piece = fmt.Sprintf(`\x%02x`, s[i])
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || unicode.Is(unicode.Cf, r):
			piece = strings.Trim(strconv.QuoteRuneToASCII(r), "'")
		default:
			piece = s[i : i+size]
		}
		if b.Len()+len(piece) > max {
			return b.String(), true
		}
		b.WriteString(piece)
	}
	return b.String(), true
}

// refuseField is a command.invalid refusal naming the field at fault.
func refuseField(field, format string, args ...any) *Refusal {
	return &Refusal{Reason: ReasonCommandInvalid, Field: field, Detail: fmt.Sprintf(format, args...)}
}
