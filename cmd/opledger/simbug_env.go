//go:build simbugs

package main

import (
	"fmt"
	"os"

	"opledger/domain/simbug"
)

// In a binary built with -tags simbugs (never shipped), OPLEDGER_SIMBUG
// plants a known bug in every command, so that scripts/chaos.sh can show its
// checks catch it on real processes:
//
//	CHAOS_BUILD_TAGS=simbugs OPLEDGER_SIMBUG=fresh-key-per-resend scripts/chaos.sh --short
func init() {
	if b := simbug.Bug(os.Getenv("OPLEDGER_SIMBUG")); b != "" && !simbug.Plant(b) {
		fmt.Fprintf(os.Stderr, "opledger: OPLEDGER_SIMBUG=%q is no known bug\n", b)
		os.Exit(2)
	}
}
