package console

import "opledger/adapters/httpapi"

// Action is something a person does in the console; every one is a command
// of the ledger (or of the transport's or loops' stores) that the API
// offers too, run with the signed-in principal as its actor.
type Action string

// The actions.
const (
	ActResolve  Action = "resolve"  // settle an Unknown or Escalated execution (POST /v1/executions/{id}/resolve)
	ActRevoke   Action = "revoke"   // withdraw unused authority (POST /v1/capabilities/{id}/revoke)
	ActResubmit Action = "resubmit" // republish dead letters under new message ids (opledger dlq resubmit)
	ActRelease  Action = "release"  // let a loop try a set-aside item again (POST /v1/set-aside/release)
	// ActEndSessions ends every console session of a token, on every
	// instance (the console's own: sessions are the console's).
	ActEndSessions Action = "end-sessions"
	// ActAcknowledge records that the log regressions recorded so far were
	// seen (POST /v1/regressions/acknowledge).
	ActAcknowledge Action = "acknowledge"
)

// May reports whether role may take action. The matrix is the API's:
// operators resolve, revoke, resubmit and release (and end a token's
// console sessions); every other role
// (auditors, analysts, agents, workers) reads only.
func May(role httpapi.Role, a Action) bool {
	switch a {
	case ActResolve, ActRevoke, ActResubmit, ActRelease, ActEndSessions, ActAcknowledge:
		return role == httpapi.RoleOperator
	}
	return false
}

// mayRead reports whether role may read the console: every role that may
// call the API's reads (httpapi.Readers; not a subscriber, which reads the
// feed only).
func mayRead(role httpapi.Role) bool {
	for _, r := range httpapi.Readers {
		if r == role {
			return true
		}
	}
	return false
}
