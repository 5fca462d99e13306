package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"opledger/domain"
	"opledger/domain/ledger"
)

// MaxIdempotencyKeyLength bounds the Idempotency-Key header.
const MaxIdempotencyKeyLength = 255

type createOperationRequest struct {
	// Kind is the operation's kind: refund (default) or export-download.
	Kind            *string `json:"kind"`
	OrderID         *string `json:"order_id"`
	AmountMinor     *int64  `json:"amount_minor"`
	Currency        *string `json:"currency"`
	CorrelationID   *string `json:"correlation_id"`
	OrderTotalMinor *int64  `json:"order_total_minor"`
	ExportID        *string `json:"export_id"`
}

// normalizedOperationRequest is a refund request as it is hashed: every
// field, absent ones as their zero value, in a fixed order. Two bodies that
// mean the same request (whitespace, field order, an explicit default, an
// explicit kind refund) hash alike, and alike with what the builds before
// kinds hashed, so a retry across an upgrade is still a replay.
type normalizedOperationRequest struct {
	OrderID         string `json:"order_id"`
	AmountMinor     int64  `json:"amount_minor"`
	Currency        string `json:"currency"`
	CorrelationID   string `json:"correlation_id"`
	OrderTotalMinor int64  `json:"order_total_minor"`
}

// normalizedExportRequest is an export download's request as it is hashed.
type normalizedExportRequest struct {
	Kind          domain.OperationKind `json:"kind"`
	ExportID      string               `json:"export_id"`
	CorrelationID string               `json:"correlation_id"`
}

type createOperationResponse struct {
	OperationID   domain.OperationID     `json:"operation_id"`
	Kind          domain.OperationKind   `json:"kind"`
	CorrelationID domain.CorrelationID   `json:"correlation_id"`
	State         domain.OperationStatus `json:"state"`
}

// CodeKindDisabled: an operation of a kind this server does not create yet
// (Config.EnabledKinds): 422, field kind.
const CodeKindDisabled = "operation.kind-disabled"

// OperationIDForKey is the operation an Idempotency-Key names:
// "OP-" + the first 20 hex digits of the key's SHA-256. A repeat of a
// request finds its operation without any other index.
func OperationIDForKey(key string) domain.OperationID {
	sum := sha256.Sum256([]byte(key))
	return domain.OperationID(domain.PrefixOperation + hex.EncodeToString(sum[:10]))
}

// correlationForKey is the correlation id given to a request without one:
// derived from the key too, so a retried request gets the same.
func correlationForKey(key string) domain.CorrelationID {
	sum := sha256.Sum256([]byte(key))
	return domain.CorrelationID(domain.PrefixCorrelation + hex.EncodeToString(sum[10:20]))
}

// createOperation: POST /v1/operations. The operation id is derived from the
// Idempotency-Key, the body's normalized hash is recorded with the key on
// OperationRequested, and a repeat is answered from that event: the same
// status and body, with Idempotent-Replayed: true; a different body under
// the same key is 422 idempotency.key-reused. A kind other than refund is
// 422 operation.kind-disabled unless the server enables it
// (Config.EnabledKinds): its events are written at a version the previous
// release refuses, so it is enabled only once every reader runs this one.
func (s *Server) createOperation(w http.ResponseWriter, r *http.Request, who Principal) (reply, error) {
	key := r.Header.Get("Idempotency-Key")
	switch {
	case key == "":
		return reply{}, invalid("Idempotency-Key", "header Idempotency-Key is required: a key unique to this refund request, reused on every retry of it")
	case len(key) > MaxIdempotencyKeyLength:
		return reply{}, invalid("Idempotency-Key", "header Idempotency-Key is %d bytes long, at most %d", len(key), MaxIdempotencyKeyLength)
	case !printableOrSpace(key):
		return reply{}, invalid("Idempotency-Key", "header Idempotency-Key must be printable ASCII")
	}
	var req createOperationRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return reply{}, err
	}
	cmd, hashed, err := s.operationCommand(req)
	if err != nil {
		return reply{}, err
	}
	hash, err := hashRequest(hashed)
	if err != nil {
		return reply{}, err
	}
	op := OperationIDForKey(key)
	if cmd.CorrelationID == "" {
		cmd.CorrelationID = correlationForKey(key)
	}
	cmd.OperationID, cmd.RequestedBy, cmd.RequestKey, cmd.RequestHash = op, who.Name, key, hash
	state, err := s.cfg.Ledger.RequestOperation(r.Context(), cmd, ledger.Cause{Actor: who.Name, CausationID: key})
	var refusal *domain.Refusal
	if errors.As(err, &refusal) && refusal.Reason == domain.ReasonOperationExists {
		return s.replayCreate(r, op, key, hash)
	}
	if err != nil {
		return reply{}, err
	}
	return createdReply(state, false), nil
}

// replayCreate answers a repeated key from the operation's first event.
func (s *Server) replayCreate(r *http.Request, op domain.OperationID, key, hash string) (reply, error) {
	state, err := s.cfg.Ledger.Load(r.Context(), op)
	if err != nil {
		return reply{}, err
	}
	switch {
	case state.RequestKey != key:
		// Another key hashing to the same 80-bit prefix: not seen in practice.
		return reply{}, &apiError{status: http.StatusConflict, code: string(domain.ReasonOperationExists),
			message: "operation " + string(op) + " exists under another Idempotency-Key: use another key"}
	case state.RequestHash != hash:
		return reply{}, &apiError{status: http.StatusUnprocessableEntity, code: CodeIdempotencyKeyReused,
			message: "this Idempotency-Key was used for a different request (operation " + string(op) + "): use a new key for a new request"}
	}
	return createdReply(state, true), nil
}

