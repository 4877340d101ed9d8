"""Notebook parameters: one cell tagged ``parameters`` of typed literals (``max_books: int | None = None``;
``None``: the profile's value), each a field of the notebook's stage config (:data:`NOTEBOOK_CONFIGS`). The
runner checks ``-p`` values before any kernel starts and injects the resolved config (:data:`RESOLVED`).
"""
from __future__ import annotations

import ast
import functools
import importlib
import json
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, get_type_hints

from ..config import (_MISSING, PROFILES, ConfigError, StageConfig, _scalar, _split_key, active_sets, field_constraint,
                      field_hint, missing_settings, rejected_choices, renamed_hint)
from ..config import _build as build_dataclass
from ..core.paths import NOTEBOOKS_DIR
from ..redact import MASK, redact_obj, redact_url, redacted_secrets, restore_obj


def parse_key_value(item: str, option: str = "parameter") -> tuple[str, Any]:
    """``key=value`` from the command line: the value as a Python literal when it is one, else the string."""
    if "=" not in item:
        raise ConfigError(f"{option} {item!r} must look like key=value")
    key, raw = item.split("=", 1)
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    return key.strip(), value

@dataclass(frozen=True)
class NotebookConfig:
    """Which stage config a notebook's parameters build; ``fields`` maps a parameter to its field path where
    the names differ; ``minimum`` tightens a field's minimum (a notebook needs one book)."""

    config: str  # "module:Class"
    fields: Mapping[str, str] = field(default_factory=dict)
    minimum: Mapping[str, float] = field(default_factory=dict)
    # the config's LLM roles the notebook calls (None = all): only those must be reachable
    llm_roles: tuple[str, ...] | None = None

    def config_class(self) -> type[StageConfig]:
        module, name = self.config.split(":")
        return getattr(importlib.import_module(module), name)


#: notebook file stem -> the config its parameters build
NOTEBOOK_CONFIGS: dict[str, NotebookConfig] = {
    "01_preprocessing": NotebookConfig("litseg_nb.corpus:PreprocessConfig", minimum={"max_books": 1}),
    "02_litseg_annotation": NotebookConfig("litseg_nb.litseg.config:LitSegConfig",
                                           fields={"max_units": "selection.max_units",
                                                   "ray_address": "ray.address"}),
    "03_lite_distillation": NotebookConfig("litseg_nb.lite.config:LiteConfig"),
    "04_baselines": NotebookConfig("litseg_nb.chunkers.config:BaselinesConfig",
                                   fields={"llm_max_units": "selection.max_units", "chunkers": "methods"}),
    "05_rag_evaluation": NotebookConfig("litseg_nb.rag.config:RagConfig"),
    "06_segment_quality": NotebookConfig("litseg_nb.evaluation.segment_quality:SegmentQualityConfig"),
    "07_ablations": NotebookConfig("litseg_nb.lite.config:LiteConfig",
                                   fields={"variants": "ablation_variants", "max_units": "ablation_max_units"},
                                   llm_roles=("llm",)),
    "08_efficiency": NotebookConfig("litseg_nb.evaluation.efficiency:EfficiencyConfig"),
}


@dataclass(frozen=True)
class Parameter:
    annotation: str  # as written, e.g. "int | None"
    default: Any


def parameters_cell(notebook: Path) -> dict[str, Parameter]:
    """The typed parameters declared in ``notebook``'s single ``parameters`` cell, in order."""
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    cells = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ConfigError(f"{Path(notebook).name}: expected exactly one cell tagged 'parameters', found {len(cells)}")
    return parse_parameters("".join(cells[0]["source"]), Path(notebook).name)


def parse_parameters(source: str, where: str = "parameters cell") -> dict[str, Parameter]:
    """``name: type = literal`` lines of a parameters cell (anything else is an error naming it)."""
    out: dict[str, Parameter] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None):
            raise ConfigError(f"{where}: line {node.lineno} is not a typed parameter `name: type = literal`")
        name, annotation = node.target.id, ast.unparse(node.annotation)
        try:
            default = ast.literal_eval(node.value)
        except ValueError:
            raise ConfigError(f"{where}: parameter {name!r} must default to a literal") from None
        out[name] = Parameter(annotation, convert(name, default, annotation))
    return out


_BASES = {"bool": bool, "int": int, "float": float, "str": str}


