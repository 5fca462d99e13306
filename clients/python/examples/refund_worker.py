#!/usr/bin/env python3
"""An example worker on the Python client.

It reads messages of your queue, one JSON object per line on stdin
({"message_id", "operation_id", "capability"}), handles each (claim, execute
once at the provider under the lease, record) and prints one JSON line per
message on stdout, saying whether to acknowledge it:

    OPLEDGER_URL=http://127.0.0.1:8080 OPLEDGER_TOKEN=... OPLEDGER_WORKER_ID=worker-py-1 \
    PROVIDER_URL=http://127.0.0.1:8081 python3 examples/refund_worker.py < messages.jsonl

EXPORT_DELIVERY_URL, when set, executes export downloads too. Replace stdin
with your queue's consumer; the rest stays.
"""

import json
import logging
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))  # run from a checkout

from opledger_client import ByKind, Client, ExportDeliveries, MalformedMessage, Message, StripeRefunds, Worker  # noqa: E402


def main():
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    client = Client(os.environ["OPLEDGER_URL"], token=os.environ["OPLEDGER_TOKEN"], worker_id=os.environ["OPLEDGER_WORKER_ID"])
    executors = ByKind(refund=StripeRefunds(os.environ["PROVIDER_URL"]))
    if os.environ.get("EXPORT_DELIVERY_URL"):
        executors["export-download"] = ExportDeliveries(os.environ["EXPORT_DELIVERY_URL"])
    worker = Worker(client, executors)

    def messages():
        for line in sys.stdin:
            if line.strip():
                m = json.loads(line)
                yield Message(m["message_id"], m["operation_id"], m["capability"], m.get("correlation_id"))

    def settle(message, handled, error):
        out = {"message_id": message.message_id, "ack": error is None}
        if error is not None:
            out.update(error=str(error), dead_letter=isinstance(error, MalformedMessage))
        else:
            out.update(status=handled.claim.status, reason=handled.claim.reason,
                       replay_suspected=handled.claim.replay_suspected)
            if handled.claim.execution is not None:
                out.update(execution_id=handled.claim.execution.execution_id, outcome=handled.result.outcome,
                           recorded=handled.recorded)
        print(json.dumps(out), flush=True)

    worker.run(messages(), settle)


if __name__ == "__main__":
    main()
