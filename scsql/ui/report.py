"""``scsql report``: one self-contained file of a period, signed, and its check.

The content is ``scsql.viewer_report(since, until, project)``, read as one
identity (the auditor by default: every project, with verification).

Signature: Ed25519 over the UTF-8 bytes of the report's canonical text,
which is PostgreSQL's jsonb text of it (``select REPORT::jsonb::text`` prints
the same bytes in any PostgreSQL; ``audit.encoding.jsonb_text`` writes them
here), by the key of the identity that read it: the auditor's key (the
keystore's auditor.key, whose public key scsql.auditor_keys holds and which
signs checkpoints), or the agent's own key (scsql.agent_keys). A recipient
checks that the content was not changed (the signature) and who vouches for
it (the public key: given with --public-key, or looked up in the database).
The JSON file is ``{"format", "report", "signature": {algorithm, signer,
key_id, public_key, value}}``; the HTML file shows the same content to a
person and carries the same signed JSON in a non-executable data block.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..audit.encoding import JsonValue, jsonb_text
from ..core.errors import ScsqlError
from ..core import errors

FORMAT = "scsql-signed-report/1"
INVALID = errors.REPORT_SIGNATURE_INVALID
_DATA = re.compile(r'<script type="application/json" id="scsql-report">(.*?)</script>', re.S)


def canonical(report: Any) -> bytes:
    """The bytes a report's signature covers: PostgreSQL's jsonb text of it."""
    return jsonb_text(report).encode("utf-8")


def read_report(source, since: str, until: str, project: str | None) -> Any:
    """scsql.viewer_report as the source's identity, its numbers exact (Decimal)."""
    with source.transaction() as conn:
        text = conn.execute("select scsql.viewer_report(%s::timestamptz, %s::timestamptz, %s::text)::text as r",
                            (since, until, project)).fetchone()["r"]
    return JsonValue.parse(text).value


def signer_key(ctx, source) -> tuple[Any, int, str]:
    """The private key the source's identity signs with, its key_id and who it is."""
    from ..audit.checkpoints import AUDITOR_KEY
    from ..core import keys

    name = AUDITOR_KEY if source.kind == "auditor" else source.name
    if not ctx.keystore.exists(name):
        raise ScsqlError(errors.KEY_FILE_MISSING, f"no key to sign the report with: {ctx.keystore.path(name)} does not exist",
                         "scsql checkpoint --init creates the auditor key" if source.kind == "auditor"
                         else "sign as the agent whose key this keystore holds, or as the auditor")
    key = ctx.keystore.load(name)
    pub = keys.public_bytes(key)
    with source.transaction() as conn:
        if source.kind == "auditor":
            row = conn.execute("select key_id from scsql.auditor_keys() where public_key = %s order by key_id desc",
                               (pub.hex(),)).fetchone()
        else:
            row = conn.execute("select k.key_id from scsql.agent_keys k join scsql.agents a using (agent_id) "
                               "where a.name = %s and k.public_key = %s order by k.key_id desc", (name, pub)).fetchone()
    if row is None:
        raise ScsqlError(errors.AUDITOR_KEY_MISSING, f"the keystore's {name}.key is not a key the database registered for {name}",
                         "scsql checkpoint --init registers the auditor key")
    return key, row["key_id"], "auditor" if source.kind == "auditor" else f"agent {name}"


def sign(report: Any, key, key_id: int, signer: str) -> dict[str, Any]:
    from ..core import keys

    return {"format": FORMAT, "report": report,
            "signature": {"algorithm": "ed25519", "signer": signer, "key_id": key_id,
                          "public_key": keys.public_bytes(key).hex(), "value": key.sign(canonical(report)).hex()}}


def check(document: dict[str, Any]) -> dict[str, Any]:
    """The signature block of a signed report whose signature holds; SC603 otherwise."""
    from cryptography.exceptions import InvalidSignature

    from ..core import keys

    sig = document.get("signature") if isinstance(document, dict) else None
    if document.get("format") != FORMAT or not isinstance(sig, dict) or "report" not in document:
        raise ScsqlError(INVALID, "not a signed scsql report", "scsql report writes one")
    try:
        public = keys.load_public(bytes.fromhex(sig["public_key"]))
        public.verify(bytes.fromhex(sig["value"]), canonical(document["report"]))
    except (InvalidSignature, ValueError, KeyError, TypeError):
        raise ScsqlError(INVALID, "the report's signature does not match its content: it was changed after it was "
                                  "signed", "ask its author for the file as written") from None
    return sig


