package sim

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// BenchmarkCreateWithRememberedKeys is one refund creation under a new key
// while the simulator remembers n keys, none of them expired (a day's
// retention, a frozen clock): what a long-lived simulator pays per request
// under load. Run: go test -run '^$' -bench CreateWithRememberedKeys
// ./adapters/provider/sim; the time per request should not grow with n.
func BenchmarkCreateWithRememberedKeys(b *testing.B) {
	at := time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			s, err := New(Config{Start: at, Clock: func() time.Time { return at }, MaxRememberedKeys: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for i := range n {
				rememberKey(s, fmt.Sprintf("old-%d", i), &keyRecord{fingerprint: "f", firstSeen: at})
			}
			form := url.Values{"amount": {"100"}, "currency": {"eur"}, "order": {"ORD-1"}, "metadata[operation_id]": {"OP-1"}}.Encode()
			b.ResetTimer()
			for i := range b.N {
				req := httptest.NewRequest(http.MethodPost, "/v1/refunds", strings.NewReader(form))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Idempotency-Key", fmt.Sprintf("new-%d", i))
				w := httptest.NewRecorder()
				s.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}

// rememberKey puts rec under key as a creation request would.
func rememberKey(s *Simulator, key string, rec *keyRecord) { s.keys.put(key, rec) }
