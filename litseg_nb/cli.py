"""The command line, ``python -m litseg_nb <command>``: :data:`COMMANDS` is the one table of subcommands. A
handler returns the exit status (0, 1 a runtime failure, 2 a usage error); a ``LitsegError`` it does not
report becomes one line on stderr, ``[litseg_nb] <command>: <message>``.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from .api import DEFAULT_PROFILE
from .config import PROFILES, ConfigError, NoSuchField, config_sets, explain, renamed_hint
from .core.paths import NOTEBOOKS_DIR, REPO_ROOT, outputs_root
from .core.safe_io import OutputsNotWritable, ensure_writable
from .data.download import cli as download_main
from .errors import LitsegError, UsageError
from .evaluation.boundaries import cli as boundaries_main
from .evaluation.boundary_train import cli as train_boundary_main
from .front import docs_site, gallery, rehearse, runner
from .front.batch_segment import __doc__ as _SEGMENT_DOC
from .front.batch_segment import segment_main
from .front.chunk_import import cli as import_chunks_main
from .front.params import (NOTEBOOK_CONFIGS, _build, check_set_keys, config_overrides, convert, missing_for,
                           parameters_cell, parse_key_value)
from .redact import redact_obj, redact_url
from .segmenters.registry import methods_text


_SMOKE_DURATION = "13-18 min on 2 idle CPU cores, by machine (docs/measurements.md)"
_TEST_DURATION = "tiny random model, about 10 min"
_HELP = f"""Run and inspect the LitSeg notebooks.

  python -m litseg_nb run                      every notebook, smoke profile ({_SMOKE_DURATION})
  python -m litseg_nb run --profile test       the CI profile ({_TEST_DURATION})
  python -m litseg_nb run --only 01,04 -p max_books=2
  python -m litseg_nb run --profile full --set judge_llm.base_urls=http://host:8000/v1   (or LITSEG_JUDGE_URLS)
  python -m litseg_nb rehearse                 the `full` code paths on CPU with tiny models (before renting a GPU)
  python -m litseg_nb config --profile smoke --notebook 05   resolved configuration of a stage
  python -m litseg_nb lab                      JupyterLab on notebooks/ (works as root)
  python -m litseg_nb download-data            opt-in: fetch GutenQA/LiteraryQA (needs internet)

