package audit

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"opledger/domain"
)

// Each renderer escapes what its reader would interpret. What a log holds
// is hostile: a worker id, an order id or a detail may carry a terminal's
// escape sequence, a bidi override that reorders a line, a column
// separator, or a Mermaid directive.

// visible makes s one line of text a terminal shows as it is: line breaks
// and tabs become spaces, and every control or format character (C0, DEL,
// C1, bidi overrides, zero-width characters) and every byte that is not
// UTF-8 becomes its Go escape (\x1b, \u202e, \xff), as the ledger keeps
// hostile evidence (domain.EvidenceText).
func visible(s string) string {
	s = oneLine(s)
	safe, _ := domain.EvidenceText(s, math.MaxInt)
	return safe
}

// cellText is visible(s) for a cell of a table whose columns " | "
// separates: a "|" of the text is written "\|", so no cell reads as two.
func cellText(s string) string {
	return strings.ReplaceAll(visible(s), "|", `\|`)
}

// mermaidText makes s an arrow's or a note's label that Mermaid shows as
// text and never interprets: visible(s), then every ASCII character but
// letters, digits, space and - . / _ : , ( ) + = * ! ? written as Mermaid's
// entity code (#37; for "%", #59; for ";", #35; for "#", #60; for "<" …).
// So no directive (%%{init: …}%%), comment, statement end, markup (<br>,
// HTML), math ($$), Markdown string (`…`) or quoting survives into the
// diagram; Mermaid turns each code back into its character when it draws
// the text. (A label follows the arrow's first ":", so the rest of the line
// is text: its ":" and "-" cannot start anything.)
func mermaidText(s string) string { return mermaidEscape(s, " -./_:,()+=*!?") }

// mermaidLane is mermaidText for a participant's title, where Mermaid also
// reads a "wrap:" prefix and arrows: ":" is always a code there, "-" too
// unless it stands between two letters or digits (worker-a).
func mermaidLane(s string) string {
	r := []rune(visible(s))
	var b strings.Builder
	for i, c := range r {
		if c == '-' && i > 0 && i < len(r)-1 && isAlnum(r[i-1]) && isAlnum(r[i+1]) {
			b.WriteRune(c)
			continue
		}
		b.WriteString(mermaidEscape(string(c), " ./_,()+=*!?"))
	}
	return b.String()
}

func isAlnum(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
}

// mermaidEscape is visible(s) with every ASCII character but letters,
// digits and those in keep as its entity code.
func mermaidEscape(s, keep string) string {
	s = visible(s)
	var b strings.Builder
	for _, r := range s {
		if r >= utf8.RuneSelf || isAlnum(r) || strings.ContainsRune(keep, r) {
			b.WriteRune(r)
			continue
		}
		b.WriteString("#" + strconv.Itoa(int(r)) + ";")
	}
	return b.String()
}

// jsonVisible rewrites, in JSON that encoding/json wrote, every control or
// format character it leaves raw (DEL, C1, bidi overrides, zero-width
// characters; it escapes C0 itself) as a \u escape: the same value, which
// no terminal or viewer showing the file reorders or interprets. JSON's
// own syntax is ASCII, so such a rune can only stand inside a string.
func jsonVisible(data []byte) []byte {
	if !bytes.ContainsFunc(data, needsJSONEscape) {
		return data
	}
	var b bytes.Buffer
	b.Grow(len(data) + 64)
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if needsJSONEscape(r) {
			for _, u := range utf16.Encode([]rune{r}) {
				b.WriteString(`\u`)
				b.WriteString(strconv.FormatUint(uint64(u)|0x10000, 16)[1:])
			}
		} else {
			b.Write(data[i : i+size])
		}
		i += size
	}
	return b.Bytes()
}

func needsJSONEscape(r rune) bool {
	return r == 0x7f || (r >= 0x80 && r < 0xa0) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}
