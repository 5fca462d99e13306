package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"strconv"
	"strings"
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
}

func (p refundParams) operationID() string { return p.Metadata["operation_id"] }

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
			return p, invalidRequest(codeParameterInvalid, name, fmt.Sprintf("Invalid %s: given %d times.", name, len(vs)))
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
			return p, invalidRequest(codeParameterUnknown, name, "Received unknown parameter: "+name)
		}
	}
	return p, nil
}

func parseJSON(body []byte) (refundParams, *apiError) {
	var in struct {
		Amount   *int64            `json:"amount"`
		Currency string            `json:"currency"`
		Order    string            `json:"order"`
		Metadata map[string]string `json:"metadata"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return refundParams{}, invalidRequest(codeParameterInvalid, "", "Invalid JSON body: "+err.Error())
	}
	p := refundParams{Currency: in.Currency, Order: in.Order, Metadata: in.Metadata}
	if in.Amount != nil {
		p.Amount, p.hasAmount = *in.Amount, true
	}
	if dec.More() {
		return p, invalidRequest(codeParameterInvalid, "", "Invalid JSON body: data after the object.")
	}
	return p, nil
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
	for k, v := range p.Metadata {
		if k == "" || len(k) > maxMetadataKeyLen || len(v) > maxMetadataValueLen {
			return invalidRequest(codeParameterInvalid, "metadata["+k+"]",
				fmt.Sprintf("Invalid metadata: keys are 1 to %d bytes, values at most %d.", maxMetadataKeyLen, maxMetadataValueLen))
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
