package setaside_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain/setaside"
	"opledger/domain/setaside/setasidetest"
)

func TestMemory(t *testing.T) {
	setasidetest.Run(t, func(*testing.T) setaside.Store { return &setaside.Memory{} })
}

func TestPolicyDelayDoublesUpToTheCap(t *testing.T) {
	p := setaside.Policy{MaxAttempts: 9, Backoff: time.Second, MaxBackoff: 10 * time.Second}
	var got []time.Duration
	for a := 1; a <= 6; a++ {
		got = append(got, p.Delay(a))
	}
	require.Equal(t, []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}, got)
	require.Error(t, setaside.Policy{MaxAttempts: 0, Backoff: time.Second, MaxBackoff: time.Second}.Validate())
	require.NoError(t, setaside.Policy{}.WithDefaults().Validate())
}
