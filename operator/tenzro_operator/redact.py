"""Node URLs without their secrets, for every page, error and log line that shows one.

Hosted chain nodes put the API key in the URL: in the path (Infura ``/v3/<key>``, Alchemy
``/v2/<key>``, Ankr ``/eth/<key>``, QuickNode ``/<token>/``), in the query (``?apikey=``) or as
userinfo (``https://user:pass@host``). `redact_url` keeps what tells the operator which node it
is (scheme, host, port, and path segments that read as words or versions) and replaces the rest
by ``***``; `scrub` does the same inside a free text (an exception's message quoting the URL).

Usage::

    redact_url("https://mainnet.infura.io/v3/0123abcd?apikey=x")   # 'https://mainnet.infura.io/v3/***?***'
    scrub("... url: /v3/0123abcd?apikey=x", url)                  # '... url: /v3/***?***'
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["MASK", "redact_url", "scrub"]

MASK = "***"
# a path segment kept as is: a version (v1, v3) or a lower-case word (rpc, eth-mainnet) of at most
# 16 characters; anything else (digits, capitals, long tokens) may be a key
_WORD = re.compile(r"v\d{1,2}|[a-z][a-z-]{0,15}")


def _parts(url: str):
    try:
        u = urlsplit(url.strip())
        port = u.port
    except ValueError:  # not a URL we can read: show nothing of it
        return None
    if not u.scheme or not u.hostname:
        return None
    return u, port


def redact_url(url: str | None) -> str:
    """``url`` with its userinfo, query, fragment and key-like path segments replaced by ``***``
    (scheme, host and port kept). Text that is not a URL with a host becomes ``***`` entirely."""
    if not url:
        return ""
    got = _parts(str(url))
    if got is None:
        return MASK
    u, port = got
    host = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
    out = f"{u.scheme}://{MASK + '@' if u.username or u.password else ''}{host}{f':{port}' if port else ''}"
    segs = u.path.split("/")
    out += "/".join(s if not s or _WORD.fullmatch(s) else MASK for s in segs)
    if u.query:
        out += "?" + MASK
    if u.fragment:
        out += "#" + MASK
    return out


def _secrets(url: str) -> list[str]:
    """The parts of ``url`` that `redact_url` hides, longest first (at least 3 characters each)."""
    got = _parts(url)
    if got is None:
        return [url] if len(url) >= 3 else []
    u, _ = got
    found = [u.netloc.rpartition("@")[0], u.query, u.fragment]
    found += [s for s in u.path.split("/") if s and not _WORD.fullmatch(s)]
    return sorted({s for s in found if len(s) >= 3}, key=len, reverse=True)


def scrub(text: str, *urls: str | None) -> str:
    """``text`` with each of ``urls`` shown redacted and every secret part of them (userinfo,
    query, fragment, key-like path segments), wherever it appears alone, replaced by ``***``."""
    text = str(text)
    for url in urls:
        if not url:
            continue
        url = str(url)
        for form in sorted({url, url.rstrip("/")}, key=len, reverse=True):
            text = text.replace(form, redact_url(url))
        for secret in _secrets(url):
            text = text.replace(secret, MASK)
    return text
