package httpapi_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/domain"
)

// member is one name and value of a JSON object written by hand, so that a
// test can repeat a name, vary its case or put raw bytes in a value. value
// is raw JSON text, or []member for a nested object.
type member struct {
	name  string
	value any
}

func render(ms []member) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:", m.name)
		switch v := m.value.(type) {
		case string:
			b.WriteString(v)
		case []member:
			b.WriteString(render(v))
		}
	}
	b.WriteByte('}')
	return b.String()
}

// edit returns a copy of ms in which f changed the object holding the
// member at the dotted path (f gets that object and the member's index).
func edit(ms []member, path string, f func(obj []member, i int) []member) []member {
	name, rest, nested := strings.Cut(path, ".")
	out := slices.Clone(ms)
	for i, m := range out {
		if m.name != name {
			continue
		}
		if nested {
			out[i].value = edit(m.value.([]member), rest, f)
			return out
		}
		return f(out, i)
	}
	panic("no member " + path)
}

// paths lists the dotted path of every member, nested ones included.
func paths(ms []member, prefix string) []string {
	var out []string
	for _, m := range ms {
		out = append(out, prefix+m.name)
		if sub, ok := m.value.([]member); ok {
			out = append(out, paths(sub, prefix+m.name+".")...)
		}
	}
	return out
}

// parentOf returns the dotted path's parent prefix ("facts." of
// "facts.order_refundable", "" of "approver") and its last name.
func parentOf(path string) (string, string) {
	i := strings.LastIndexByte(path, '.')
	return path[:i+1], path[i+1:]
}

// hostileText is what each free-text field is tried with: as JSON escapes
// (NUL, ESC, RIGHT-TO-LEFT OVERRIDE) and as a raw byte that is not UTF-8.
var hostileText = map[string]string{
	"NUL":          `\u0000`,
	"ESC":          `\u001b[2J`,
	"RLO":          `\u202e`,
	"invalid-utf8": "\xff",
}

// bodyShapes are bodies that are not exactly one JSON object.
var bodyShapes = map[string]string{
	"null":             `null`,
	"array":            `[{}]`,
	"string":           `"{}"`,
	"number":           `5`,
	"two objects":      `{} {}`,
	"trailing garbage": `{} x`,
	"not json":         `order_id=ORD-1`,
	"truncated":        `{`,
}

// strictEndpoint is one endpoint that takes a body, with a body it accepts.
type strictEndpoint struct {
	name   string
	role   httpapi.Role
	path   string
	header []string
	body   []member
	// free: the free-text members (every string an endpoint reads from the
	// caller); token: members holding a capability token, whose unreadable
	// value is recorded as evidence in the unattributed stream (200 Invalid,
	// as docs/api.md says) rather than refused.
	free, token []string
	// stream is the operation stream the endpoint writes to ("" for none);
	// evidence the event types it documents recording for a refused write.
	stream   string
	evidence []string
	accepted int // the status of body itself
}

