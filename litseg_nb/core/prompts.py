"""Prompt templates ``litseg_nb/templates/<area>/<name>.txt``, addressed as ``"<area>/<name>"``."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from .paths import TEMPLATES_DIR
from ..errors import LitsegError

HEADER_PREFIX = "# source:"


class PromptError(LitsegError, ValueError):
    """A template is missing, has no source header, or a placeholder cannot be filled."""


def prompt_path(name: str) -> Path:
    """Path of template ``"<area>/<name>"`` (``.txt`` appended when missing)."""
    rel = name if name.endswith(".txt") else f"{name}.txt"
    path = (TEMPLATES_DIR / rel).resolve()
    if TEMPLATES_DIR.resolve() not in path.parents:
        raise PromptError(f"template name {name!r} points outside {TEMPLATES_DIR}")
    return path


@lru_cache(maxsize=None)
def load_prompt(name: str) -> str:
    """The text of template ``name`` (e.g. ``"litseg/system"``) without its source header."""
    path = prompt_path(name)
    if not path.is_file():
        raise PromptError(f"prompt template {path} does not exist")
    header, _, body = path.read_text(encoding="utf-8").partition("\n")
    if not header.startswith(HEADER_PREFIX):
        raise PromptError(
            f"prompt template {path}: first line must be a header starting with {HEADER_PREFIX!r} "
            f"naming the prompt's source, got {header[:60]!r}"
        )
    return body.removesuffix("\n")


def fill_prompt(template: str, **values: object) -> str:
    """Replace exactly the placeholders ``{key}`` for the given keys (single pass, no format()); a key missing
    from the template raises :class:`PromptError`, other braces are left untouched."""
    if not values:
        return template
    missing = [k for k in values if "{" + k + "}" not in template]
    if missing:
        raise PromptError(f"placeholder(s) {missing} not found in the template")
    pattern = re.compile(r"\{(" + "|".join(re.escape(k) for k in values) + r")\}")
    return pattern.sub(lambda m: str(values[m.group(1)]), template)


def render_prompt(name: str, **values: object) -> str:
    """``fill_prompt(load_prompt(name), **values)``."""
    return fill_prompt(load_prompt(name), **values)