def _parse_annotation(annotation: str, name: str) -> tuple[Any, bool]:
    parts = [p.strip() for p in annotation.split("|")]
    optional = "None" in parts
    parts = [p for p in parts if p != "None"]
    if len(parts) == 1:
        p = parts[0]
        if p in _BASES:
            return _BASES[p], optional
        m = re.fullmatch(r"tuple\[(\w+), \.\.\.\]", p)
        if m and m.group(1) in _BASES:
            return ("tuple", _BASES[m.group(1)]), optional
    raise ConfigError(f"parameter {name!r}: unsupported annotation {annotation!r} (use bool, int, float, str "
                      f"or tuple[str, ...], optionally `| None`)")


def _describe(base: Any, optional: bool) -> str:
    text = (f"a comma-separated list of {base[1].__name__}" if isinstance(base, tuple) else
            {bool: "true/false (also 1/0, yes/no)", int: "an integer", float: "a number", str: "a string"}[base])
    return text + (" or none (the profile's value)" if optional else "")


def convert(name: str, value: Any, annotation: str) -> Any:
    """``value`` (a literal or a ``-p`` string) as the parameter's annotated type."""
    base, optional = _parse_annotation(annotation, name)
    if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "null")):
        if optional:
            return None
        raise ConfigError(f"parameter {name!r}: None is not accepted; expected {_describe(base, optional)}")
    try:
        if isinstance(base, tuple):
            items = value.split(",") if isinstance(value, str) else value
            if not isinstance(items, (list, tuple)):
                raise ValueError(value)
            items = [i.strip() if isinstance(i, str) else i for i in items]
            return tuple(_scalar(i, base[1]) for i in items if i != "")
        return _scalar(value, base)
    except ValueError:
        raise ConfigError(f"parameter {name!r}: {value!r} is not accepted; expected "
                          f"{_describe(base, optional)}") from None


def _target(cls: type, name: str, spec: NotebookConfig) -> str:
    if name in spec.fields:
        return spec.fields[name]
    if name in {f.name for f in fields(cls)}:
        return name
    if name in {f.name for f in fields(field_owner(cls, "corpus.x"))}:
        return f"corpus.{name}"
    raise ConfigError(f"parameter {name!r} is not a field of {cls.__name__} (nor of its corpus config); "
                      f"map it in litseg_nb.front.params.NOTEBOOK_CONFIGS")


def field_owner(cls: type, path: str) -> type:
    """The dataclass holding the last field of ``path``."""
    owner = cls
    for part in path.split(".")[:-1]:
        owner = get_type_hints(owner)[part]
    return owner


def _check_value(name: str, value: Any, cls: type, path: str, spec: NotebookConfig) -> None:
    rule = field_constraint(field_owner(cls, path), path.split(".")[-1])
    choices = rule.get("choices")
    bad = rejected_choices(value, choices) if choices is not None else []
    if bad:
        raise ConfigError(f"parameter {name!r}: {', '.join(map(repr, bad))} is not accepted; accepted values: "
                          f"{', '.join(map(str, choices))} (or none for the profile's value)")
    for bound, op in ((spec.minimum.get(name, rule.get("ge")), ">="), (rule.get("le"), "<=")):
        if bound is not None and not isinstance(value, tuple) and (value < bound if op == ">=" else value > bound):
            raise ConfigError(f"parameter {name!r}: {value!r} is not accepted; expected a value {op} {bound:g} "
                              f"(or none for the profile's value)")


