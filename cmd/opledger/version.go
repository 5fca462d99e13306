package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"opledger/adapters/httpapi"
)

func init() {
	register("version", "print the build: module version, VCS revision, Go version (also --version)", runVersion)
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	f := newFlags("version", "[--json]", stderr)
	asJSON := f.Local().Bool("json", false, "print the build as one JSON object")
	if code, ok := f.Parse(args); !ok {
		return code
	}
	b := httpapi.Build() // what /metrics reports as opledger_build_info
	if *asJSON {
		line, _ := json.Marshal(map[string]any{"version": b.Version, "revision": b.Revision, "modified": b.Modified,
			"time": b.Time, "go_version": b.GoVersion, "platform": b.Platform})
		fmt.Fprintln(stdout, string(line))
		return 0
	}
	fmt.Fprintf(stdout, "opledger %s\n", b.Version)
	switch {
	case b.Revision == "":
		fmt.Fprintln(stdout, "revision unknown (not recorded: built outside a git checkout, by go run, or with -buildvcs=false)")
	case b.Modified:
		fmt.Fprintf(stdout, "revision %s (dirty: the work tree had changes) %s\n", b.Revision, b.Time)
	default:
		fmt.Fprintf(stdout, "revision %s %s\n", b.Revision, b.Time)
	}
	fmt.Fprintf(stdout, "%s %s\n", b.GoVersion, b.Platform)
	return 0
}
