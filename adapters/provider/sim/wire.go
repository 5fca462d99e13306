package sim

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"opledger/adapters/provider"
)

// refund is one refund the simulator committed. It is never mutated after
// creation.
type refund struct {
	ID             string
	IdempotencyKey string
	Operation      string // the merchant's reference (our operation id), "" when none
	Amount         int64
	Currency       string // lowercase
	Order          string
	Declined       bool // committed as declined (FaultDecline): nothing moved
	Metadata       map[string]string
	Created        int64 // unix seconds, simulated clock
}

// dialect is one provider's API shape: how a creation request is read, how
// every answer is written, which reads it serves and how its ledger export
// looks. The idempotency, fault and ledger engine around it is the same for
// every provider (create.go); what differs by profile beyond the shape is
// Simulator.replaysSavedErrors and the key retention.
type dialect interface {
	// keyHeader is the request header carrying the idempotency key.
	keyHeader() string
	// reference is the merchant's reference (our operation id) a creation
	// body names, "" when it names none it can read; it refuses nothing.
	reference(body []byte, referenceKey string) string
	// maxKey is the longest key the provider takes.
	maxKey() int
	// parse decodes a creation body; it returns whatever it could decode
	// (the operation, for counting) together with the first refusal.
	parse(contentType string, body []byte, referenceKey string) (refundParams, *apiError)
	// errorAnswer renders an error in the provider's shape.
	errorAnswer(e *apiError) answer
	// created is the answer to the execution that committed r; current the
	// answer of a replay, showing r's current state.
	created(r *refund) answer
	current(r *refund) answer
	// refundID names the n-th refund (1-based).
	refundID(n int) string
	// replayHeader is the header marking an answer a replay.
	replayHeader() string
	// routes mounts the provider API on mux.
	routes(s *Simulator, mux *http.ServeMux)
	// export writes the ledger export; contentType is its media type.
	export(w io.Writer, refunds []refund) error
	exportContentType() string
}

// dialects are the simulator's own wire code of each provider API, by the
// API's name (provider.API): a new API's dialect is listed here.
var dialects = map[string]dialect{
	provider.APIStripe:   stripeDialect{},
	provider.APIMeridian: meridianDialect{},
}

// newDialect is the dialect of the API profile p speaks (Config.validate
// refused a profile without one).
func newDialect(p Profile) dialect { return dialects[p.documented().API] }

// Error types and codes the simulator describes errors with (Stripe's
// vocabulary; the Meridian dialect maps them onto its own).
const (
	errTypeInvalidRequest = "invalid_request_error"
	errTypeIdempotency    = "idempotency_error"
	errTypeAPI            = "api_error"
	errTypeRateLimit      = "rate_limit_error"

	codeParameterMissing     = "parameter_missing"
	codeParameterInvalid     = "parameter_invalid"
	codeParameterUnknown     = "parameter_unknown"
	codeIdempotencyKeyInUse  = "idempotency_key_in_use"
	codeIdempotencyKeyReused = "idempotency_key_reused"
	codeResourceMissing      = "resource_missing"
)

// apiError is an error answer: its HTTP status and what went wrong, in the
// Stripe vocabulary the engine speaks; a dialect renders it.
type apiError struct {
	status  int
	Type    string `json:"type"`
	Code    string `json:"code,omitempty"`
	Param   string `json:"param,omitempty"`
	Message string `json:"message"`
	// malformed: the request could not be read at all (syntax, names,
	// media type), as opposed to a parameter value refused.
	malformed bool
}

// stripeBody is the error in Stripe's shape, {"error":{...}}: also the
// shape of every /_sim answer.
func (e *apiError) stripeBody() []byte {
	return mustJSON(struct {
		Error *apiError `json:"error"`
	}{e})
}

func invalidRequest(code, param, message string) *apiError {
	return &apiError{status: http.StatusBadRequest, Type: errTypeInvalidRequest, Code: code, Param: param, Message: message}
}

// mustJSON encodes values the simulator itself built; they always encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("provider simulator: encoding its own response: " + err.Error())
	}
	return b
}

// answer is one HTTP response: saved under a key, or written once.
type answer struct {
	status int
	body   []byte
}

// errorAnswer renders e in the simulator's provider shape.
func (s *Simulator) errorAnswer(e *apiError) answer { return s.dia.errorAnswer(e) }

// writeAnswer writes a JSON response with the simulator's standard headers.
func (s *Simulator) writeAnswer(w http.ResponseWriter, a answer, key string, requestSeq int64, replayed bool) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	h.Set("Request-Id", "req_sim_"+strconv.FormatInt(requestSeq, 10))
	if key != "" {
		h.Set(s.dia.keyHeader(), key)
	}
	if replayed {
		h.Set(s.dia.replayHeader(), "true")
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body) // the client may be gone; nothing to do about it
}
