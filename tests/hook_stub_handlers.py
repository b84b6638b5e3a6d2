"""Stand-in hook handlers for the transport tests (SCSQL_HOOK_HANDLERS=tests.hook_stub_handlers).

Every recorded event becomes one signed, chained tool-call row whose input
preview is the event's scsql_event_id, so a test counts rows per event and
reads their order from the chain. Like the real handlers, the row is written
with the event's key (capture_tool_call), so an event delivered again adds
no row; unlike them, the stub notes each delivery that found its key taken
in ``<data dir>/redelivered`` (one event id a line), so a test sees how often
the transport sent an event twice.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from scsql.api import Api

_apis: dict = {}


@dataclass
class Reply:
    output: dict | None = None
    exit: int = 0
    stderr: str | None = None


def _record(agent, event: dict) -> None:
    api = _apis.get(id(agent))
    if api is None:
        api = _apis[id(agent)] = Api(agent)
    row = api.call("capture_tool_call", tool=event.get("tool_name") or event["hook_event_name"],
                   input_preview=event["scsql_event_id"], output_preview=event.get("scsql_received_at"),
                   event_key=event["scsql_event_id"])
    if row["tool_call_id"] is None:  # the key was taken: this event was delivered before
        with open(os.path.join(os.environ["SCSQL_DATA_DIR"], "redelivered"), "a") as f:
            f.write(event["scsql_event_id"] + "\n")


def handle(agent, event: dict) -> Reply:
    time.sleep(float(event.get("stub_sleep", 0)))
    name = event["hook_event_name"]
    if name in ("SessionStart", "UserPromptSubmit"):
        _record(agent, event)
        return Reply({"hookSpecificOutput": {"hookEventName": name, "additionalContext": "stub context"}})
    if name == "PreToolUse" and "owned" in str(event.get("tool_input", {}).get("file_path", "")):
        return Reply({"hookSpecificOutput": {"hookEventName": name, "permissionDecision": "deny",
                                             "permissionDecisionReason": "owned by task 1"}})
    return Reply()


def capture(agent, events: list[dict]) -> None:
    if any(event.get("stub_refuse") for event in events):  # all or nothing, as one transaction is
        raise ValueError("refused by the stub")
    for event in events:
        _record(agent, event)
