"""Every documented parameter value runs.

The documentation of a notebook's parameters is its ``parameters`` cell: one typed line per parameter,
whose comment lists the values it accepts (``# none | llm-pointwise | flagembedding``) or what a special
value means (``# 0 = all``). Each notebook runs here at least once, in the ``test`` profile, with every
documented non-default value that changes its code path (:data:`DOCUMENTED`), several values combined
per run so that the runs fit CI's time. A run that fails is re-run with each of its values alone, so the
failure names the notebook, the parameter and the value.

A fast test keeps the table honest: a parameter that a notebook declares and this table neither covers
nor exempts (:data:`NOT_A_CODE_PATH`, with the reason), and a value a parameter's comment lists but the
table leaves out, fail it. The subcommands' documented options: ``config`` for every profile and
notebook, with and without the servers ``full`` needs, and ``segment`` in every profile.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import NOTEBOOK_NEEDS, REPO_ROOT

NOTEBOOKS = REPO_ROOT / "notebooks"

#: per notebook: parameter -> the documented non-default values a run uses (test-profile sized). Values
#: are given as the command line gives them (``-p key=value``).
DOCUMENTED: dict[str, dict[str, tuple[str, ...]]] = {
    "01": {"max_books": ("1",), "max_unit_words": ("120",)},
    "02": {"max_units": ("0",), "max_retries": ("0",), "calibrate": ("false",), "compare_structured": ("false",),
           "ray_address": ("local",)},
    "03": {"annotations_profile": ("test",), "sft_max_steps": ("1",), "grpo_max_steps": ("0",),
           "max_train_units": ("0",), "max_eval_units": ("0",), "grpo_max_completion_length": ("0",)},
    "04": {"chunkers": ("token,lumber",), "llm_max_units": ("0",),
           "length_match": ("false",)},
    "05": {"reranker": ("none", "flagembedding"), "fusion": ("weighted",), "question_scope": ("all",),
           "chunkers": ("token,recursive",)},
    "06": {"chunkers": ("token,recursive",)},
    "07": {"variants": ("wo-theo-s2",), "max_units": ("1",)},
    "08": {"reference": ("lumber", "litseg-lite"), "timing_dataset": ("gutenqa", "literaryqa"),
           "litseg_on_student": ("false",)},
}

#: parameters whose other values do not change a code path, with the reason
NOT_A_CODE_PATH = {
    "profile": "the profile is what the whole suite varies; this test runs `test`",
    "seed": "another seed draws other samples through the same code",
}

#: extra ``--set`` values a documented value needs in the test profile (a local model instead of the hub's)
SETS_FOR = {("05", "reranker", "flagembedding"): lambda: [f"RagConfig.reranker_model={_tiny_reranker()}"]}


def _tiny_reranker() -> str:
    from litseg_nb.front.rehearse import tiny_reranker_dir

    return str(tiny_reranker_dir())


def declared(number: str) -> dict[str, tuple[str, str]]:
    """``name -> (default, comment)`` of the notebook's parameters cell."""
    path = next(NOTEBOOKS.glob(f"{number}_*.ipynb"))
    cells = [c for c in json.loads(path.read_text())["cells"] if "parameters" in c["metadata"].get("tags", [])]
    assert len(cells) == 1, f"{path.name}: expected one cell tagged 'parameters', found {len(cells)}"
    out = {}
    for line in "".join(cells[0]["source"]).splitlines():
        m = re.match(r"^(\w+)\s*:\s*[^=]+=\s*([^#]+?)\s*(?:#\s*(.*))?$", line)
        if m:
            out[m.group(1)] = (m.group(2), m.group(3) or "")
    return out


def listed_choices(comment: str) -> list[str]:
    """The values a comment lists as ``a | b | c`` (its first such run of words)."""
    m = re.search(r"([\w.-]+(?:\s*\|\s*[\w.-]+)+)", comment)
    return [v.strip() for v in m.group(1).split("|")] if m else []


def runs_of(number: str) -> list[dict[str, str]]:
    """The runs of a notebook: run i takes each parameter's i-th documented value, where it has one."""
    table = DOCUMENTED[number]
    n = max(len(v) for v in table.values())
    return [{k: vs[i] for k, vs in table.items() if i < len(vs)} for i in range(n)]


RUNS = [(nb, i, params) for nb in sorted(DOCUMENTED) for i, params in enumerate(runs_of(nb))]


def test_every_declared_parameter_and_listed_value_is_covered():
    for nb in sorted(DOCUMENTED):
        params = declared(nb)
        assert params, f"notebook {nb}: no parameters found"
        for name, (default, comment) in params.items():
            if name in NOT_A_CODE_PATH:
                continue
            assert name in DOCUMENTED[nb], (f"notebook {nb} declares parameter {name!r} ({comment!r}) that no "
                                            f"documented-value run covers: add it to DOCUMENTED or NOT_A_CODE_PATH")
            for choice in listed_choices(comment):
                ran = set(DOCUMENTED[nb][name])
                assert choice in ran or choice == _profile_value(nb, name), (
                    f"notebook {nb}: parameter {name}={choice!r} is documented ({comment!r}) but never run")
        stale = set(DOCUMENTED[nb]) - set(params)
        assert not stale, f"notebook {nb}: DOCUMENTED names parameter(s) {sorted(stale)} it no longer declares"


