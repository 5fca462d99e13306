package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
)

// `opledger version` and `opledger --version` print the build the metrics
// report: the module version, the revision (or that none was recorded) and
// the Go version.
func TestVersion(t *testing.T) {
	t.Parallel()
	var a, b, errs bytes.Buffer
	require.Equal(t, 0, run(t.Context(), []string{"version"}, &a, &errs), errs.String())
	require.Equal(t, 0, run(t.Context(), []string{"--version"}, &b, &errs), errs.String())
	require.Equal(t, a.String(), b.String())
	lines := strings.Split(strings.TrimSpace(a.String()), "\n")
	require.Len(t, lines, 3)
	build := httpapi.Build()
	require.Equal(t, "opledger "+build.Version, lines[0])
	require.True(t, strings.HasPrefix(lines[1], "revision "), lines[1])
	require.Equal(t, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH, lines[2])

	var js bytes.Buffer
	require.Equal(t, 0, run(t.Context(), []string{"version", "--json"}, &js, &errs))
	var v map[string]any
	require.NoError(t, json.Unmarshal(js.Bytes(), &v))
	require.Equal(t, runtime.Version(), v["go_version"])
	require.Equal(t, build.Version, v["version"])
}
