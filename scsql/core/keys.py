"""Agents' Ed25519 keys: generation, the on-disk keystore, signing.

The private key never reaches the database; only the raw 32-byte public key is
registered. A key file must be readable by its owner alone (mode 0600): a file
that group or others can read is refused, since anyone who can read it can
write rows in the agent's name.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from . import errors
from .errors import ScsqlError


def generate() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def public_bytes(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    pub = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def load_public(raw: bytes) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(bytes(raw))


def _pem(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


class Keystore:
    """A directory of private keys, one ``NAME.key`` (PKCS#8 PEM, mode 0600) per agent."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def path(self, name: str) -> Path:
        return self.directory / f"{name}.key"

    def exists(self, name: str) -> bool:
        return self.path(name).exists()

    def stage(self, name: str, key: Ed25519PrivateKey) -> Path:
        """Write the key beside its final place; :meth:`commit` makes it live.

        Used so that a failed registration leaves no key file behind."""
        import tempfile

        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        owner = self.directory.stat().st_uid
        if hasattr(os, "geteuid") and owner != os.geteuid():
            raise ScsqlError(
                errors.KEY_FILE_INSECURE,
                f"keystore {self.directory} belongs to uid {owner}, not to this user; no key was written",
                "point SCSQL_KEYSTORE at a directory of your own",
            )
        os.chmod(self.directory, 0o700)
        # A new file (O_EXCL, 0600 from its creation) under a name no one can
        # guess: never a file or link someone else put there.
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{name}.key.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(_pem(key))
        return Path(tmp)

    def commit(self, staged: Path, name: str) -> Path:
        final = self.path(name)
        os.replace(staged, final)
        return final

    def load(self, name: str) -> Ed25519PrivateKey:
        path = self.path(name)
        try:
            st = path.stat()
        except FileNotFoundError:
            raise ScsqlError(
                errors.KEY_FILE_MISSING,
                f"no private key for agent {name!r} at {path}",
                "create the agent with scsql agent create, or set SCSQL_KEYSTORE to the directory that holds its key",
            ) from None
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ScsqlError(
                errors.KEY_FILE_INSECURE,
                f"key file {path} has mode {stat.S_IMODE(st.st_mode):04o}; group or others can read it",
                f"chmod 600 {path}",
            )
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            raise ScsqlError(
                errors.KEY_FILE_INSECURE,
                f"key file {path} belongs to uid {st.st_uid}, not to this user",
                "keep each agent's key owned by the user that runs the agent",
            )
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ScsqlError(errors.KEY_FILE_INSECURE, f"{path} does not hold an Ed25519 private key")
        return key
