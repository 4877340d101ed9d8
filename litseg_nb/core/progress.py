"""The package's progress bars: tqdm's, with tqdm's own switch left in charge.

``bar(..., progress=False)`` is off; ``progress=True`` leaves ``disable`` unset, so ``TQDM_DISABLE=1`` (tqdm's
environment default, which the notebook runner sets for its kernels: an executed notebook shows results, the
runner's console shows sections and heartbeats) still turns it off. tqdm lets an explicit ``disable=False``
override that variable, hence this one function instead of ``tqdm(..., disable=not progress)``.
"""
from __future__ import annotations

from typing import Any

from tqdm.auto import tqdm

__all__ = ["bar"]


def bar(iterable: Any = None, *, progress: bool = True, **kwargs: Any) -> Any:
    """``tqdm.auto.tqdm(iterable, **kwargs)``, off when ``progress`` is false or ``TQDM_DISABLE`` is set."""
    if not progress:
        kwargs["disable"] = True
    return tqdm(iterable, **kwargs)
