"""Secrets out of everything the package writes or prints: URL userinfo, every query or fragment part (a value,
or a whole part without ``=``: ``?SECRET``, ``#SECRET``) and ``;key=value`` path parameters.

:func:`redact_url` is the one path for text, :func:`redact_obj` for JSON-like values (it applies
:func:`redact_url`); :func:`redacted_secrets` gives what they removed, so a secret can travel elsewhere
(the environment) and be put back (:func:`restore_obj`)."""
from __future__ import annotations

import hashlib
import re
from typing import Any, Mapping

_USERINFO = re.compile(r"(?<=://)[^/@\s?#]+@")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_PATH_PARAM = re.compile(r"(?<=;)([^=;\s/?#]+=)[^;\s/?#]+")  # ;jsessionid=abc in the path
_QUERY_PART = re.compile(r"([?&#;])([^?&#;]*)")  # from the first ? or #: each part with its separator
MASK = "***"


def _redact_one(url: str) -> tuple[str, list[str]]:
    """``(redacted, secrets)`` of one URL (no whitespace inside)."""
    secrets = [m.group(0) for m in _USERINFO.finditer(url)]
    url = _USERINFO.sub(MASK + "@", url)
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=len(url))
    head, tail = url[:cut], url[cut:]
    secrets += [m.group(0) for m in _PATH_PARAM.finditer(head)]
    head = _PATH_PARAM.sub(r"\1" + MASK, head)
    parts = []
    for sep, part in _QUERY_PART.findall(tail):
        key, eq, value = part.partition("=")
        if eq and value:
            secrets.append(part)
            part = f"{key}={MASK}"
        elif part and not eq:
            secrets.append(part)
            part = MASK
        parts.append(sep + part)
    return head + "".join(parts), secrets


def redact_url(text: str) -> str:
    """``text`` with every URL's secrets replaced by ``***`` (userinfo, query and fragment parts)."""
    text = _USERINFO.sub(MASK + "@", str(text))
    return _URL.sub(lambda m: _redact_one(m.group(0))[0], text)


def url_identity(url: str) -> str:
    """A server's identity for a cache key: the redacted URL, plus ``#<12 hex>`` of the removed parts if any."""
    text = str(url)
    red, secrets = redact_url(text), [s for m in _URL.finditer(text) for s in _redact_one(m.group(0))[1]]
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


def redacted_secrets(obj: Any) -> dict[str, str]:
    """``redacted string -> original`` for every string of ``obj`` that :func:`redact_obj` changes."""
    if isinstance(obj, str):
        red = redact_obj(obj)
        return {red: obj} if red != obj else {}
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    return {k: v for item in items for k, v in redacted_secrets(item).items()}


def restore_obj(obj: Any, secrets: Mapping[str, str]) -> Any:
    """``obj`` with each redacted string of ``secrets`` (:func:`redacted_secrets`) put back."""
    if isinstance(obj, str):
        return secrets.get(obj, obj)
    if isinstance(obj, dict):
        return {k: restore_obj(v, secrets) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(restore_obj(v, secrets) for v in obj)
    return obj
