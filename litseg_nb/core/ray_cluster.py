"""Reaching a Ray cluster for the runs that go past one machine (the optional extra ``ray``).

``segment DIR --ray [ADDRESS]`` (:mod:`litseg_nb.front.ray_segment`) and
:func:`litseg_nb.litseg.ray_annotate.annotate_units_on_ray` name their cluster with one address:

* ``local`` (the default of a bare ``--ray``): a Ray cluster of this machine only, started for the run
  and shut down after it;
* ``auto``: the cluster ``RAY_ADDRESS`` names, or the one ``ray start --head`` started on this machine;
* ``HOST:PORT``: the head node's GCS address (``ray start --head`` prints it; port 6379 by default);
* ``ray://HOST:PORT``: a Ray Client server (port 10001 by default).

Anything else (another scheme, a user name or password, a path, a query, a blank) is a
:class:`RayAddressError` (exit 2) naming the value with its secrets removed. A ``HOST:PORT`` nobody
answers on is a :class:`RayUnreachable` (exit 1) after a TCP probe of ``connect_timeout_s`` seconds,
before :func:`ray.init` (which would otherwise wait minutes for a missing head node). Something other
than Ray answering on the port passes the probe; Ray then retries on its own (seen: ~20 s to over 10 min). Without the
extra, :func:`require_ray` is a :class:`RayMissing` (exit 2) saying how to install it.

When the calling process already holds a Ray connection (a notebook or a test called
:func:`ray.init`), :func:`cluster` uses it and leaves it open; otherwise it connects for the run and
shuts the connection (and a local cluster it started) down afterwards, also on an error.
"""
from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from ..errors import LitsegError, UsageError
from ..redact import redact_url

LOCAL = "local"
AUTO = "auto"
_HOST = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


class RayMissing(UsageError):
    """``--ray`` without the optional extra installed."""


class RayAddressError(UsageError):
    """A ``--ray`` address that is none of the forms the module docstring lists."""


class RayUnreachable(LitsegError):
    """A well-formed cluster address nobody answers on (or :func:`ray.init` refused it)."""


@dataclass(frozen=True)
class RayAddress:
    """A checked cluster address: ``kind`` is ``local``, ``auto``, ``gcs`` or ``client``."""

    kind: str
    host: str = ""
    port: int = 0

    @property
    def init_address(self) -> str | None:
        """What :func:`ray.init` is given (None: start a local cluster)."""
        if self.kind == LOCAL:
            return None
        if self.kind == AUTO:
            return AUTO
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'ray://' if self.kind == 'client' else ''}{host}:{self.port}"

    def __str__(self) -> str:
        return self.init_address or LOCAL


def parse_address(value: str | None) -> RayAddress:
    """The :class:`RayAddress` of a ``--ray`` value (None: ``local``)."""
    if value is None:
        return RayAddress(LOCAL)
    shown = redact_url(value) if "://" in value else redact_url("x://" + value)[4:]  # secrets out of the message
    raw = str(value)
    if raw != raw.strip() or any(ord(ch) < 32 for ch in raw):
        raise RayAddressError(f"--ray {shown!r}: an address has no blanks or control characters")
    if raw == "":
        raise RayAddressError("--ray '': give local, auto, HOST:PORT or ray://HOST:PORT (or leave the value out: local)")
    if raw == LOCAL:
        return RayAddress(LOCAL)
    if raw == AUTO:
        return RayAddress(AUTO)
    kind, rest = "gcs", raw
    if "://" in raw:
        scheme, rest = raw.split("://", 1)
        if scheme != "ray":
            raise RayAddressError(f"--ray {shown}: a cluster address is HOST:PORT (the head's GCS) or "
                                  f"ray://HOST:PORT (Ray Client), not a {scheme}:// URL")
        kind = "client"
    if any(ch in rest for ch in "@/?#\\"):
        raise RayAddressError(f"--ray {shown}: a cluster address is HOST:PORT, with no user, path or query")
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d{1,5})|([^:\[\]]+):(\d{1,5})", rest)
    if not m:
        raise RayAddressError(f"--ray {shown}: expected local, auto, HOST:PORT or ray://HOST:PORT")
    host, port = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not _HOST.match(host):
            raise RayAddressError(f"--ray {shown}: {host!r} is not a host name or IP address") from None
    if not 1 <= int(port) <= 65535:
        raise RayAddressError(f"--ray {shown}: port {port} is outside 1-65535")
    return RayAddress(kind, host, int(port))


def require_ray() -> Any:
    """The :mod:`ray` module, or :class:`RayMissing`."""
    try:
        # deferred: ray is the optional extra `ray`; everything else works without it
        import ray
    except ImportError:
        raise RayMissing("--ray needs Ray: pip install 'litseg_nb[ray]' (ray[data]==2.60.0)") from None
    return ray


def probe(address: RayAddress, connect_timeout_s: float = 5.0) -> None:
    """A TCP connection to ``address`` (gcs / client), or :class:`RayUnreachable` naming it."""
    if address.kind not in ("gcs", "client"):
        return
    try:
        with socket.create_connection((address.host, address.port), timeout=connect_timeout_s):
            pass
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        if isinstance(exc, socket.timeout):
            why = f"no answer within {connect_timeout_s:g}s"
        raise RayUnreachable(f"Ray cluster {address} is unreachable ({why}); start it with "
                             "`ray start --head` or give another --ray address") from None


@contextmanager
def cluster(address: RayAddress, num_cpus: int | None = None, env_vars: dict[str, str] | None = None,
            connect_timeout_s: float = 5.0) -> Iterator[Any]:
    """The :mod:`ray` module connected to ``address`` for the block (see the module docstring).

    ``num_cpus`` sizes a ``local`` cluster (default: this machine's CPUs); ``env_vars`` reach every
    worker of the run (a new connection: its runtime environment; an existing one: ignored, the
    caller's workers keep theirs — :func:`task_env` passes them per task instead)."""
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    probe(address, connect_timeout_s)
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING,
                              "runtime_env": {"env_vars": dict(env_vars or {})}}
    if address.kind == LOCAL:
        kwargs["num_cpus"] = num_cpus or os.cpu_count() or 1
    else:
        kwargs["address"] = address.init_address
    try:
        ray.init(**kwargs)
    except Exception as exc:  # ray.init raises bare Exception too (a local raylet that did not start in time)
        if ray.is_initialized():
            ray.shutdown()
        hint = " (a local raylet gets 30 s to start: on a busy machine, rerun)" if address.kind == LOCAL else ""
        raise RayUnreachable(f"Ray cluster {address} did not start or answer: {type(exc).__name__}: "
                             f"{' '.join(str(exc).split())[:300]}{hint}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


#: the driver's environment variables every task of a run carries (where outputs, caches, models and data
#: live; offline switches; thread caps): a worker started before the run, or on another node, sees the run's
#: settings. No secret is among them: an API key (``llm.api_key_env``) or a signed ``LITSEG_*_URLS`` is set on
#: the nodes themselves, never put into a Ray runtime environment (which the cluster stores and shows).
TASK_ENV = ("LITSEG_CACHE_DIR", "LITSEG_DATA_DIR", "LITSEG_MODELS_DIR", "LITSEG_OUTPUTS_DIR", "LITSEG_TORCH_THREADS",
            "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "TOKENIZERS_PARALLELISM",
            "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def task_env() -> dict[str, str]:
    """The driver's variables of :data:`TASK_ENV` that are set (a task's ``runtime_env`` ``env_vars``)."""
    return {k: os.environ[k] for k in TASK_ENV if k in os.environ}
