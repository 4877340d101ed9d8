"""Secrets out of everything the package writes or prints: a URL's userinfo (``http://user:token@host``)
and every query or fragment value (signed URLs put them anywhere) become ``***``. :func:`url_identity`
still tells two servers apart that differ only in a secret (a short hash of what was removed).
"""
from __future__ import annotations

import hashlib
import re
from typing import Any

_USERINFO = re.compile(r"(?<=://)[^/@\s?#]+@")
# every value of a query or fragment parameter: ?a=1&b=2#c=3 -> ?a=***&b=***#c=***
_PARAM_VALUE = re.compile(r"(?<=[?&#;])([^=&#;\s/]+=)[^&#;\s]+")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def _secret_parts(url: str) -> list[str]:
    parts = [m.group(0) for m in _USERINFO.finditer(url)]
    for m in _URL.finditer(url):
        parts += [p.group(0) for p in _PARAM_VALUE.finditer(m.group(0))]
    return parts


def redact_url(text: str) -> str:
    """``text`` (a URL, or any text with URLs in it) with every userinfo replaced by ``***@`` and every
    query or fragment value of a URL by ``***`` (the parameter names are kept: ``?api_key=***``)."""
    text = _USERINFO.sub("***@", str(text))
    return _URL.sub(lambda m: _PARAM_VALUE.sub(r"\1***", m.group(0)), text)


def url_identity(url: str) -> str:
    """A server's identity for a cache key: the redacted URL, plus ``#<12 hex>`` of the removed parts if any."""
    secrets = _secret_parts(str(url))
    red = redact_url(url)
    if not secrets:
        return red
    return f"{red}#{hashlib.sha256(chr(0).join(secrets).encode()).hexdigest()[:12]}"


def redact_obj(obj: Any) -> Any:
    """A copy of a JSON-like value with :func:`redact_url` applied to every string holding ``://``."""
    if isinstance(obj, str):
        return redact_url(obj) if "://" in obj else obj
    if isinstance(obj, dict):
        return {k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(redact_obj(v) for v in obj) if not hasattr(obj, "_fields") else obj
    return obj
