package domain

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEvidenceLogStateRoundTrip: a log restored from its state, through
// JSON, admits every refusal as the log it was taken of, and goes on
// counting the same; its state is the same whatever the order of its maps.
func TestEvidenceLogStateRoundTrip(t *testing.T) {
	b := EvidenceBound{Window: time.Hour, PerKey: 2, PerStream: 3}
	t0 := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	l := NewEvidenceLog("evidence-OP-1", b)
	for i, at := range []time.Duration{0, time.Minute, 2 * time.Minute, time.Hour, 3 * time.Hour, 3*time.Hour + time.Second} {
		e := refusedWrite(ExecutionID([]string{"EXE-1", "EXE-2"}[i%2]), SecretMissing, t0.Add(at))
		require.NoError(t, l.Evolve(e))
		l.Version++
	}
	b1, err := json.Marshal(l.State())
	require.NoError(t, err)
	var s EvidenceLogState
	require.NoError(t, json.Unmarshal(b1, &s))
	r, err := EvidenceLogFromState(s)
	require.NoError(t, err)
	b2, err := json.Marshal(r.State())
	require.NoError(t, err)
	require.JSONEq(t, string(b1), string(b2))
	require.Equal(t, l.Version, r.Version)
	require.Equal(t, b, r.Bound())
	require.Len(t, s.Windows, 3, "the windows kept, not every window met")

	for _, key := range []EvidenceKey{{ScopeExecution, "EXE-1"}, {ScopeExecution, "EXE-2"}, {ScopeExecution, "EXE-3"}} {
		for _, at := range []time.Duration{0, time.Hour, 3 * time.Hour, 4 * time.Hour} {
			one, sk, w := l.Admit(key, t0.Add(at))
			one2, sk2, w2 := r.Admit(key, t0.Add(at))
			require.Equal(t, one, one2, "%s at %s", key, at)
			require.Equal(t, sk, sk2)
			require.True(t, w.Equal(w2))
		}
	}
	e := refusedWrite("EXE-3", SecretMissing, t0.Add(3*time.Hour+time.Minute))
	require.NoError(t, l.Evolve(e))
	require.NoError(t, r.Evolve(e))
	one, sk, _ := r.Admit(EvidenceKey{ScopeExecution, "EXE-4"}, t0.Add(3*time.Hour+2*time.Minute))
	require.False(t, one, "the stream's bound, counted across the restore")
	require.Equal(t, StreamKey, sk)
	require.Equal(t, l.State(), r.State())
}

// TestEvidenceLogStateRefused: a state no fold can reach is refused.
func TestEvidenceLogStateRefused(t *testing.T) {
	b := EvidenceBound{Window: time.Hour, PerKey: 2, PerStream: 3}
	t0 := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	good := func() EvidenceLogState {
		return EvidenceLogState{Stream: "evidence-OP-1", Version: 1, Bound: b, Windows: []EvidenceWindowState{
			{Start: t0, Total: 2, PerKey: []EvidenceKeyCount{{Scope: ScopeExecution, ID: "EXE-1", Count: 2}}},
		}}
	}
	_, err := EvidenceLogFromState(good())
	require.NoError(t, err)
	for name, change := range map[string]func(*EvidenceLogState){
		"bound":      func(s *EvidenceLogState) { s.Bound.PerKey = 0 },
		"version":    func(s *EvidenceLogState) { s.Version = -2 },
		"unaligned":  func(s *EvidenceLogState) { s.Windows[0].Start = t0.Add(time.Minute) },
		"total":      func(s *EvidenceLogState) { s.Windows[0].Total = 3 },
		"scope":      func(s *EvidenceLogState) { s.Windows[0].PerKey[0].Scope = "nonsense" },
		"zero count": func(s *EvidenceLogState) { s.Windows[0].PerKey[0].Count, s.Windows[0].Total = 0, 0 },
		"not ascending": func(s *EvidenceLogState) {
			s.Windows = append(s.Windows, EvidenceWindowState{Start: t0, Total: 1, PerKey: []EvidenceKeyCount{{Scope: ScopeStream, Count: 1}}})
		},
		"twice": func(s *EvidenceLogState) {
			s.Windows[0].PerKey = append(s.Windows[0].PerKey, s.Windows[0].PerKey[0])
			s.Windows[0].Total = 4
		},
		"too many windows": func(s *EvidenceLogState) {
			for i := 1; i <= evidenceWindows; i++ {
				s.Windows = append(s.Windows, EvidenceWindowState{Start: t0.Add(time.Duration(i) * time.Hour), Total: 1, PerKey: []EvidenceKeyCount{{Scope: ScopeStream, Count: 1}}})
			}
		},
	} {
		s := good()
		change(&s)
		_, err := EvidenceLogFromState(s)
		require.Error(t, err, name)
	}
}
