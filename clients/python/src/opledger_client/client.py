"""The worker's side of serve's HTTP API: claim, renew, record.

docs/api.md ("A worker in any language") is the protocol; this module writes
each of its steps once. Guarantees are boundaries, never "exactly once": a
request whose answer is lost, or whose lease is lost mid-flight, is Unknown,
and the reconciler asks the provider before anything is attempted again.
"""

import json
import logging
import threading
import time
import unicodedata
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Optional

from . import errors

# Claim statuses (docs/api.md, "POST /v1/claims").
CLAIMED = "Claimed"
DUPLICATE_DELIVERY = "DuplicateDelivery"
ALREADY_CONSUMED = "AlreadyConsumed"
EXPIRED = "Expired"
REVOKED = "Revoked"
INVALID = "Invalid"
OPERATION_NOT_EXECUTABLE = "OperationNotExecutable"
CLAIM_STATUSES = (CLAIMED, DUPLICATE_DELIVERY, ALREADY_CONSUMED, EXPIRED, REVOKED, INVALID, OPERATION_NOT_EXECUTABLE)

# Outcomes of an execution's one request.
COMPLETED = "Completed"
NOT_APPLIED = "NotApplied"
UNKNOWN = "Unknown"

# Kinds of operation, each with its executor.
KIND_REFUND = "refund"
KIND_EXPORT_DOWNLOAD = "export-download"

# How an outcome entered the ledger.
NOT_RECORDED = ""
RECORDED_OUTCOME = "outcome"
RECORDED_LATE = "late-outcome"

# The API's bounds.
MAX_LEASE_SECONDS = 3600
MAX_REFERENCE_BYTES = 256
MAX_DETAIL_BYTES = 2000
MAX_ANSWER_BYTES = 4 << 20


@dataclass(frozen=True)
class Message:
    """One delivery of your queue: identifiers only. What to execute comes
    from the ledger's answer to the claim, never from the message."""

    message_id: str
    operation_id: str
    capability: str  # the capability token the decision answered
    correlation_id: Optional[str] = None


@dataclass(frozen=True)
class Result:
    """An executor's call, classified."""

    outcome: str  # COMPLETED, NOT_APPLIED or UNKNOWN
    provider_reference: str = ""
    detail: str = ""

    @property
    def definite(self):
        return self.outcome in (COMPLETED, NOT_APPLIED)


class Execution:
    """A claimed execution: what to execute, under which key, and the lease
    that lets this worker alone write for it. The lease secret is kept in
    memory only; repr() and str() never show it."""

    def __init__(self, answer, secret, deadline):
        self.execution_id = answer["execution_id"]
        self.operation_id = answer["operation_id"]
        self.kind = answer["kind"]
        self.lease_epoch = answer["lease_epoch"]
        self.lease_expires_at = answer["lease_expires_at"]  # serve's clock, as last confirmed
        self.idempotency_key = answer["idempotency_key"]
        self.use = answer.get("use", 0)
        self.uses_left = answer.get("uses_left") or 0
        self.amount_minor = answer.get("amount_minor", 0)
        self.currency = answer.get("currency", "")
        self.order_id = answer.get("order_id", "")
        self.export_id = answer.get("export_id", "")
        self._secret = secret
        self._lock = threading.Lock()
        self._deadline = deadline

    @property
    def deadline(self):
        """The lease's expiry by this process's monotonic clock: when the
        confirming request was sent plus the lease's length. No request of
        the execution may start after it."""
        with self._lock:
            return self._deadline

    def _confirmed(self, expires_at, deadline):
        with self._lock:
            self.lease_expires_at, self._deadline = expires_at, deadline

    def provider_metadata(self):
        """The metadata a refund carries at the provider for the reconciler
        to read it back: our operation id (how it finds the refund) and the
        key (how it tells one attempt's refund from another's)."""
        return {"operation_id": self.operation_id, "idempotency_key": self.idempotency_key}

    def __repr__(self):
        return (f"Execution(execution_id={self.execution_id!r}, operation_id={self.operation_id!r}, "
                f"lease_epoch={self.lease_epoch}, idempotency_key={self.idempotency_key!r})")

    __str__ = __repr__