// TestEveryBodyIsReadStrictly: for every endpoint that takes a body, a
// case-variant or exact duplicate of each field, hostile text in each
// free-text field, a body that is not one JSON object, and an unknown
// nested field are each a 400 naming the field, and none of them writes to
// the operation's stream (except the evidence the endpoint documents) or to
// the evidence stream. Each endpoint then accepts its body, so what was
// refused was what the case changed.
func TestEveryBodyIsReadStrictly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)

	// One operation per endpoint whose state lets its body succeed.
	decideOp := e.create("strict-decide")
	claimOp := e.create("strict-claim")
	_, claimToken := e.allow(claimOp)
	revokeOp := e.create("strict-revoke")
	revokeCap, _ := e.allow(revokeOp)
	leaseOp, leaseX := e.execute("strict-lease")
	outcomeOp, outcomeX := e.execute("strict-outcome")
	resolveOp, resolveX := e.execute("strict-resolve")
	e.must(http.StatusOK, e.post(httpapi.RoleWorker, "/v1/executions/"+string(resolveX)+"/outcome",
		map[string]any{"lease_epoch": 1, "lease_secret": e.secret(resolveX), "outcome": "Unknown", "detail": "timeout after sending"}))
	createKey := "strict-create"

	facts := []member{
		{"order_refundable", `true`}, {"chargeback_open", `false`}, {"refunded_minor", `0`}, {"order_total_minor", `12000`},
	}
	endpoints := []strictEndpoint{
		{
			name: "create operation", role: httpapi.RoleAgent, path: "/v1/operations", header: []string{"Idempotency-Key", createKey},
			body: []member{{"order_id", `"ORD-1"`}, {"amount_minor", `100`}, {"currency", `"EUR"`}, {"correlation_id", `"COR-1"`}, {"order_total_minor", `500`}},
			free: []string{"order_id", "currency", "correlation_id"}, stream: httpapi.OperationIDForKey(createKey).StreamName(), accepted: http.StatusCreated,
		},
		{
			name: "decide", role: httpapi.RoleAgent, path: "/v1/operations/" + string(decideOp) + "/decisions",
			body: []member{{"approver", `"ops-lead"`}, {"approval_limit_minor", `10000`}, {"facts", facts}},
			free: []string{"approver"}, stream: decideOp.StreamName(), accepted: http.StatusOK,
		},
		{
			name: "claim", role: httpapi.RoleWorker, path: "/v1/claims",
			body: []member{
				{"message_id", `"MSG-strict"`}, {"correlation_id", `"COR-strict"`}, {"operation_id", fmt.Sprintf("%q", claimOp)},
				{"capability", fmt.Sprintf("%q", claimToken)}, {"worker_id", `"worker-1"`}, {"lease_seconds", `60`},
			},
			free: []string{"message_id", "correlation_id", "operation_id", "worker_id"}, token: []string{"capability"},
			stream: claimOp.StreamName(), accepted: http.StatusOK,
		},
		{
			name: "revoke", role: httpapi.RoleOperator, path: "/v1/capabilities/" + string(revokeCap) + "/revoke",
			body: []member{{"reason", `"agent withdrew the approval"`}},
			free: []string{"reason"}, stream: revokeOp.StreamName(), accepted: http.StatusOK,
		},
		{
			name: "renew lease", role: httpapi.RoleWorker, path: "/v1/executions/" + string(leaseX) + "/lease",
			body: []member{{"lease_epoch", `1`}, {"lease_secret", fmt.Sprintf("%q", e.secret(leaseX))}, {"worker_id", `"worker-1"`}, {"lease_seconds", `60`}},
			free: []string{"worker_id"}, stream: leaseOp.StreamName(), evidence: []string{domain.TypeWriteRefused}, accepted: http.StatusOK,
		},
		{
			name: "record outcome", role: httpapi.RoleWorker, path: "/v1/executions/" + string(outcomeX) + "/outcome",
			body: []member{{"lease_epoch", `1`}, {"lease_secret", fmt.Sprintf("%q", e.secret(outcomeX))}, {"outcome", `"Completed"`}, {"provider_reference", `"re_1"`}, {"detail", `"201 from provider"`}, {"late", `false`}},
			free: []string{"outcome", "provider_reference", "detail"}, stream: outcomeOp.StreamName(), evidence: []string{domain.TypeWriteRefused}, accepted: http.StatusOK,
		},
		{
			name: "resolve", role: httpapi.RoleOperator, path: "/v1/executions/" + string(resolveX) + "/resolve",
			body: []member{{"outcome", `"Completed"`}, {"provider_reference", `"re_9"`}, {"evidence", `"found at the provider by operation id"`}},
			free: []string{"outcome", "provider_reference", "evidence"}, stream: resolveOp.StreamName(), accepted: http.StatusOK,
		},
		{
			name: "test clock", role: httpapi.RoleOperator, path: "/v1/test-clock",
			body: []member{{"advance", `"1s"`}}, free: []string{"advance"}, accepted: http.StatusOK,
		},
	}

	for _, ep := range endpoints {
		evidenceBefore := len(e.streamTypes(e.unattributed()))
		var streamBefore []string
		if ep.stream != "" {
			streamBefore = e.streamTypes(ep.stream)
		}
		// refused sends body and requires a 400 naming field with one of codes.
		refused := func(what, body, field string, codes ...string) {
			t.Helper()
			r := e.call(ep.role, "POST", ep.path, body, ep.header...)
			require.Equal(t, http.StatusBadRequest, r.status, "%s, %s: %s: %s", ep.name, what, body, r.raw)
			require.Equal(t, field, r.field(), "%s, %s: %s", ep.name, what, r.raw)
			require.Contains(t, codes, r.code(), "%s, %s: %s", ep.name, what, r.raw)
		}

		for _, path := range paths(ep.body, "") {
			prefix, name := parentOf(path)
			variant := strings.ToUpper(name[:1]) + name[1:]
			refused("case-variant of "+path, render(edit(ep.body, path, func(obj []member, i int) []member {
				return append(obj, member{variant, obj[i].value})
			})), prefix+variant, httpapi.CodeRequestUnknownField)
			refused("duplicate of "+path, render(edit(ep.body, path, func(obj []member, i int) []member {
				return append(obj, obj[i])
			})), path, httpapi.CodeRequestDuplicateField)
		}
		for _, path := range ep.free {
			for what, text := range hostileText {
				body := render(edit(ep.body, path, func(obj []member, i int) []member {
					v := obj[i].value.(string)
					obj[i].value = v[:2] + text + v[2:] // inside the string, after its first character
					return obj
				}))
				code := httpapi.CodeRequestInvalid
				if what == "invalid-utf8" {
					code = httpapi.CodeRequestMalformed
				}
				refused(what+" in "+path, body, path, code)
			}
			refused("object in "+path, render(edit(ep.body, path, func(obj []member, i int) []member {
				obj[i].value = []member{{"x", `1`}}
				return obj
			})), path, httpapi.CodeRequestInvalid)
		}
		for what, body := range bodyShapes {
			refused(what, body, "body", httpapi.CodeRequestMalformed)
		}
		refused("unknown nested field", render(append(slices.Clone(ep.body), member{"extra", []member{{"amount_minor", `99999999`}}})),
			"extra", httpapi.CodeRequestUnknownField)
		if slices.ContainsFunc(ep.body, func(m member) bool { return m.name == "facts" }) {
			refused("unknown field inside facts", render(edit(ep.body, "facts.order_refundable", func(obj []member, i int) []member {
				return append(obj, member{"vip", `true`})
			})), "facts.vip", httpapi.CodeRequestUnknownField)
		}

		// An unreadable capability token is evidence, as documented: 200
		// Invalid, recorded in the unattributed stream, escaped.
		tokenEvidence := 0
		for _, path := range ep.token {
			for what, text := range hostileText {
				body := render(edit(ep.body, path, func(obj []member, i int) []member {
					v := obj[i].value.(string)
					obj[i].value = v[:2] + text + v[2:]
					return obj
				}))
				r := e.call(ep.role, "POST", ep.path, body, ep.header...)
				if what == "invalid-utf8" {
					require.Equal(t, http.StatusBadRequest, r.status, "%s, %s: %s", ep.name, what, r.raw)
					require.Equal(t, path, r.field())
					continue
				}
				require.Equal(t, http.StatusOK, r.status, "%s, %s in %s: %s", ep.name, what, path, r.raw)
				require.Equal(t, string(domain.StatusInvalid), r.str("status"))
				require.Equal(t, string(domain.ReasonCapabilityInvalid), r.str("reason"))
				tokenEvidence++
			}
		}

		if ep.stream != "" {
			after := e.streamTypes(ep.stream)
			require.Equal(t, streamBefore, after[:min(len(streamBefore), len(after))], ep.name)
			for _, typ := range after[len(streamBefore):] {
				require.Contains(t, ep.evidence, typ, "%s: a refused body wrote %s to the operation's stream", ep.name, typ)
			}
		}
		require.Len(t, e.streamTypes(e.unattributed()), evidenceBefore+tokenEvidence, "%s: evidence stream", ep.name)

		// The body itself is accepted: the refusals were about what changed.
		r := e.call(ep.role, "POST", ep.path, render(ep.body), ep.header...)
		require.Equal(t, ep.accepted, r.status, "%s: %s", ep.name, r.raw)
	}

	// What the accepted bodies did is what they said, nothing more.
	created, err := e.h.Load(t.Context(), httpapi.OperationIDForKey(createKey))
	require.NoError(t, err)
	require.Equal(t, int64(100), created.AmountMinor)
	claimed, err := e.h.Load(t.Context(), claimOp)
	require.NoError(t, err)
	require.Equal(t, domain.OpExecuting, claimed.Status())
}

