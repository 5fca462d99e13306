"""The client's parts that need no serve: texts, secrets, errors, and the
executors' outcome tables against canned provider answers."""

import http.server
import json
import os
import re
import threading
import unittest

from opledger_client import (
    COMPLETED, NOT_APPLIED, UNKNOWN, Cancellation, Execution, ExportDeliveries, Result, StripeRefunds, errors,
    evidence_text, safe_result,
)
from opledger_client.client import _answer_error

SECRET = "s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t-x"


def execution(kind="refund", **over):
    a = {"execution_id": "EXE-1.1", "operation_id": "OP-1", "kind": kind, "lease_epoch": 1,
         "lease_expires_at": "2026-11-26T14:03:13Z", "idempotency_key": "refund-OP-1-a1", "use": 1, "uses_left": 0,
         "amount_minor": 12000, "currency": "EUR", "order_id": "ORD-8841", "export_id": "EXP-1"}
    a.update(over)
    return Execution(a, SECRET, deadline=1e12)


class Canned:
    """A local HTTP server answering each POST with the next canned
    (status, headers, body), keeping what it received."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.received = []
        canned = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                canned.received.append((self.path, dict(self.headers), body))
                status, headers, answer = canned.answers.pop(0)
                data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def refund(status="succeeded", **over):
    r = {"id": "re_1", "object": "refund", "amount": 12000, "currency": "eur", "status": status,
         "metadata": {"operation_id": "OP-1", "idempotency_key": "refund-OP-1-a1"}}
    r.update(over)
    return r


def stripe_error(kind):
    return {"error": {"type": kind, "code": "x", "message": "no"}}


class StripeTable(unittest.TestCase):
    """docs/providers.md's outcome table, Stripe-style column, row by row."""

    def run_call(self, *answers):
        canned = Canned(answers)
        self.addCleanup(canned.close)
        r = StripeRefunds(canned.url, backoff=0.001)(execution(), Cancellation())
        return r, canned.received

    def test_rows(self):
        rows = [
            ("succeeded", [(200, {}, refund())], COMPLETED, 1),
            ("failed", [(200, {}, refund("failed"))], NOT_APPLIED, 1),
            ("canceled", [(200, {}, refund("canceled"))], NOT_APPLIED, 1),
            ("pending", [(200, {}, refund("pending"))], UNKNOWN, 1),
            ("amount mismatch", [(200, {}, refund(amount=1))], UNKNOWN, 1),
            ("another operation", [(200, {}, refund(metadata={"operation_id": "OP-2"}))], UNKNOWN, 1),
            ("unparsable", [(200, {}, b"{")], UNKNOWN, 1),
            ("validation", [(400, {}, stripe_error("invalid_request_error"))], NOT_APPLIED, 1),
            ("key reused", [(400, {}, stripe_error("idempotency_error"))], UNKNOWN, 1),
            ("other 4xx", [(404, {}, stripe_error("invalid_request_error"))], UNKNOWN, 1),
            ("5xx, then succeeded", [(500, {}, stripe_error("api_error")), (200, {}, refund())], COMPLETED, 2),
            ("409 three times", [(409, {}, stripe_error("x"))] * 3, UNKNOWN, 3),
            ("429, then a fresh rejection", [(429, {}, stripe_error("x")), (400, {}, stripe_error("invalid_request_error"))],
             UNKNOWN, 2),
            ("500, then a replayed rejection", [(500, {}, stripe_error("x")),
                                                (400, {"Idempotent-Replayed": "true"}, stripe_error("invalid_request_error"))],
             NOT_APPLIED, 2),
        ]
        for name, answers, want, sends in rows:
            with self.subTest(name):
                r, received = self.run_call(*answers)
                self.assertEqual(r.outcome, want, r.detail)
                self.assertEqual(len(received), sends)

    def test_every_send_is_the_same_request_with_the_claims_key_and_metadata(self):
        r, received = self.run_call((503, {}, b""), (200, {}, refund()))
        self.assertEqual(r.outcome, COMPLETED)
        self.assertEqual(r.provider_reference, "re_1")
        self.assertEqual(len(received), 2)
        self.assertEqual(received[0][2], received[1][2], "the same body on every send")
        path, headers, body = received[0]
        self.assertEqual(path, "/v1/refunds")
        self.assertEqual(headers["Idempotency-Key"], "refund-OP-1-a1")
        self.assertEqual(headers["Content-Type"], "application/x-www-form-urlencoded")
        self.assertEqual(body, b"amount=12000&currency=eur&metadata%5Bidempotency_key%5D=refund-OP-1-a1"
                               b"&metadata%5Boperation_id%5D=OP-1&order=ORD-8841")

    def test_nothing_is_sent_once_cancelled(self):
        canned = Canned([])
        self.addCleanup(canned.close)
        c = Cancellation()
        c.cancel(errors.LeaseExpired("gone"))
        r = StripeRefunds(canned.url)(execution(), c)
        self.assertEqual(r.outcome, NOT_APPLIED)
        self.assertEqual(canned.received, [])

    def test_a_connection_never_established_is_not_applied(self):
        s = Canned([])
        url = s.url
        s.close()
        r = StripeRefunds(url, max_sends=2, backoff=0.001)(execution(), Cancellation())
        self.assertEqual(r.outcome, NOT_APPLIED, r.detail)

    def test_another_kind_is_not_sent(self):
        r = StripeRefunds("http://127.0.0.1:9")(execution(kind="export-download"), Cancellation())
        self.assertEqual(r.outcome, NOT_APPLIED)


