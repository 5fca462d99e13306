package httpapi

import "net/http"

// Mount serves h for every path under prefix (a pattern ending in "/",
// e.g. the console's "/ui/"), beside the API's endpoints: its requests are
// logged and counted like the API's, under the route prefix, and carry the
// same X-Request-Id. h authenticates its own requests (the console signs
// people in with the same Tokens). Mounted handlers are not among Routes,
// which lists the JSON API. Call Mount before serving.
func (s *Server) Mount(prefix string, h http.Handler) {
	s.mux.Handle(prefix, h)
}
