package httpapi

import (
	"net/http"

	"opledger/domain"
)

// pathOperation reads and validates the {id} of an operation path.
func pathOperation(r *http.Request) (domain.OperationID, error) {
	id, err := domain.ParseOperationID(r.PathValue("id"))
	if err != nil {
		return "", invalid("id", "path id: %v", err)
	}
	return id, nil
}

// pathExecution reads the {id} of an execution path and the operation it
// belongs to (execution ids name their operation: EXE-4471.1 is OP-4471's).
func pathExecution(r *http.Request) (domain.OperationID, domain.ExecutionID, error) {
	id, err := domain.ParseExecutionID(r.PathValue("id"))
	if err != nil {
		return "", "", invalid("id", "path id: %v", err)
	}
	op, found := domain.OperationOf(string(id))
	if !found {
		return "", "", notFound(string(domain.ReasonExecutionUnknown), "execution %s does not name an operation (ids look like EXE-<operation>.<n>)", id)
	}
	return op, id, nil
}

// pathCapability reads the {id} of a capability path and its operation.
func pathCapability(r *http.Request) (domain.OperationID, domain.CapabilityID, error) {
	id, err := domain.ParseCapabilityID(r.PathValue("id"))
	if err != nil {
		return "", "", invalid("id", "path id: %v", err)
	}
	op, found := domain.OperationOf(string(id))
	if !found {
		return "", "", notFound(string(domain.ReasonCapabilityInvalid), "capability %s does not name an operation (ids look like CAP-<operation>.<n>)", id)
	}
	return op, id, nil
}
