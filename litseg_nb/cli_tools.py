"""``config`` and ``lab`` subcommands of ``python -m litseg_nb``.

* ``python -m litseg_nb config --profile smoke [--notebook 05] [-p key=value ...]`` prints each
  stage's fully resolved configuration (models, data, sizes), built exactly as the notebook builds
  it from its parameters (:func:`litseg_nb.params.notebook_config`).
* ``python -m litseg_nb lab [-- extra jupyter args]`` starts JupyterLab on ``notebooks/``; as root it
  adds ``--allow-root`` (JupyterLab refuses to start as root otherwise), and kernels print text
  progress bars without the IProgress warning, as in ``run``.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Iterator

from .config import PROFILES, ConfigError


def _flatten(d: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _flatten(v, f"{prefix}{k}.")
    else:
        yield prefix[:-1], d


def resolved_configs(profile: str, only: str = "", parameters: dict[str, Any] | None = None,
                     check: bool = True) -> list[tuple[str, Any]]:
    """``(notebook stem, config)`` for each selected notebook, from its parameters' defaults
    (``check=False``: also a config that misses a required setting, see ``params.missing_for``)."""
    from .params import NOTEBOOK_CONFIGS, _build, convert, notebook_config, parameters_cell
    from .runner import discover_notebooks

    extra = dict(parameters or {})
    out = []
    for nb in discover_notebooks([o for o in only.split(",") if o.strip()]):
        if nb.stem not in NOTEBOOK_CONFIGS:
            continue
        declared = parameters_cell(nb)
        values = {n: p.default for n, p in declared.items()}
        values.update({k: v for k, v in extra.items() if k in declared})
        values["profile"] = profile
        if check:
            out.append((nb.stem, notebook_config(nb.stem, **values)))
        else:
            out.append((nb.stem, _build(nb.stem, {n: convert(n, v, declared[n].annotation) for n, v in values.items()})))
    unknown = set(extra) - {k for stem, _ in out for k in parameters_cell(_nb_path(stem))}
    if unknown:
        raise ConfigError(f"parameter(s) {', '.join(sorted(unknown))} not declared by any selected notebook")
    return out


def _nb_path(stem: str):
    from .paths import NOTEBOOKS_DIR

    return NOTEBOOKS_DIR / f"{stem}.ipynb"


def format_config(stem: str, cfg: Any) -> str:
    lines = [f"== {stem}: {type(cfg).__name__}  ({cfg.describe()})"]
    for key, value in _flatten(cfg.to_dict()):
        lines.append(f"   {key} = {value!r}")
    return "\n".join(lines)


def _config_main(args) -> int:
    from .config import config_sets
    from .params import check_set_keys, missing_for, parse_key_value
    from .runner import _parse_param, discover_notebooks

    try:
        params = dict(_parse_param(p) for p in args.param)
        sets = [parse_key_value(item, "--set") for item in args.sets]
        check_set_keys(sets, discover_notebooks([o for o in args.notebook.split(",") if o.strip()]))
        with config_sets(sets):  # labels (describe) build related configs too: keep the sets active
            configs = resolved_configs(args.profile, args.notebook, params, check=False)
            print("\n\n".join(format_config(stem, cfg) for stem, cfg in configs))
    except ConfigError as exc:
        print(f"[litseg_nb] configuration error: {exc}", file=sys.stderr)
        return 2
    missing = [f"{stem}: {m}" for stem, cfg in configs for m in missing_for(stem, cfg)]
    for line in missing:  # what `run` refuses to start without (an unset server address)
        print(f"[litseg_nb] configuration error: {line}", file=sys.stderr)
    return 2 if missing else 0


def lab_command(extra: list[str]) -> list[str]:
    from .paths import NOTEBOOKS_DIR

    cmd = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={NOTEBOOKS_DIR}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd + [a for a in extra if a != "--"]


def _lab_main(args) -> int:
    from .execution import kernel_env_for_lab

    cmd = lab_command(args.jupyter_args)
    print("[litseg_nb] " + " ".join(cmd), flush=True)
    os.execve(sys.executable, cmd, kernel_env_for_lab())
    return 0  # pragma: no cover  (execve does not return)


def add_subparsers(sub) -> None:
    cfg = sub.add_parser("config", help="print each stage's resolved configuration for a profile")
    cfg.add_argument("--profile", choices=PROFILES, default="smoke")
    cfg.add_argument("--notebook", default="", help="comma-separated notebook numbers, e.g. 05 (default: all)")
    cfg.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                     help="a notebook parameter, as for `run`")
    cfg.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE", dest="sets",
                     help="a config field, as for `run --set` (e.g. judge_llm.base_urls=http://host:8000/v1)")
    cfg.set_defaults(handler=_config_main)
    lab = sub.add_parser("lab", help="start JupyterLab on notebooks/ (works as root too)",
                         description="Start JupyterLab on notebooks/. Extra arguments after `--` go to "
                                     "jupyter lab, e.g. `python -m litseg_nb lab -- --no-browser --port 8890`.")
    lab.add_argument("jupyter_args", nargs=argparse.REMAINDER, help="extra arguments for jupyter lab")
    lab.set_defaults(handler=_lab_main)
