"""The Python client against a real serve and provider-sim.

cmd/opledger's TestPythonClient starts both (serve with --test-clock,
--enable-kinds export-download, the reconciler off so that the simulator's
requests are the workers' alone) and runs these with:

    OPLEDGER_TEST_API, OPLEDGER_TEST_SIM        the two base URLs
    OPLEDGER_TEST_{AGENT,WORKER,OPERATOR,AUDITOR}_TOKEN

Without them, these tests are skipped. Each proves its negative on the
simulator's ledger.
"""

import base64
import http.server
import json
import os
import threading
import time
import unittest
import urllib.error
import urllib.request

from opledger_client import (
    ALREADY_CONSUMED, CLAIMED, COMPLETED, DUPLICATE_DELIVERY, INVALID, NOT_RECORDED, OPERATION_NOT_EXECUTABLE,
    RECORDED_LATE, RECORDED_OUTCOME, REVOKED, UNKNOWN, ByKind, Client, ExportDeliveries, MalformedMessage, Message,
    Result, StripeRefunds, Worker, errors,
)

ENV = {k: os.environ.get("OPLEDGER_TEST_" + k) for k in
       ("API", "SIM", "AGENT_TOKEN", "WORKER_TOKEN", "OPERATOR_TOKEN", "AUDITOR_TOKEN")}
WAIT_BOUND = 30.0  # seconds: every wait for a condition is bounded


def call(method, url, token=None, body=None, headers=None):
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode())
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def eventually(what, check):
    deadline = time.monotonic() + WAIT_BOUND
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"never: {what}")


class Proxy:
    """Stands in front of serve and answers 503 store.unavailable in its
    stead, before forwarding (the request never reached serve) or after
    (serve did it, the answer is lost); it keeps what it saw."""

    def __init__(self, target):
        self.before, self.after, self.seen = {}, {}, []
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                before, after = proxy.take(self.path, body)
                if before:
                    return self.unavailable()
                req = urllib.request.Request(target + self.path, data=body, method="POST")
                for k in ("Authorization", "Content-Type"):
                    req.add_header(k, self.headers[k])
                try:
                    with urllib.request.urlopen(req, timeout=10) as resp:
                        status, answer = resp.status, resp.read()
                except urllib.error.HTTPError as e:
                    status, answer = e.code, e.read()
                if after:
                    return self.unavailable()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def unavailable(self):
                data = b'{"error":{"code":"store.unavailable","message":"injected by the test proxy"}}'
                self.send_response(503)
                self.send_header("Content-Type", "application/json")
                self.send_header("Retry-After", "1")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def take(self, path, body):
        with self.lock:
            self.seen.append((path, body))
            for table, hit in ((self.before, (True, False)), (self.after, (False, True))):
                for suffix, n in table.items():
                    if n > 0 and path.endswith(suffix):
                        table[suffix] = n - 1
                        return hit
        return False, False

    def bodies(self, suffix):
        with self.lock:
            return [b for p, b in self.seen if p.endswith(suffix)]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Ticker:
    """Drives the lease keeper's renewals by hand: a wait of a third of the
    lease returns when the test fires (or the keeper is stopped); every
    other wait is real."""

    def __init__(self, lease_seconds):
        self.every = lease_seconds / 3
        self.tick = threading.Semaphore(0)
        self.waiting = threading.Event()

    def wait(self, seconds, stop):
        if seconds != self.every:
            return stop.wait(seconds)
        self.waiting.set()
        while not stop.is_set():
            if self.tick.acquire(timeout=0.01):
                return False
        return True

    def fire(self):
        if not self.waiting.wait(WAIT_BOUND):
            raise AssertionError("the lease keeper never waited for its next renewal")
        self.tick.release()


