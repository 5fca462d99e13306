package console

import (
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
)

// Every role that may call the API's reads may read the console; a
// subscriber (a service downstream, the feed only) may not sign in.
func TestWhoMayRead(t *testing.T) {
	t.Parallel()
	for _, r := range httpapi.Readers {
		require.True(t, mayRead(r), r)
	}
	require.False(t, mayRead(httpapi.RoleSubscriber))
	require.False(t, mayRead("admin"))
}
