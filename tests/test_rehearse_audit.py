"""The rehearsal reaches every configuration ``full`` builds (litseg_nb.front.rehearse_audit).

* every stage config class of the package is known to the rehearsal's overrides;
* with those overrides, no stage config in ``full`` keeps a real model, split, device, engine or server;
* the audit names the notebook, cell and field of a planted uncovered config (a class the overrides do
  not know, and a package class left out of them: notebook 06's BoundaryConfig, the last known stop);
* (slow) notebooks 01-08 executed under ``full`` with the rehearsal's overrides and stand-in engines
  build no config that still points at ``full``'s real models, data or servers.
"""
from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from litseg_nb.front import rehearse_audit as ra
from litseg_nb.config import StageConfig, config_sets
from litseg_nb.front.rehearse import notebook_sets
from litseg_nb.front.params import stage_config_classes

ROOT = Path(__file__).resolve().parents[1] / "litseg_nb"
NOTEBOOKS = ("01", "02", "03", "04", "05", "06", "07", "08")


def SETS(number):  # noqa: N802 - the rehearsal's overrides with placeholder model folders
    return notebook_sets(number, "/m3", "/rr")


@dataclasses.dataclass(frozen=True)
class PlantedConfig(StageConfig):
    """A stage config the rehearsal's overrides do not know (defined here, not in the package)."""

    rounds: int = 3


def _subclass_names_in_source() -> set[str]:
    """Classes of the package deriving from StageConfig (directly or through one of them), by ast."""
    bases: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
    found, grew = {"StageConfig"}, True
    while grew:
        new = {n for n, b in bases.items() if b & found} - found
        found |= new
        grew = bool(new)
    return found - {"StageConfig"}


def test_every_stage_config_class_of_the_package_is_known():
    assert {c.__name__ for c in stage_config_classes()} == _subclass_names_in_source()


