package provider

import (
	"fmt"
	"net/http"

	"opledger/domain"
)

// wire is one provider's API shape: how a creation request is written, how
// its answer is classified (the outcome table of that provider, package
// doc), and how its reads are asked and read. The client around it is the
// same for every provider: sends, retries, back-off, the whole-call
// conclusion, the observer. A wire holds no state but its configuration and
// is safe for concurrent use.
type wire interface {
	// validate refuses a request this provider cannot be sent (nothing is
	// sent then).
	validate(req domain.RefundRequest) error
	// create builds the creation request: the path under the base URL, the
	// headers beside the client's own, and the body, the same bytes on every
	// send.
	create(req domain.RefundRequest) (path string, header http.Header, body []byte)
	// classify classifies a complete response to a creation request.
	classify(req domain.RefundRequest, status int, header http.Header, body []byte) sendResult

	// lookupPath is the path (with query) of the lookup by our reference,
	// or "" when the provider has none.
	lookupPath(op domain.OperationID) string
	// readLookup reads a complete answer to a lookup.
	readLookup(op domain.OperationID, status int, body []byte) ([]domain.ProviderEffect, readVerdict)
	// retrievePath is the path of the retrieve by idempotency key, or ""
	// when the provider has none.
	retrievePath(key domain.IdempotencyKey) string
	// readRetrieve reads a complete answer to a retrieve by key.
	readRetrieve(key domain.IdempotencyKey, status int, body []byte) (domain.ProviderEffect, bool, readVerdict)
}

// readVerdict is what a read's answer amounted to: err nil for an answer,
// else why not, and whether asking again is sensible.
type readVerdict struct {
	err       error
	retryable bool
}

// statusVerdict is the verdict on a read answered with an error status.
func statusVerdict(status int, described string) readVerdict {
	return readVerdict{
		err:       fmt.Errorf("%s", described),
		retryable: status == http.StatusConflict || status == http.StatusTooManyRequests || status >= 500,
	}
}
