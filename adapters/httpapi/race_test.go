package httpapi_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/domain"
)

// racers is how many requests race in these tests.
const racers = 8

// TestRacingCreatesAndClaims: racing creates under one key open one
// operation and all get the same answer; racing claims of one capability on
// different messages open one execution.
func TestRacingCreatesAndClaims(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	answers := make([]response, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			answers[i] = e.call(httpapi.RoleAgent, "POST", "/v1/operations", refund("ORD-race"), "Idempotency-Key", "race-1")
		})
	}
	wg.Wait()
	fresh := 0
	for _, a := range answers {
		require.Equal(t, http.StatusCreated, a.status, "body: %s", a.raw)
		require.Equal(t, string(answers[0].raw), string(a.raw))
		if a.header.Get("Idempotent-Replayed") == "" {
			fresh++
		}
	}
	require.Equal(t, 1, fresh)
	op := domain.OperationID(answers[0].str("operation_id"))
	require.Equal(t, []string{domain.TypeOperationRequested}, e.streamTypes(op.StreamName()))

	_, token := e.allow(op)
	for i := range racers {
		wg.Go(func() { answers[i] = e.claim(op, "MSG-race-"+string(rune('a'+i)), token) })
	}
	wg.Wait()
	statuses := map[string]int{}
	for _, a := range answers {
		require.Equal(t, http.StatusOK, a.status, "body: %s", a.raw)
		statuses[a.str("status")]++
	}
	require.Equal(t, map[string]int{"Claimed": 1, "AlreadyConsumed": racers - 1}, statuses)
}