@dataclass
class ClaimAnswer:
    """A claim the ledger answered and recorded (HTTP 200). Every answer may
    be acknowledged to the queue; only CLAIMED executes."""

    status: str
    reason: str = ""
    detail: str = ""
    replay_suspected: bool = False
    execution_attempted: bool = False
    execution_id: str = ""
    execution_state: str = ""
    operation_id: str = ""
    execution: Optional[Execution] = field(default=None, repr=True)


class Cancellation:
    """What an executor's call runs under: set the moment the lease is lost
    (``cause`` says why) or the call's time is up. An executor checks it
    before every send and registers a callback that aborts the send in
    flight."""

    def __init__(self, deadline=None, clock=time.monotonic):
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks = []
        self.cause = None
        self.deadline = deadline
        self._clock = clock
        self._timer = None
        if deadline is not None:
            self._timer = threading.Timer(max(0.0, deadline - clock()), self.cancel, args=(TimeoutError("the call's time is up"),))
            self._timer.daemon = True
            self._timer.start()

    def is_set(self):
        return self._event.is_set()

    def wait(self, seconds):
        """Waits up to seconds; True if cancelled meanwhile."""
        return self._event.wait(seconds)

    def remaining(self):
        """Seconds until the deadline (None without one)."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - self._clock())

    def cancel(self, cause):
        with self._lock:
            if self._event.is_set():
                return
            self.cause = cause
            self._event.set()
            callbacks = list(self._callbacks)
        for cb in callbacks:
            cb()

    def add_callback(self, cb):
        """Calls cb on cancellation (at once if already cancelled)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(cb)
                return
        cb()

    def remove_callback(self, cb):
        with self._lock:
            if cb in self._callbacks:
                self._callbacks.remove(cb)

    def child(self, seconds):
        """A cancellation set when this one is, or after seconds."""
        deadline = self._clock() + seconds
        if self.deadline is not None:
            deadline = min(deadline, self.deadline)
        c = Cancellation(deadline, self._clock)
        self.add_callback(lambda: c.cancel(self.cause))
        return c

    def close(self):
        if self._timer is not None:
            self._timer.cancel()


