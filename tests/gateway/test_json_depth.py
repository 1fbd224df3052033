"""`jsonrpc.json_depth`, the check that runs on every request body before the parser (issue #24's
flood: a batch of 100 deliveries is about 76 kB, over the no-scan bound of `MAX_DEPTH` brackets,
so every forged batch is scanned). The scan uses bytes methods only; these tests hold it to the
depth the parser itself sees, strings with brackets, quotes and backslashes included."""

from __future__ import annotations

import json
import random

from tenzro_operator.gateway.jsonrpc import MAX_DEPTH, json_depth

# strings that hide brackets and quotes from a naive count, or end in escaped backslashes
TRICKY = ['[', ']', '{', '}', '"', '\\', '\\"', '"]', '\\\\', '\\\\"[', '[[[{', 'a\\"b[', '\u005b', '\\u005b', ']]}}"']


def depth_of(obj) -> int:
    """The nesting depth of a parsed document (0 for a scalar)."""
    if isinstance(obj, list):
        return 1 + max((depth_of(v) for v in obj), default=0)
    if isinstance(obj, dict):
        return 1 + max((depth_of(v) for v in obj.values()), default=0)
    return 0


def random_doc(rng: random.Random, depth: int):
    if depth == 0 or rng.random() < 0.15:
        return rng.choice([rng.choice(TRICKY), rng.randrange(10**6), None, True, rng.choice(TRICKY) * 3])
    if rng.random() < 0.5:
        return [random_doc(rng, depth - 1) for _ in range(rng.randrange(1, 4))]
    return {rng.choice(TRICKY) + str(i): random_doc(rng, depth - 1) for i in range(rng.randrange(1, 4))}


def test_the_depth_scan_is_the_parsers_depth_whatever_the_strings_hold():
    rng = random.Random(24)
    for _ in range(400):
        doc = [random_doc(rng, rng.randrange(1, 9)) for _ in range(rng.randrange(20, 40))]  # over the no-scan bound
        body = json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode()
        assert body.count(b"[") + body.count(b"{") > MAX_DEPTH or json_depth(body) >= depth_of(doc)
        if body.count(b"[") + body.count(b"{") > MAX_DEPTH:
            assert json_depth(body) == depth_of(doc), body[:300]


def test_brackets_behind_escaped_quotes_and_backslashes_are_counted_or_not_as_the_parser_does():
    filler = ",".join(["[1]"] * MAX_DEPTH)  # over the no-scan bound, depth 2
    cases = {
        f'[{filler},"a\\\\"]': 2,  # an escaped backslash ends the string: nothing hidden
        f'[{filler},"a\\"[[[[["]': 2,  # an escaped quote: the brackets are inside the string
        f'[{filler},"\\\\\\"[[[[["]': 2,  # backslash pair, then an escaped quote: still inside
        f'[{filler},"\\\\",[[[[1]]]]]': 5,  # the string ends after the pair: these brackets count
    }
    for text, want in cases.items():
        assert depth_of(json.loads(text)) == want
        assert json_depth(text.encode()) == want, text