`run` prints each notebook's sections as they start and a heartbeat at least every 30 s; the
executed copies go to outputs/<profile>/executed/ (NN_name.FAILED.ipynb when a notebook failed)."""


def _jobs(text: str) -> int:
    with contextlib.suppress(ValueError):
        if int(text) >= 1:
            return int(text)
    raise argparse.ArgumentTypeError(f"--jobs {text!r}: a whole number >= 1")


def _params_and_sets(args: argparse.Namespace, only: list[str]) -> tuple[dict[str, Any], list[Any]]:
    """The ``-p`` parameters and ``--set`` values of ``run``/``config``, the sets checked."""
    params = dict(parse_key_value(p, "parameter") for p in args.param)
    sets = [parse_key_value(item, "--set") for item in args.sets]
    check_set_keys(sets, runner.discover_notebooks(only))
    return params, sets


def run_main(args: argparse.Namespace) -> int:
    try:
        params, sets = _params_and_sets(args, args.only.split(","))
        with config_sets(sets):  # the runner's checks see them; each kernel gets them as a parameter
            runner.run_notebooks(args.profile, only=args.only.split(","), parameters=params, seed=args.seed,
                                 log_output=args.log_output, jobs=args.jobs)
    except (runner.NotebookFailed, OutputsNotWritable) as exc:
        print(redact_url(f"[litseg_nb] {exc}"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # one line, no traceback; the partial copy is marked FAILED
        print(f"\n[litseg_nb] {exc if isinstance(exc, runner.Interrupted) else 'interrupted'}", file=sys.stderr)
        return 130
    except ConfigError as exc:
        print(redact_url(f"[litseg_nb] configuration error: {exc}"), file=sys.stderr)
        return 2
    return 0


def list_main(args: argparse.Namespace) -> int:
    for nb in runner.discover_notebooks():
        print(f"{nb.name}: {runner.declared_parameters(nb)}")
    return 0


def _flatten(d: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(d, dict):  # an empty dict shows nothing
        return [kv for k, v in d.items() for kv in _flatten(v, f"{prefix}{k}.")]
    return [(prefix[:-1], d)]


def _stage_values(profile: str, only: str, parameters: dict[str, Any]) -> Iterator[tuple[Path, dict, dict]]:
    """``(notebook, declared, values)`` per selected package notebook; an undeclared ``-p`` is an error."""
    seen: set[str] = set()
    for nb in runner.discover_notebooks([o for o in only.split(",") if o.strip()]):
        if nb.stem not in NOTEBOOK_CONFIGS:
            continue
        declared = parameters_cell(nb)
        seen |= set(declared)
        defaults = {n: p.default for n, p in declared.items()}
        yield nb, declared, {**defaults, **{k: v for k, v in parameters.items() if k in declared}, "profile": profile}
    unknown = set(parameters) - seen
    if unknown:
        raise ConfigError(f"parameter(s) {', '.join(sorted(unknown))} not declared by any selected notebook")


def resolved_configs(profile: str, only: str = "", parameters: dict[str, Any] | None = None) -> list[tuple[str, Any]]:
    """``(notebook stem, config)`` per selected notebook, also one missing a required setting."""
    return [(nb.stem, _build(nb.stem, {n: convert(n, v, declared[n].annotation) for n, v in values.items()}))
            for nb, declared, values in _stage_values(profile, only, dict(parameters or {}))]


def format_config(stem: str, cfg: Any) -> str:
    # server addresses without their secrets
    fields = [f"   {key} = {value!r}" for key, value in _flatten(redact_obj(cfg.to_dict()))]
    return "\n".join([f"== {stem}: {type(cfg).__name__}  ({cfg.describe()})", *fields])


def explain_configs(profile: str, only: str, parameters: dict[str, Any], key: str) -> list[str]:
    """One line per field of ``key`` per selected stage: its value and the layer that set it."""
    if not key.strip():
        raise ConfigError("--explain '': give a key such as llm.model, or a section such as llm")
    lines, classes = [], []
    for nb, declared, values in _stage_values(profile, only, parameters):
        cls = NOTEBOOK_CONFIGS[nb.stem].config_class()
        classes.append(cls.__name__)
        try:  # a bad parameter value is its own error (as for `config` without --explain)
            overrides = config_overrides(nb.stem, {n: convert(n, v, declared[n].annotation) for n, v in values.items()})
        except ConfigError as exc:
            raise ConfigError(f"{nb.name}: {exc}") from None
        try:
            found = explain(cls, profile, key, overrides)
        except NoSuchField:  # this stage's config has no such field (a bad value is its own error)
            continue
        lines += [redact_url(f"{nb.stem}: {cls.__name__}.{e.key} = {e.value!r}  <- {e.layer}: {e.source}")
                  for e in found]
    if not lines:
        raise ConfigError(f"--explain {key}: no field {key!r}{renamed_hint(key.split('.'))} in {', '.join(sorted(set(classes))) or 'any selected stage'}"
                          f"; see `python -m litseg_nb config --profile PROFILE` for the field names")
    return lines


def config_main(args: argparse.Namespace) -> int:
    try:
        params, sets = _params_and_sets(args, [o for o in args.notebook.split(",") if o.strip()])
        with config_sets(sets):  # labels (describe) build related configs too: keep the sets active
            if args.explain is not None:
                print("\n".join(explain_configs(args.profile, args.notebook, params, args.explain)))
                return 0
            configs = resolved_configs(args.profile, args.notebook, params)
            print("\n\n".join(format_config(stem, cfg) for stem, cfg in configs))
    except ConfigError as exc:
        print(redact_url(f"[litseg_nb] configuration error: {exc}"), file=sys.stderr)
        return 2
    # showing a configuration is not running it: what `run` needs first is a warning here
    for stem, cfg in configs:
        for m in missing_for(stem, cfg):
            print(f"[litseg_nb] warning: `run` needs this first: {stem}: {m}", file=sys.stderr)
    return 0


def lab_command(extra: list[str]) -> list[str]:
    if not NOTEBOOKS_DIR.is_dir():
        raise UsageError(f"lab opens the notebooks of a checkout; {NOTEBOOKS_DIR} does not exist (an installed package "
                         "has no notebooks: clone the repository)")
    # rooted at the checkout (notebooks/ and outputs/ both reachable), opened on notebooks/
    cmd = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={REPO_ROOT}",
           f"--LabApp.default_url=/lab/tree/{NOTEBOOKS_DIR.relative_to(REPO_ROOT).as_posix()}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd + [a for a in extra if a != "--"]


def lab_main(args: argparse.Namespace) -> int:
    cmd = lab_command(args.jupyter_args)
    print("[litseg_nb] " + " ".join(cmd), flush=True)
    os.execve(sys.executable, cmd, runner.kernel_env_for_lab())  # does not return


def rehearse_main(args: argparse.Namespace) -> int:
    if not args.estimate:
        return rehearse.main(args)
    try:
        cards = [int(x) for x in str(args.gpu_gb).split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"rehearse --estimate: --gpu-gb {args.gpu_gb!r} must be integers (GB), e.g. 80,141") from None
    print(rehearse.format_estimate(Path(args.work) / "rehearsal_rows.json", cards or (80, 141)))
    return 0


def methods_main(args: argparse.Namespace) -> int:
    print(methods_text())
    return 0


_REST = ((re.compile(r":[a-z]+:`~?(?:[\w.]+\.)?([^`]+)`"), r"`\1`"),  # :func:`~litseg_nb.x.name` -> `name`
         (re.compile(r"``([^`]+)``"), r"`\1`"), (re.compile(r"\*\*([^*]+)\*\*"), r"\1"),
         (re.compile(r"::$", re.M), ":"))


def plain_help(text: str) -> str:
    """A docstring as terminal help: its reST markup (double backquotes, roles, bold, ``::``) shown plain."""
    for pattern, repl in _REST:
        text = pattern.sub(repl, text)
    return text


class _RAW(argparse.RawDescriptionHelpFormatter):
    """Descriptions keep their line breaks; docstrings' reST markup is shown plain."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return super()._fill_text(plain_help(text), width, indent)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return super()._split_lines(plain_help(text), width)