class Client:
    """A worker's client of serve. Safe to share between threads.

    base_url: serve's address. token: a bearer token of role worker (never
    logged). worker_id: the lease owner, 1..128 printable ASCII characters
    without spaces. lease_seconds: asked for at claim and at each renewal;
    renewed every third of it. retry_backoff, retry_backoff_max: the pauses
    before sending an executor write again (doubling; a Retry-After
    lengthens one, up to the maximum). clock and wait are for tests:
    ``wait(seconds, stop_event)`` returns True when stop_event was set.
    """

    def __init__(self, base_url, token, worker_id, lease_seconds=60, request_timeout=10.0,
                 retry_backoff=0.1, retry_backoff_max=1.0, logger=None, clock=time.monotonic, wait=None):
        if not (base_url.startswith("http://") or base_url.startswith("https://")):
            raise ValueError(f"base_url {base_url!r} must be an http or https URL")
        if not token:
            raise ValueError("token is required (a worker's bearer token)")
        if not worker_id or len(worker_id) > 128 or any(not ("!" <= ch <= "~") for ch in worker_id):
            raise ValueError(f"worker_id {worker_id!r} must be 1..128 printable ASCII characters without spaces")
        if not isinstance(lease_seconds, int) or not 1 <= lease_seconds <= MAX_LEASE_SECONDS:
            raise ValueError(f"lease_seconds {lease_seconds!r} must be a whole number in 1..{MAX_LEASE_SECONDS}")
        if not 0 < retry_backoff <= retry_backoff_max:
            raise ValueError("retry_backoff must be positive and at most retry_backoff_max")
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.worker_id = worker_id
        self.lease_seconds = lease_seconds
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        self.retry_backoff_max = retry_backoff_max
        self.log = logger or logging.getLogger("opledger_client")
        self.clock = clock
        self.wait = wait or (lambda seconds, stop: stop.wait(seconds))

    def __repr__(self):
        return f"Client(base_url={self.base_url!r}, worker_id={self.worker_id!r})"

    # -- the wire ----------------------------------------------------------

    def _do(self, method, path, body=None):
        """Sends one request; returns the decoded 2xx answer. Raises an
        APIError for any other answer, NoAnswer when none came."""
        data = None if body is None else body
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self._token)
        req.add_header("Accept", "application/json")
        req.add_header("User-Agent", "opledger-python-client")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.request_timeout) as resp:
                raw = resp.read(MAX_ANSWER_BYTES + 1)
                status = resp.status
        except urllib.error.HTTPError as e:
            raw = e.read(MAX_ANSWER_BYTES + 1)
            raise _answer_error(e.code, e.headers, raw) from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise errors.NoAnswer(f"{method} {path}: {e}") from None
        if len(raw) > MAX_ANSWER_BYTES:
            raise errors.NoAnswer(f"{method} {path}: HTTP {status}, answer over {MAX_ANSWER_BYTES} bytes")
        try:
            return json.loads(raw)
        except ValueError as e:
            raise errors.NoAnswer(f"{method} {path}: HTTP {status}, answer is not JSON: {e}") from None

    # -- claim ---------------------------------------------------------------

    def claim(self, message):
        """Presents message's capability: POST /v1/claims. Sent once, never
        again: a claim whose answer is lost leaves its execution to lapse to
        Unknown, and the same message presented again is DuplicateDelivery.

        Raises when the claim was not answered as recorded (StoreUnavailable,
        NoAnswer: nothing may execute; do not acknowledge the message;
        RequestInvalid with ``field``: the message is malformed,
        dead-letter it)."""
        body = {"message_id": message.message_id, "operation_id": message.operation_id,
                "capability": message.capability, "worker_id": self.worker_id, "lease_seconds": self.lease_seconds}
        if message.correlation_id:
            body["correlation_id"] = message.correlation_id
        sent = self.clock()
        a = self._do("POST", "/v1/claims", _encode(body))
        status = a.get("status")
        if status not in CLAIM_STATUSES:
            raise errors.NoAnswer(f"claim {message.message_id}: unexpected status {status!r}")
        answer = ClaimAnswer(status=status, reason=a.get("reason", ""), detail=a.get("detail", ""),
                             replay_suspected=bool(a.get("replay_suspected")),
                             execution_attempted=bool(a.get("execution_attempted")),
                             execution_id=a.get("execution_id", ""), execution_state=a.get("execution_state", ""),
                             operation_id=a.get("operation_id", ""))
        if status == CLAIMED:
            secret = a.get("lease_secret")
            missing = [k for k in ("execution_id", "operation_id", "idempotency_key", "lease_epoch", "lease_expires_at", "kind")
                       if not a.get(k)]
            if missing or not secret or a["kind"] not in (KIND_REFUND, KIND_EXPORT_DOWNLOAD):
                # A Claimed answer we cannot hold: its lease lapses to Unknown; nothing is sent.
                raise errors.NoAnswer(f"claim {message.message_id}: Claimed without {missing or 'a lease secret or a known kind'}")
            answer.execution = Execution(a, secret, sent + self.lease_seconds)
        return answer

    # -- the lease -------------------------------------------------------

    def renew_lease(self, execution):
        """Renews the lease once (POST /v1/executions/{id}/lease). A 409
        (LeaseLost, LeaseNotHeld) means stop at once."""
        body = _encode({"lease_epoch": execution.lease_epoch, "lease_secret": execution._secret,
                        "worker_id": self.worker_id, "lease_seconds": self.lease_seconds})
        sent = self.clock()
        a = self._do("POST", f"/v1/executions/{execution.execution_id}/lease", body)
        execution._confirmed(a.get("lease_expires_at"), sent + self.lease_seconds)

    def keep_lease(self, execution, call_seconds=None):
        """Starts renewing execution's lease in the background, every third
        of it. Returns the Lease; run the executor under ``lease.cancellation``
        (or a child of it): it is cancelled the moment a renewal is refused
        (a 409, or any other refusal) or renewals failed until the lease's
        deadline; ``lease.lost`` then says why."""
        return Lease(self, execution)

    # -- outcomes --------------------------------------------------------

    def record_outcome(self, execution, result):
        """Records result under the lease (POST /v1/executions/{id}/outcome).
        A 503, a 429 or no answer sends the same body again (capped
        back-off), renewing the lease every third meanwhile, while the lease's
        deadline has not passed: at most lease_seconds/retry_backoff+1 sends.
        Never after a 409: LeaseLost (send a definite result again with
        record_late_outcome), LeaseNotHeld (not yours: stop)."""
        result = safe_result(result)
        body = _encode({"lease_epoch": execution.lease_epoch, "lease_secret": execution._secret,
                        "outcome": result.outcome, "provider_reference": result.provider_reference,
                        "detail": result.detail})
        return self._send_write(execution, body, under_lease=True)

    def record_late_outcome(self, execution, result):
        """Hands in a definite result as late evidence, once the lease was
        lost while the request was in flight (late: true, same epoch and
        secret). A Completed settles an Unknown execution; a NotApplied is
        kept as evidence and refused (LateOutcomeNotApplied). Sent again on a
        503, a 429 or no answer, bounded; never after a 409."""
        if not result.definite:
            raise ValueError(f"only a definite outcome is late evidence, not {result.outcome!r}")
        result = safe_result(result)
        body = _encode({"lease_epoch": execution.lease_epoch, "lease_secret": execution._secret,
                        "outcome": result.outcome, "provider_reference": result.provider_reference,
                        "detail": result.detail, "late": True})
        return self._send_write(execution, body, under_lease=False)

    def _send_write(self, execution, body, under_lease):
        path = f"/v1/executions/{execution.execution_id}/outcome"
        backoff, ambiguous = self.retry_backoff, None
        max_tries = int(self.lease_seconds / self.retry_backoff) + 1  # no more fit in one lease
        stop = threading.Event()
        for attempt in range(1, max_tries + 1):
            try:
                self._do("POST", path, body)
                return
            except (errors.APIError, errors.NoAnswer) as e:
                if not _retryable(e) or attempt == max_tries:
                    if ambiguous is not None and isinstance(e, errors.APIError) and e.refusal:
                        raise errors.OutcomeMayBeRecorded(e, ambiguous) from e
                    raise
                ambiguous = e
            if under_lease:
                last = execution.deadline - self.lease_seconds
                if self.clock() - last >= self.lease_seconds / 3:
                    try:
                        self.renew_lease(execution)
                    except errors.APIError as e:
                        if not e.temporary:
                            raise
                    except errors.NoAnswer:
                        pass
                if self.clock() >= execution.deadline:
                    raise errors.LeaseExpired(f"the lease's deadline passed before the outcome was recorded: {ambiguous}")
            self.log.warning("outcome of %s not recorded yet (%s); sending it again", execution.execution_id, ambiguous)
            self.wait(_pause(ambiguous, backoff, self.retry_backoff_max), stop)
            backoff = min(2 * backoff, self.retry_backoff_max)

    def record(self, execution, result, lost=None):
        """Records result as the protocol says: under the lease; once the
        lease is lost (lost is a LeaseLost refusal, or record_outcome is
        refused LeaseLost), a definite result as late evidence; an Unknown
        one is left to the reconciler. Returns (recorded, error): recorded is
        RECORDED_OUTCOME, RECORDED_LATE or NOT_RECORDED (then error says why;
        the lease lapses to Unknown and the reconciler asks the provider)."""
        if not (isinstance(lost, errors.APIError) and lost.refusal):
            try:
                self.record_outcome(execution, result)
                return RECORDED_OUTCOME, None
            except errors.OutcomeMayBeRecorded as e:
                if not isinstance(e.refusal, errors.LeaseLost):
                    return NOT_RECORDED, e
                lost = e
            except errors.LeaseLost as e:
                lost = e
            except errors.OpledgerError as e:
                return NOT_RECORDED, e
        lease_lost = isinstance(lost, errors.LeaseLost) or (
            isinstance(lost, errors.OutcomeMayBeRecorded) and isinstance(lost.refusal, errors.LeaseLost))
        if not lease_lost or not result.definite:
            return NOT_RECORDED, lost
        try:
            self.record_late_outcome(execution, result)
            return RECORDED_LATE, None
        except errors.OpledgerError as e:
            if isinstance(lost, errors.OutcomeMayBeRecorded) and not isinstance(e, errors.OutcomeMayBeRecorded):
                e = errors.OutcomeMayBeRecorded(e, lost.earlier)
            return NOT_RECORDED, e


