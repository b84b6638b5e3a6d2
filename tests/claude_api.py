"""A scripted Anthropic Messages API on 127.0.0.1, so the real Claude Code
CLI runs a session offline: each request that offers tools gets the next step
of the script (a tool call, or a text answer that ends the turn), streamed as
server-sent events; a request without tools (a title, a summary) gets a short
text. Every request body is kept, so a test sees what the model was given:
the hooks' additionalContext, tool results, a denial's reason.

    api = ClaudeApi([Bash("echo hi"), Say("done")])
    with api:
        run_claude(repo, "do it", api, env, allowed="Bash")
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

USAGE = {"input_tokens": 120, "output_tokens": 30, "cache_creation_input_tokens": 400, "cache_read_input_tokens": 800}


@dataclass
class Step:
    """One answer of the model: a tool call (NAME with INPUT) or, when NAME is None, TEXT that ends the turn."""
    name: str | None = None
    input: dict = field(default_factory=dict)
    text: str = ""


def Tool(name: str, **tool_input: Any) -> Step:  # noqa: N802 - reads as the script's vocabulary
    return Step(name, tool_input)


def Say(text: str) -> Step:  # noqa: N802
    return Step(None, text=text)


def claude_cli() -> str | None:
    """The Claude Code CLI on PATH (npm install -g @anthropic-ai/claude-code), or None."""
    return shutil.which("claude")


class ClaudeApi:
    def __init__(self, script: list[Step], replies: dict[str, str] | None = None):
        """SCRIPT answers the requests that offer tools, in turn; REPLIES
        answers a request without tools whose body holds one of its keys with
        that key's text (a model command that runs claude -p without tools)."""
        self.script = list(script)
        self.replies = dict(replies or {})
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self.send_response(200)
                self.end_headers()

            def do_GET(self):
                self.send_response(404)
                self.end_headers()

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                if "count_tokens" in self.path:
                    return self._json({"input_tokens": 100})
                with api.lock:
                    api.requests.append(body)
                    step = api.script.pop(0) if body.get("tools") and api.script else Say("ok")
                    if not body.get("tools"):
                        seen = json.dumps(body)
                        step = next((Say(text) for key, text in api.replies.items() if key in seen), step)
                if body.get("stream"):
                    return self._stream(body, step)
                return self._json({"id": f"msg_{uuid.uuid4().hex[:12]}", "type": "message", "role": "assistant",
                                   "model": body.get("model"), "content": [{"type": "text", "text": step.text or "ok"}],
                                   "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 2}})

            def _json(self, data: dict) -> None:
                raw = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _stream(self, body: dict, step: Step) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()

                def ev(name: str, data: dict) -> None:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                msg = {"id": f"msg_{uuid.uuid4().hex[:12]}", "type": "message", "role": "assistant",
                       "model": body.get("model"), "content": [], "stop_reason": None, "stop_sequence": None,
                       "usage": dict(USAGE, output_tokens=1)}
                ev("message_start", {"type": "message_start", "message": msg})
                if step.name is None:
                    ev("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": {"type": "text", "text": ""}})
                    ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": step.text}})
                else:
                    ev("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
                        "type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:20]}", "name": step.name, "input": {}}})
                    ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                        "type": "input_json_delta", "partial_json": json.dumps(step.input)}})
                ev("content_block_stop", {"type": "content_block_stop", "index": 0})
                ev("message_delta", {"type": "message_delta", "usage": {"output_tokens": USAGE["output_tokens"]},
                                     "delta": {"stop_reason": "end_turn" if step.name is None else "tool_use",
                                               "stop_sequence": None}})
                ev("message_stop", {"type": "message_stop"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> ClaudeApi:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def seen(self) -> str:
        """Everything the model was sent, as one text."""
        return json.dumps(self.requests)


def run_claude(cwd: Path, prompt: str, api: ClaudeApi, env: dict, allowed: str, *, resume: str | None = None,
               timeout: float = 180) -> dict:
    """One non-interactive session of the real CLI in CWD against API; its JSON result."""
    argv = [claude_cli() or "claude", "-p", prompt, "--output-format", "json", "--allowedTools", allowed]
    if resume:
        argv += ["--resume", resume]
    full = {**env, "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "sk-ant-test-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1"}
    done = subprocess.run(argv, cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return json.loads(done.stdout)


def transcripts(home: Path) -> list[Path]:
    return sorted((home / ".claude" / "projects").rglob("*.jsonl"), key=os.path.getmtime)
