"""``scsql metrics``: the rows of ``scsql.metrics()`` in the Prometheus text
format, through the maintained client library (prometheus_client), printed
once or served for scraping (``--listen ADDRESS``); and the timing of
searches that feeds the search latency histogram.

Each scrape reads ``scsql.metrics()`` afresh: as the administrator (every
project) or, with ``--agent``, as that agent (its project only; the
database decides, not this module).
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..core import errors
from ..core.errors import ScsqlError

Rows = list[dict[str, Any]]


def fetch(conn) -> Rows:
    """The rows of scsql.metrics() on CONN (SC057 when the schema predates them)."""
    import psycopg

    try:
        with conn.transaction():
            return conn.execute("select * from scsql.metrics()").fetchall()
    except psycopg.errors.UndefinedFunction:
        raise ScsqlError(errors.OPERATIONS_SCHEMA_MISSING, "this database has no scsql.metrics(): its schema predates it",
                         "run scsql migrate") from None
    except psycopg.Error as exc:
        raise errors.from_psycopg(exc) from None


def families(rows: Rows) -> Iterable[Any]:
    """prometheus_client metric families of the rows, one per metric."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

    kinds = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily, "histogram": HistogramMetricFamily}
    grouped: dict[str, Rows] = {}
    for r in rows:
        grouped.setdefault(r["metric"], []).append(r)
    for name, series in grouped.items():
        keys = sorted({k for r in series for k in (r["labels"] or {})})
        family = kinds[series[0]["kind"]](name, series[0]["help"], labels=keys)
        for r in series:
            values = [str((r["labels"] or {}).get(k, "")) for k in keys]
            if r["kind"] == "histogram":
                family.add_metric(values, buckets=[(str(le), float(n)) for le, n in r["buckets"]],
                                  sum_value=float(r["value"]))
            else:
                family.add_metric(values, float(r["value"]))
        yield family


class Collector:
    """A prometheus_client collector whose every collect() reads ROWS()."""

    def __init__(self, rows: Callable[[], Rows]):
        self.rows = rows

    def collect(self):
        yield from families(self.rows())


def registry(rows: Callable[[], Rows]):
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(Collector(rows))
    return reg


def render(rows: Rows) -> bytes:
    """The rows in the Prometheus text exposition format."""
    from prometheus_client import generate_latest

    return generate_latest(registry(lambda: rows))


def parse_address(address: str) -> tuple[str, int]:
    """[HOST]:PORT (HOST may be [v6]) as (host, port); SC056 otherwise."""
    host, sep, port = address.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ScsqlError(errors.METRICS_LISTEN_INVALID, f"--listen {address}: not [HOST]:PORT", "for example --listen 127.0.0.1:9187")
    return host, int(port)


def serve(address: str, rows: Callable[[], Rows]):
    """Serve /metrics on ADDRESS in a background thread; returns (server, thread)."""
    from prometheus_client import start_http_server

    host, port = parse_address(address)
    try:
        return start_http_server(port, addr=host, registry=registry(rows))
    except OSError as exc:
        raise ScsqlError(errors.METRICS_LISTEN_INVALID, f"--listen {address}: cannot listen there: {exc.strerror or exc}",
                         "choose a free port on an address of this machine") from None


# -- search latency: timed here, sent in batches -----------------------------

FLUSH_SECONDS = 5.0
MAX_PENDING = 10_000


class SearchTimer:
    """Durations of this process's searches, sent to scsql.record_search_latency
    at most every FLUSH_SECONDS (and at exit), so a search pays for no write."""

    def __init__(self) -> None:
        self.pending: dict[Any, list[float]] = {}
        self.last = time.monotonic()
        self.lock = threading.Lock()
        atexit.register(self.flush)

    def around(self, agent, args: dict[str, Any], call) -> Any:
        start = time.perf_counter()
        try:
            return call(args)
        finally:
            self.add(agent, time.perf_counter() - start)

    def add(self, agent, seconds: float) -> None:
        with self.lock:
            durations = self.pending.setdefault(agent, [])
            if len(durations) < MAX_PENDING:
                durations.append(seconds)
            due = time.monotonic() - self.last >= FLUSH_SECONDS
        if due:
            self.flush()

    def flush(self) -> int:
        """Send what was timed; returns how many durations were sent. A failure loses them, never a search."""
        with self.lock:
            pending, self.pending, self.last = self.pending, {}, time.monotonic()
        sent = 0
        for agent, durations in pending.items():
            try:
                with agent.transaction() as conn:
                    conn.execute("select scsql.record_search_latency(%s::double precision[])", (durations,))
                sent += len(durations)
            except Exception:  # noqa: BLE001 - a closed pool at exit, an old schema: the figures wait, searches do not
                pass
        return sent


TIMER = SearchTimer()


def adapters() -> dict[str, Any]:
    """Registry adapters timing search and search_global end to end."""
    from ..core.registry import Adapter

    return {name: Adapter(frozenset(), TIMER.around) for name in ("search", "search_global")}