// createdReply is the creation answer; it depends only on what
// OperationRequested recorded, so a replay is byte for byte the original.
func createdReply(state *domain.Operation, replayed bool) reply {
	h := http.Header{"Location": {"/v1/operations/" + string(state.ID)}}
	if replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	return reply{
		status: http.StatusCreated,
		body:   createOperationResponse{OperationID: state.ID, Kind: state.Kind, CorrelationID: state.CorrelationID, State: domain.OpRequested},
		header: h,
	}
}

// operationCommand validates the request by its kind into the command (its
// operation id, requester and key filled by the caller) and what is hashed.
func (s *Server) operationCommand(req createOperationRequest) (domain.RequestOperation, any, error) {
	kind := domain.KindRefund
	if req.Kind != nil {
		k, err := domain.ParseOperationKind(*req.Kind)
		if err != nil || *req.Kind == "" {
			return domain.RequestOperation{}, nil, invalid("kind", "kind must be one of %v", domain.Kinds())
		}
		kind = k
	}
	if kind != domain.KindRefund && !s.kindEnabled(kind) {
		return domain.RequestOperation{}, nil, &apiError{status: http.StatusUnprocessableEntity, code: CodeKindDisabled, field: "kind",
			message: "operations of kind " + string(kind) + " are not enabled on this server: an operator enables the kind (serve --enable-kinds) only once every reader of the ledger runs a release that reads it"}
	}
	if kind == domain.KindExportDownload {
		n, err := req.normalizeExport()
		if err != nil {
			return domain.RequestOperation{}, nil, err
		}
		return domain.RequestOperation{Kind: kind, ExportID: n.ExportID, CorrelationID: domain.CorrelationID(n.CorrelationID)}, n, nil
	}
	if req.ExportID != nil {
		return domain.RequestOperation{}, nil, invalid("export_id", "export_id is an %s's; a refund names its order_id, amount_minor and currency", domain.KindExportDownload)
	}
	n, err := req.normalize()
	if err != nil {
		return domain.RequestOperation{}, nil, err
	}
	return domain.RequestOperation{Kind: kind, OrderID: n.OrderID, AmountMinor: n.AmountMinor, Currency: n.Currency,
		OrderTotalMinor: n.OrderTotalMinor, CorrelationID: domain.CorrelationID(n.CorrelationID)}, n, nil
}

// kindEnabled reports whether the server creates operations of kind.
func (s *Server) kindEnabled(kind domain.OperationKind) bool {
	return kind == domain.KindRefund || slices.Contains(s.cfg.EnabledKinds, kind)
}

func (req createOperationRequest) normalizeExport() (normalizedExportRequest, error) {
	n := normalizedExportRequest{Kind: domain.KindExportDownload}
	for _, f := range []struct {
		field string
		set   bool
	}{{"order_id", req.OrderID != nil}, {"amount_minor", req.AmountMinor != nil}, {"currency", req.Currency != nil}, {"order_total_minor", req.OrderTotalMinor != nil}} {
		if f.set {
			return n, invalid(f.field, "%s is a refund's; an %s names its export_id", f.field, domain.KindExportDownload)
		}
	}
	var err error
	if n.ExportID, err = need(req.ExportID, "export_id"); err != nil {
		return n, err
	}
	if _, perr := domain.ParseMessageID(n.ExportID); perr != nil { // the ledger's rule for export ids
		return n, invalid("export_id", "export_id must be 1..%d printable characters without spaces", domain.MaxIDLength)
	}
	if req.CorrelationID != nil {
		n.CorrelationID = *req.CorrelationID
		if _, perr := domain.ParseCorrelationID(n.CorrelationID); perr != nil {
			return n, invalid("correlation_id", "correlation_id must be 1..%d printable characters without spaces", domain.MaxIDLength)
		}
	}
	return n, nil
}

func (req createOperationRequest) normalize() (normalizedOperationRequest, error) {
	var n normalizedOperationRequest
	var err error
	if n.OrderID, err = need(req.OrderID, "order_id"); err != nil {
		return n, err
	}
	if _, perr := domain.ParseMessageID(n.OrderID); perr != nil { // same rules as the ledger's order ids
		return n, invalid("order_id", "order_id must be 1..%d printable characters without spaces", domain.MaxIDLength)
	}
	if n.AmountMinor, err = need(req.AmountMinor, "amount_minor"); err != nil {
		return n, err
	}
	if n.AmountMinor <= 0 {
		return n, invalid("amount_minor", "amount_minor must be a positive amount in the currency's minor unit, got %d", n.AmountMinor)
	}
	if n.Currency, err = need(req.Currency, "currency"); err != nil {
		return n, err
	}
	if !isCurrency(n.Currency) {
		return n, invalid("currency", "currency must be an ISO 4217 code in capitals, got %q", n.Currency)
	}
	if req.CorrelationID != nil {
		n.CorrelationID = *req.CorrelationID
		if _, perr := domain.ParseCorrelationID(n.CorrelationID); perr != nil {
			return n, invalid("correlation_id", "correlation_id must be 1..%d printable characters without spaces", domain.MaxIDLength)
		}
	}
	if req.OrderTotalMinor != nil {
		n.OrderTotalMinor = *req.OrderTotalMinor
		if n.OrderTotalMinor < 0 {
			return n, invalid("order_total_minor", "order_total_minor must not be negative")
		}
	}
	return n, nil
}

func hashRequest(n any) (string, error) {
	data, err := json.Marshal(n)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

func printableOrSpace(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