def retrieval_benchmark_main(args: argparse.Namespace) -> int:
    # deferred: the benchmark needs the eval extras (pandas, faiss, bm25s); a core install's CLI starts without them
    from .rag.benchmark import cli

    return cli(args)


def _arg(*flags: str, **kw: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    return flags, kw


#: subcommand -> (``add_parser`` keywords, ``args``: its ``add_argument`` calls; handler), in the order ``--help``
#: lists them
COMMANDS: dict[str, tuple[dict[str, Any], Callable[[argparse.Namespace], int]]] = {
    "run": (dict(help=f"execute the numbered notebooks with papermill (default profile: smoke, {_SMOKE_DURATION})",
                 description=_HELP, formatter_class=_RAW, args=[
        _arg("--profile", choices=PROFILES, default="smoke",
             help=f"default: smoke ({_SMOKE_DURATION}); test: {_TEST_DURATION}; full: GPU"),
        _arg("--only", default="", help="comma-separated notebook numbers, e.g. 01,04"),
        _arg("--seed", type=int, default=0),
        _arg("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
             help="extra parameter injected into notebooks that declare it"),
        _arg("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE", dest="sets",
             help="any config field of the selected notebooks' stage configs, e.g. "
                  "judge_llm.base_urls=http://host:8000/v1, llm.model=/models/Qwen3-8B, "
                  "llm.engine.tensor_parallel_size=2, LitSegConfig.llm.model=... (one config only); "
                  "checked before any kernel starts (`config --set` shows the result)"),
        _arg("--log-output", action="store_true",
             help="also stream the notebooks' printed output (progress bars and warnings always show)"),
        _arg("--jobs", type=_jobs, default=None, metavar="N",
             help="notebooks run side by side where their needs allow (default: 2 for smoke on >= 2 cores, "
                  "1 for test and full; 1 = one after another)"),
    ]), run_main),
    "list": (dict(help="list the numbered notebooks and their parameters"), list_main),
    "import-chunks": (dict(help="import an external chunk set (jsonl/csv/parquet/xlsx) and "
                                "align it to a book, for notebooks 05/06", args=[
        _arg("--book", required=True, help="book id (e.g. gutenqa:Emma_-_Jane_Austen) or your own book file (a .txt path, loaded as `segment` loads it)"),
        _arg("--name", required=True, help="chunk set name (artifacts/chunks/<name>.jsonl)"),
        _arg("--from", dest="from_file", required=True, help="chunk file: .jsonl .csv .parquet .xlsx"),
        _arg("--text-column", default="Chunk", help="column holding the chunk text (default: Chunk)"),
        _arg("--profile", default="smoke", choices=("test", "smoke", "full")),
        _arg("--min-score", type=float, default=0.8, help="lowest similarity accepted as a fuzzy match"),
    ]), import_chunks_main),
    "config": (dict(help="print each stage's resolved configuration for a profile", args=[
        _arg("--profile", choices=PROFILES, default="smoke"),
        _arg("--notebook", default="", help="comma-separated notebook numbers, e.g. 05 (default: all)"),
        _arg("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
             help="a notebook parameter, as for `run`"),
        _arg("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE", dest="sets",
             help="a config field, as for `run --set` (e.g. judge_llm.base_urls=http://host:8000/v1)"),
        _arg("--explain", default=None, metavar="KEY",
             help="only KEY (e.g. llm.model, or a section such as llm): its value per stage and the layer "
                  "that set it (default, profile, run: --set or a server variable, explicit: a parameter)"),
    ]), config_main),
    "lab": (dict(help="start JupyterLab at the checkout, on notebooks/ (works as root too)",
                 description="Start JupyterLab rooted at the checkout (notebooks/ and outputs/), opened on "
                             "notebooks/. Extra arguments after `--` go to "
                             "jupyter lab, e.g. `python -m litseg_nb lab -- --no-browser --port 8890`.", args=[
        _arg("jupyter_args", nargs=argparse.REMAINDER, help="extra arguments for jupyter lab"),
    ]), lab_main),
    "download-data": (dict(help="opt-in: fetch GutenQA / LiteraryQA from the Hugging Face hub "
                                "into the data folder (needs internet)", args=[
        _arg("--datasets", default="gutenqa,literaryqa", help="comma-separated: gutenqa,literaryqa"),
        _arg("--dest", default=None, help="data folder (default: LITSEG_DATA_DIR or ../shared/data)"),
        _arg("--literaryqa-split", default="validation"),
    ]), download_main),
    "segment": (dict(help="segment .txt books (a file, a folder or a glob) with any method",
                     description=_SEGMENT_DOC.split("\n\n", 1)[1],
                     formatter_class=_RAW, args=[
        _arg("inputs", nargs="+", metavar="FILE|DIR|GLOB",
             help="Project Gutenberg .txt books or plain text files; a folder means its *.txt files"),
        _arg("--method", default="litseg",
             help="litseg, litseg-lite, a baseline (lumber, token, paragraph, ...) or a library preset "
                  "lib:<preset> (lib:langchain-recursive, lib:chonkie-token, ...) or lib:<library>.<Class>; "
                  "`python -m litseg_nb methods` lists them all with one line each (default: litseg)"),
        _arg("--profile", choices=PROFILES, default=DEFAULT_PROFILE,
             help=f"models and sizes (default: {DEFAULT_PROFILE}; test = a tiny random model)"),
        _arg("--llm-backend", choices=("hf", "vllm", "openai"), help="override the profile's LLM backend"),
        _arg("--llm-model", help="model name or path (with --llm-backend openai: the served model)"),
        _arg("--base-url", action="append", default=[], metavar="URL",
             help="OpenAI-compatible endpoint(s), e.g. http://localhost:8000/v1 (repeatable)"),
        _arg("--max-units", type=int, default=0, help="segment only the first N units per book (0 = all)"),
        _arg("--set", action="append", default=[], metavar="KEY=VALUE",
             help="config override of the method, e.g. lumber_budget_tokens=400 (repeatable)"),
        _arg("--chunk-size", default=None, metavar="N",
             help="no chunk over N tokens of --token-counter: longer ones are split at paragraph, sentence, "
                  "then token boundaries (default: none; chunks longer than the model reads are counted)"),
        _arg("--token-counter", default=None, metavar="NAME",
             help="tokenizer of --chunk-size and token_count: a packaged name, a folder or a hub id "
                  "(default: the profile's embedding model)"),
        _arg("--keep-outside-units", action=argparse.BooleanOptionalAction, default=True,
             help="chunk the text outside the narrative units (title page, front/back matter) as unit "
                  "'outside' (default); --no-keep-outside-units leaves it out, still counted"),
        _arg("-o", "--output", type=Path,
             help="chunks file (*.jsonl, one input) or folder (default: ./outputs/<profile>/segment/)"),
        _arg("--force", action="store_true", help="replace existing outputs (and redo complete books)"),
        _arg("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
             help="run the books on a Ray cluster (extra `ray`): local (default: a cluster of this machine, "
                  "started and stopped for the run), auto, HOST:PORT (the head's GCS) or ray://HOST:PORT; "
                  "outputs as without --ray"),
        _arg("--ray-actors", type=int, default=None, metavar="N",
             help="with --ray, for a method with a model: N actors, each holding one backend "
                  "(default: the cluster's CPUs, at most one per book)"),
        _arg("--ray-cpus", type=int, default=None, metavar="N", help="with --ray local: the local cluster's CPUs"),
        _arg("--ray-gpus", type=float, default=None, metavar="G",
             help="with --ray: GPUs each actor reserves (a vllm or hf backend on GPU nodes)"),
    ]), segment_main),
    "methods": (dict(help="list every segmentation method and lib: preset with one line each "
                          "(for segment --method, boundaries --method)"), methods_main),
    "boundaries": (dict(help="score chunkers against the authors' chapter and scene breaks: "
                             "ours (--method) or any chunk set (--chunks)", args=[
        _arg("--profile", default="smoke", choices=("test", "smoke", "full")),
        _arg("--seed", type=int, default=0),
        _arg("--method", action="append", default=[],
             help="registered method(s) to run on the windows, comma-separated (default: the profile's)"),
        _arg("--chunks", action="append", default=[],
             help="a chunk set to score: the package's chunk JSONL on the windows, or JSONL rows "
                  "{'book_id', 'text'} in order from your own chunker (see --export-windows); its row is named "
                  "after the file (two files of one name, or a method's name: an error)"),
        _arg("--export-windows", default="", metavar="FILE",
             help="write the windows (book_id, unit_id, kind, text, sentences) as JSONL and stop"),
        _arg("--counts", action="store_true",
             help="print the gold found per source book and the ornament census of all local books, and stop"),
        _arg("--llm-windows", type=int, default=None, help="windows the LLM methods segment (0 = all)"),
        _arg("--name", default="", help="table name under outputs/<profile>/tables (default: boundaries); never "
                                        "a notebook's (NN_...) or another command's table"),
    ]), boundaries_main),
    "retrieval-benchmark": (dict(help="whole-book retrieval benchmark: every LLM-free method on every local book "
                                      "(tier A), the LLM methods on the units they cover (tier B); budget-matched "
                                      "and paired against recursive", args=[
        _arg("--profile", default="smoke", choices=("test", "smoke", "full")),
        _arg("--seed", type=int, default=0),
        _arg("--books", action="append", default=[],
             help="tier-A book ids, comma-separated (default: every local GutenQA and LiteraryQA book)"),
        _arg("--embedding-presets", action=argparse.BooleanOptionalAction, default=None,
             help="also the lib: presets that embed (each embeds every book its own way: on 2 CPU cores about half "
                  "an hour each for the local books); default: the profile's (smoke and test: no, full: yes)"),
    ]), retrieval_benchmark_main),
    "train-boundary-model": (dict(help="train the narrative boundary model (method boundary-model) on the chapter "
                                       "and scene breaks of <data>/gutenberg_train; writes the weights and their "
                                       "card (default: boundary_model.json in the working directory)", args=[
        _arg("--seed", type=int, default=None, help="seed of the split and the sampling (default: 13)"),
        _arg("--max-books", type=int, default=None, help="first N training books only (0 = all)"),
        _arg("--out", default="", help="weights file to write (default: boundary_model.json in the working "
                                       "directory; the card lands beside it as <name>.card.json)"),
        _arg("--force", action="store_true", help="replace an existing --out file and its card"),
        _arg("--packaged", action="store_true", help="replace the package's own weights and card "
                                                     "(litseg_nb/weights/boundary_model{,.card}.json) instead"),
        _arg("--no-validation", action="store_true", help="skip the held-out validation scores"),
    ]), train_boundary_main),
    "rehearse": (dict(help="the full profile's engines and code paths on the CPU with tiny local models "
                           "(the step before renting a GPU)",
                      description=rehearse.__doc__, formatter_class=_RAW, args=[
        _arg("--python", default=str(REPO_ROOT / ".venv-vllm" / "bin" / "python"),
             help="the rehearsal environment's python (bash scripts/setup_vllm_cpu.sh .venv-vllm --with-project)"),
        _arg("--only", default="01,02,03,04,05,06,07,08", help="notebooks to run (default: all)"),
        _arg("--pieces-only", action="store_true", help="only the engine pieces (a few minutes)"),
        _arg("--no-pieces", action="store_true", help="skip the engine pieces"),
        _arg("--timeout", type=float, default=7200, help="seconds per notebook (default 7200)"),
        _arg("--work", default=str(outputs_root() / "rehearsal"),
             help="outputs, caches and logs of the rehearsal (never the real full outputs)"),
        _arg("--estimate", action="store_true",
             help="print what `run --profile full` costs on one GPU (the rehearsal's counts in --work scaled "
                  "to full's data sizes, engine memory, GPU-hours at stated throughputs) and stop"),
        _arg("--gpu-gb", default="80,141", help="--estimate: card sizes in GB (stated throughputs: 80, 141)"),
    ]), rehearse_main),
    "gallery": (dict(help="a gallery page of outputs/<profile>/ (tables and figures) in docs/gallery/<profile>/",
                     description=gallery.__doc__, formatter_class=_RAW, args=[
        _arg("--profile", default="smoke", choices=PROFILES,
             help="whose outputs/<profile>/ to show (default: smoke)"),
        _arg("--out", default=None,
             help="folder of the page (default: docs/gallery/<profile>/ in the checkout)"),
    ]), gallery.run),
    "docs": (dict(help="build the documentation site (Sphinx + MyST-NB, warnings as errors) into docs/_build/html/",
                  description=docs_site.__doc__, formatter_class=_RAW, args=[
        _arg("--out", default=None, help="folder of the site (default: docs/_build/html/ in the checkout, "
                                          "git-ignored); new, empty or an earlier build, never a folder of yours"),
        _arg("--notebooks", default=None, choices=PROFILES, metavar="PROFILE",
             help="first copy the executed notebooks of outputs/PROFILE/executed/ into docs/notebooks/PROFILE/"),
    ]), docs_site.run),

}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m litseg_nb", description=_HELP, formatter_class=_RAW)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (spec, handler) in COMMANDS.items():
        p = sub.add_parser(name, **{k: v for k, v in spec.items() if k != "args"})
        for flags, arg_kw in spec.get("args", []):
            p.add_argument(*flags, **arg_kw)
        p.set_defaults(handler=handler)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status = args.handler(args)
        sys.stdout.flush()  # a closed pipe (`methods | head`) surfaces here, not at exit
        return status
    except LitsegError as exc:  # a domain error the handler did not report: one line, no traceback
        print(redact_url(f"[litseg_nb] {args.command}: {' '.join(str(exc).split()) or type(exc).__name__}"),
              file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # the reader went away: as Python's docs recommend, no more output, exit 1
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
