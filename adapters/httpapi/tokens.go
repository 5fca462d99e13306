package httpapi

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"opledger/domain"
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
	// RoleAnalyst only reads, as an auditor does: the people looking for
	// patterns (in the console, or through the reads and the read models).
	RoleAnalyst Role = "analyst"
	// RoleSubscriber reads the operation feed (GET /v1/feed) and nothing
	// else: a service downstream of the ledger.
	RoleSubscriber Role = "subscriber"
)

// Roles lists every role.
var Roles = []Role{RoleAgent, RoleWorker, RoleOperator, RoleAuditor, RoleAnalyst, RoleSubscriber}

// Readers are the roles that may call every read of the API and sign in to
// the console: every role but a subscriber, which reads the feed only.
var Readers = []Role{RoleAgent, RoleWorker, RoleOperator, RoleAuditor, RoleAnalyst}

// roleNames lists the roles for a message.
func roleNames() string {
	names := make([]string, len(Roles))
	for i, r := range Roles {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

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
	// maxTokenFile bounds the file: MaxTokens lines of a digest and a name.
	maxTokenFile = 1 << 20
	// maxNameLength bounds a principal's name.
	maxNameLength = 128
)

// DigestPrefix starts the digest form of a token in the file.
const DigestPrefix = "sha256:"

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

// tokenSet is one reading of the file; immutable.
type tokenSet struct {
	entries []tokenEntry
	// plainLines are the lines that hold a token rather than its digest.
	plainLines []int
}

// Tokens maps bearer tokens to principals. Only SHA-256 digests of the
// tokens are kept. Reload swaps in a new reading of the file atomically:
// a request authenticates against one reading, whole, and none waits for a
// reload. Safe for concurrent use.
type Tokens struct {
	set    atomic.Pointer[tokenSet]
	source string // the file Reload reads; "" when parsed from a reader
}

// LoadTokens reads a token file; see ParseTokens for its format. Reload
// reads the same file again.
func LoadTokens(path string) (*Tokens, error) {
	if path == "" {
		return nil, fmt.Errorf("no token file: set --%s FILE or %s", TokensFlag, TokensEnvVar)
	}
	set, err := readTokenFile(path)
	if err != nil {
		return nil, err
	}
	t := &Tokens{source: path}
	t.set.Store(set)
	return t, nil
}

func readTokenFile(path string) (*tokenSet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return nil, fmt.Errorf("token file %s: read: %w", path, err)
	}
	if len(raw) > maxTokenFile {
		return nil, fmt.Errorf("token file %s is larger than %d bytes", path, maxTokenFile)
	}
	return parseTokenSet(bytes.NewReader(raw), path)
}

// Reload reads the token file again and swaps it in. On any error the
// tokens in use stay as they were; the error names the file and line.
func (t *Tokens) Reload() error {
	if t.source == "" {
		return errors.New("tokens were not read from a file: nothing to reload")
	}
	set, err := readTokenFile(t.source)
	if err != nil {
		return err
	}
	t.set.Store(set)
	return nil
}

// ParseTokens reads tokens, one per line:
//
//	ROLE sha256:DIGEST [NAME]
//	ROLE TOKEN [NAME]
//
// ROLE is agent, worker, operator, auditor or analyst. DIGEST is the SHA-256 of the
// token, 64 lowercase hex digits (`opledger tokens hash` prints the line):
// the file then holds nothing a caller could present. A plain TOKEN (at
// least MinTokenLength printable ASCII characters, not starting with
// "sha256:") is still accepted for compatibility; PlainLines lists where,
// for a warning. NAME, optional, is recorded as the actor of what the
// token's requests cause (an operator's resolutions name it); several tokens
// may share one, which is how a principal's token is replaced without a gap.
// Without a NAME the actor is ROLE-<first 8 hex digits of the token's
// SHA-256>, whichever form the line has. '#' starts a comment; blank lines
// are ignored. An unknown role, a malformed digest, a token given twice (in
// either form), a control character or invalid UTF-8 anywhere on a line are
// errors naming source and the line, never the token. A file without tokens
// is an error.
func ParseTokens(r io.Reader, source string) (*Tokens, error) {
	set, err := parseTokenSet(r, source)
	if err != nil {
		return nil, err
	}
	t := &Tokens{}
	t.set.Store(set)
	return t, nil
}

