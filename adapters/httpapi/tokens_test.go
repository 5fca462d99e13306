package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
)

func digestOf(token string) string {
	sum := sha256.Sum256([]byte(token))
	return httpapi.DigestPrefix + hex.EncodeToString(sum[:])
}

// TestTokenDigests: a file of digests authenticates the tokens they are
// digests of, names principals as the plain form does, and is parsed
// strictly.
func TestTokenDigests(t *testing.T) {
	t.Parallel()
	file := "agent " + digestOf("agent-token-0123456789") + " alice\n" +
		"\tauditor  " + digestOf("auditor-token-0123456789") + "   # no name\r\n" +
		"worker worker-token-0123456789 # plain, kept for compatibility\n"
	tokens, err := httpapi.ParseTokens(strings.NewReader(file), "tokens")
	require.NoError(t, err)
	require.Equal(t, 3, tokens.Len())
	require.Equal(t, []int{3}, tokens.PlainLines())
	who, found := tokens.Authenticate("agent-token-0123456789")
	require.True(t, found)
	require.Equal(t, httpapi.Principal{Role: httpapi.RoleAgent, Name: "alice"}, who)
	_, found = tokens.Authenticate(digestOf("agent-token-0123456789"))
	require.False(t, found, "the digest itself is not a token")

	// A nameless principal is named alike in both forms.
	plain, err := httpapi.ParseTokens(strings.NewReader("auditor auditor-token-0123456789\n"), "plain")
	require.NoError(t, err)
	a, _ := plain.Authenticate("auditor-token-0123456789")
	b, _ := tokens.Authenticate("auditor-token-0123456789")
	require.Equal(t, a, b)

	line, err := httpapi.TokenLine(httpapi.RoleWorker, "worker-token-0123456789", "fleet-1")
	require.NoError(t, err)
	require.Equal(t, "worker "+digestOf("worker-token-0123456789")+" fleet-1", line)
	fresh, err := httpapi.NewToken()
	require.NoError(t, err)
	require.Len(t, fresh, 43)
	_, err = httpapi.TokenLine("admin", fresh, "")
	require.ErrorContains(t, err, "unknown role")

	d := digestOf("x-token-0123456789")
	hexPart := strings.TrimPrefix(d, httpapi.DigestPrefix)
	bad := map[string]string{
		"agent " + d[:len(d)-1] + "\n":                       "tokens:1: malformed digest",
		"agent sha256:" + strings.ToUpper(hexPart) + "\n":    "tokens:1: malformed digest",
		"agent sha256:" + strings.Repeat("zz", 32) + "\n":    "tokens:1: malformed digest",
		"agent sha256:\n":                                    "tokens:1: malformed digest",
		"root " + d + "\n":                                   `tokens:1: unknown role "root"`,
		"agent " + d + "\nworker x-token-0123456789\n":       "tokens:2: the token of line 1 is given again",
		"agent " + d + " al\x1bice\n":                        "tokens:1: line holds control character U+001B",
		"# ok\nagent " + d + " # \x00\n":                     "tokens:2: line holds a NUL character",
		"agent " + d + " \xff\n":                             "tokens:1: line holds invalid UTF-8",
		"agent " + d + " " + strings.Repeat("n", 129) + "\n": "tokens:1: NAME must be at most 128",
	}
	for text, want := range bad {
		_, err := httpapi.ParseTokens(strings.NewReader(text), "tokens")
		require.ErrorContains(t, err, want, "%q", text)
		require.NotContains(t, err.Error(), "x-token-0123456789", "errors never show a token")
		require.NotContains(t, err.Error(), hexPart[:16], "errors never show a digest")
	}
}

// TestTokensReloadKeepsServing: requests keep being answered while the
// token file is reloaded under them; the new file's tokens work at once,
// removed ones are refused, and a bad file keeps the set in use.
func TestTokensReloadKeepsServing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	write := func(content string) { require.NoError(t, os.WriteFile(path, []byte(content), 0o600)) }
	write(tokenFile)
	tokens, err := httpapi.LoadTokens(path)
	require.NoError(t, err)
	e := newEnv(t, func(c *httpapi.Config) { c.Tokens = tokens })

	// Readers hammer a read endpoint with the auditor token, which every
	// version of the file keeps.
	const readers = 3
	var (
		stop             = make(chan struct{})
		wg               sync.WaitGroup
		served, failures atomic.Int64
		firstAnswers     sync.WaitGroup
	)
	firstAnswers.Add(readers)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := true
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("GET", e.srv.URL+"/v1/escalations", nil)
				req.Header.Set("Authorization", "Bearer auditor-token-0123456789")
				res, err := e.srv.Client().Do(req)
				if err != nil || res.StatusCode != http.StatusOK {
					failures.Add(1)
				} else {
					served.Add(1)
				}
				if res != nil {
					res.Body.Close()
				}
				if first {
					firstAnswers.Done()
					first = false
				}
			}
		}()
	}
	firstAnswers.Wait()

	// Operator olga's token is replaced by a new one, in digest form.
	write(strings.Replace(tokenFile, "operator operator-token-0123456789  olga",
		"operator "+digestOf("operator-token-new-0123456789")+" olga", 1))
	require.NoError(t, tokens.Reload())
	op := func(token string) int {
		r := e.call("", "POST", "/v1/test-clock", map[string]any{"advance": "1s"}, "Authorization", "Bearer "+token)
		return r.status
	}
	require.Equal(t, http.StatusOK, op("operator-token-new-0123456789"))
	require.Equal(t, http.StatusUnauthorized, op("operator-token-0123456789"))

	// A bad file is refused; the set in use stays.
	write(tokenFile + "admin " + digestOf("admin-token-0123456789") + "\n")
	require.ErrorContains(t, tokens.Reload(), "tokens:7: unknown role \"admin\"")
	require.Equal(t, http.StatusOK, op("operator-token-new-0123456789"))
	require.NoError(t, os.Remove(path))
	require.ErrorContains(t, tokens.Reload(), "token file")
	require.Equal(t, http.StatusOK, op("operator-token-new-0123456789"))

	before := served.Load()
	waitFor(t, "the readers to be served after the reloads", func() bool { return served.Load() >= before+readers })
	close(stop)
	wg.Wait()
	require.Zero(t, failures.Load(), "no request was refused or dropped during the reloads")
	require.Positive(t, served.Load())
}