// TestRevokeWithANullBodyRevokesNothing: an optional body may be empty,
// never null.
func TestRevokeWithANullBodyRevokesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	op := e.create("revoke-null")
	c, _ := e.allow(op)
	before := e.streamTypes(op.StreamName())
	r := e.must(http.StatusBadRequest, e.call(httpapi.RoleOperator, "POST", "/v1/capabilities/"+string(c)+"/revoke", `null`))
	require.Equal(t, httpapi.CodeRequestMalformed, r.code())
	require.Equal(t, "body", r.field())
	require.Equal(t, before, e.streamTypes(op.StreamName()))

	e.must(http.StatusOK, e.call(httpapi.RoleOperator, "POST", "/v1/capabilities/"+string(c)+"/revoke", ``))
	require.Equal(t, append(before, domain.TypeCapabilityRevoked), e.streamTypes(op.StreamName()))
}

// TestCaseVariantAmountIsNotRecorded: the case from outside. A body with
// amount_minor 100 and Amount_Minor 99,999,999 was 201 and recorded
// 99,999,999; a duplicate let the last value win.
func TestCaseVariantAmountIsNotRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.must(http.StatusBadRequest, e.call(httpapi.RoleAgent, "POST", "/v1/operations",
		`{"order_id":"ORD-X","amount_minor":100,"Amount_Minor":99999999,"currency":"EUR"}`, "Idempotency-Key", "variant-1"))
	require.Equal(t, httpapi.CodeRequestUnknownField, r.code())
	require.Equal(t, "Amount_Minor", r.field())
	require.Contains(t, r.body["error"].(map[string]any)["message"], `"amount_minor"`, "the message names the field meant")
	r = e.must(http.StatusBadRequest, e.call(httpapi.RoleAgent, "POST", "/v1/operations",
		`{"order_id":"ORD-X","amount_minor":-5,"amount_minor":5,"currency":"EUR"}`, "Idempotency-Key", "variant-1"))
	require.Equal(t, httpapi.CodeRequestDuplicateField, r.code())
	require.Equal(t, "amount_minor", r.field())
	require.Empty(t, e.streamTypes(httpapi.OperationIDForKey("variant-1").StreamName()))
}