class ExportTable(unittest.TestCase):
    def test_rows(self):
        d = {"id": "exd_1", "export_id": "EXP-1", "operation_id": "OP-1", "use": 2,
             "idempotency_key": "export-OP-1-a1-u2", "status": "delivered", "created": 1}
        x = execution(kind="export-download", idempotency_key="export-OP-1-a1-u2", use=2)
        rows = [
            ("delivered", [(201, {}, d)], COMPLETED),
            ("failed", [(201, {}, dict(d, status="failed"))], NOT_APPLIED),
            ("pending", [(201, {}, dict(d, status="pending"))], UNKNOWN),
            ("another use", [(201, {}, dict(d, use=3))], UNKNOWN),
            ("refused", [(400, {}, stripe_error("invalid_request_error"))], NOT_APPLIED),
            ("key reused", [(422, {}, stripe_error("idempotency_key_reused"))], UNKNOWN),
        ]
        for name, answers, want in rows:
            with self.subTest(name):
                canned = Canned(answers)
                self.addCleanup(canned.close)
                r = ExportDeliveries(canned.url)(x, Cancellation())
                self.assertEqual(r.outcome, want, r.detail)
                path, headers, body = canned.received[0]
                self.assertEqual(path, "/v1/export_deliveries")
                self.assertEqual(headers["Idempotency-Key"], "export-OP-1-a1-u2")
                self.assertEqual(json.loads(body), {"export_id": "EXP-1", "operation_id": "OP-1", "use": 2})


class Texts(unittest.TestCase):
    def test_what_serve_refuses_is_escaped_and_cut(self):
        self.assertEqual(evidence_text("re_1", 256), ("re_1", False))
        self.assertEqual(evidence_text("a\x00b\n\u202ec\x85", 256), ("a\\x00b\\n\\u202ec\\u0085", True))
        self.assertEqual(evidence_text("é" * 10, 5), ("éé", True), "cut on a character boundary")
        r = safe_result(Result(COMPLETED, "re_\x1b[31m", "ok\tgood"))
        self.assertEqual(r.provider_reference, "re_\\x1b[31m")
        self.assertTrue(r.detail.startswith("[provider text escaped] ok\\tgood"))
        self.assertEqual(r.outcome, COMPLETED, "a definite outcome survives hostile words")


class Secrets(unittest.TestCase):
    def test_an_execution_never_shows_its_secret(self):
        x = execution()
        for shown in (repr(x), str(x), f"{x}", f"{x!r}", repr([x])):
            self.assertNotIn(SECRET, shown)
        self.assertEqual(x.provider_metadata(), {"operation_id": "OP-1", "idempotency_key": "refund-OP-1-a1"})


class Errors(unittest.TestCase):
    def test_every_documented_code_has_its_class(self):
        e = _answer_error(409, {"Retry-After": None}, b'{"error":{"code":"lease.lost","message":"stale"}}')
        self.assertIsInstance(e, errors.LeaseLost)
        self.assertTrue(e.refusal)
        self.assertFalse(e.temporary)
        e = _answer_error(503, {"Retry-After": "1"}, b'{"error":{"code":"store.unavailable","message":"x"}}')
        self.assertIsInstance(e, errors.StoreUnavailable)
        self.assertTrue(e.temporary)
        self.assertEqual(e.retry_after, 1)
        e = _answer_error(400, {}, b'{"error":{"code":"request.invalid","message":"x","field":"message_id"}}')
        self.assertIsInstance(e, errors.RequestInvalid)
        self.assertEqual(e.field, "message_id")
        e = _answer_error(502, {}, b"<html>bad gateway</html>")
        self.assertEqual(e.code, "http.502")
        self.assertTrue(e.temporary is False)
        for code, cls in errors.BY_CODE.items():
            self.assertEqual(cls.code, code)
            self.assertTrue(issubclass(cls, errors.APIError))


class DocumentedCodes(unittest.TestCase):
    """Every code docs/api.md's "Errors" table documents has its class here
    (the Go client's TestEveryDocumentedCodeIsTyped does the same)."""

    def test_every_documented_code_has_its_class(self):
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "..", "..", "..", "docs", "api.md"), encoding="utf-8") as f:
            doc = f.read()
        table = doc.split("\n## Errors\n", 1)[1]
        table = table[table.index("\n| status | code |") + 1:].split("\n\n", 1)[0]
        codes = []
        for row in table.splitlines():
            cols = row.split("|")
            if len(cols) < 4 or cols[1].strip() in ("status", "---") or cols[1].strip().startswith("---"):
                continue
            col = cols[3] if cols[1].strip() == "409" else cols[2]
            codes += re.findall(r"`([a-z][a-z.-]*)`", col)
        self.assertGreater(len(codes), 20, "the table was read")
        for code in codes:
            self.assertIn(code, errors.BY_CODE, f"docs/api.md documents {code}: add it to opledger_client/errors.py")


if __name__ == "__main__":
    unittest.main()
