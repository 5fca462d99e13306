package domain

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckTextRefusesWhatTheStoreOrAReaderCannotHold(t *testing.T) {
	for name, s := range map[string]string{
		"nul":          "a\x00b",
		"newline":      "a\nb",
		"tab":          "a\tb",
		"escape":       "\x1b[31mred",
		"del":          "a\x7fb",
		"c1":           "a\u0085b",
		"bidi":         "abc\u202edcba",
		"zero-width":   "a\u200bb",
		"invalid utf8": "a\xffb",
		"truncated":    "a\xe2\x82",
	} {
		t.Run(name, func(t *testing.T) {
			r := CheckText("detail", s, 100, false)
			require.NotNil(t, r)
			require.Equal(t, ReasonCommandInvalid, r.Reason)
			require.Equal(t, "detail", r.Field)
			require.Contains(t, r.Detail, "detail holds")
		})
	}
}

func TestCheckTextAcceptsPrintableUTF8(t *testing.T) {
	for _, s := range []string{"", "Agent Müller", "退款 approved", "ok: 120.00 EUR (ref re_1)"} {
		require.Nil(t, CheckText("detail", s, 100, false), s)
	}
	require.NotNil(t, CheckText("approver", "", 10, true))
	r := CheckText("reason", strings.Repeat("x", 11), 10, false)
	require.NotNil(t, r)
	require.Equal(t, "reason", r.Field)
}

func TestEvidenceTextEscapesAndCuts(t *testing.T) {
	safe, altered := EvidenceText("plain", 10)
	require.Equal(t, "plain", safe)
	require.False(t, altered)

	safe, altered = EvidenceText("a\x00b\nc\xffd\u202e", 100)
	require.True(t, altered)
	require.Equal(t, `a\x00b\nc\xffd\u202e`, safe)
	require.Nil(t, CheckText("detail", safe, 100, false), "escaped evidence must itself be storable")

	safe, altered = EvidenceText(strings.Repeat("é", 10), 5) // 2 bytes each: cut on a rune boundary
	require.True(t, altered)
	require.Equal(t, "éé", safe)
}
