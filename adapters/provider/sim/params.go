package sim

import (
	"errors"
	"fmt"
	"mime"
	"net/url"
	"strconv"
	"strings"

	"opledger/domain"
	"opledger/domain/strictjson"
)

// Parameter limits, Stripe's where it documents them.
const (
	maxAmount           = 99_999_999
	maxOrderLength      = 255
	maxMetadataKeys     = 50
	maxMetadataKeyLen   = 40
	maxMetadataValueLen = 500
	maxIdempotencyKey   = 255
)

// refundParams are the parameters of a refund-creation request.
type refundParams struct {
	Amount    int64
	hasAmount bool
	Currency  string
	Order     string
	Metadata  map[string]string
	op        string // Metadata[Config.ReferenceKey]: the merchant's reference
}

func (p refundParams) operationID() string { return p.op }

// fingerprint identifies the parameters, independent of the body's encoding,
// so a form and a JSON body with the same values compare equal.
func (p refundParams) fingerprint() string {
	return string(mustJSON(struct {
		Amount   int64             `json:"amount"`
		Currency string            `json:"currency"`
		Order    string            `json:"order"`
		Metadata map[string]string `json:"metadata"` // encoded with sorted keys
	}{p.Amount, p.Currency, p.Order, p.Metadata}))
}

// parseParams decodes a form-encoded or JSON body. It returns whatever it
// could decode (the operation id, for counting) together with the first
// syntax error, as a 400 invalid_request_error.
func parseParams(contentType string, body []byte) (refundParams, *apiError) {
	mediaType := "application/x-www-form-urlencoded"
	if contentType != "" {
		mt, _, err := mime.ParseMediaType(contentType)
		if err != nil {
			return refundParams{}, invalidRequest(codeParameterInvalid, "", "Invalid Content-Type: "+err.Error())
		}
		mediaType = mt
	}
	switch mediaType {
	case "application/x-www-form-urlencoded":
		return parseForm(body)
	case "application/json":
		return parseJSON(body)
	}
	return refundParams{}, invalidRequest(codeParameterInvalid, "",
		fmt.Sprintf("Unsupported Content-Type %q: send application/x-www-form-urlencoded or application/json.", mediaType))
}

func parseForm(body []byte) (refundParams, *apiError) {
	values, err := url.ParseQuery(string(body))
	if err != nil {
		return refundParams{}, invalidRequest(codeParameterInvalid, "", "Invalid form body: "+err.Error())
	}
	var p refundParams
	// Metadata first, so that the operation id is known whatever else fails.
	for name, vs := range values {
		if k, ok := strings.CutPrefix(name, "metadata["); ok && strings.HasSuffix(k, "]") && len(vs) == 1 {
			if p.Metadata == nil {
				p.Metadata = make(map[string]string)
			}
			p.Metadata[strings.TrimSuffix(k, "]")] = vs[0]
		}
	}
	for name, vs := range values {
		if len(vs) != 1 {
			safe := printable(name)
			return p, invalidRequest(codeParameterInvalid, safe, fmt.Sprintf("Invalid %s: given %d times.", safe, len(vs)))
		}
		v := vs[0]
		switch {
		case name == "amount":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return p, invalidRequest(codeParameterInvalid, "amount", "Invalid integer: "+strconv.Quote(v))
			}
			p.Amount, p.hasAmount = n, true
		case name == "currency":
			p.Currency = v
		case name == "order":
			p.Order = v
		case strings.HasPrefix(name, "metadata[") && strings.HasSuffix(name, "]"):
			// decoded above
		default:
			safe := printable(name)
			return p, invalidRequest(codeParameterUnknown, safe, "Received unknown parameter: "+safe)
		}
	}
	return p, nil
}