func parseTokenSet(r io.Reader, source string) (*tokenSet, error) {
	t := &tokenSet{}
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1024), maxTokenLine)
	for n := 1; sc.Scan(); n++ {
		at := fmt.Sprintf("%s:%d", source, n)
		text := strings.TrimSuffix(sc.Text(), "\r")
		if refusal := domain.CheckText("line", strings.ReplaceAll(text, "\t", " "), maxTokenLine, false); refusal != nil {
			return nil, fmt.Errorf("%s: %s", at, refusal.Detail)
		}
		line, _, _ := strings.Cut(text, "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) < 2 || len(fields) > 3 {
			return nil, fmt.Errorf("%s: want ROLE sha256:DIGEST [NAME] (or ROLE TOKEN [NAME]), got %d fields", at, len(fields))
		}
		role, secret := fields[0], fields[1]
		if !knownRole(role) {
			return nil, fmt.Errorf("%s: unknown role %q (roles: %s)", at, cut(role, 40), roleNames())
		}
		digest, plain, err := tokenDigest(secret)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		if first, dup := seen[digest]; dup {
			return nil, fmt.Errorf("%s: the token of line %d is given again", at, first)
		}
		name := string(role) + "-" + hex.EncodeToString(digest[:4])
		if len(fields) == 3 {
			name = fields[2]
			if len(name) > maxNameLength || !printable(name) {
				return nil, fmt.Errorf("%s: NAME must be at most %d printable ASCII characters", at, maxNameLength)
			}
		}
		if len(t.entries) >= MaxTokens {
			return nil, fmt.Errorf("%s: more than %d tokens", at, MaxTokens)
		}
		seen[digest] = n
		if plain {
			t.plainLines = append(t.plainLines, n)
		}
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

// tokenDigest reads the second field of a line: a digest, or a plain token
// (plain reports which). Errors never quote it.
func tokenDigest(field string) (digest [sha256.Size]byte, plain bool, err error) {
	if hexDigest, isDigest := strings.CutPrefix(field, DigestPrefix); isDigest {
		if len(hexDigest) != 2*sha256.Size || strings.ToLower(hexDigest) != hexDigest {
			return digest, false, fmt.Errorf("malformed digest: want sha256: and %d lowercase hex digits, got %d characters", 2*sha256.Size, len(hexDigest))
		}
		if _, err := hex.Decode(digest[:], []byte(hexDigest)); err != nil {
			return digest, false, fmt.Errorf("malformed digest: want sha256: and %d lowercase hex digits", 2*sha256.Size)
		}
		return digest, false, nil
	}
	if len(field) < MinTokenLength {
		return digest, true, fmt.Errorf("token is %d characters, at least %d are required", len(field), MinTokenLength)
	}
	if !printable(field) {
		return digest, true, errors.New("token must be printable ASCII")
	}
	return sha256.Sum256([]byte(field)), true, nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Authenticate returns the principal of a bearer token. It compares the
// token's digest with every entry in constant time and without stopping at
// a match, so timing tells nothing about which tokens exist.
func (t *Tokens) Authenticate(token string) (Principal, bool) {
	who, _, found := t.authenticate(token)
	return who, found
}

// authenticate is Authenticate, also returning the token's digest (what the
// rate limit counts by).
func (t *Tokens) authenticate(token string) (Principal, [sha256.Size]byte, bool) {
	digest := sha256.Sum256([]byte(token))
	set := t.set.Load()
	var found Principal
	match := 0
	for i := range set.entries {
		eq := subtle.ConstantTimeCompare(digest[:], set.entries[i].digest[:])
		if eq == 1 {
			found = set.entries[i].who
		}
		match |= eq
	}
	return found, digest, match == 1
}

// Len returns how many tokens there are.
func (t *Tokens) Len() int { return len(t.set.Load().entries) }

// PlainLines lists the lines of the file that hold a token in plain text
// rather than its digest (accepted, and worth a warning).
func (t *Tokens) PlainLines() []int { return append([]int(nil), t.set.Load().plainLines...) }

// Source is the file Reload reads ("" when parsed from a reader).
func (t *Tokens) Source() string { return t.source }

// TokenLine returns the token file line for token: ROLE sha256:DIGEST
// [NAME]. It checks what ParseTokens would.
func TokenLine(role Role, token, name string) (string, error) {
	if !knownRole(string(role)) {
		return "", fmt.Errorf("unknown role %q (roles: %s)", cut(string(role), 40), roleNames())
	}
	if strings.HasPrefix(token, DigestPrefix) {
		return "", fmt.Errorf("the token starts with %q: it would read as a digest; make another", DigestPrefix)
	}
	digest, _, err := tokenDigest(token)
	if err != nil {
		return "", err
	}
	line := string(role) + " " + DigestPrefix + hex.EncodeToString(digest[:])
	if name != "" {
		if len(name) > maxNameLength || !printable(name) {
			return "", fmt.Errorf("NAME must be at most %d printable ASCII characters", maxNameLength)
		}
		line += " " + name
	}
	return line, nil
}

// NewToken returns a fresh random bearer token: 32 bytes (256 bits) in
// base64url, 43 characters.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("new token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// bearer extracts the token of an Authorization header ("Bearer TOKEN").
func bearer(header string) (string, bool) {
	scheme, token, found := strings.Cut(strings.TrimSpace(header), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
