package sim

import (
	"fmt"
	"net/http"
	"path"
)

// Describe names a request to the simulator for a trace: what it asks
// (create, lookup, retrieve), the operation it names and its idempotency
// key, read the way the simulated API writes them (the export-delivery
// service's requests included). It changes nothing and refuses nothing.
func (s *Simulator) Describe(req *http.Request, body []byte) (what, op, key string) {
	key = req.Header.Get(s.dia.keyHeader())
	if key == "" {
		key = req.Header.Get("Idempotency-Key") // the export-delivery service's
	}
	if req.Method == http.MethodPost {
		op = s.dia.reference(body, s.cfg.ReferenceKey)
		return fmt.Sprintf("create %s key %s", op, key), op, key
	}
	if op = req.URL.Query().Get("operation_id"); op != "" {
		return "lookup " + op, op, ""
	}
	return "retrieve " + path.Base(req.URL.Path), "", ""
}