def _profile_value(nb: str, name: str) -> str:
    """The test profile's value of a notebook parameter, as `config` prints it (for a choice parameter,
    the value the default run already covers)."""
    from litseg_nb.cli import main

    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        assert main(["config", "--profile", "test", "--notebook", nb]) == 0
    m = re.search(rf"^\s+(?:\w+\.)*{re.escape(name)} = '([^']*)'$", buf.getvalue(), re.M)
    return m.group(1) if m else ""


def test_the_choice_parser_reads_the_comments():
    assert listed_choices("none | llm-pointwise | flagembedding") == ["none", "llm-pointwise", "flagembedding"]
    assert listed_choices("§4.4 units: all | gutenqa | literaryqa (profile: literaryqa in full)") == [
        "all", "gutenqa", "literaryqa"]
    assert listed_choices("0 = all") == []
    assert [r for nb, _, r in RUNS if nb == "05"] == [
        {"reranker": "none", "fusion": "weighted", "question_scope": "all", "chunkers": "token,recursive"},
        {"reranker": "flagembedding"}]


def _run(nb: str, params: dict[str, str], capsys) -> tuple[int, str]:
    from litseg_nb.cli import main

    argv = ["run", "--profile", "test", "--only", nb]
    for k, v in params.items():
        argv += ["-p", f"{k}={v}"]
        for s in SETS_FOR.get((nb, k, v), lambda: [])():
            argv += ["--set", s]
    capsys.readouterr()
    rc = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    return rc, (err[-1] if err else "")


@pytest.mark.slow
@pytest.mark.parametrize("nb,i,params", RUNS, ids=[f"{nb}-run{i}" for nb, i, _ in RUNS])
def test_notebook_runs_with_its_documented_values(nb, i, params, notebook_pipeline, tmp_path, monkeypatch,
                                                  capsys):
    """Run ``i`` of notebook ``nb`` (its documented values combined) in a copy of the session's outputs
    (the notebooks it reads already ran there with the defaults), so the default runs' tables that other
    tests read are left as they are."""
    needs = NOTEBOOK_NEEDS.get(nb, ())
    base = notebook_pipeline(*needs) if needs else None
    outputs = tmp_path / "outputs"
    if base is not None:
        shutil.copytree(base, outputs / "test", ignore=shutil.ignore_patterns("executed"))
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(outputs))
    rc, last = _run(nb, params, capsys)
    if rc == 0:
        return
    culprits = []
    for k, v in params.items():  # name the value(s) that fail alone
        if len(params) > 1 and _run(nb, {k: v}, capsys)[0] != 0:
            culprits.append(f"{k}={v}")
    where = (f"parameter(s) {', '.join(culprits)}" if culprits
             else f"the combination {', '.join(f'{k}={v}' for k, v in params.items())}")
    pytest.fail(f"notebook {nb} fails with {where} (test profile, exit {rc}): {last}")


# ------------------------------------------------------------------ subcommands' documented options
def _profiles_and_notebooks():
    from litseg_nb.config import PROFILES

    return [(p, nb) for p in PROFILES for nb in sorted(DOCUMENTED)]


def _servers() -> dict[str, str]:
    """The servers `full` asks for, one address each, through the variables docs/guide/full-on-gpu.md gives
    (``config.SERVER_ENV``; nothing is contacted by `config`)."""
    from litseg_nb.config import SERVER_ENV

    return {name: "http://127.0.0.1:9/v1" for name, *_ in SERVER_ENV}


@pytest.mark.parametrize("profile,nb", _profiles_and_notebooks())
@pytest.mark.parametrize("servers", [False, True], ids=["no-servers", "servers"])
def test_config_shows_every_profile_and_notebook(profile, nb, servers, capsys, monkeypatch):
    """Showing a configuration is not running it: exit 0, the configuration printed, and what `run` would
    need first (an unset server address) a warning, not an error."""
    from litseg_nb.cli import main

    for k, v in _servers().items():
        if servers:
            monkeypatch.setenv(k, v)
        else:
            monkeypatch.delenv(k, raising=False)
    argv = ["config", "--profile", profile, "--notebook", nb]
    rc = main(argv)
    out = capsys.readouterr()
    assert rc == 0, f"config {' '.join(argv[1:])}: exit {rc}: {out.err.strip()}"
    assert out.out.startswith(f"== {nb}_"), f"config {' '.join(argv[1:])}: printed no configuration"
    assert "configuration error" not in out.err, out.err
    if servers:
        assert "is unset" not in out.err, f"config {' '.join(argv[1:])} with servers still warns: {out.err}"


@pytest.mark.parametrize("profile", ["test", "smoke", "full"])
def test_segment_runs_a_rule_based_method_in_every_profile(profile, tmp_path, monkeypatch):
    """`segment --profile P` for a rule-based method needs no model, server or GPU in any profile (offline,
    `full` names a local tokenizer: its default, BGE-M3's, is on the hub)."""
    from litseg_nb.cli import main

    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    book = tmp_path / "book.txt"
    book.write_text("CHAPTER I.\n\n" + " ".join(f"Sentence number {i} of the first chapter." for i in range(40))
                    + "\n\nCHAPTER II.\n\n" + " ".join(f"Sentence {i} of the second." for i in range(40)) + "\n")
    out = tmp_path / "chunks.jsonl"
    offline = ["--token-counter", "all-MiniLM-L6-v2"] if profile == "full" else []
    assert main(["segment", str(book), "--method", "token", "--profile", profile, "-o", str(out), *offline]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    assert rows and all(r["spans"] for r in rows)
