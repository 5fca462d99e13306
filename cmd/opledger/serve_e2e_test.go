package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/captoken"
)

// hangupReload: a token added to the file (as a digest) and a key added to
// the ring are taken up on SIGHUP, without a restart: the new token is
// accepted, new capabilities are signed by the new key, and a capability
// signed by the old key before the rotation still claims.
func (s *system) hangupReload(t *testing.T) {
	op, before := s.approve("e2e-rotation")
	oldKid := kidOf(t, before)

	sum := sha256.Sum256([]byte("auditor-token-new-0123456789"))
	f, err := os.OpenFile(s.tokens, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("auditor sha256:" + hex.EncodeToString(sum[:]) + " audit-2\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	newKey := exec.Command(binary(t), "keys", "new")
	newKey.Env = s.env
	out, err := newKey.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, 401, s.call("GET", "/v1/escalations", "auditor-token-new-0123456789", nil).status, "not before the reload")

	require.NoError(t, s.serve.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool {
		return s.call("GET", "/v1/escalations", "auditor-token-new-0123456789", nil).status == 200
	}, 30*time.Second, 20*time.Millisecond, "the new token is accepted after SIGHUP")
	// The new key activates at most a second after the old one did.
	n := 0
	require.Eventually(t, func() bool {
		n++
		_, tok := s.approve("e2e-rotation-" + string(rune('a'+n)))
		return kidOf(t, tok) != oldKid
	}, 30*time.Second, 100*time.Millisecond, "new capabilities are signed by the new key")

	c := s.claim(op, before, "MSG-ROT-1")
	require.Equal(t, "Claimed", c.body["status"], "a capability of the old key claims after the rotation: %v", c.body)
	require.Eventually(t, func() bool { return s.call("GET", "/readyz", "", nil).status == 200 },
		30*time.Second, 20*time.Millisecond, "ready once the projector has caught up")
}

func kidOf(t *testing.T, token string) string {
	t.Helper()
	c, err := captoken.ParseUnverified(token)
	require.NoError(t, err)
	require.NotEmpty(t, c.KeyID)
	return c.KeyID
}

// unreachableKafka: a serve whose relay publishes to Kafka brokers that do
// not answer is alive (/healthz 200) but not ready, and /readyz says which
// role and why.
func (s *system) unreachableKafka(t *testing.T) {
	addr := freeAddr(t)
	env := append(append([]string(nil), s.env...), "KAFKA_BROKERS=127.0.0.1:9")
	start(t, "serve-kafka", env, "serve", "--listen", addr, "--disable", "projector,sweeper,reconciler")
	var body struct {
		Status string `json:"status"`
		Roles  []struct {
			Role, State, Detail string
			OK                  bool
		} `json:"roles"`
	}
	require.Eventually(t, func() bool {
		res, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		raw, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode == 503 && json.Unmarshal(raw, &body) == nil && len(body.Roles) == 4
	}, 60*time.Second, 50*time.Millisecond, "/readyz answers 503 with the roles")
	require.Equal(t, "not-ready", body.Status)
	for _, r := range body.Roles {
		if r.Role == "relay" {
			require.False(t, r.OK)
			require.True(t, strings.Contains(r.Detail, "cannot reach Kafka"), r.Detail)
			continue
		}
		require.Equal(t, "disabled", r.State)
	}
	res, err := http.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 200, res.StatusCode)
}
