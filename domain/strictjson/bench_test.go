package strictjson_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"opledger/domain/strictjson"
)

// claimBody is the size and shape of a typical request body (POST /v1/claims).
var claimBody = []byte(`{"message_id":"MSG-6f1c2a0e-3b7d-5c1e-9a4f-0d2b8c7e1f3a","correlation_id":"COR-2210","operation_id":"OP-3f1c9a0e2b7d5c1e9a4f","capability":"eyJ2IjoxLCJjYXAiOiJDQVAtM2YxYzlhMGUyYjdkNWMxZTlhNGYuMSIsIm9wIjoiT1AtM2YxYzlhMGUyYjdkNWMxZTlhNGYiLCJhdHQiOjEsImV4cCI6IjIwMjYtMTEtMjZUMTQ6MTc6MTBaIn0.k3JdQ2xvY2tlZC1zaWduYXR1cmUtNjQtYnl0ZXMtbG9uZy1lbm91Z2gtdG8tYmUtcmVhbGlzdGlj","worker_id":"worker-1","lease_seconds":60}`)

type claimRequest struct {
	MessageID     *string `json:"message_id"`
	CorrelationID *string `json:"correlation_id"`
	OperationID   *string `json:"operation_id"`
	Capability    *string `json:"capability"`
	WorkerID      *string `json:"worker_id"`
	LeaseSeconds  *int64  `json:"lease_seconds"`
}

// BenchmarkDecodeClaimBody compares the strict decoder with what the API
// used before (encoding/json v1 with DisallowUnknownFields and a trailing
// value check): go test -run '^$' -bench DecodeClaimBody ./domain/strictjson/
func BenchmarkDecodeClaimBody(b *testing.B) {
	b.Run("strictjson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r claimRequest
			if err := strictjson.DecodeObject(claimBody, &r, strictjson.Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json-v1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r claimRequest
			dec := json.NewDecoder(bytes.NewReader(claimBody))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&r); err != nil {
				b.Fatal(err)
			}
			if dec.More() {
				b.Fatal("trailing")
			}
		}
	})
}
