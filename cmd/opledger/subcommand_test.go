package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSubcommand: usage with exit 2 for no arguments and 0 for --help, an
// unknown subcommand named with exit 2, a known one with its synopsis and
// the flags after it.
func TestSubcommand(t *testing.T) {
	synopses := map[string]string{"list": "[--json]"}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{{nil, 2, "USAGE"}, {[]string{"--help"}, 0, "USAGE"}, {[]string{"-h"}, 0, "USAGE"}, {[]string{"lst"}, 2, `opledger things: unknown subcommand "lst"`}} {
		var errs bytes.Buffer
		_, _, _, code, ok := subcommand("things", "USAGE", synopses, c.args, &errs)
		require.False(t, ok, "%v", c.args)
		require.Equal(t, c.code, code, "%v", c.args)
		require.Contains(t, errs.String(), c.says, "%v", c.args)
	}
	var errs bytes.Buffer
	sub, rest, synopsis, _, ok := subcommand("things", "USAGE", synopses, []string{"list", "--json"}, &errs)
	require.True(t, ok)
	require.Equal(t, "list", sub)
	require.Equal(t, []string{"--json"}, rest)
	require.Equal(t, "[--json]", synopsis)
	require.Empty(t, errs.String())
}