@unittest.skipUnless(all(ENV.values()), "needs a running serve and provider-sim (cmd/opledger TestPythonClient)")
class AgainstServe(unittest.TestCase):
    def client(self, base=None, **kw):
        return Client(base or ENV["API"], token=kw.pop("token", ENV["WORKER_TOKEN"]),
                      worker_id=kw.pop("worker_id", "worker-py-client"), **kw)

    def decide(self, key, export_uses=0):
        create = {"order_id": "ORD-" + key, "amount_minor": 12000, "currency": "EUR", "order_total_minor": 24000}
        decision = {"approver": "agent-7", "approval_limit_minor": 50000,
                    "facts": {"order_refundable": True, "chargeback_open": False, "refunded_minor": 0}}
        if export_uses:
            create = {"kind": "export-download", "export_id": "EXP-" + key}
            decision = {"approver": "agent-7", "uses": export_uses, "facts": {"export_ready": True}}
        status, op = call("POST", ENV["API"] + "/v1/operations", ENV["AGENT_TOKEN"], create, {"Idempotency-Key": "py-" + key})
        self.assertEqual(status, 201, op)
        status, d = call("POST", f"{ENV['API']}/v1/operations/{op['operation_id']}/decisions", ENV["AGENT_TOKEN"], decision)
        self.assertEqual(status, 200, d)
        return op["operation_id"], d["capability"]

    def sim_ledger(self):
        return call("GET", ENV["SIM"] + "/_sim/ledger")[1]

    def sim_counts(self, op):
        c = self.sim_ledger()["by_operation"].get(op, {})
        return c.get("requests_received", 0), c.get("refunds_created", 0)

    def execution_of(self, op):
        status, o = call("GET", f"{ENV['API']}/v1/operations/{op}", ENV["AUDITOR_TOKEN"])
        xs = o.get("executions") or []
        return xs[0] if status == 200 and len(xs) == 1 else None

    def wait_execution(self, op, what, ok):
        return eventually(what, lambda: (lambda x: x if x and ok(x) else None)(self.execution_of(op)))

    def advance(self, by):
        status, _ = call("POST", ENV["API"] + "/v1/test-clock", ENV["OPERATOR_TOKEN"], {"advance": by})
        self.assertEqual(status, 200)

    def arm(self, kind, op):
        status, _ = call("POST", ENV["SIM"] + "/_sim/faults", body={"kind": kind, "operation_id": op})
        self.assertEqual(status, 200)

    def test_every_claim_status_is_typed(self):
        c = self.client()
        op, cap = self.decide("statuses")
        token = cap["token"]
        a = c.claim(Message("MSG-PY-1", op, token))
        self.assertEqual(a.status, CLAIMED)
        x = a.execution
        self.assertEqual(x.idempotency_key, f"refund-{op}-a1")
        self.assertEqual((x.amount_minor, x.currency, x.order_id), (12000, "EUR", "ORD-statuses"))
        self.assertEqual(x.provider_metadata(), {"operation_id": op, "idempotency_key": x.idempotency_key})
        self.assertNotIn(x._secret, repr(a))

        a = c.claim(Message("MSG-PY-1", op, token))
        self.assertEqual((a.status, a.reason, a.execution), (DUPLICATE_DELIVERY, "delivery.duplicate", None))
        a = c.claim(Message("MSG-PY-2", op, token))
        self.assertEqual((a.status, a.reason, a.replay_suspected), (ALREADY_CONSUMED, "capability.already-consumed", True))

        payload, sig = token.split(".")
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).replace(b'"att":1', b'"att":2')
        forged = base64.urlsafe_b64encode(raw).rstrip(b"=").decode() + "." + sig
        a = c.claim(Message("MSG-PY-3", op, forged))
        self.assertEqual((a.status, a.reason), (INVALID, "capability.invalid"))

        rop, rcap = self.decide("revoked")
        status, _ = call("POST", f"{ENV['API']}/v1/capabilities/{rcap['capability_id']}/revoke", ENV["OPERATOR_TOKEN"], {"reason": "test"})
        self.assertEqual(status, 200)
        a = c.claim(Message("MSG-PY-4", rop, rcap["token"]))
        self.assertEqual((a.status, a.reason), (REVOKED, "capability.revoked"))

        xop, xcap = self.decide("busy", export_uses=2)
        a = c.claim(Message("MSG-PY-5", xop, xcap["token"]))
        self.assertEqual(a.execution.idempotency_key, f"export-{xop}-a1-u1")
        a = c.claim(Message("MSG-PY-6", xop, xcap["token"]))
        self.assertEqual((a.status, a.reason), (OPERATION_NOT_EXECUTABLE, "operation.executing"))
        for o in (op, rop, xop):
            self.assertEqual(self.sim_counts(o)[0], 0, "claims alone send nothing")

    def test_every_documented_error_is_typed(self):
        op, cap = self.decide("errors")
        m = Message("MSG-PY-E1", op, cap["token"])
        with self.assertRaises(errors.Unauthenticated) as e:
            self.client(token="not-a-token-of-this-server").claim(m)
        self.assertEqual(e.exception.status, 401)
        with self.assertRaises(errors.Forbidden):
            self.client(token=ENV["AGENT_TOKEN"]).claim(m)
        w = Worker(self.client(), StripeRefunds(ENV["SIM"]))
        with self.assertRaises(MalformedMessage) as e:
            w.handle(Message("MSG-PY-E1\u202e", op, cap["token"]))
        self.assertIsInstance(e.exception.error, errors.RequestInvalid)
        self.assertEqual(e.exception.error.field, "message_id")

        c = self.client()
        x = c.claim(m).execution
        with self.assertRaises(errors.LeaseLost):
            self.client(worker_id="worker-other").renew_lease(x)
        c.renew_lease(x)
        c.record_outcome(x, Result("NotApplied", "", "nothing sent"))
        with self.assertRaises(errors.LeaseLost):
            c.record_outcome(x, Result("NotApplied", "", "again"))
        with self.assertRaises(errors.ExecutionNotUnknown):
            c.record_late_outcome(x, Result("NotApplied", "", "late"))

    def test_a_workers_refund_is_made_once_where_the_reconciler_finds_it(self):
        w = Worker(self.client(), ByKind(refund=StripeRefunds(ENV["SIM"])))
        op, cap = self.decide("once")
        m = Message("MSG-PY-O1", op, cap["token"])
        h = w.handle(m)
        self.assertEqual((h.claim.status, h.result.outcome, h.recorded), (CLAIMED, COMPLETED, RECORDED_OUTCOME), h.result.detail)
        self.assertEqual(w.handle(m).claim.status, DUPLICATE_DELIVERY)
        self.assertEqual(w.handle(Message("MSG-PY-O2", op, cap["token"])).claim.status, ALREADY_CONSUMED)
        self.assertEqual(self.sim_counts(op), (1, 1))
        status, found = call("GET", f"{ENV['SIM']}/v1/refunds?operation_id={op}")
        self.assertEqual(status, 200)
        self.assertEqual([r["id"] for r in found["data"]], [h.result.provider_reference])
        self.assertEqual(found["data"][0]["metadata"]["idempotency_key"], h.claim.execution.idempotency_key)
        self.wait_execution(op, "Completed", lambda x: x["state"] == "Completed")

    def test_an_export_download_is_delivered_under_the_uses_key(self):
        w = Worker(self.client(), ByKind({"export-download": ExportDeliveries(ENV["SIM"])}))
        op, cap = self.decide("export", export_uses=1)
        h = w.handle(Message("MSG-PY-X1", op, cap["token"]))
        self.assertEqual((h.result.outcome, h.recorded), (COMPLETED, RECORDED_OUTCOME), h.result.detail)
        self.assertEqual(self.sim_ledger()["deliveries_by_key"][f"export-{op}-a1-u1"], 1)

    def run_in_thread(self, w, m):
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("h", w.handle(m)), daemon=True)
        t.start()
        return t, out

    def test_a_lease_lost_mid_call_cancels_the_call(self):
        tick = Ticker(60)
        w = Worker(self.client(wait=tick.wait), StripeRefunds(ENV["SIM"]))
        op, cap = self.decide("lost")
        self.arm("hold-response", op)  # the refund is made; its answer never comes
        t, out = self.run_in_thread(w, Message("MSG-PY-L1", op, cap["token"]))
        eventually("the request reached the provider", lambda: self.sim_counts(op)[0] == 1)
        self.advance("2m")
        self.wait_execution(op, "the sweeper lapsed the lease", lambda x: x["lease_epoch"] == 2)
        tick.fire()  # the next renewal is refused
        t.join(WAIT_BOUND)
        self.assertFalse(t.is_alive(), "the call was not cancelled when the lease was lost")
        h = out["h"]
        self.assertIsInstance(h.lease_lost, errors.LeaseLost)
        self.assertEqual(h.result.outcome, UNKNOWN, h.result.detail)
        self.assertIn("cancelled mid-request", h.result.detail)
        self.assertEqual(h.recorded, NOT_RECORDED, "an Unknown result after the lease is lost is the reconciler's")
        self.assertEqual(self.sim_counts(op), (1, 1), "no resend after the lease was lost")
        self.wait_execution(op, "Unknown", lambda x: x["state"] == "Unknown")

    def test_a_definite_result_after_the_lease_is_lost_is_late_evidence(self):
        tick = Ticker(60)
        executed = threading.Event()
        refunds = StripeRefunds(ENV["SIM"])

        def slow(x, cancellation):
            r = refunds(x, cancellation)
            executed.set()
            cancellation.wait(WAIT_BOUND)  # the answer is in hand; the worker stalls until its lease is gone
            return r

        w = Worker(self.client(wait=tick.wait), slow)
        op, cap = self.decide("late")
        t, out = self.run_in_thread(w, Message("MSG-PY-LT1", op, cap["token"]))
        self.assertTrue(executed.wait(WAIT_BOUND))
        self.advance("2m")
        self.wait_execution(op, "Unknown", lambda x: x["state"] == "Unknown")
        tick.fire()
        t.join(WAIT_BOUND)
        h = out["h"]
        self.assertIsInstance(h.lease_lost, errors.LeaseLost)
        self.assertEqual((h.result.outcome, h.recorded), (COMPLETED, RECORDED_LATE), h.record_error)
        self.wait_execution(op, "Completed", lambda x: x["state"] == "Completed")
        self.assertEqual(self.sim_counts(op)[1], 1)

    def test_a_503_storm_sends_the_same_outcome_again_until_recorded(self):
        proxy = Proxy(ENV["API"])
        self.addCleanup(proxy.close)
        w = Worker(self.client(proxy.url, retry_backoff=0.005, retry_backoff_max=0.02), StripeRefunds(ENV["SIM"]))
        op, cap = self.decide("storm")
        m = Message("MSG-PY-S1", op, cap["token"])
        proxy.before = {"/v1/claims": 3}
        for _ in range(3):  # the claim never reached serve: nothing executes, the message is not acknowledged
            with self.assertRaises(errors.StoreUnavailable):
                w.handle(m)
        self.assertEqual(self.sim_counts(op)[0], 0)
        proxy.before = {"/outcome": 7}
        h = w.handle(m)  # the queue redelivers
        self.assertEqual((h.result.outcome, h.recorded), (COMPLETED, RECORDED_OUTCOME), h.record_error)
        bodies = proxy.bodies("/outcome")
        self.assertEqual(len(bodies), 8, "seven 503s, then recorded")
        self.assertEqual(set(bodies), {bodies[0]}, "the same epoch, secret and outcome every time")
        self.assertEqual(self.sim_counts(op), (1, 1))
        self.wait_execution(op, "Completed", lambda x: x["state"] == "Completed")

    def test_a_503_after_serve_recorded_it_ends_at_the_409(self):
        proxy = Proxy(ENV["API"])
        self.addCleanup(proxy.close)
        w = Worker(self.client(proxy.url, retry_backoff=0.005, retry_backoff_max=0.02), StripeRefunds(ENV["SIM"]))
        op, cap = self.decide("storm-after")
        proxy.after = {"/outcome": 1}
        h = w.handle(Message("MSG-PY-SA1", op, cap["token"]))
        self.assertEqual((h.result.outcome, h.recorded), (COMPLETED, NOT_RECORDED))
        self.assertIsInstance(h.record_error, errors.OutcomeMayBeRecorded)
        self.assertIsInstance(h.record_error.refusal, errors.ExecutionNotUnknown)
        self.assertEqual(len(proxy.bodies("/outcome")), 3,
                         "the 503'd send, the one refused lease.lost, the late one refused: nothing after a 409")
        self.wait_execution(op, "Completed", lambda x: x["state"] == "Completed")
        self.assertEqual(self.sim_counts(op)[1], 1)


if __name__ == "__main__":
    unittest.main()
