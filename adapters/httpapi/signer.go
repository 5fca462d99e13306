package httpapi

import (
	"opledger/adapters/captoken"
	"opledger/domain"
)

// TokenSigner issues the capability tokens decisions answer and verifies
// the tokens claims present: *captoken.Keys (a key ring, what serve uses)
// or *captoken.Signer (one key). Implementations are safe for concurrent
// use; Verify's errors wrap captoken.ErrMalformed or captoken.ErrBadSignature.
type TokenSigner interface {
	TokenFor(op domain.OperationID, ev domain.CapabilityIssued) (string, error)
	Verify(token string) (captoken.Claims, error)
}

var (
	_ TokenSigner = (*captoken.Keys)(nil)
	_ TokenSigner = (*captoken.Signer)(nil)
)
