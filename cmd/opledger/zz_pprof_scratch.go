package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	if a := os.Getenv("SCRATCH_PPROF"); a != "" {
		go http.ListenAndServe(a, nil)
	}
}
