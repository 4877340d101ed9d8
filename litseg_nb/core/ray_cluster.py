"""Ray clusters for the runs that go past one machine (the optional extra ``ray``): addresses and actors.

A ``--ray`` / ``RayOptions.address`` value is ``local`` (a cluster of this machine, started for the run),
``auto`` (``RAY_ADDRESS`` or the ``ray start --head`` of this machine), ``HOST:PORT`` (the head's GCS) or
``ray://HOST:PORT`` (Ray Client); anything else is a :class:`RayAddressError` with its secrets removed.
A ``HOST:PORT`` nobody answers on fails fast (a TCP probe) instead of :func:`ray.init`'s minutes of waiting.
"""
from __future__ import annotations

import ipaddress
import itertools
import logging
import os
import re
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from ..errors import LitsegError, UsageError
from ..redact import redact_url

LOCAL = "local"
AUTO = "auto"
_HOST = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


class RayMissing(UsageError):
    """``--ray`` without the optional extra installed."""


class RayAddressError(UsageError):
    """A cluster address that is none of the forms the module docstring lists."""


class RayResourcesError(UsageError):
    """Actors that ask for more of a resource (GPUs) than the whole cluster has: they would wait forever."""


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
        if self.kind in (LOCAL, AUTO):
            return None if self.kind == LOCAL else AUTO
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'ray://' if self.kind == 'client' else ''}{host}:{self.port}"

    def __str__(self) -> str:
        return self.init_address or LOCAL


def parse_address(value: str | None) -> RayAddress:
    """The :class:`RayAddress` of a ``--ray`` value (None: ``local``)."""
    if value is None:
        return RayAddress(LOCAL)
    shown = redact_url(value) if "://" in value else redact_url("x://" + value)[4:]  # secrets out of the message
    if value != value.strip() or any(ord(ch) < 32 for ch in value):
        raise RayAddressError(f"--ray {shown!r}: an address has no blanks or control characters")
    if value == "":
        raise RayAddressError("--ray '': give local, auto, HOST:PORT or ray://HOST:PORT (or leave the value out: local)")
    if value in (LOCAL, AUTO):
        return RayAddress(value)
    kind, rest = "gcs", value
    if "://" in value:
        scheme, rest = value.split("://", 1)
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
        socket.create_connection((address.host, address.port), timeout=connect_timeout_s).close()
    except OSError as exc:
        why = (f"no answer within {connect_timeout_s:g}s" if isinstance(exc, socket.timeout)
               else exc.strerror or type(exc).__name__)
        raise RayUnreachable(f"Ray cluster {address} is unreachable ({why}); start it with "
                             "`ray start --head` or give another --ray address") from None


@contextmanager
def cluster(address: RayAddress, num_cpus: int | None = None) -> Iterator[Any]:
    """The :mod:`ray` module connected to ``address`` for the block. A connection the process already holds
    (a notebook's, a test's) is used and left open; otherwise one is opened for the block and shut down after
    it, also on an error. ``num_cpus`` sizes a ``local`` cluster (default: this machine's CPUs)."""
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    probe(address)
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING,
                              "runtime_env": {"env_vars": {}}}
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


#: the driver's variables every actor of a run carries (where outputs, caches, models and data live; offline
#: switches; thread caps). No secret is among them: an API key is set on the nodes, never put into a Ray
#: runtime environment (which the cluster stores and shows).
TASK_ENV = ("LITSEG_CACHE_DIR", "LITSEG_DATA_DIR", "LITSEG_MODELS_DIR", "LITSEG_OUTPUTS_DIR", "LITSEG_TORCH_THREADS",
            "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "TOKENIZERS_PARALLELISM",
            "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def run_on_actors(ray: Any, worker: type, init: tuple[Any, ...], n: int, jobs: Sequence[Any],
                  call: Callable[[Any, Any], Any], on_result: Callable[[Any, Any], None],
                  on_death: Callable[[Any, BaseException], None], *, name: str, num_gpus: float = 0,
                  more: Callable[[], bool] = lambda: True, last: Callable[[list[Any]], None] | None = None
                  ) -> list[Any]:
    """Run ``call(actor, job)`` for each job on ``n`` actors ``worker(*init)``, the next job to whichever actor is
    free while ``more()``; ``on_result(job, value)`` in completion order. A worker that dies is ``on_death(job,
    exc)`` (raise to stop) and a fresh actor takes its place (no restarts, no retries); an exception of the job
    itself is raised here as it is. ``last(actors)`` sees the live actors before they are killed.
    Returns the jobs never started."""
    # deferred: ray is the optional extra (cluster() has checked it is installed)
    from ray.exceptions import ObjectLostError, RayActorError, RayTaskError, WorkerCrashedError

    if num_gpus:  # Ray queues an actor the cluster cannot place without a word, for ever: refuse it here
        total = float(ray.cluster_resources().get("GPU", 0))
        if total < num_gpus:
            raise RayResourcesError(f"the Ray cluster has {total:g} GPU(s) and each {name} actor reserves "
                                    f"{num_gpus:g}: it would never start; add GPU nodes or reserve none "
                                    "(--ray-gpus 0, ray.gpus_per_actor=0)")
    opts: dict[str, Any] = {"num_cpus": 1, "max_restarts": 0, "max_task_retries": 0,
                            "runtime_env": {"env_vars": {k: os.environ[k] for k in TASK_ENV if k in os.environ}}}
    if num_gpus:
        opts["num_gpus"] = num_gpus
    Actor = ray.remote(**opts)(worker)
    names = (f"{name}-{time.time_ns():x}-{i}" for i in itertools.count())
    actors = [Actor.options(name=next(names)).remote(*init) for _ in range(n)]
    queue, refs = list(jobs), {}

    def submit(actor: Any) -> None:
        if queue and more():
            job = queue.pop(0)
            refs[call(actor, job)] = (job, actor)

    try:
        for a in actors:
            submit(a)
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            job, actor = refs.pop(ready[0])
            try:
                value = ray.get(ready[0])
            except RayTaskError as exc:  # the job's own error (a bug, a dead server): its cause, not Ray's wrapper
                raise exc.as_instanceof_cause() from None
            except (RayActorError, WorkerCrashedError, ObjectLostError) as exc:
                on_death(job, exc)
                actors[actors.index(actor)] = actor = Actor.options(name=next(names)).remote(*init)
            else:
                on_result(job, value)
            submit(actor)
        if last is not None:
            last(actors)
    finally:
        for a in actors:
            ray.kill(a)
    return queue
