"""Executors: an execution's one request, classified.

An executor is a callable ``execute(execution, cancellation) -> Result``:

- it never raises for what happened at the provider: everything is
  classified; when in doubt, UNKNOWN (the reconciler asks the provider);
- it sends ``execution.idempotency_key`` and what the execution says to
  execute (amount, currency, order; export and use), never anything from the
  message; a resend carries the same key and the same body;
- once ``cancellation`` is set (the lease lost, or the call's time up) no
  further send starts, and the send in flight is aborted (UNKNOWN: it may
  have arrived);
- a refund carries ``execution.provider_metadata()``, which the reconciler
  reads back.

StripeRefunds and ExportDeliveries speak what provider-sim serves by
default, exactly as ``opledger worker`` does (docs/api.md, "A worker in any
language"; the outcome tables are docs/providers.md's).
"""

import http.client
import json
import socket
import urllib.parse

from .client import COMPLETED, KIND_EXPORT_DOWNLOAD, KIND_REFUND, NOT_APPLIED, UNKNOWN, Result

MAX_SENDS_LIMIT = 10  # each resend is one more request in flight; the key is remembered for a while only
MAX_PROVIDER_ANSWER = 1 << 20
MAX_KEY_BYTES = 255


class _Sent:
    """One send, classified."""

    __slots__ = ("result", "replayed", "retryable")

    def __init__(self, result, replayed=False, retryable=False):
        self.result, self.replayed, self.retryable = result, replayed, retryable


