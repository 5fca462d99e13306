package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
)

// TestTestClock: the operator moves the ledger's clock forward and expiry
// follows; without a test clock the endpoint does not exist.
func TestTestClock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	op := e.create("clock-1")
	_, token := e.allow(op) // expires after DefaultCapabilityTTL (15m)

	r := e.must(http.StatusOK, e.post(httpapi.RoleOperator, "/v1/test-clock", map[string]any{"advance": "25h"}))
	require.Equal(t, start.Add(25*time.Hour).Format(time.RFC3339), r.str("now"))
	require.Equal(t, start.Add(25*time.Hour), e.clock.Now())

	r = e.must(http.StatusOK, e.claim(op, "MSG-LATE", token))
	require.Equal(t, "Expired", r.str("status"))
	require.Equal(t, "capability.expired", r.str("reason"))

	for _, bad := range []any{"-1h", "0s", "soon", 25, "10000h"} {
		r := e.must(http.StatusBadRequest, e.post(httpapi.RoleOperator, "/v1/test-clock", map[string]any{"advance": bad}))
		require.Equal(t, "advance", r.field(), "%v", bad)
	}
	require.Equal(t, start.Add(25*time.Hour), e.clock.Now(), "refused moves move nothing")

	off := newEnv(t, func(c *httpapi.Config) { c.TestClock = nil })
	r = off.must(http.StatusNotFound, off.post(httpapi.RoleOperator, "/v1/test-clock", map[string]any{"advance": "1h"}))
	require.Equal(t, httpapi.CodeTestClockDisabled, r.code())
	require.Equal(t, start, off.clock.Now())
}
