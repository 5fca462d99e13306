package audit_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"opledger/domain/audit"
)

// unescapedBar is a column separator a table wrote: a "|" not written "\|".
var unescapedBar = regexp.MustCompile(`(^|[^\\])\|`)

// requireInert fails on anything a terminal or viewer would interpret or
// reorder: a control character (but the line breaks), DEL, C1, a format
// character (bidi overrides, zero-width), invalid UTF-8.
func requireInert(t *testing.T, what string, out []byte) {
	t.Helper()
	require.True(t, utf8.Valid(out), "%s: valid UTF-8", what)
	for i, r := range string(out) {
		bad := (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r < 0xa0) || unicode.Is(unicode.Cf, r)
		require.False(t, bad, "%s: %U at byte %d", what, r, i)
	}
}

// TestRenderersEscapeHostileText: the text, table and JSON renderings of a
// timeline whose every free field is hostile hold no control or format
// character, the tables no forged column, and the JSON every value as
// stored.
func TestRenderersEscapeHostileText(t *testing.T) {
	rows := hostileRows()

	var text bytes.Buffer
	require.NoError(t, audit.WriteTimelineText(&text, "OP-1", rows))
	requireInert(t, "text", text.Bytes())
	lines := strings.Split(strings.TrimSpace(text.String()), "\n")[2:] // under the title line and a blank one
	columns := len(unescapedBar.FindAllString(lines[0], -1))
	require.Equal(t, 10, columns, "the header: %q", lines[0])
	for _, l := range lines {
		require.Len(t, unescapedBar.FindAllString(l, -1), columns, "one row, one line, no forged column: %q", l)
	}
	require.Contains(t, text.String(), `\u202eoverride`, "a bidi override shown as its escape")
	require.Contains(t, text.String(), `ESC\x1b[31m`, "a terminal escape shown as its escape")

	var table bytes.Buffer
	require.NoError(t, audit.WriteTimelineTable(&table, "OP-1", rows, 100))
	requireInert(t, "table", table.Bytes())
	for _, l := range strings.Split(table.String(), "\n") {
		if strings.HasPrefix(l, "    ") || !strings.Contains(l, " | ") {
			continue // a detail line under its row, a title or a day
		}
		require.Len(t, unescapedBar.FindAllString(l, -1), 6, "seven columns: %q", l)
	}

	var js bytes.Buffer
	require.NoError(t, audit.WriteTimelineJSON(&js, "OP-1", rows))
	requireInert(t, "json", js.Bytes())
	require.NotContains(t, js.String(), "<img", "markup escaped for a page that embeds it")
	var back audit.TimelineJSON
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	require.Len(t, back.Rows, len(rows))
	for i := range rows {
		require.Equal(t, rows[i].Detail, back.Rows[i].Detail, "every value as stored")
		require.Equal(t, rows[i].Actor, back.Rows[i].Actor)
		require.Equal(t, rows[i].Message, back.Rows[i].Message)
	}
}
