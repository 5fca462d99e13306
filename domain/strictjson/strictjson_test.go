package strictjson_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain/strictjson"
)

type facts struct {
	Refundable *bool `json:"order_refundable"`
}

type request struct {
	OrderID *string `json:"order_id"`
	Amount  *int64  `json:"amount_minor"`
	Facts   *facts  `json:"facts"`
	Reason  string  `json:"reason"`
}

func TestDecodeObjectAcceptsOneExactObject(t *testing.T) {
	t.Parallel()
	var r request
	require.NoError(t, strictjson.DecodeObject([]byte(" {\"order_id\":\"O\\u0000\",\"amount_minor\":5,\"facts\":{\"order_refundable\":true},\"reason\":null}\n"), &r, strictjson.Options{}))
	require.Equal(t, "O\x00", *r.OrderID, "free text is judged by the domain, not here")
	require.Equal(t, int64(5), *r.Amount)
	require.True(t, *r.Facts.Refundable)

	var lenient request
	require.NoError(t, strictjson.DecodeObject([]byte(`{"order_id":"O","extra":{"a":1}}`), &lenient, strictjson.Options{AllowUnknown: true}))
	require.Equal(t, "O", *lenient.OrderID)
}

// TestDecodeObjectRefusals: every refusal names its problem and the member
// at fault, by pointer and by dotted path, escaped.
func TestDecodeObjectRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, in string
		problem  strictjson.Problem
		field    string
		pointer  string
	}{
		{"case variant", `{"order_id":"X","amount_minor":100,"Amount_Minor":99999999}`, strictjson.ProblemUnknown, "Amount_Minor", "/Amount_Minor"},
		{"duplicate", `{"amount_minor":-5,"amount_minor":5}`, strictjson.ProblemDuplicate, "amount_minor", "/amount_minor"},
		{"nested duplicate", `{"facts":{"order_refundable":true,"order_refundable":false}}`, strictjson.ProblemDuplicate, "facts.order_refundable", "/facts/order_refundable"},
		{"nested unknown", `{"facts":{"vip":true}}`, strictjson.ProblemUnknown, "facts.vip", "/facts/vip"},
		{"hostile unknown name", `{"a\u0000b":1}`, strictjson.ProblemUnknown, `a\x00b`, `/a\x00b`},
		{"invalid utf-8", "{\"order_id\":\"a\xffb\"}", strictjson.ProblemSyntax, "order_id", "/order_id"},
		{"lone surrogate", `{"order_id":"\ud800"}`, strictjson.ProblemSyntax, "order_id", "/order_id"},
		{"wrong type", `{"amount_minor":"5"}`, strictjson.ProblemType, "amount_minor", "/amount_minor"},
		{"fraction", `{"amount_minor":1.5}`, strictjson.ProblemType, "amount_minor", "/amount_minor"},
		{"out of range", `{"amount_minor":99999999999999999999}`, strictjson.ProblemType, "amount_minor", "/amount_minor"},
		{"nested not an object", `{"facts":[1]}`, strictjson.ProblemType, "facts", "/facts"},
		{"truncated", `{"order_id":`, strictjson.ProblemSyntax, "order_id", "/order_id"},
		{"null", `null`, strictjson.ProblemNotObject, "", ""},
		{"array", `[1,2]`, strictjson.ProblemNotObject, "", ""},
		{"string", `"x"`, strictjson.ProblemNotObject, "", ""},
		{"number", `5`, strictjson.ProblemNotObject, "", ""},
		{"two objects", `{} {}`, strictjson.ProblemSyntax, "", ""},
		{"trailing garbage", `{} x`, strictjson.ProblemSyntax, "", ""},
		{"not json", `order_id=O`, strictjson.ProblemSyntax, "", ""},
		{"empty", ``, strictjson.ProblemEmpty, "", ""},
		{"blank", " \n\t", strictjson.ProblemEmpty, "", ""},
	} {
		var r request
		err := strictjson.DecodeObject([]byte(c.in), &r, strictjson.Options{})
		var se *strictjson.Error
		require.True(t, errors.As(err, &se), "%s: %v", c.name, err)
		require.ErrorIs(t, err, strictjson.ErrRefused, c.name)
		require.Equal(t, c.problem, se.Problem, "%s: %v", c.name, err)
		require.Equal(t, c.field, se.Field, "%s: %v", c.name, err)
		require.Equal(t, c.pointer, se.Pointer, "%s: %v", c.name, err)
		require.NotEmpty(t, se.Detail, c.name)
		require.NotContains(t, err.Error(), "\x00", c.name)
	}
}

func TestUnknownCaseVariantNamesTheField(t *testing.T) {
	t.Parallel()
	var r request
	err := strictjson.DecodeObject([]byte(`{"Amount_Minor":1}`), &r, strictjson.Options{})
	require.ErrorContains(t, err, `the field is "amount_minor"`)
}

func TestFieldOfUnescapesPointerTokens(t *testing.T) {
	t.Parallel()
	require.Equal(t, "a/b.c~d.0", strictjson.FieldOf("/a~1b/c~0d/0"))
	require.Equal(t, "", strictjson.FieldOf(""))
}