// parseJSON reads a JSON body strictly (domain/strictjson): exactly one
// object, names matching exactly, no duplicate names (metadata keys
// included), valid UTF-8, no unknown fields. A refusal names the parameter
// at fault.
func parseJSON(body []byte) (refundParams, *apiError) {
	var in struct {
		Amount   *int64            `json:"amount"`
		Currency string            `json:"currency"`
		Order    string            `json:"order"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := strictjson.DecodeObject(body, &in, strictjson.Options{}); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			return refundParams{}, invalidRequest(codeParameterInvalid, jsonParam(se.Field), "Invalid JSON body: "+se.Error())
		}
		return refundParams{}, invalidRequest(codeParameterInvalid, "", "Invalid JSON body: "+printable(err.Error()))
	}
	p := refundParams{Currency: in.Currency, Order: in.Order, Metadata: in.Metadata}
	if in.Amount != nil {
		p.Amount, p.hasAmount = *in.Amount, true
	}
	return p, nil
}

// jsonParam names a JSON field as a form parameter: "metadata.k" is
// "metadata[k]", as Stripe names it.
func jsonParam(field string) string {
	if k, ok := strings.CutPrefix(field, "metadata."); ok {
		return "metadata[" + k + "]"
	}
	return field
}

// printable escapes and bounds hostile text quoted back (domain.EvidenceText).
func printable(s string) string {
	out, _ := domain.EvidenceText(s, maxMetadataValueLen)
	return out
}

// checkText refuses text a person or a store could not take as it is:
// invalid UTF-8, NUL, control or format characters (domain.CheckText).
// Stripe takes more; the simulator refuses these so that nothing it keeps
// (its ledger, its export) carries them.
func checkText(param, s string, max int) *apiError {
	if r := domain.CheckText(param, s, max, false); r != nil {
		return invalidRequest(codeParameterInvalid, printable(param), "Invalid "+printable(param)+": "+r.Detail)
	}
	return nil
}

// validate checks the decoded parameters and normalises the currency.
func (p *refundParams) validate() *apiError {
	switch {
	case !p.hasAmount:
		return invalidRequest(codeParameterMissing, "amount", "Missing required param: amount.")
	case p.Amount <= 0 || p.Amount > maxAmount:
		return invalidRequest(codeParameterInvalid, "amount",
			fmt.Sprintf("Invalid amount %d: must be an integer in minor units between 1 and %d.", p.Amount, maxAmount))
	case p.Currency == "":
		return invalidRequest(codeParameterMissing, "currency", "Missing required param: currency.")
	case !isCurrency(p.Currency):
		return invalidRequest(codeParameterInvalid, "currency", "Invalid currency: "+strconv.Quote(p.Currency))
	case p.Order == "":
		return invalidRequest(codeParameterMissing, "order", "Missing required param: order.")
	case len(p.Order) > maxOrderLength:
		return invalidRequest(codeParameterInvalid, "order", fmt.Sprintf("Invalid order: longer than %d bytes.", maxOrderLength))
	case len(p.Metadata) > maxMetadataKeys:
		return invalidRequest(codeParameterInvalid, "metadata", fmt.Sprintf("Invalid metadata: more than %d keys.", maxMetadataKeys))
	}
	if e := checkText("order", p.Order, maxOrderLength); e != nil {
		return e
	}
	for k, v := range p.Metadata {
		if k == "" || len(k) > maxMetadataKeyLen || len(v) > maxMetadataValueLen {
			return invalidRequest(codeParameterInvalid, "metadata["+printable(k)+"]",
				fmt.Sprintf("Invalid metadata: keys are 1 to %d bytes, values at most %d.", maxMetadataKeyLen, maxMetadataValueLen))
		}
		if r := domain.CheckText("metadata key", k, maxMetadataKeyLen, true); r != nil {
			return invalidRequest(codeParameterInvalid, "metadata["+printable(k)+"]", "Invalid metadata key: "+r.Detail)
		}
		if e := checkText("metadata["+k+"]", v, maxMetadataValueLen); e != nil {
			return e
		}
	}
	p.Currency = strings.ToLower(p.Currency)
	return nil
}

func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') {
			return false
		}
	}
	return true
}
