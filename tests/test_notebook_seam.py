"""One seam between a notebook and the package: ``cfg, run = setup("NN", globals())``.

A notebook names its parameters once (its ``parameters`` cell), never reads its own ``.ipynb``, and
gets the configuration the runner resolved as a papermill parameter (``litseg_resolved``), with the
run's ``--set`` overrides for the configs it builds inside — never through the environment.
"""
from __future__ import annotations

import ast
import builtins
import io
import re
import subprocess
from pathlib import Path

import nbformat
import pytest

from litseg_nb.config import SERVER_ENV

from litseg_nb.front import params, run_context
from litseg_nb.config import PROFILES, ConfigError, active_sets, config_sets, use_sets
from litseg_nb.core.paths import NOTEBOOKS_DIR, REPO_ROOT

NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("0*.ipynb"))
OLD_ENV = "LITSEG" + "_SET"  # spelled in two halves so that this file does not contain it


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    monkeypatch.delenv(OLD_ENV, raising=False)
    for name, *_ in SERVER_ENV:
        monkeypatch.delenv(name, raising=False)
    yield
    use_sets([])


def _cells(nb_path: Path):
    nb = nbformat.read(nb_path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    (i,) = [k for k, c in enumerate(code) if "parameters" in c.metadata.get("tags", [])]
    return code, i


def _namespace(nb_path: Path, **injected):
    """The notebook's namespace after its parameters cell (and papermill's injected cell)."""
    code, i = _cells(nb_path)
    ns: dict = {}
    exec(compile(code[i].source, nb_path.name, "exec"), ns)
    ns.update(injected)
    return ns


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_has_one_seam_and_names_its_parameters_once(nb):
    code, i = _cells(nb)
    number = nb.stem[:2]
    seam = [k for k, c in enumerate(code) if re.search(r"\bsetup\(", c.source)]
    assert seam == [i + 1], f"{nb.name}: setup() must be called once, in the cell after the parameters cell"
    assert re.search(rf'^cfg, \w+ = setup\("{number}", globals\(\)\)', code[i + 1].source, re.M)
    declared = params.parameters_cell(nb)
    others = [n for n in declared if n not in ("profile", "seed")]
    for k, cell in enumerate(code):
        src = cell.source
        for banned in ("notebook_config", "parameters_cell", "NOTEBOOKS_DIR", ".ipynb", "RunContext(", "RunContext.for_config",
                       "os.environ[", "environ.get(", "getenv("):
            assert banned not in src, f"{nb.name} cell {k}: {banned!r} (the notebook must not read its own file or the environment)"
        if k == i:
            continue
        tree = ast.parse(src.replace("%", "#"))
        assert not [n for n in ast.walk(tree) if isinstance(n, ast.AnnAssign)], \
            f"{nb.name} cell {k}: an annotated assignment outside the parameters cell would read as a parameter"
        for name in others:  # no second list of the parameters (a config call, a manifest dict)
            assert not re.search(rf"\b{name}={name}\b|[\"']{name}[\"']: {name}\b", src), f"{nb.name} cell {k}: {name} named again"
        assert "write_manifest({" not in src, f"{nb.name} cell {k}: the manifest takes the run's own parameters"


def test_old_environment_channel_is_gone_everywhere():
    files = subprocess.run(["git", "-C", str(REPO_ROOT), "ls-files"], capture_output=True, text=True,
                           check=True).stdout.split()
    hits = [f for f in files if (REPO_ROOT / f).is_file() and not f.endswith((".png", ".pdf"))
            and OLD_ENV in (REPO_ROOT / f).read_text(encoding="utf-8", errors="replace")]
    assert hits == []


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_setup_never_reads_the_notebook_file(nb, monkeypatch):
    ns = _namespace(nb)
    declared = {n: ns[n] for n in params.parameters_cell(nb)}
    expected = params.notebook_config(nb.stem, **declared)
    real_open, real_io_open = builtins.open, io.open

    def guarded(file, *a, **kw):
        if str(file).endswith(".ipynb"):
            raise AssertionError(f"setup() opened {file}")
        return real_open(file, *a, **kw)

    def refuse(*a, **kw):
        raise AssertionError("setup() read a parameters cell from a file")

    monkeypatch.setattr(builtins, "open", guarded)
    monkeypatch.setattr(io, "open", guarded)
    monkeypatch.setattr(params, "parameters_cell", refuse)
    monkeypatch.setattr(nbformat, "read", refuse)
    cfg, run = run_context.setup(nb.stem[:2], ns)
    monkeypatch.setattr(builtins, "open", real_open)
    assert cfg == expected and run.notebook == nb.stem and run.label == cfg.describe()
    assert run.parameters == declared and run.config is cfg


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_kernel_takes_the_config_the_runner_resolved(nb, profile, monkeypatch):
    for name, *_ in SERVER_ENV:  # full's judge and raters need an address
        monkeypatch.setenv(name, "http://127.0.0.1:9/v1")
    values = params.check_parameters(nb, {"profile": profile, "seed": 1})  # with the resolved config
    defaults = {n: p.default for n, p in params.parameters_cell(nb).items()}
    runner_cfg = params.notebook_config(nb.stem, **{**defaults, "profile": profile, "seed": 1})
    ns = _namespace(nb, **values)
    for name, *_ in SERVER_ENV:  # the kernel does not resolve again: the addresses came with the config
        monkeypatch.delenv(name)
    cfg, run = run_context.setup(nb.stem[:2], ns)
    assert cfg == runner_cfg and run.profile == profile and run.parameters["seed"] == 1


def test_set_reaches_the_kernel_as_a_parameter_and_configs_built_inside(fresh_dirs):
    """05's LumberChunker sweep builds BaselinesConfig inside the notebook: the run's --set reach it
    through the injected parameter, and the manifest records them."""
    from litseg_nb.chunkers.config import BaselinesConfig

    nb = NOTEBOOKS_DIR / "05_rag_evaluation.ipynb"
    sets = [("BaselinesConfig.llm.model", "smollm2-135m-instruct"), ("rrf_k", 3)]
    with config_sets(sets):
        values = params.check_parameters(nb, {"profile": "test", "seed": 0})
    assert active_sets() == []  # nothing left behind in the runner's process, nothing in the environment
    assert values[params.RESOLVED]["sets"] == [list(kv) for kv in sets]
    cfg, run = run_context.setup("05", _namespace(nb, **values))
    assert cfg.rrf_k == 3 and active_sets() == sets  # the kernel's process has them now
    assert BaselinesConfig.for_profile("test").llm.model == "smollm2-135m-instruct"
    import json

    run.write_manifest(data_files=[])
    manifest = json.loads(run.manifest_path().read_text())
    assert manifest["parameters"] == {"profile": "test", "seed": 0, "reranker": None, "fusion": None,
                                      "question_scope": None, "chunkers": None}
    assert manifest["config"]["rrf_k"] == 3 and manifest["sets"] == [list(kv) for kv in sets]


def test_a_parameter_edited_after_the_injection_is_an_error():
    nb = NOTEBOOKS_DIR / "04_baselines.ipynb"
    values = params.check_parameters(nb, {"profile": "test", "seed": 0})
    ns = _namespace(nb, **values)
    ns["seed"] = 7
    with pytest.raises(ConfigError, match=r"04_baselines: parameter\(s\) seed differ from those the runner resolved"):
        run_context.setup("04", ns)
    with pytest.raises(ConfigError, match="is for '04_baselines', not this notebook"):
        run_context.setup("05", _namespace(NOTEBOOKS_DIR / "05_rag_evaluation.ipynb",
                                           **{params.RESOLVED: ns[params.RESOLVED]}))
    with pytest.raises(ConfigError, match="no package notebook '09'"):
        run_context.setup("09", ns)
    with pytest.raises(ConfigError, match="no parameters found"):
        run_context.setup("04", {})


def test_the_runner_injects_the_resolved_config(monkeypatch, fresh_dirs):
    from litseg_nb.front import runner

    got = {}

    def fake_execute(nb, executed_dir, parameters, **kw):
        got[nb.stem] = parameters
        return executed_dir / nb.name

    monkeypatch.setattr(runner, "execute", fake_execute)
    with config_sets([("llm.batch_size", 2)]):
        runner.run_notebooks("test", only=("06",), parameters={"chunkers": "litseg,token"})
    injected = got["06_segment_quality"]
    assert injected["chunkers"] == ["litseg", "token"]
    resolved = injected[params.RESOLVED]
    assert resolved["notebook"] == "06_segment_quality" and resolved["parameters"]["chunkers"] == ["litseg", "token"]
    assert resolved["config"]["llm"]["batch_size"] == 2 and resolved["sets"] == [["llm.batch_size", 2]]


def test_set_reaches_notebook_06s_boundary_benchmark():
    """06 builds the boundary benchmark's config inside: a --set for it (qualified, or unqualified
    like corpus.max_books) is accepted for 06 and reaches it in the kernel."""
    from litseg_nb.evaluation.boundaries import BoundaryConfig

    nb = NOTEBOOKS_DIR / "06_segment_quality.ipynb"
    sets = [("BoundaryConfig.llm_max_windows", 3), ("corpus.max_books", 1)]
    params.check_set_keys(sets, [nb])
    with config_sets(sets):
        values = params.check_parameters(nb, {"profile": "test", "seed": 0})
    before = BoundaryConfig.for_profile("test")
    cfg, _ = run_context.setup("06", _namespace(nb, **values))
    inside = BoundaryConfig.for_profile("test", seed=0)
    assert (inside.llm_max_windows, inside.corpus.max_books) == (3, 1) != (before.llm_max_windows, before.corpus.max_books)
    assert cfg.corpus.max_books == 1