def config_overrides(notebook: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Nested config overrides from converted parameter values (``None`` values are dropped)."""
    spec = NOTEBOOK_CONFIGS[notebook]
    cls = spec.config_class()
    out: dict[str, Any] = {}
    for name, value in values.items():
        if name == "profile" or value is None:
            continue
        path = "seed" if name == "seed" else _target(cls, name, spec)
        if name != "seed":
            _check_value(name, value, cls, path, spec)
        *parents, leaf = path.split(".")
        functools.reduce(lambda node, p: node.setdefault(p, {}), parents, out)[leaf] = value
    return out


def notebook_config(notebook: str, **values: Any) -> StageConfig:
    """The config of ``notebook`` (file stem) from all its declared parameters, checked as the runner does."""
    path = NOTEBOOKS_DIR / f"{notebook}.ipynb"
    if not path.is_file():
        raise ConfigError(f"no notebook {path}")
    return resolve(notebook, {n: p.annotation for n, p in parameters_cell(path).items()}, values)[0]


def resolve(notebook: str, annotations: Mapping[str, str], values: Mapping[str, Any]) -> tuple[StageConfig, dict[str, Any]]:
    """``(config, converted values)`` of ``notebook``; ``annotations`` and ``values`` name the same parameters."""
    missing = sorted(set(annotations) - set(values))
    unknown = sorted(set(values) - set(annotations))
    if missing or unknown:
        raise ConfigError(f"{notebook}: notebook_config() must get exactly the declared parameters; "
                          f"missing {missing}, undeclared {unknown}")
    converted = {n: convert(n, v, annotations[n]) for n, v in values.items()}
    cfg = _build(notebook, converted)
    assert_runnable(notebook, cfg)
    return cfg, converted


#: the parameter through which papermill hands a notebook the configuration the runner resolved (redacted)
RESOLVED = "litseg_resolved"
#: the secrets redacted from :data:`RESOLVED` (redacted -> original, JSON): the kernel inherits them from the
#: runner's environment, so no executed notebook holds them
SECRETS_ENV = "LITSEG_RESOLVED_SECRETS"


def _env_secrets() -> dict[str, str]:
    try:
        found = json.loads(os.environ.get(SECRETS_ENV) or "{}")
    except json.JSONDecodeError:
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def inject_redacted(resolved: Any) -> Any:
    """``resolved`` without secrets, to write into a notebook; the secrets go to :data:`SECRETS_ENV`."""
    secrets = redacted_secrets(resolved)
    if secrets:
        os.environ[SECRETS_ENV] = json.dumps({**_env_secrets(), **secrets})
    return redact_obj(resolved)


def _unredacted(stem: str, resolved: Any) -> Any:
    restored = restore_obj(resolved, _env_secrets())

    def strings(o: Any) -> list[str]:
        if isinstance(o, str):
            return [o]
        items = o.values() if isinstance(o, dict) else o if isinstance(o, (list, tuple)) else ()
        return [x for i in items for x in strings(i)]

    left = [v for v in strings(restored) if "://" in v and MASK in v and redact_url(v) == v]
    if left:
        raise ConfigError(f"{stem}: the injected {RESOLVED} holds redacted addresses ({redact_url(left[0])!r}) whose "
                          f"secrets are not in this kernel's environment ({SECRETS_ENV}); rerun it with "
                          "`python -m litseg_nb run`, or delete the injected-parameters cell to resolve the "
                          "configuration from the parameters cell and your environment")
    return restored


def from_namespace(stem: str, namespace: Mapping[str, Any]) -> tuple[StageConfig, dict[str, Any], list[tuple[str, Any]]]:
    """``(config, parameters, sets)`` of the running notebook ``stem``: the injected :data:`RESOLVED`, else resolved
    here."""
    # the parameters the notebook declared (its ``__annotations__``), annotations as written
    annotations = {n: a.__name__ if isinstance(a, type) else a if isinstance(a, str) else repr(a).replace("typing.", "")
                   for n, a in (namespace.get("__annotations__") or {}).items()}
    if not annotations:
        raise ConfigError(f"{stem}: no parameters found; run the notebook's `parameters` cell (typed "
                          f"`name: type = value` lines) before setup()")
    values = {n: namespace[n] for n in annotations if n in namespace}
    resolved = namespace.get(RESOLVED)
    if resolved is None:
        return *resolve(stem, annotations, values), []
    if not isinstance(resolved, Mapping) or resolved.get("notebook") != stem:
        got = resolved.get("notebook") if isinstance(resolved, Mapping) else type(resolved).__name__
        raise ConfigError(f"{stem}: the injected {RESOLVED} is for {got!r}, not this notebook")
    converted = {n: convert(n, v, annotations[n]) for n, v in values.items()}
    expected = {n: convert(n, v, annotations[n]) for n, v in resolved["parameters"].items() if n in annotations}
    if set(resolved["parameters"]) != set(annotations) or converted != expected:
        changed = sorted(n for n in set(converted) | set(expected) if converted.get(n) != expected.get(n))
        changed += sorted(set(resolved["parameters"]) ^ set(annotations))
        raise ConfigError(f"{stem}: parameter(s) {', '.join(sorted(set(changed)))} differ from those the runner "
                          f"resolved the configuration for ({RESOLVED}); rerun the notebook from the top, or "
                          f"delete the injected-parameters cell to resolve it from the parameters cell")
    resolved = _unredacted(stem, resolved)
    cls = NOTEBOOK_CONFIGS[stem].config_class()
    cfg = build_dataclass(cls, resolved["config"], f"{cls.__name__}[{resolved['config'].get('profile')}]")
    return cfg, converted, [(str(k), v) for k, v in resolved.get("sets", [])]


def missing_for(notebook: str, cfg: StageConfig) -> list[str]:
    return missing_settings(cfg, NOTEBOOK_CONFIGS[notebook].llm_roles)


def assert_runnable(notebook: str, cfg: StageConfig) -> None:
    missing = missing_for(notebook, cfg)
    if missing:
        raise ConfigError(f"{notebook} (profile {cfg.profile}) cannot run: " + "; ".join(missing))


def stage_config_classes() -> list[type[StageConfig]]:
    """Every :class:`~litseg_nb.config.StageConfig` subclass of the package, by name (also those a notebook
    builds inside, e.g. notebook 06's ``BoundaryConfig``)."""
    # the modules defining stage configs, loaded when asked for (not with the CLI)
    for module in ("corpus", "chunkers.config", "chunkers.library", "evaluation.boundaries", "evaluation.efficiency",
                   "evaluation.segment_quality", "lite.config", "litseg.config", "rag.config"):
        importlib.import_module(f"litseg_nb.{module}")
    out: dict[str, type] = {}
    todo = list(StageConfig.__subclasses__())
    while todo:
        c = todo.pop()
        if c.__module__.startswith("litseg_nb.") and not c.__module__.startswith("litseg_nb.tests"):
            out[c.__name__] = c
        todo.extend(c.__subclasses__())
    return [out[k] for k in sorted(out)]



def check_set_keys(sets: Any, notebooks: Any) -> None:
    """Every ``--set`` key must name a field of at least one selected notebook's config."""
    classes = {NOTEBOOK_CONFIGS[Path(nb).stem].config_class() for nb in notebooks
               if Path(nb).stem in NOTEBOOK_CONFIGS}
    if sets and not classes:
        raise ConfigError("--set given, but no selected notebook has a stage config")
    for key, _ in sets:
        qual, parts = _split_key(key)
        pool = [c for c in classes if qual is None or c.__name__ == qual]
        # a qualified key may name any stage config (one a selected notebook builds inside)
        if qual is not None and not pool:
            pool = [c for c in stage_config_classes() if c.__name__ == qual]
        if not any(field_hint(c, parts) is not _MISSING for c in pool):
            names = ", ".join(sorted(c.__name__ for c in (pool or classes)))
            raise ConfigError(f"--set {key}: no field {'.'.join(parts)!r}{renamed_hint(parts)} in {names} (the selected notebooks' "
                              f"configs); see `python -m litseg_nb config --profile PROFILE` for the field names")


def _build(notebook: str, converted: Mapping[str, Any]) -> StageConfig:
    profile = converted.get("profile")
    if profile not in PROFILES:
        raise ConfigError(f"parameter 'profile': {profile!r} is not accepted; accepted values: {', '.join(PROFILES)}")
    spec = NOTEBOOK_CONFIGS[notebook]
    overrides = config_overrides(notebook, converted)
    try:
        return spec.config_class().for_profile(profile, **overrides)
    except ConfigError as exc:
        shown = {k: _redacted(v) for k, v in converted.items()}
        raise ConfigError(f"{notebook}: parameters {shown} give an invalid config: {exc}") from None


def _redacted(value: Any) -> Any:
    """A parameter value without URL secrets (also of a bare ``user:password@host:port``)."""
    if isinstance(value, str) and "://" not in value and any(ch in value for ch in "@?#;"):
        return redact_url("x://" + value)[4:]
    return redact_obj(value)


def check_parameters(notebook: Path, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` (declared parameters) converted and, for a package notebook, checked by building its config;
    ready to inject, a package notebook's with ``{RESOLVED: ...}`` (its parameters, config and ``--set`` overrides).
    """
    notebook = Path(notebook)
    declared = parameters_cell(notebook)
    injected: dict[str, Any] = {}
    try:
        converted = {n: convert(n, v, declared[n].annotation) for n, v in values.items()}
        if notebook.stem in NOTEBOOK_CONFIGS:
            full = {**{n: p.default for n, p in declared.items()}, **converted}
            cfg = _build(notebook.stem, full)
            assert_runnable(notebook.stem, cfg)
            resolved = {"notebook": notebook.stem, "parameters": full, "config": cfg.to_dict(),
                        "sets": [[k, v] for k, v in active_sets()]}
            injected[RESOLVED] = inject_redacted(json.loads(json.dumps(resolved, default=list)))  # JSON, as papermill injects
    except ConfigError as exc:
        raise ConfigError(f"{notebook.name}: {exc}") from None
    return {n: list(v) if isinstance(v, tuple) else v for n, v in converted.items()} | injected
