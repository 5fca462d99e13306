"""Typed errors: one class per code docs/api.md documents ("Errors").

Every error answer of serve is an APIError (or a subclass named after its
code) carrying the HTTP status, the stable code, the message and the field
at fault. A 409 is the ledger's refusal in the state it found: stop at once,
start nothing more, never send it again. A 503 or 429 may be sent again
(``temporary``). A request that got no answer at all raises NoAnswer.
"""


class OpledgerError(Exception):
    """Base of every error this package raises."""


class NoAnswer(OpledgerError):
    """No HTTP answer from serve (refused, reset, timed out): whether the
    request reached it is not known."""


class LeaseExpired(OpledgerError):
    """Renewals kept failing until the lease's deadline: the lease can no
    longer be vouched for, and no further request may start."""


class OutcomeMayBeRecorded(OpledgerError):
    """A refusal answered an outcome sent again after an ambiguous answer
    (a 503, or none): the earlier send may have been recorded. Nothing more
    is sent either way. ``refusal`` is the refusal, ``earlier`` the
    ambiguous answer."""

    def __init__(self, refusal, earlier):
        super().__init__(f"{refusal} (an earlier send may have been recorded: {earlier})")
        self.refusal = refusal
        self.earlier = earlier


class APIError(OpledgerError):
    """An error answer of serve: ``status`` (HTTP), ``code`` (stable),
    ``message``, ``field`` (the request field at fault, or None),
    ``retry_after`` (seconds, from Retry-After, or None), ``request_id``."""

    code = None  # the class's code; instances carry the answer's

    def __init__(self, status, code, message="", field=None, retry_after=None, request_id=None):
        text = f"{status} {code}"
        if field:
            text += f" (field {field})"
        if message:
            text += f": {message}"
        super().__init__(text)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retry_after = retry_after
        self.request_id = request_id

    @property
    def temporary(self):
        """A 503 (store.unavailable, ledger.contention) or 429 rate.limited:
        the same request may be sent again later."""
        return self.status in (503, 429)

    @property
    def refusal(self):
        """A 409: the ledger refused the command in this state."""
        return self.status == 409


def _define(name, code, doc):
    cls = type(name, (APIError,), {"__doc__": doc, "code": code})
    globals()[name] = cls
    return cls


# The documented codes, each its own class (catch the class, or compare
# ``err.code``). A 409 of a reason not listed is an APIError with that code.
_CODES = [
    ("RequestMalformed", "request.malformed", "400: the body is not exactly one JSON object, or not UTF-8."),
    ("RequestDuplicateField", "request.duplicate-field", "400: an object holds one name twice."),
    ("RequestUnknownField", "request.unknown-field", "400: a field the endpoint does not take."),
    ("RequestInvalid", "request.invalid", "400: a field missing, of the wrong type, out of range or not printable."),
    ("Unauthenticated", "auth.unauthenticated", "401: no bearer token, or an unknown one."),
    ("Forbidden", "auth.forbidden", "403: the token's role may not call this endpoint."),
    ("OperationUnknown", "operation.unknown", "404: no such operation."),
    ("ExecutionUnknown", "execution.unknown", "404: no such execution."),
    ("SetAsideUnknown", "set-aside.unknown", "404: no recorded failure of that item."),
    ("TestClockDisabled", "test-clock.disabled", "404: serve runs without --test-clock."),
    ("NotFound", "not-found", "404: no such endpoint."),
    ("MethodNotAllowed", "method.not-allowed", "405: the path exists, the method does not."),
    ("LeaseLost", "lease.lost", "409: the epoch is stale or the execution no longer runs: stop at once."),
    ("LeaseNotHeld", "lease.not-held", "409: the write was not this lease holder's to make: stop."),
    ("ExecutionNotUnknown", "execution.not-unknown", "409: late evidence for an execution not Unknown."),
    ("LateOutcomeNotApplied", "late-outcome.not-applied", "409: a late NotApplied is kept as evidence only."),
    ("OperationExecuting", "operation.executing", "409: an execution of the operation is open."),
    ("OperationOutcomeUnknown", "operation.outcome-unknown", "409: an execution's outcome is Unknown."),
    ("OperationCompleted", "operation.completed", "409: the operation is completed."),
    ("OperationExists", "operation.exists", "409: the operation exists."),
    ("DecisionNotAllowed", "decision.not-allowed", "409: the decision did not allow it."),
    ("CapabilityInvalid", "capability.invalid", "409: no such capability on its operation."),
    ("CapabilityAlreadyRevoked", "capability.already-revoked", "409: revoked already."),
    ("CapabilityConsumed", "capability.consumed-cannot-revoke", "409: spent authority cannot be revoked."),
    ("RequestTooLarge", "request.too-large", "413: the body is over the limit."),
    ("IdempotencyKeyReused", "idempotency.key-reused", "422: an Idempotency-Key reused for another request."),
    ("KindDisabled", "operation.kind-disabled", "422: a kind the server does not create yet."),
    ("RateLimited", "rate.limited", "429: over the token's rate; nothing was done; Retry-After says when."),
    ("StreamCorrupt", "stream.corrupt", "500: a stream cannot be read as a valid history."),
    ("Internal", "internal", "500: a bug; serve's log has the cause."),
    ("StoreUnavailable", "store.unavailable", "503: the store is unreachable or did not confirm a write."),
    ("LedgerContention", "ledger.contention", "503: too many writers on one operation; nothing was written."),
    ("NotReady", "not-ready", "503: /readyz only."),
]

BY_CODE = {code: _define(name, code, doc) for name, code, doc in _CODES}


def api_error(status, code, message="", field=None, retry_after=None, request_id=None):
    """The APIError of an answer: the class of its code when documented."""
    cls = BY_CODE.get(code, APIError)
    return cls(status, code, message, field, retry_after, request_id)


__all__ = ["OpledgerError", "NoAnswer", "LeaseExpired", "OutcomeMayBeRecorded", "APIError", "api_error", "BY_CODE"] + [
    name for name, _, _ in _CODES
]