class Lease:
    """Keeps an execution's lease in a background thread (Client.keep_lease)."""

    def __init__(self, client, execution):
        self._client = client
        self._execution = execution
        self._stop = threading.Event()
        self.cancellation = Cancellation(clock=client.clock)
        self.lost = None  # None while held; then the refusal, or LeaseExpired
        self._thread = threading.Thread(target=self._run, name=f"lease-{execution.execution_id}", daemon=True)
        self._thread.start()

    def _run(self):
        # Bounded: ends on stop(), on a refusal, or when the deadline passes
        # without a confirmed renewal (a confirmed one moves it by one lease).
        c, x = self._client, self._execution
        every = c.lease_seconds / 3
        wait, backoff = every, c.retry_backoff
        while True:
            if c.wait(wait, self._stop):
                return
            try:
                c.renew_lease(x)
                wait, backoff = every, c.retry_backoff
                continue
            except (errors.APIError, errors.NoAnswer) as e:
                if self._stop.is_set():
                    return
                left = x.deadline - c.clock()
                if not _retryable(e):
                    c.log.warning("lease of %s lost: no further request will start (%s)", x.execution_id, e)
                    self._lose(e)
                    return
                if left <= 0:
                    c.log.warning("lease of %s expired unconfirmed: no further request will start (%s)", x.execution_id, e)
                    self._lose(errors.LeaseExpired(str(e)))
                    return
                c.log.warning("renewing the lease of %s failed; retrying until its deadline (%s)", x.execution_id, e)
                wait, backoff = min(_pause(e, backoff, c.retry_backoff_max), left), min(2 * backoff, c.retry_backoff_max)

    def _lose(self, err):
        self.lost = err
        self.cancellation.cancel(err)

    def stop(self):
        """Stops renewing, waits for the renewal in flight, returns lost."""
        self._stop.set()
        self._thread.join()
        self.cancellation.close()
        return self.lost


