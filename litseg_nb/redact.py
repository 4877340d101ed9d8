"""Secrets out of everything the package writes or prints: URL userinfo, query and fragment values."""
from __future__ import annotations

import hashlib
import re
from typing import Any

_USERINFO = re.compile(r"(?<=://)[^/@\s?#]+@")
# every value of a query or fragment parameter: ?a=1&b=2#c=3 -> ?a=***&b=***#c=***
_PARAM_VALUE = re.compile(r"(?<=[?&#;])([^=&#;\s/]+=)[^&#;\s]+")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def redact_url(text: str) -> str:
    """``text`` with every URL's userinfo replaced by ``***@`` and query or fragment values by ``***``."""
    text = _USERINFO.sub("***@", str(text))
    return _URL.sub(lambda m: _PARAM_VALUE.sub(r"\1***", m.group(0)), text)


def url_identity(url: str) -> str:
    """A server's identity for a cache key: the redacted URL, plus ``#<12 hex>`` of the removed parts if any."""
    secrets = [m.group(0) for m in _USERINFO.finditer(str(url))]
    secrets += [p.group(0) for m in _URL.finditer(str(url)) for p in _PARAM_VALUE.finditer(m.group(0))]
    red = redact_url(url)
    return f"{red}#{hashlib.sha256(chr(0).join(secrets).encode()).hexdigest()[:12]}" if secrets else red


def redact_obj(obj: Any) -> Any:
    """A copy of a JSON-like value with :func:`redact_url` applied to every string holding ``://``."""
    if isinstance(obj, str):
        return redact_url(obj) if "://" in obj else obj
    if isinstance(obj, dict):
        return {k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(redact_obj(v) for v in obj) if not hasattr(obj, "_fields") else obj
    return obj
