package main

import (
	"fmt"
	"io"
)

// subcommand reads the subcommand of command from args (the words after
// "opledger command"): synopses maps each subcommand it has to the
// synopsis of its flags. No arguments print usage and exit 2; -h or
// --help print it and exit 0; a subcommand it does not have is named and
// exits 2. ok is false when the caller must return code.
func subcommand(command, usage string, synopses map[string]string, args []string, stderr io.Writer) (sub string, rest []string, synopsis string, code int, ok bool) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, usage)
		if len(args) == 0 {
			return "", nil, "", 2, false
		}
		return "", nil, "", 0, false
	}
	synopsis, ok = synopses[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "opledger %s: unknown subcommand %q\n\n%s\n", command, args[0], usage)
		return "", nil, "", 2, false
	}
	return args[0], args[1:], synopsis, 0, true
}