def _retryable(e):
    if isinstance(e, errors.APIError):
        return e.temporary
    return isinstance(e, errors.NoAnswer)


def _pause(err, backoff, maximum):
    ra = getattr(err, "retry_after", None)
    if ra is not None and ra > backoff:
        return min(ra, maximum)
    return backoff


def _encode(body):
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def _answer_error(status, headers, raw):
    retry_after = None
    try:
        retry_after = int(headers.get("Retry-After", ""))
    except (TypeError, ValueError):
        pass
    request_id = headers.get("X-Request-Id")
    try:
        e = json.loads(raw)["error"]
        if e.get("code"):
            return errors.api_error(status, e["code"], e.get("message", ""), e.get("field"), retry_after, request_id)
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    text = raw[:200].decode("utf-8", "replace").strip()
    return errors.APIError(status, f"http.{status}", text, None, retry_after, request_id)


# -- text serve would refuse -------------------------------------------------

_GO_ESCAPES = {0x07: "\\a", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x0B: "\\v"}


def _escape(ch):
    cp = ord(ch)
    if cp in _GO_ESCAPES:
        return _GO_ESCAPES[cp]
    if cp < 0x80:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def _refused(ch):
    cp = ord(ch)
    return cp < 0x20 or cp == 0x7F or 0x80 <= cp < 0xA0 or unicodedata.category(ch) in ("Cf", "Cs")


def evidence_text(s, max_bytes):
    """s with every character serve refuses (control and format characters,
    lone surrogates) replaced by its Go escape, cut to at most max_bytes of
    UTF-8 on a character boundary; returns (text, altered)."""
    out, size, altered = [], 0, False
    for ch in s:
        piece = ch
        if _refused(ch):
            piece, altered = _escape(ch), True
        n = len(piece.encode("utf-8"))
        if size + n > max_bytes:
            return "".join(out), True
        out.append(piece)
        size += n
    return "".join(out), altered


def safe_result(r):
    """r with its texts made safe to record, so that a provider's hostile
    words never cost a definite outcome; the detail says when they were
    escaped."""
    ref, ref_altered = evidence_text(r.provider_reference or "", MAX_REFERENCE_BYTES)
    detail, detail_altered = evidence_text(r.detail or "", MAX_DETAIL_BYTES)
    if ref_altered or detail_altered:
        note = "[provider text escaped] "
        detail = note + evidence_text(r.detail or "", MAX_DETAIL_BYTES - len(note))[0]
    return Result(r.outcome, ref, detail)
