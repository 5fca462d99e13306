package provider

// refundObject is a refund as the provider's API shapes it.
type refundObject struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	Currency      string            `json:"currency"`
	Status        string            `json:"status"`
	Metadata      map[string]string `json:"metadata"`
	Created       int64             `json:"created"`
	FailureReason string            `json:"failure_reason"`
}

// errorEnvelope is an error answer.
type errorEnvelope struct {
	Error *struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Error types the classification reads.
const (
	errTypeInvalidRequest = "invalid_request_error"
	errTypeIdempotency    = "idempotency_error"
)

// Refund statuses of the provider's API.
const (
	statusSucceeded      = "succeeded"
	statusFailed         = "failed"
	statusCanceled       = "canceled"
	statusPending        = "pending"
	statusRequiresAction = "requires_action"
)

// Metadata keys the client writes and reads.
const (
	metaOperationID    = "operation_id"
	metaIdempotencyKey = "idempotency_key"
)
