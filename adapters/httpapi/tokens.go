package httpapi

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Role is what a bearer token may do.
type Role string

// The roles. See docs/api.md for which endpoint each may call.
const (
	// RoleAgent requests operations and asks for decisions.
	RoleAgent Role = "agent"
	// RoleWorker claims, renews leases and records outcomes.
	RoleWorker Role = "worker"
	// RoleOperator revokes capabilities, resolves escalations and moves
	// the test clock.
	RoleOperator Role = "operator"
	// RoleAuditor only reads.
	RoleAuditor Role = "auditor"
)

// Roles lists every role.
var Roles = []Role{RoleAgent, RoleWorker, RoleOperator, RoleAuditor}

func knownRole(s string) bool {
	for _, r := range Roles {
		if string(r) == s {
			return true
		}
	}
	return false
}

// Settings naming the token file, for callers' flags and help text.
const (
	TokensFlag   = "tokens"
	TokensEnvVar = "OPLEDGER_TOKENS_FILE"
)

// Bounds on a token file.
const (
	// MinTokenLength refuses tokens short enough to guess.
	MinTokenLength = 16
	// MaxTokens bounds the entries of one file (each request compares
	// against all of them).
	MaxTokens = 1000
	// maxTokenLine bounds one line of the file.
	maxTokenLine = 4096
)

// Principal is who a request is from: the role its token has, and a name
// that is recorded as the actor of what the request causes (never the token).
type Principal struct {
	Role Role
	Name string
}

type tokenEntry struct {
	digest [sha256.Size]byte
	who    Principal
}

// Tokens maps bearer tokens to principals. Only SHA-256 digests of the
// tokens are kept. Safe for concurrent use (it is immutable).
type Tokens struct {
	entries []tokenEntry
}

// LoadTokens reads a token file; see ParseTokens for its format.
func LoadTokens(path string) (*Tokens, error) {
	if path == "" {
		return nil, fmt.Errorf("no token file: set --%s FILE or %s", TokensFlag, TokensEnvVar)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	return ParseTokens(f, path)
}

// ParseTokens reads tokens, one per line:
//
//	ROLE TOKEN [NAME]
//
// ROLE is agent, worker, operator or auditor; TOKEN is at least
// MinTokenLength printable characters; NAME, optional, is recorded as the
// actor of what the token's requests cause (an operator's resolutions name
// it). Without a NAME the actor is ROLE-<first 8 hex digits of the token's
// SHA-256>. '#' starts a comment; blank lines are ignored. Unknown roles,
// malformed lines and a token given twice are errors naming source and the
// line number, never the token. A file without tokens is an error.
func ParseTokens(r io.Reader, source string) (*Tokens, error) {
	t := &Tokens{}
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1024), maxTokenLine)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		at := fmt.Sprintf("%s:%d", source, n)
		if len(fields) < 2 || len(fields) > 3 {
			return nil, fmt.Errorf("%s: want ROLE TOKEN [NAME], got %d fields", at, len(fields))
		}
		role, token := fields[0], fields[1]
		if !knownRole(role) {
			return nil, fmt.Errorf("%s: unknown role %q (roles: agent, worker, operator, auditor)", at, role)
		}
		if len(token) < MinTokenLength {
			return nil, fmt.Errorf("%s: token is %d characters, at least %d are required", at, len(token), MinTokenLength)
		}
		if !printable(token) {
			return nil, fmt.Errorf("%s: token must be printable ASCII", at)
		}
		digest := sha256.Sum256([]byte(token))
		if first, dup := seen[digest]; dup {
			return nil, fmt.Errorf("%s: the token of line %d is given again", at, first)
		}
		name := string(role) + "-" + hex.EncodeToString(digest[:4])
		if len(fields) == 3 {
			name = fields[2]
			if len(name) > 128 || !printable(name) {
				return nil, fmt.Errorf("%s: NAME must be at most 128 printable ASCII characters", at)
			}
		}
		if len(t.entries) >= MaxTokens {
			return nil, fmt.Errorf("%s: more than %d tokens", at, MaxTokens)
		}
		seen[digest] = n
		t.entries = append(t.entries, tokenEntry{digest: digest, who: Principal{Role: Role(role), Name: name}})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s: a line is longer than %d bytes", source, maxTokenLine)
		}
		return nil, fmt.Errorf("%s: read: %w", source, err)
	}
	if len(t.entries) == 0 {
		return nil, fmt.Errorf("%s: no tokens: every request would be refused", source)
	}
	return t, nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// Authenticate returns the principal of a bearer token. It compares the
// token's digest with every entry in constant time and without stopping at
// a match, so timing tells nothing about which tokens exist.
func (t *Tokens) Authenticate(token string) (Principal, bool) {
	digest := sha256.Sum256([]byte(token))
	var found Principal
	match := 0
	for i := range t.entries {
		eq := subtle.ConstantTimeCompare(digest[:], t.entries[i].digest[:])
		if eq == 1 {
			found = t.entries[i].who
		}
		match |= eq
	}
	return found, match == 1
}

// Len returns how many tokens there are.
func (t *Tokens) Len() int { return len(t.entries) }

// bearer extracts the token of an Authorization header ("Bearer TOKEN").
func bearer(header string) (string, bool) {
	scheme, token, found := strings.Cut(strings.TrimSpace(header), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