def _write_notebook(path: Path, cells: list[str]) -> Path:
    nb = {"cells": [{"cell_type": "code", "metadata": {"tags": ["parameters"] if i == 0 else []},
                     "source": src, "outputs": [], "execution_count": None} for i, src in enumerate(cells)],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


@pytest.mark.parametrize("number", NOTEBOOKS)
def test_rehearsal_sets_reach_every_stage_config_in_full(number, monkeypatch):
    monkeypatch.setenv("LITSEG_JUDGE_URLS", "http://127.0.0.1:8100/v1")
    with config_sets(notebook_sets(number, "/m3", "/rr")):
        bad = {c.__name__: ra.real_targets(c.for_profile("full")) for c in stage_config_classes()}
    assert not {k: v for k, v in bad.items() if v}
    # and without them every class points at full's real models (the check is not vacuous)
    for c in stage_config_classes():
        assert any("full's model" in x for x in ra.real_targets(c.for_profile("full"))), c.__name__


def test_real_targets_names_each_kind_of_field():
    from litseg_nb.config import CorpusConfig, LLMConfig

    issues = ra.real_targets(LLMConfig(backend="vllm", model="Qwen/Qwen3-8B", device="cuda",
                                       base_urls=("http://10.0.0.5:8000/v1", "http://127.0.0.1:8001/v1")))
    assert [i.split(":")[0] for i in issues] == ["model", "device", "engine", "base_urls"]
    assert "10.0.0.5" in issues[-1] and "127.0.0.1" not in issues[-1]
    assert ra.real_targets(LLMConfig(backend="vllm", model="smollm2-135m-instruct", device="cpu",
                                     engine={"enforce_eager": True})) == []
    assert ra.real_targets(CorpusConfig(datasets=("literaryqa",), literaryqa_split="test", max_books=2)) == [
        "literaryqa_split: 'test' is full's LiteraryQA split (held locally: validation)"]
    assert ra.real_targets(CorpusConfig(datasets=("gutenqa",)))[0].startswith("max_books: 0")


def test_audit_fails_on_a_planted_uncovered_config(tmp_path, monkeypatch, fresh_dirs):
    """A notebook that builds a config the overrides do not know: the audit names notebook, cell, field."""
    nb = _write_notebook(tmp_path / "planted.ipynb", [
        'profile: str = "test"',
        "from tests.test_rehearse_audit import PlantedConfig\nfrom litseg_nb.litseg.config import LitSegConfig\n"
        "covered = LitSegConfig.for_profile(profile)",
        "planted = PlantedConfig.for_profile(profile)\nllm = planted.llm.replace(max_new_tokens=8)",
    ])
    res = ra.audit_notebooks(["06"], SETS, notebooks=[nb])
    lines = res["uncovered"]
    assert "notebook 06 cell 2: PlantedConfig.llm.model: 'Qwen/Qwen3-8B' is full's model" in lines[0]
    assert any(x.startswith("notebook 06 cell 2: PlantedConfig.corpus.literaryqa_split: 'test'") for x in lines)
    assert any(x.startswith("notebook 06 cell 2: PlantedConfig.embedding.model: 'BAAI/bge-m3'") for x in lines)
    assert any(x.startswith("notebook 06 cell 2: LLMConfig.model: 'Qwen/Qwen3-8B'") for x in lines)  # .replace
    assert not any("cell 1" in x for x in lines)  # LitSegConfig is covered
    assert {r["config"] for r in res["records"] if r["cell"] == 1} >= {"LitSegConfig"}


def test_a_notebook_that_fails_keeps_what_the_audit_recorded(tmp_path, fresh_dirs):
    nb = _write_notebook(tmp_path / "fails.ipynb", [
        'profile: str = "test"',
        "from tests.test_rehearse_audit import PlantedConfig\nplanted = PlantedConfig.for_profile(profile)\n"
        "raise FileNotFoundError('test.jsonl')"])
    with pytest.raises(RuntimeError, match="notebook 06 code cell 1 raised FileNotFoundError") as exc:
        ra.audit_notebooks(["06"], SETS, notebooks=[nb])
    assert exc.value.audit["uncovered"][0].startswith("notebook 06 cell 1: PlantedConfig.llm.model: 'Qwen/Qwen3-8B'")


def test_audit_catches_a_package_config_left_out_of_the_overrides(tmp_path, monkeypatch, fresh_dirs):
    """The last known stop of the rehearsal: notebook 06 builds the boundary benchmark's BoundaryConfig
    inside (its code cell 7); with BoundaryConfig left out of the overrides the audit finds it."""
    import litseg_nb.front.params as sc

    src = [c for c in ra.code_cells(Path(__file__).parents[1] / "notebooks" / "06_segment_quality.ipynb")
           if "BoundaryConfig.for_profile" in c][0].splitlines()
    cell = "\n".join(ln for ln in src if "import" in ln or "BoundaryConfig.for_profile" in ln)
    nb = _write_notebook(tmp_path / "nb06.ipynb", ['profile: str = "test"\nseed: int = 0', cell])
    assert ra.audit_notebooks(["06"], SETS, notebooks=[nb])["uncovered"] == []
    real = sc.stage_config_classes
    monkeypatch.setattr(sc, "stage_config_classes", lambda: [c for c in real() if c.__name__ != "BoundaryConfig"])
    lines = ra.audit_notebooks(["06"], SETS, notebooks=[nb])["uncovered"]
    assert "notebook 06 cell 1: BoundaryConfig.llm.model: 'Qwen/Qwen3-8B' is full's model" in lines[0]
    assert any("BoundaryConfig.corpus.literaryqa_split: 'test'" in x for x in lines)


@pytest.mark.slow
def test_every_config_notebooks_01_to_08_build_in_full_is_reached_by_the_rehearsal(data_dir, fresh_dirs, monkeypatch):
    """Notebooks 01-08, every code cell, profile full with the rehearsal's overrides, engines stood in
    (tiny random model; vLLM requests recorded), a fake judge server: no config keeps a real target."""
    from litseg_nb.front.rehearse import tiny_bge_m3_dir, tiny_reranker_dir
    from tests.fakes import FakeOpenAI

    monkeypatch.chdir(fresh_dirs)
    with FakeOpenAI() as judge:
        m3, rr = str(tiny_bge_m3_dir()), str(tiny_reranker_dir())
        res = ra.audit_notebooks(NOTEBOOKS, lambda n: notebook_sets(n, m3, rr), judge_url=judge.url)
    assert res["uncovered"] == [], "\n".join(res["uncovered"])
    built = {r["notebook"] for r in res["records"] if r["config"].endswith("Config")}
    assert built == set(NOTEBOOKS)  # every notebook built configs: the audit ran each one
    assert res["engines"] and all(e["model"] not in ra.full_models() for e in res["engines"])
