"""The one clip of the hooks: never a fragment of a word (so never part of a
secret, which redaction would no longer recognise), always within its bound."""

from __future__ import annotations

import random

import pytest

from scsql.hooks import handlers, transcript
from scsql.hooks.clip import clip, cut_point

SECRETS = ["AKIAIOSFODNN7EXAMPLE", "ghp_Zq8Rt2Lx9Vb4Nm7Kp3Wc6Hy1Jd5Fg0Ts8Eab",
           "postgres://app:Xk9mPq2vL7@db.internal:5432/app",
           "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"]


@pytest.mark.parametrize("ellipsis", [False, True])
@pytest.mark.parametrize("squash", [False, True])
def test_a_clip_keeps_a_secret_whole_or_not_at_all(squash, ellipsis):
    rng = random.Random(7)
    seps = [" ", "\n", '"', "'", ",", "(", "[", "{", "\t"]
    for _ in range(3000):
        secret = rng.choice(SECRETS)
        limit = rng.randint(30, 400)
        start = rng.randint(max(0, limit - len(secret) - 40), limit + 5)
        left = "".join(rng.choice("abc ") for _ in range(start))
        text = left + rng.choice(seps) + secret + rng.choice(seps) + "tail words"
        out = clip(text, limit, squash=squash, ellipsis=ellipsis)
        assert len(out) <= limit
        if secret not in out:
            for n in range(6, len(secret)):
                assert secret[:n] not in out, (text, out)


def test_cut_point_is_at_a_word_boundary():
    assert cut_point("hello world", 8) == 6
    assert cut_point("hello world", 5) == 5
    assert cut_point("hello world", 6) == 6
    assert cut_point("helloworld", 5) == 0
    assert cut_point("short", 99) == 5


def test_every_hook_clip_is_the_same_function():
    assert handlers._clip is clip
    assert transcript._clip("a  b\n c " + "d" * 50, 10) == clip("a  b\n c " + "d" * 50, 10, squash=True, ellipsis=True)
    assert not hasattr(transcript, "_PEM") and not hasattr(transcript, "_pem_free")
