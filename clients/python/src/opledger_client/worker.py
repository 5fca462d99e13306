"""A worker: claim, execute once under a held lease, record.

docs/api.md ("A worker in any language") in one call per message.
"""

from dataclasses import dataclass
from typing import Optional

from . import errors
from .client import CLAIMED, NOT_APPLIED, NOT_RECORDED, ClaimAnswer, Result


class MalformedMessage(errors.OpledgerError):
    """The claim was refused as malformed (a 400: a message id that does
    not parse, say): dead-letter the message. ``error`` is the APIError."""

    def __init__(self, error):
        super().__init__(f"malformed message: {error}")
        self.error = error


@dataclass
class Handled:
    """What handling one message did."""

    claim: ClaimAnswer
    executed: bool = False  # the executor was called
    result: Optional[Result] = None
    lease_lost: Optional[Exception] = None  # why the lease was lost during the call
    recorded: str = NOT_RECORDED  # RECORDED_OUTCOME, RECORDED_LATE or NOT_RECORDED
    record_error: Optional[Exception] = None  # why not recorded (the reconciler asks the provider)


class Worker:
    """Handles messages with client and executor (``executor(execution,
    cancellation) -> Result``). call_seconds bounds one executor call,
    resends included, and never passes the lease's deadline; it must be
    shorter than the lease, so a slow but live call is not swept."""

    def __init__(self, client, executor, call_seconds=30.0):
        if call_seconds >= client.lease_seconds:
            raise ValueError(f"call_seconds {call_seconds} must be shorter than the lease ({client.lease_seconds}s)")
        self.client = client
        self.executor = executor
        self.call_seconds = call_seconds

    def handle(self, message):
        """Claims message's capability and, only when Claimed, runs the
        executor once under the lease (renewed in the background; the call
        cancelled the moment the lease is lost), then records the result.

        Raises only when the claim was not answered as recorded (serve
        unavailable, no answer): nothing was executed; do not acknowledge
        the message. MalformedMessage: dead-letter it. Every Handled returned
        was recorded by the ledger, refusals included: acknowledge it."""
        c = self.client
        try:
            answer = c.claim(message)
        except errors.APIError as e:
            if e.status == 400:
                raise MalformedMessage(e) from e
            raise
        h = Handled(claim=answer)
        if answer.status != CLAIMED:
            # Never execute; never infer the first delivery's fate from a duplicate.
            c.log.info("not executing %s: %s %s", message.message_id, answer.status, answer.reason)
            return h
        x = answer.execution
        left = x.deadline - c.clock()
        if left <= 0:
            h.result = Result(NOT_APPLIED, "", "not sent: the lease expired before the request could be sent")
        else:
            lease = c.keep_lease(x)
            call = lease.cancellation.child(min(self.call_seconds, left))
            try:
                h.result = self.executor(x, call)
            finally:
                call.close()
                h.lease_lost = lease.stop()
            h.executed = True
        h.recorded, h.record_error = c.record(x, h.result, h.lease_lost)
        log = c.log.warning if h.record_error else c.log.info
        log("handled %s: %r outcome %s recorded %r%s", message.message_id, x, h.result.outcome, h.recorded,
            f" ({h.record_error})" if h.record_error else "")
        return h

    def run(self, messages, settle):
        """Handles each message of the iterable messages in turn and calls
        settle(message, handled, error): error None means acknowledge it;
        otherwise do not (MalformedMessage: dead-letter it)."""
        for m in messages:
            try:
                h = self.handle(m)
            except errors.OpledgerError as e:
                settle(m, None, e)
                continue
            settle(m, h, None)
