package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"opledger/adapters/httpapi"
)

func init() {
	register("tokens", "make bearer tokens and the digest lines of the tokens file", runTokens)
}

const tokensUsage = `usage: opledger tokens <new|hash> ROLE [NAME]

  new ROLE [NAME]    make a random token: the token on stderr (once: it is stored nowhere), its
                     line on stdout (opledger tokens new worker fleet-1 >> tokens)
  hash ROLE [NAME]   read a token from stdin and print its line

A line is 'ROLE sha256:DIGEST [NAME]' (roles: agent, worker, operator, auditor, analyst, subscriber).
Add it to the tokens file and send SIGHUP to serve: it reloads the file.`

// maxTokenInput bounds what 'tokens hash' reads from stdin.
const maxTokenInput = 4096

func runTokens(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runTokensFrom(os.Stdin, args, stdout, stderr)
}

func runTokensFrom(stdin io.Reader, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, tokensUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, rest := args[0], args[1:]
	if len(rest) < 1 || len(rest) > 2 {
		fmt.Fprintln(stderr, tokensUsage)
		return 2
	}
	role, name := httpapi.Role(rest[0]), ""
	if len(rest) == 2 {
		name = rest[1]
	}
	switch sub {
	case "new":
		token, err := httpapi.NewToken()
		if err != nil {
			return fail(stderr, "tokens new", err)
		}
		line, err := httpapi.TokenLine(role, token, name)
		if err != nil {
			return fail(stderr, "tokens new", err)
		}
		// The line alone on stdout, so that '>> tokens' appends just it; the
		// token on stderr, for the person at the terminal.
		fmt.Fprintf(stderr, "# the token, for the caller (shown once, stored nowhere):\n%s\n# its line, on stdout: append it to the tokens file, then SIGHUP serve\n", token)
		fmt.Fprintln(stdout, line)
		return 0
	case "hash":
		token, err := readToken(stdin)
		if err != nil {
			return fail(stderr, "tokens hash", err)
		}
		line, err := httpapi.TokenLine(role, token, name)
		if err != nil {
			return fail(stderr, "tokens hash", err)
		}
		fmt.Fprintln(stdout, line)
		return 0
	}
	fmt.Fprintf(stderr, "opledger tokens: unknown subcommand %q\n\n%s\n", sub, tokensUsage)
	return 2
}

// readToken reads the first line of r, without its line ending: a token on
// the command line would be left in shell history and process lists.
func readToken(r io.Reader) (string, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxTokenInput+1))
	sc.Buffer(make([]byte, 0, 256), maxTokenInput)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return "", fmt.Errorf("read the token from stdin: %w", err)
		}
		return "", errors.New("no token on stdin: echo -n TOKEN | opledger tokens hash ROLE [NAME]")
	}
	token := strings.TrimSuffix(sc.Text(), "\r")
	if token == "" {
		return "", errors.New("the token on stdin is empty")
	}
	return token, nil
}