class _HTTPExecutor:
    def __init__(self, base_url, api_key=None, max_sends=3, send_timeout=10.0, backoff=0.2):
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base_url {base_url!r} must be an http or https URL")
        self._scheme, self._host, self._port = u.scheme, u.hostname, u.port
        self._prefix = u.path.rstrip("/")
        self.api_key = api_key
        self.max_sends = max(1, min(max_sends, MAX_SENDS_LIMIT))
        self.send_timeout = send_timeout
        self.backoff = backoff

    def _call(self, cancellation, path, headers, body, classify):
        """At most max_sends sends, backing off, until one is Completed or
        not worth sending again; none once cancellation is set."""
        headers = dict(headers, Accept="application/json")
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        sends, stop, backoff = [], "", self.backoff
        for i in range(1, self.max_sends + 1):
            if i > 1:
                cancellation.wait(backoff)
                backoff *= 2
            if cancellation.is_set():
                stop = f"no further send: {cancellation.cause}"
                break
            s = self._exchange(cancellation, self._prefix + path, headers, body, classify)
            sends.append(s)
            if s.result.outcome == COMPLETED or not s.retryable:
                break
            if i == self.max_sends:
                stop = f"gave up after {i} sends"
        return _conclude(sends, stop)

    def _exchange(self, cancellation, path, headers, body, classify):
        timeout = self.send_timeout
        remaining = cancellation.remaining()
        if remaining is not None:
            timeout = max(0.001, min(timeout, remaining))
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=timeout)

        def abort():  # from the lease's thread: ends a blocked connect, send or read
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        try:
            try:
                conn.connect()
            except OSError as e:
                return _Sent(Result(NOT_APPLIED, "", f"connection not established, nothing sent: {e}"),
                             retryable=not cancellation.is_set())
            cancellation.add_callback(abort)
            try:
                conn.request("POST", path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read(MAX_PROVIDER_ANSWER + 1)
            except (OSError, http.client.HTTPException) as e:
                if cancellation.is_set():
                    return _Sent(Result(UNKNOWN, "", f"cancelled mid-request ({cancellation.cause}): {e!r}"))
                return _Sent(Result(UNKNOWN, "", f"no answer: {e!r}"), retryable=True)
            finally:
                cancellation.remove_callback(abort)
            if len(data) > MAX_PROVIDER_ANSWER:
                return _Sent(Result(UNKNOWN, "", f"HTTP {resp.status}, answer over {MAX_PROVIDER_ANSWER} bytes"))
            return classify(resp.status, resp.headers, data)
        finally:
            conn.close()


def _conclude(sends, stop):
    """The whole call: the first Completed ends it; otherwise the last send
    decides, except that a NotApplied after an earlier Unknown send is
    Unknown unless the provider marked it a replay of the key's saved answer.
    No send at all is NotApplied. The last provider reference seen is kept."""
    if not sends:
        return Result(NOT_APPLIED, "", "not sent" + (f": {stop}" if stop else ""))
    last = sends[-1]
    outcome, detail = last.result.outcome, f"send {len(sends)}: {last.result.detail}"
    ref = ""
    for s in sends:
        ref = s.result.provider_reference or ref
    if outcome == NOT_APPLIED and not last.replayed:
        for i, s in enumerate(sends[:-1]):
            if s.result.outcome == UNKNOWN:
                outcome = UNKNOWN
                detail += f"; but send {i + 1} may have reached the provider: {s.result.detail}"
                break
    if stop:
        detail += "; " + stop
    return Result(outcome, ref, detail)


def _error_of(data):
    try:
        e = json.loads(data).get("error")
        if isinstance(e, dict):
            return e
    except (ValueError, AttributeError):
        pass
    return None


def _describe(status, err):
    if not err:
        return f"HTTP {status}"
    return f"HTTP {status} {err.get('type')}/{err.get('code') or '-'}: {str(err.get('message', ''))[:200]!r}"


class StripeRefunds(_HTTPExecutor):
    """Refunds at a Stripe-style API (profiles stripe-v1, stripe-v2;
    provider-sim's default): POST {base_url}/v1/refunds, header
    Idempotency-Key, form fields amount, currency (lower case), order,
    metadata[operation_id], metadata[idempotency_key].

    ======================================================  ==========  ===========
    observed                                                outcome     sent again
    ======================================================  ==========  ===========
    2xx refund matching the request, succeeded              Completed   no
    2xx refund, failed or canceled                          NotApplied  no
    2xx anything else, or not matching the request          Unknown     no
    400 invalid_request_error                               NotApplied  no
    400 idempotency_error, other 4xx, 3xx                   Unknown     no
    409, 429, 5xx, no answer                                Unknown     yes
    cancelled mid-request (the lease was lost)              Unknown     no
    connection never established                            NotApplied  yes
    ======================================================  ==========  ===========
    """

    def __init__(self, base_url, api_key=None, reference_key="operation_id", **sends):
        super().__init__(base_url, api_key, **sends)
        self.reference_key = reference_key

    def __call__(self, x, cancellation):
        if x.kind != KIND_REFUND:
            return Result(NOT_APPLIED, "", f"not sent: StripeRefunds executes refunds, not {x.kind!r}")
        if not x.idempotency_key or len(x.idempotency_key.encode()) > MAX_KEY_BYTES:
            return Result(NOT_APPLIED, "", f"not sent: idempotency key must be 1 to {MAX_KEY_BYTES} bytes")
        if x.amount_minor <= 0 or len(x.currency) != 3 or not x.order_id:
            return Result(NOT_APPLIED, "", "not sent: a refund needs a positive amount, a currency and an order")
        form = urllib.parse.urlencode([
            ("amount", str(x.amount_minor)),
            ("currency", x.currency.lower()),
            ("metadata[idempotency_key]", x.idempotency_key),
            (f"metadata[{self.reference_key}]", x.operation_id),
            ("order", x.order_id),
        ]).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Idempotency-Key": x.idempotency_key}
        return self._call(cancellation, "/v1/refunds", headers, form, lambda st, h, d: self._classify(x, st, h, d))

    def _classify(self, x, status, headers, data):
        replayed = headers.get("Idempotent-Replayed") == "true"
        err = _error_of(data)
        describe = _describe(status, err)
        outcome, ref, detail, retryable = UNKNOWN, "", "", False
        if 200 <= status <= 299:
            try:
                r = json.loads(data)
                if not isinstance(r, dict):
                    raise ValueError("not an object")
            except ValueError as e:
                r, detail = None, f"HTTP {status} with an unparsable body: {e}"
            if r is not None:
                meta = r.get("metadata") or {}
                ref = r.get("id") or ""
                if r.get("object") != "refund" or not ref:
                    ref, detail = "", f"HTTP {status} without a refund object"
                elif (r.get("amount") != x.amount_minor or str(r.get("currency", "")).lower() != x.currency.lower()
                      or meta.get(self.reference_key, x.operation_id) != x.operation_id):
                    detail = f"refund {ref} does not match the request"
                elif r.get("status") == "succeeded":
                    outcome, detail = COMPLETED, f"HTTP {status}: refund {ref} succeeded"
                elif r.get("status") in ("failed", "canceled"):
                    outcome = NOT_APPLIED
                    detail = f"HTTP {status}: refund {ref} {r['status']} ({r.get('failure_reason') or 'no reason given'})"
                else:
                    detail = f"HTTP {status}: refund {ref} is {r.get('status')!r}"
        elif status == 400 and err and err.get("type") == "invalid_request_error":
            outcome, detail = NOT_APPLIED, "rejected before execution: " + describe
        elif status == 400 and err and err.get("type") == "idempotency_error":
            detail = "key already used with other parameters, its first request's fate is not known: " + describe
        elif status == 409:
            retryable, detail = True, "a request with this key is still in progress: " + describe
        elif status == 429:
            retryable, detail = True, "rate limited: " + describe
        elif status >= 500:
            retryable, detail = True, "provider error, the request may have taken effect: " + describe
        else:
            detail = "unexpected answer: " + describe
        if replayed:
            detail += " (replayed)"
        return _Sent(Result(outcome, ref, detail), replayed, retryable)


class ExportDeliveries(_HTTPExecutor):
    """Export downloads at the export-delivery service (provider-sim serves
    it): POST {base_url}/v1/export_deliveries, header Idempotency-Key (the
    use's own key), JSON {"export_id","operation_id","use"}. A delivery
    matching the request delivered is Completed, failed NotApplied, anything
    else Unknown; 400 invalid_request_error NotApplied; 409, 429, 5xx and no
    answer Unknown, sent again."""

    def __call__(self, x, cancellation):
        if x.kind != KIND_EXPORT_DOWNLOAD:
            return Result(NOT_APPLIED, "", f"not sent: ExportDeliveries executes export downloads, not {x.kind!r}")
        if not x.idempotency_key or len(x.idempotency_key.encode()) > MAX_KEY_BYTES:
            return Result(NOT_APPLIED, "", f"not sent: idempotency key must be 1 to {MAX_KEY_BYTES} bytes")
        if not x.export_id or x.use < 1:
            return Result(NOT_APPLIED, "", "not sent: a delivery names its export and use")
        body = json.dumps({"export_id": x.export_id, "operation_id": x.operation_id, "use": x.use},
                          separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", "Idempotency-Key": x.idempotency_key}
        return self._call(cancellation, "/v1/export_deliveries", headers, body, lambda st, h, d: self._classify(x, st, h, d))

    @staticmethod
    def _classify(x, status, headers, data):
        replayed = headers.get("Idempotent-Replayed") == "true"
        err = _error_of(data)
        describe = _describe(status, err)
        outcome, ref, detail, retryable = UNKNOWN, "", "", False
        if 200 <= status <= 299:
            try:
                d = json.loads(data)
                if not isinstance(d, dict):
                    raise ValueError("not an object")
            except ValueError as e:
                d, detail = None, f"HTTP {status} with an unparsable body: {e}"
            if d is not None:
                if (not d.get("id") or d.get("idempotency_key") != x.idempotency_key or d.get("operation_id") != x.operation_id
                        or d.get("export_id") != x.export_id or d.get("use") != x.use):
                    detail = f"HTTP {status}: delivery {d.get('id')!r} does not match the request"
                elif d.get("status") == "delivered":
                    outcome, ref, detail = COMPLETED, d["id"], f"HTTP {status}: delivery {d['id']} delivered"
                elif d.get("status") == "failed":
                    outcome, ref, detail = NOT_APPLIED, d["id"], f"HTTP {status}: delivery {d['id']} failed"
                else:
                    ref, detail = d["id"], f"HTTP {status}: delivery {d['id']} is {d.get('status')!r}"
        elif status == 400 and err and err.get("type") == "invalid_request_error":
            outcome, detail = NOT_APPLIED, "refused before delivering: " + describe
        elif status in (409, 429) or status >= 500:
            retryable, detail = True, "may be sent again: " + describe
        else:
            detail = "unexpected answer: " + describe
        if replayed:
            detail += " (replayed)"
        return _Sent(Result(outcome, ref, detail), replayed, retryable)


class ByKind(dict):
    """Executes each kind with its own executor; a kind without one is
    NotApplied, nothing sent (the claimed use is spent)."""

    def __call__(self, x, cancellation):
        executor = self.get(x.kind)
        if executor is None:
            return Result(NOT_APPLIED, "", f"not sent: this worker has no executor for kind {x.kind!r}")
        return executor(x, cancellation)
