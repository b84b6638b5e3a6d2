"""Embeddings: the offline default model (pinned, sha256-checked), Ollama over
HTTP (against a stub server started here), the queue drained by scsql
worker, inline embedding for small writes, BM25 before embedding, and a
model change that re-embeds in the background without breaking search."""

from __future__ import annotations

import json
import shutil
import threading
import typing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from scsql import subsystems
from scsql.memory import embed
from scsql.core import worker
from scsql.core.errors import ScsqlError
from scsql.api import Api

from ..helpers import wait_for


def q(agent, sql, *args):
    with agent.transaction() as conn:
        return conn.execute(sql, args).fetchall()


@pytest.fixture(scope="module")
def minilm() -> embed.MiniLM:
    return embed.provider(embed.EmbedSettings(provider="default")).load()


class _Stub(BaseHTTPRequestHandler):
    """Ollama's /api/embed: a deterministic 8-dimensional vector per text."""

    requests: typing.ClassVar[list[dict]] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, **body})
        if self.path != "/api/embed" or body.get("model") != "stub-embed":
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b'{"error": "model not found"}')
            return
        vectors = []
        for text in body["input"]:
            words = text.lower().split()
            v = [float(sum(1 for w in words if hash_bucket(w) == i)) + 0.01 for i in range(8)]
            vectors.append(v)
        out = json.dumps({"model": body["model"], "embeddings": vectors}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def hash_bucket(word: str) -> int:
    return sum(word.encode()) % 8


@pytest.fixture
def ollama():
    _Stub.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_default_model_embeds_offline_and_meaning_is_close(minilm):
    v = minilm.embed(["verify the hash chain of audit rows", "check that the chain of row hashes is intact",
                      "a recipe for banana bread", ""])
    assert v.shape == (4, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v[:3], axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > 0.6
    assert v[0] @ v[2] < 0.2
    assert minilm.loaded and embed.provider(embed.EmbedSettings(provider="default")) is minilm  # loaded once, shared


def test_a_model_file_that_does_not_match_its_sha256_is_refused(tmp_path, monkeypatch):
    bad = tmp_path / "tokenizer.json"
    shutil.copy(embed.TOKENIZER, bad)
    with bad.open("a") as f:
        f.write(" ")
    monkeypatch.setattr(embed, "TOKENIZER", bad)
    with pytest.raises(ScsqlError) as err:
        embed.MiniLM().load()
    assert err.value.code == "SC220" and "sha256" in err.value.message
    monkeypatch.setattr(embed, "MODEL_VERSION", "0.0.1")
    with pytest.raises(ScsqlError) as err:
        embed.MiniLM().load()
    assert err.value.code == "SC220" and "pinned" in err.value.message


def test_ollama_provider_over_http(ollama):
    prov = embed.Ollama(ollama, "stub-embed")
    assert not prov.loaded
    v = prov.embed(["alpha beta", "gamma"])
    assert v.shape == (2, 8) and prov.dims == 8 and prov.name == "ollama:stub-embed"
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert _Stub.requests[-1] == {"path": "/api/embed", "model": "stub-embed", "input": ["alpha beta", "gamma"]}
    with pytest.raises(ScsqlError) as err:
        embed.Ollama(ollama, "missing-model").embed(["x"])
    assert err.value.code == "SC221"
    with pytest.raises(ScsqlError) as err:
        embed.Ollama("http://127.0.0.1:9", "stub-embed", timeout=2).embed(["x"])
    assert err.value.code == "SC221"
    assert embed.provider(embed.EmbedSettings(provider="none")) is None


DOC = ("# Audit\n\nEvery audit row carries the hash of the row before it, so changing history breaks the links.\n\n"
       "# Bread\n\nMix flour, water and salt, then bake for forty minutes.\n")


def test_worker_drains_the_queue_and_hybrid_search_then_uses_vectors(scsql_db, minilm):
    agent = scsql_db.agent("emb", scsql_db.project())
    q(agent, "select * from scsql.index_text('doc.md', %s, 'file')", DOC)
    status = q(agent, "select * from scsql.memory_status()")[0]
    assert (status["embedded"], status["pending_embeddings"]) == (0, 2)
    query = "tamper-proof ledger"  # no word in common with the text
    emb = embed.vector_literal(minilm.embed([query])[0])
    # Not embedded yet: BM25 still finds what it can, vector search nothing.
    assert q(agent, "select * from scsql.search('audit links', p_query_embedding => %s, p_model => %s)",
             emb, minilm.name)[0]["retrievers"] == ["bm25"]
    assert q(agent, "select * from scsql.search(%s, p_query_embedding => %s, p_model => %s)",
             query, emb, minilm.name) == []
    jobs = subsystems.jobs(["embed"])
    assert [j.name for j in jobs] == ["embed"]
    from scsql.coordination.client import my_channel  # the project's own channel, not one every agent hears
    assert [c(agent) for c in jobs[0].channels] == [my_channel(agent, "embed")]
    assert worker.drain(agent, jobs) == 2
    status = q(agent, "select * from scsql.memory_status()")[0]
    assert (status["embedded"], status["pending_embeddings"]) == (2, 0)
    # A meaning with no word in common is a weak similarity for this small model: below the
    # default relevance floor (min_similarity 0.2), so the floor is lowered to find it.
    hits = q(agent, "select * from scsql.search(%s, p_query_embedding => %s, p_model => %s, p_min_similarity => 0)",
             query, emb, minilm.name)
    assert hits[0]["anchor"] == "Audit" and hits[0]["retrievers"] == ["vector"]
    # Re-indexing with one section changed queues only the changed text.
    q(agent, "select * from scsql.index_text('doc.md', %s, 'file')", DOC.replace("forty", "fifty"))
    assert q(agent, "select pending_embeddings from scsql.memory_status()")[0]["pending_embeddings"] == 1
    assert q(agent, "select count(*) as n from scsql.kb_embeddings")[0]["n"] == 1  # the old Bread vector is gone


def test_api_embeds_queries_and_small_writes_inline_when_the_model_is_loaded(scsql_db, minilm, monkeypatch):
    monkeypatch.setenv("SCSQL_EMBED", "default")
    agent = scsql_db.agent("emb_api", scsql_db.project())
    api = Api(agent)
    # The first search loads the model (shared: the fixture's instance); writes then embed inline.
    assert api.call("search", query="anything at all") == []
    assert embed.provider().loaded
    api.call("index_text", path="doc.md", content=DOC, kind="file")
    assert q(agent, "select pending_embeddings, embedded from scsql.memory_status()")[0] == {
        "pending_embeddings": 0, "embedded": 2}
    hits = api.call("search", query="tamper-proof ledger", min_similarity=0)  # a weak match: below the default floor
    assert hits[0]["anchor"] == "Audit" and "vector" in hits[0]["retrievers"]
    pack = api.call("pack", intent="how is history protected from tampering", budget=200)
    assert pack and pack[0]["source_path"] == "doc.md" and sum(p["tokens"] for p in pack) <= 200
    # With SCSQL_EMBED=none the same search is BM25 only.
    monkeypatch.setenv("SCSQL_EMBED", "none")
    assert all(h["retrievers"] == ["bm25"] for h in api.call("search", query="audit row hash"))


def test_changing_the_model_re_embeds_in_the_background_without_breaking_search(scsql_db, minilm, ollama):
    project = scsql_db.project()
    agent = scsql_db.agent("emb_switch", project)
    q(agent, "select * from scsql.index_text('doc.md', %s, 'file')", DOC)
    embed.embed_queued(agent, minilm)
    stub = embed.Ollama(ollama, "stub-embed")
    with scsql_db.connect() as conn:
        queued = conn.execute("select scsql.set_embedding_model(%s, %s, %s) as n",
                              (project, stub.name, stub.dims)).fetchone()["n"]
        conn.commit()
        index = conn.execute("select indexdef from pg_indexes where indexname like 'kb_embeddings_hnsw_%%' "
                             "and indexdef like '%%vector(8)%%'").fetchall()
    assert queued == 2 and len(index) == 1
    status = q(agent, "select * from scsql.memory_status()")[0]
    assert (status["embedding_model"], status["embedded"], status["pending_embeddings"]) == (stub.name, 0, 2)
    # Meanwhile: old vectors still answer old-model queries, BM25 answers everything.
    old_q = embed.vector_literal(minilm.embed(["tamper-proof ledger"])[0])
    assert q(agent, "select anchor from scsql.search('zzz tamper', p_query_embedding => %s, p_model => %s, "
                    "p_min_similarity => 0)",
             old_q, minilm.name)[0]["anchor"] == "Audit"
    new_q = embed.vector_literal(stub.embed(["flour water salt"])[0])
    hits = q(agent, "select * from scsql.search('bake flour', p_query_embedding => %s, p_model => %s)",
             new_q, stub.name)
    assert hits[0]["anchor"] == "Bread" and hits[0]["retrievers"] == ["bm25"]
    # New text is queued for the new model only; the worker with the new provider catches up.
    q(agent, "select * from scsql.index_text('more.md', 'salt and flour again', 'note')")
    assert embed.embed_queued(agent, minilm) == 0
    assert embed.embed_queued(agent, stub) == 3
    hits = q(agent, "select * from scsql.search('bake flour', p_query_embedding => %s, p_model => %s)",
             new_q, stub.name)
    assert "vector" in hits[0]["retrievers"]
    with scsql_db.connect() as conn:
        with pytest.raises(Exception) as err:
            conn.execute("select scsql.set_embedding_model(%s, %s, 4)", (project, stub.name))
        assert err.value.sqlstate == "SC207"


def test_cli_switches_a_project_to_ollama_and_the_worker_catches_up(scsql_db, ollama):
    import os
    import subprocess
    import sys
    from pathlib import Path

    project = scsql_db.project()
    agent = scsql_db.agent("emb_cli", project)
    q(agent, "select * from scsql.index_text('doc.md', %s, 'file')", DOC)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCSQL_")}
    env.update(SCSQL_DSN=scsql_db.admin, SCSQL_AGENT_DSN=scsql_db.app, SCSQL_KEYSTORE=str(scsql_db.keystore.directory),
               SCSQL_EMBED="ollama", SCSQL_OLLAMA_URL=ollama, SCSQL_OLLAMA_MODEL="stub-embed",
               PYTHONPATH=str(Path(__file__).resolve().parent.parent.parent))

    def scsql(*args):
        return subprocess.run([sys.executable, "-m", "scsql", *args], env=env, capture_output=True, text=True,
                              timeout=120, check=False)

    out = scsql("memory", "set-model", "--project", project)
    assert out.returncode == 0, out.stderr
    assert "ollama:stub-embed (8 dimensions); 2 chunk text(s) queued" in out.stdout
    out = scsql("worker", "--agent", agent.name, "--once", "--job", "embed")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "scsql: drained 2 unit(s) of work"
    status = q(agent, "select * from scsql.memory_status()")[0]
    assert (status["embedding_model"], status["embedded"], status["pending_embeddings"]) == ("ollama:stub-embed", 2, 0)
    out = scsql("memory", "status", "--agent", agent.name)
    assert out.returncode == 0 and json.loads(out.stdout)["embedded"] == 2


def test_an_idle_model_is_released_and_loads_again_when_there_is_something_to_embed(minilm):
    """A worker held the model (about 200 MB of its 300) for as long as it
    lived, though it embeds only now and then: the model is now released once
    unused for its idle time, and loaded again by the next embed()."""
    quick = embed.MiniLM(idle=0.5)
    assert not quick.loaded  # made, not loaded: loading waits for something to embed
    first = quick.embed(["verify the hash chain"])
    assert quick.loaded
    wait_for(lambda: not quick.loaded, timeout=30)
    again = quick.embed(["verify the hash chain"])
    assert quick.loaded and np.allclose(first, again) and np.allclose(first, minilm.embed(["verify the hash chain"]))


def test_a_worker_answers_query_embeddings_for_its_data_directory(minilm, tmp_path):
    """scsql search loaded the model in every process (seconds a query): a
    serving worker answers query embeddings on DATA_DIR/workers/embed.sock,
    with the same vectors, for this user only, and only as the model it
    names; one worker of a data directory serves."""
    from scsql.memory import embed_service

    home = tmp_path / "data"
    assert embed_service.ask(home, ["anything"], embed.DEFAULT_PIN) is None  # no worker: the caller embeds itself
    assert embed_service.serve(home, minilm, embed.DEFAULT_PIN, embed.vector_literal) is not None
    assert embed_service.serve(home, minilm, embed.DEFAULT_PIN, embed.vector_literal) is None  # one per data directory
    served = embed_service.ask(home, ["verify the hash chain", "banana bread"], embed.DEFAULT_PIN)
    assert served is not None and len(served) == 2
    local = minilm.embed(["verify the hash chain", "banana bread"])
    assert np.allclose(np.array([json.loads(v) for v in served]), local, atol=1e-6)
    assert embed_service.ask(home, ["x"], embed.DEFAULT_PIN.replace(embed.MODEL_SHA256, "0" * 64)) is None
    assert embed_service.ask(home, ["x" * 2001], embed.DEFAULT_PIN) is None  # refused: longer than any query
    (home / "workers").chmod(0o777)  # a directory others may put a socket in: not trusted with a query
    try:
        assert embed_service.ask(home, ["x"], embed.DEFAULT_PIN) is None
    finally:
        (home / "workers").chmod(0o700)
