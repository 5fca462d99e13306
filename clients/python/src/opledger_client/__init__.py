"""opledger's Python client for workers that speak serve's HTTP API.

    from opledger_client import Client, Worker, StripeRefunds, Message

    client = Client("http://127.0.0.1:8080", token=WORKER_TOKEN, worker_id="worker-py-1")
    worker = Worker(client, StripeRefunds("http://127.0.0.1:8081"))
    handled = worker.handle(Message(message_id, operation_id, capability_token))

The standard library only. docs/api.md ("A worker in any language") is the
protocol each step follows.
"""

from . import errors
from .client import (
    ALREADY_CONSUMED, CLAIMED, COMPLETED, DUPLICATE_DELIVERY, EXPIRED, INVALID, KIND_EXPORT_DOWNLOAD, KIND_REFUND,
    NOT_APPLIED, NOT_RECORDED, OPERATION_NOT_EXECUTABLE, RECORDED_LATE, RECORDED_OUTCOME, REVOKED, UNKNOWN,
    Cancellation, ClaimAnswer, Client, Execution, Lease, Message, Result, evidence_text, safe_result,
)
from .errors import APIError, LeaseExpired, NoAnswer, OpledgerError, OutcomeMayBeRecorded
from .executors import ByKind, ExportDeliveries, StripeRefunds
from .worker import Handled, MalformedMessage, Worker

__all__ = [
    "errors", "Client", "Worker", "Handled", "Message", "ClaimAnswer", "Execution", "Result", "Lease", "Cancellation",
    "StripeRefunds", "ExportDeliveries", "ByKind", "MalformedMessage", "APIError", "NoAnswer", "LeaseExpired",
    "OpledgerError", "OutcomeMayBeRecorded", "evidence_text", "safe_result",
    "CLAIMED", "DUPLICATE_DELIVERY", "ALREADY_CONSUMED", "EXPIRED", "REVOKED", "INVALID", "OPERATION_NOT_EXECUTABLE",
    "COMPLETED", "NOT_APPLIED", "UNKNOWN", "KIND_REFUND", "KIND_EXPORT_DOWNLOAD",
    "RECORDED_OUTCOME", "RECORDED_LATE", "NOT_RECORDED",
]