def load_document(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    if not text.lstrip().startswith("{"):
        m = _DATA.search(text)
        if m is None:
            raise ScsqlError(INVALID, f"{path}: no signed report in it", "scsql report writes JSON or HTML")
        text = m.group(1)
    try:
        return json.loads(text, parse_float=Decimal)
    except ValueError as exc:
        raise ScsqlError(INVALID, f"{path}: not JSON: {exc}") from None


# -- the commands -------------------------------------------------------------


def cmd_write(ctx, args: argparse.Namespace) -> int:
    from .source import open_source

    now = dt.datetime.now(dt.UTC)
    since = args.since or (now - dt.timedelta(days=7)).isoformat()
    until = args.until or now.isoformat()
    source = open_source(ctx, args.agent, args.auditor or not args.agent, pool_size=1)
    try:
        report = read_report(source, since, until, args.project)
        document = sign(report, *signer_key(ctx, source))
    finally:
        source.close()
    # The report is written as its canonical text, so every number is kept exactly as signed.
    data = (f'{{"format": {json.dumps(FORMAT)},\n "signature": {json.dumps(document["signature"])},\n'
            f' "report": {jsonb_text(report)}}}')
    out = data if args.format == "json" else render_html(document, data)
    if args.output:
        Path(args.output).write_text(out + ("\n" if args.format == "json" else ""), encoding="utf-8")
        sig = document["signature"]
        print(f"scsql report: wrote {args.output} ({args.format}), signed by {sig['signer']} "
              f"(key {sig['key_id']}, public key {sig['public_key']})", file=sys.stderr)
    else:
        sys.stdout.write(out + "\n")
    return 0


def cmd_verify(ctx, args: argparse.Namespace) -> int:
    document = load_document(Path(args.file))
    sig = check(document)
    report = document["report"]
    span = f"{report.get('since')} to {report.get('until')}" + (f", project {report['project']}" if report.get("project") else "")
    if args.public_key:
        if args.public_key.lower() != sig["public_key"]:
            raise ScsqlError(INVALID, f"the report was signed with key {sig['public_key']}, not the key given",
                             "someone else signed it: do not trust it")
        anchored = "the public key you gave"
    else:
        anchored = _registered(ctx, sig)
    print(f"scsql report: {args.file}: signature valid; signed by {sig['signer']} (key {sig['key_id']}, "
          f"{sig['public_key']}), confirmed by {anchored}; {span}")
    return 0


def _registered(ctx, sig: dict[str, Any]) -> str:
    """Which database registration confirms the signer's public key; SC603 when none does."""
    from ..core.roles import admin_connection

    try:
        with admin_connection(ctx.admin_conninfo()) as conn:
            conn.execute("set local role scsql_auditor")
            if sig["signer"] == "auditor":
                found = conn.execute("select 1 from scsql.auditor_keys() where public_key = %s", (sig["public_key"],)).fetchone()
            else:
                found = conn.execute("select 1 from scsql.agent_keys k join scsql.agents a using (agent_id) "
                                     "where a.name = %s and k.public_key = %s",
                                     (sig["signer"].removeprefix("agent "), bytes.fromhex(sig["public_key"]))).fetchone()
    except ScsqlError as exc:
        raise ScsqlError(INVALID, f"the signature holds, but its key could not be checked: {exc.message}",
                         "pass the signer's public key with --public-key HEX") from None
    if found is None:
        raise ScsqlError(INVALID, f"the signature holds, but key {sig['public_key']} is not registered here for "
                                  f"{sig['signer']}", "pass the public key you trust with --public-key HEX")
    return "this server's registered keys"


def render_html(document: dict[str, Any], data: str) -> str:
    """The report for a person: one file, no script that runs, every value escaped; the signed JSON inside."""
    import jinja2

    from .http import HERE

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["usd"] = lambda v: "-" if v is None else f"${float(v):,.4f}"
    safe = data.replace("<", "\\u003c")  # inside the data block no "<" can open or close a tag
    page = env.get_template("report.html").render(r=document["report"], sig=document["signature"])
    return page.replace("@@SIGNED_REPORT@@", safe)
