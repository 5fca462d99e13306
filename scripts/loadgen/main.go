// Command loadgen drives a running `opledger serve` the way many workers
// would: each client loops create → decide → claim → outcome, and presents
// every capability a second time on a new message id (the expected refusal).
// It prints claims per second and latency percentiles. It is a load run, not
// a test: scripts/load.sh starts the system and calls it.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	api := flag.String("api", "http://127.0.0.1:18080", "the API's base URL")
	clients := flag.Int("clients", 50, "concurrent clients")
	duration := flag.Duration("duration", 30*time.Second, "how long to run")
	agent := flag.String("agent-token", "", "agent bearer token")
	worker := flag.String("worker-token", "", "worker bearer token")
	flag.Parse()
	if *agent == "" || *worker == "" {
		fmt.Fprintln(os.Stderr, "loadgen: --agent-token and --worker-token are required")
		os.Exit(2)
	}
	httpc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *clients * 2}}
	var (
		mu                        sync.Mutex
		claimLat                  []time.Duration
		claimed, refused, unexpct atomic.Int64
		firstErr                  atomic.Value
	)
	call := func(path, token string, body any, hdr ...string) (int, map[string]any, time.Duration) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", *api+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		t0 := time.Now()
		resp, err := httpc.Do(req)
		if err != nil {
			firstErr.CompareAndSwap(nil, err.Error())
			return 0, nil, time.Since(t0)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out := map[string]any{}
		_ = json.Unmarshal(raw, &out)
		return resp.StatusCode, out, time.Since(t0)
	}
	bad := func(what string, status int, body map[string]any) {
		unexpct.Add(1)
		firstErr.CompareAndSwap(nil, fmt.Sprintf("%s: %d %v", what, status, body))
	}
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	deadline := time.Now().Add(*duration)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			for i := 0; time.Now().Before(deadline); i++ {
				key := fmt.Sprintf("load-%s-%d-%d", run, c, i)
				st, op, _ := call("/v1/operations", *agent, map[string]any{"order_id": "ORD-" + key, "amount_minor": 1000, "currency": "EUR", "order_total_minor": 5000}, "Idempotency-Key", key)
				if st != 201 {
					bad("create", st, op)
					continue
				}
				opID := op["operation_id"].(string)
				st, d, _ := call("/v1/operations/"+opID+"/decisions", *agent, map[string]any{"approver": "load", "approval_limit_minor": 5000,
					"facts": map[string]any{"order_refundable": true, "chargeback_open": false, "refunded_minor": 0}})
				if st != 200 || d["capability"] == nil {
					bad("decide", st, d)
					continue
				}
				token := d["capability"].(map[string]any)["token"].(string)
				st, cl, took := call("/v1/claims", *worker, map[string]any{"message_id": "MSG-" + key, "operation_id": opID, "capability": token, "worker_id": fmt.Sprintf("load-%d", c)})
				lat = append(lat, took)
				if st != 200 || cl["status"] != "Claimed" {
					bad("claim", st, cl)
					continue
				}
				claimed.Add(1)
				st, o, _ := call("/v1/executions/"+cl["execution_id"].(string)+"/outcome", *worker, map[string]any{"lease_epoch": cl["lease_epoch"], "lease_secret": cl["lease_secret"], "outcome": "Completed", "provider_reference": "re_" + key})
				if st != 200 {
					bad("outcome", st, o)
				}
				st, rp, took := call("/v1/claims", *worker, map[string]any{"message_id": "MSG-R-" + key, "operation_id": opID, "capability": token, "worker_id": fmt.Sprintf("load-%d", c)})
				lat = append(lat, took)
				if st == 200 && rp["status"] == "AlreadyConsumed" {
					refused.Add(1)
				} else {
					bad("replay", st, rp)
				}
			}
			mu.Lock()
			claimLat = append(claimLat, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(claimLat)
	pct := func(p float64) time.Duration {
		if len(claimLat) == 0 {
			return 0
		}
		return claimLat[min(len(claimLat)-1, int(float64(len(claimLat))*p))]
	}
	presentations := len(claimLat)
	fmt.Printf("clients %d, %s: %d presentations (%d Claimed, %d refused as expected), %d unexpected\n",
		*clients, elapsed.Round(time.Millisecond), presentations, claimed.Load(), refused.Load(), unexpct.Load())
	fmt.Printf("claims/s (all presentations): %.0f; Claimed/s: %.0f\n", float64(presentations)/elapsed.Seconds(), float64(claimed.Load())/elapsed.Seconds())
	fmt.Printf("claim latency p50 %s p90 %s p99 %s max %s\n", pct(0.50).Round(time.Microsecond), pct(0.90).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), pct(1).Round(time.Microsecond))
	if e := firstErr.Load(); e != nil {
		fmt.Printf("first unexpected: %v\n", e)
	}
	if unexpct.Load() > 0 {
		os.Exit(1)
	}
}
