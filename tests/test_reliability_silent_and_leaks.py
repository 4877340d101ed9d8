"""Silent wrong results, leaks and losses of the newest commands: a reply copying the prompt's placeholder
text is invalid; a reply that failed validation is never replayed from the request cache; a secret in a URL
reaches no output; nothing the user or the repository has is overwritten. Each test fails on the code before."""
from __future__ import annotations

import gzip
import json

import conftest
import pytest

from litseg_nb.cli import main
from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.litseg.pipeline import annotate_units
from litseg_nb.litseg.validate import finalize_segments, validate_segments, validate_stage1, validate_stage2
from litseg_nb.lite.segmenter import LiteSegmenter, validate_single_pass

from litseg_nb.evaluation import boundary_train as bt

from fakes import FakeOpenAI, ScriptedBackend, chat_reply, model_reply
from test_boundary_model import tiny_root  # noqa: F401 (a fixture: eight synthetic training books, one evaluation book)

# SmolLM2-135M's replies in the smoke run (constrained decoding): the prompt's placeholders, one cut short
ECHO_STAGE1 = '{"step_1_events": "A string briefly listing the core dynamic events extracted (filtering out noise)."}'
ECHO_STAGE2 = ('{"step_2_threads": "A string briefly describing the narrative threads and their nested hierarchy, '
               'based on the"}')
ECHO_SUBTITLE = "The subtitle of the plot block"
ECHO = "template echo"  # how the validator's error says so (notebooks show it as the verdict)


# ------------------------------------------------------------------ template echoes are invalid
def test_stage_replies_copying_the_prompts_placeholder_are_invalid_and_say_so():
    for validator, reply in ((validate_stage1, ECHO_STAGE1), (validate_stage2, ECHO_STAGE2)):
        errors = validator(json.loads(reply))
        assert len(errors) == 1 and errors[0].startswith(ECHO), errors
    assert validate_stage1({"step_1_events": "Anna walks to the mill; Boris follows her."}) == []
    from litseg_nb.litseg.validate import template_echo

    for real in ("The subtitle", "Anna leaves the mill", "The chapter", "The letter from Moscow"):
        assert template_echo(real) is None, real


def test_a_subtitle_copying_the_placeholder_is_invalid_and_dropped_by_the_counted_repair():
    res = validate_segments({"segments": [{"subtitle": ECHO_SUBTITLE, "from_idx": 1, "to_idx": 2},
                                          {"subtitle": "The storm", "from_idx": 3, "to_idx": 4}]}, 4)
    assert not res.ok and res.item_ok == [False, True]
    assert any(e.startswith(f"{ECHO}: segment 1: subtitle") for e in res.errors), res.errors
    final = finalize_segments(res, 4)
    assert final.fallback == "schema_repair" and [s.subtitle for s in final.segments] == ["", "The storm"]
    assert any(ECHO in a for a in final.actions)


def test_lite_reply_copying_the_placeholders_is_invalid():
    n = 3
    seg = {"subtitle": ECHO_SUBTITLE, "from_idx": 1, "to_idx": n, "context_idx": []}
    reply = json.dumps({"step1": {"step_1_events": "Anna walks."}, "step2": {"step_2_threads": "One thread."},
                        "step3": {"chapter_title": "c", "step_3_turning_points": [], "segments": [seg]}})
    res = validate_single_pass(reply, n)
    assert not res.ok and any(e.startswith(ECHO) for e in res.errors)
    steps = json.dumps({"step1": json.loads(ECHO_STAGE1), "step2": {"step_2_threads": "One thread."},
                        "step3": {"chapter_title": "c", "step_3_turning_points": [],
                                  "segments": [{**seg, "subtitle": "Anna walks"}]}})
    res = validate_single_pass(steps, n)
    assert not res.ok and res.errors[0].startswith(f"{ECHO}: step1.step_1_events")
    assert finalize_segments(res, n).fallback == "schema_repair"


def test_litseg_pipeline_retries_an_echo_and_counts_it():
    book = conftest.make_book("bk", 1, 4, unit_id="u{u}")

    def reply(conv):
        user = conv[-1]["content"]
        if "ONLY Step 1" in user:
            return ECHO_STAGE1
        if "ONLY Step 2" in user:
            return ECHO_STAGE2
        return json.dumps({"chapter_title": "c", "step_3_turning_points": [],
                           "segments": [{"subtitle": ECHO_SUBTITLE, "from_idx": 1, "to_idx": 4}]})

    run = annotate_units([(book, book.units[0])], ScriptedBackend(reply_fn=reply), LitSegConfig.for_profile("test"),
                         max_retries=1, progress=False)
    rec = run.records[0]
    for stage in ("stage1", "stage2", "stage3"):
        st = rec["stages"][stage]
        assert not st["valid"] and len(st["attempts"]) == 2, stage
        assert all(a["errors"][0].startswith(ECHO) for a in st["attempts"]), st["attempts"][0]["errors"]
    assert rec["stage_fallbacks"] == {"stage1": "raw_passthrough", "stage2": "raw_passthrough"}
    assert rec["fallback"] == "schema_repair" and rec["segments"][0]["subtitle"] == ""


# ------------------------------------------------------------------ failed replies are not replayed from the cache
NAMES = ("Anna", "Boris", "Clara", "Dmitri", "Elena", "Fyodor", "Galina", "Ivan")
PLACES = ("the mill", "the river", "the station", "the orchard", "the church", "the market")
STORY = "\n\n".join(" ".join(f"{NAMES[(p + i) % 8]} walked slowly to {PLACES[(p * 3 + i) % 6]} on day {p * 5 + i}, "
                             f"thinking of {NAMES[(p + i + 3) % 8]}." for i in range(5)) for p in range(8)) + "\n"


def _fallbacks(meta) -> int:
    return sum(v for v in meta["fallbacks"].values() if isinstance(v, int))


@pytest.mark.parametrize("method", ["lumber", "litseg", "litseg-lite"])
def test_llm_methods_ask_again_after_the_server_is_fixed(method, tmp_path, monkeypatch):
    """Replies that failed validation are not replayed from the request cache: a rerun asks again, and the
    valid replies of that rerun stay cached."""
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache"))
    book = tmp_path / "book.txt"
    book.write_text(STORY)
    out = tmp_path / "o"
    with FakeOpenAI("ok") as srv:
        orig = srv.respond

        def garbage(handler, body):  # 200 with text no method can read
            if handler.path.split("?")[0].endswith("/chat/completions"):
                return srv.send(handler, 200, chat_reply("I like turtles.", completion_tokens=3))
            return orig(handler, body)

        srv.respond = garbage
        argv = ["segment", str(book), "--method", method, "--profile", "test", "--base-url", srv.url,
                "--llm-model", "fake-model", "-o", str(out)]
        assert main(argv) == 0
        first = json.loads(next(out.glob("*.meta.json")).read_text())
        assert _fallbacks(first) > 0
        srv.respond = orig  # the server is fixed: every reply of the earlier run failed validation
        n_before = len(srv.chat_requests)
        assert main(argv + ["--force"]) == 0
        second = json.loads(next(out.glob("*.meta.json")).read_text())
        asked = len(srv.chat_requests) - n_before
        assert main(argv + ["--force"]) == 0  # valid replies stay cached
        third = len(srv.chat_requests) - n_before - asked
    assert asked > 0 and _fallbacks(second) < _fallbacks(first), second["fallbacks"]
    if method != "lumber":
        assert first["fallbacks"].get("whole_unit") and not second["fallbacks"].get("whole_unit")
    assert third == 0


def test_fake_server_answers_lite_with_a_valid_reply():
    book = conftest.make_book("bk", 1, 4, unit_id="u{u}")
    seg = LiteSegmenter(ScriptedBackend(reply_fn=lambda conv: model_reply({"messages": conv})), retries=0)
    _, results = seg.segment_units([(book, book.units[0])])
    assert results[0].first_try_valid and results[0].fallback == "none"


# ------------------------------------------------------------------ training texts never leak into validation or evaluation
def _train(root, tmp_path, evaluation_root=None):
    return bt.train(bt.TrainConfig(validation_share=0.25, max_windows_per_book=2, window_sentences=30), root=root,
                    weights_file=tmp_path / "w.json", progress=False, cache_root=tmp_path / "cache",
                    evaluation_root=evaluation_root or root, validate=False)


def _add_training_book(root, number: str, raw: str, author: str) -> None:
    folder = root / bt.TRAIN_FOLDER
    (folder / f"{number}.txt.gz").write_bytes(gzip.compress(raw.encode("utf-8"), mtime=0))
    with (folder / "MANIFEST.tsv").open("a", encoding="utf-8") as fh:
        fh.write(f"{number}\t{author}\tA copy\tx\tx\n")


def test_a_copy_of_a_validation_book_under_a_training_author_stays_on_its_side(tiny_root, tmp_path):
    card = _train(tiny_root, tmp_path)
    held = card["data"]["validation_ids"][0]
    manifest = (tiny_root / bt.TRAIN_FOLDER / "MANIFEST.tsv").read_text().splitlines()[1:]
    train_author = dict(ln.split("\t")[:2] for ln in manifest)[card["data"]["train_ids"][0]]
    raw = gzip.decompress((tiny_root / bt.TRAIN_FOLDER / f"{held}.txt.gz").read_bytes()).decode()
    _add_training_book(tiny_root, "990200", raw.replace("Title: ", "Title: Another edition of "), train_author)
    card = _train(tiny_root, tmp_path)
    side = {n: "train" for n in card["data"]["train_ids"]} | {n: "validation" for n in card["data"]["validation_ids"]}
    assert side["990200"] == side[held], card["data"]["split"]
    assert [held, "990200"] in [sorted(p[:2]) for p in card["data"]["same_text_books"]]


def test_an_evaluation_book_with_a_changed_front_is_refused_by_its_text(tiny_root, tmp_path):
    raw = (tiny_root / "gutenberg" / "990050.txt").read_text(encoding="utf-8")
    _add_training_book(tiny_root, "990300", raw.replace("Title: ", "Title: Reissued: ").replace(
        "CHAPTER I.", "A NOTE ON THIS EDITION\n\nReset from the first printing.\n\nCHAPTER I."), "Someone Else")
    with pytest.raises(bt.TrainingDataError, match=r"990300.*shares \d+% of its text with evaluation book"):
        _train(tiny_root, tmp_path)
    assert not (tmp_path / "w.json").exists()


def test_a_data_folder_without_evaluation_books_is_refused_not_vacuously_disjoint(tiny_root, tmp_path):
    (tmp_path / "no-eval").mkdir()
    with pytest.raises(bt.TrainingDataError, match="no evaluation books under"):
        _train(tiny_root, tmp_path, evaluation_root=tmp_path / "no-eval")


def test_lite_training_book_that_is_an_evaluated_book_under_another_name_is_refused():
    from litseg_nb.lite.segmenter import check_books_disjoint
    from fakes import toy_book

    text = " ".join(f"Anna walked to the mill on day {i} and thought of Boris at the river." for i in range(80))
    evaluated = toy_book(text, "gutenberg:1342", "Pride and Prejudice")
    copy = toy_book("A new preface.\n\n" + text, "train:99999", "Elizabeth's Story")
    other = toy_book(" ".join(f"The ship left port {i} times before the storm." for i in range(80)), "train:5", "Sea")
    check_books_disjoint([other], [evaluated])
    with pytest.raises(ValueError, match=r"train:99999 \(shares \d+% of its text with gutenberg:1342\)"):
        check_books_disjoint([other, copy], [evaluated])


# ------------------------------------------------------------------ one redaction path for everything written or printed
def test_a_bare_query_secret_reaches_the_server_and_no_file(tmp_path, monkeypatch, capsys):
    import sqlite3

    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache"))
    book = tmp_path / "book.txt"
    book.write_text(" ".join(f"Sentence number {i} is here." for i in range(30)) + "\n")
    with FakeOpenAI("ok") as srv:
        rc = main(["segment", str(book), "--method", "lumber", "--profile", "test", "--base-url",
                   f"{srv.url}?SECRET789", "--llm-model", "fake-model", "-o", str(tmp_path / "out")])
        paths = [r["path"] for r in srv.chat_requests]
    console = "".join(capsys.readouterr())
    assert rc == 0, console
    assert paths and all(p.endswith("/chat/completions?SECRET789") for p in paths)
    written = [p for root in ("out", "outputs", "cache") for p in (tmp_path / root).rglob("*") if p.is_file()]
    assert any(p.name.endswith(".meta.json") for p in written)
    for p in written:
        assert b"SECRET789" not in p.read_bytes(), f"URL secret written to {p}"
    db = next(p for p in written if p.name == "llm_requests.sqlite")
    models = {m for (m,) in sqlite3.connect(db).execute("SELECT DISTINCT model FROM requests")}
    assert models and all("?***#" in m for m in models)  # redacted + hash of the secret: another secret, another key
    assert "SECRET789" not in console


def test_a_base_url_with_a_fragment_is_one_line_and_sends_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache"))
    book = tmp_path / "book.txt"
    book.write_text("A sentence of the book. And another one.\n")
    with FakeOpenAI("ok") as srv:
        rc = main(["segment", str(book), "--method", "lumber", "--profile", "test", "--base-url",
                   f"{srv.url}#SECRET789", "--llm-model", "fake-model", "-o", str(tmp_path / "out")])
        sent = len(srv.requests)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and sent == 0 and len(lines) == 1 and "fragment" in lines[0], err
    assert "SECRET789" not in err and "#***" in lines[0]


def test_config_explain_redacts_set_values_and_server_variables(monkeypatch, capsys):
    monkeypatch.setenv("LITSEG_LLM_URLS", "http://user:PW123@h:1/v1?SECRET789")
    argv = ["config", "--profile", "test", "--notebook", "04", "--set", "llm.backend=openai", "--explain"]
    assert main(argv + ["llm.base_urls"]) == 0
    assert main(argv + ["llm.base_urls", "--set", "llm.base_urls=http://h:2/v1?tok=SECRET111"]) == 0
    out = capsys.readouterr().out
    assert "$LITSEG_LLM_URLS" in out and "--set llm.base_urls=" in out
    for secret in ("PW123", "SECRET789", "SECRET111"):
        assert secret not in out, out


def test_the_injected_configuration_holds_no_secret_and_the_kernel_gets_it_back(monkeypatch):
    from litseg_nb.config import ConfigError
    from litseg_nb.core.paths import NOTEBOOKS_DIR
    from litseg_nb.front import params, run_context

    from test_notebook_seam import _namespace

    url = "http://user:PW123@127.0.0.1:9/v1?SECRET789"
    monkeypatch.setenv("LITSEG_LLM_URLS", url)
    monkeypatch.delenv(params.SECRETS_ENV, raising=False)
    nb = NOTEBOOKS_DIR / "04_baselines.ipynb"
    from litseg_nb.config import config_sets, use_sets

    with config_sets([("llm.backend", "openai")]):
        values = params.check_parameters(nb, {"profile": "test", "seed": 0})
    written = json.dumps(values)  # what papermill writes into the executed notebook (cell and metadata)
    assert "PW123" not in written and "SECRET789" not in written and "***" in written
    monkeypatch.delenv("LITSEG_LLM_URLS")
    try:
        cfg, _ = run_context.setup("04", _namespace(nb, **values))  # the kernel: the runner's environment
        assert cfg.llm.base_urls == (url,)
        monkeypatch.delenv(params.SECRETS_ENV)  # the executed copy opened later, elsewhere: said, not sent redacted
        with pytest.raises(ConfigError, match="redacted addresses"):
            run_context.setup("04", _namespace(nb, **values))
    finally:
        use_sets([])  # setup() made the injected --set this process's own (as a kernel's)


# ------------------------------------------------------------------ never overwrite what the user or the repository has
def _outputs_with(root, tables=(), figures=()):
    (root / "tables").mkdir(parents=True, exist_ok=True)
    (root / "figures").mkdir(parents=True, exist_ok=True)
    for name in tables:
        (root / "tables" / f"{name}.md").write_text(f"**{name}** — profile=test\n\n| a |\n|---|\n| 1 |\n")
    for name in figures:
        (root / "figures" / f"{name}.png").write_bytes(b"\x89PNG " + name.encode())
    return root


def test_gallery_from_partial_outputs_never_shrinks_an_earlier_gallery(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    full = _outputs_with(tmp_path / "outputs" / "test", ["01_a", "04_b", "05_c"], ["02_fig", "05_fig"])
    dest = tmp_path / "gallery"
    assert main(["gallery", "--profile", "test", "--out", str(dest)]) == 0
    before = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    for p in list(full.rglob("*.*")):  # a run of notebook 01 alone: its outputs only
        if not p.name.startswith("01_"):
            p.unlink()
    capsys.readouterr()
    assert main(["gallery", "--profile", "test", "--out", str(dest)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "would replace or remove" in err[0] and "04_b" in err[0], err
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before  # nothing lost
    _outputs_with(full, ["04_b", "05_c", "06_new"], ["02_fig", "05_fig"])  # the whole run again, and more: fine
    assert main(["gallery", "--profile", "test", "--out", str(dest)]) == 0
    assert "**06_new**" in (dest / "README.md").read_text()


def test_gallery_bad_table_and_unwritable_out_are_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    src = _outputs_with(tmp_path / "outputs" / "test", ["01_a"], ["01_fig"])
    (src / "tables" / "02_latin1.md").write_bytes("**02_latin1** - caf\xe9\n".encode("latin-1"))
    assert main(["gallery", "--profile", "test", "--out", str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err and "02_latin1.md" in lines[0] and "UTF-8" in lines[0], err
    assert not (tmp_path / "g").exists()
    (src / "tables" / "02_latin1.md").unlink()
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where a folder is needed")
    assert main(["gallery", "--profile", "test", "--out", str(blocked / "g")]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err and "cannot write" in lines[0], err


def test_the_packaged_model_held_out_no_copy_of_a_training_book():
    """The packaged card's validation books share most of their text with no training book (Gutenberg has several
    editions of a book under different authors' names: they count as one group of the split)."""
    from litseg_nb.chunkers import boundary_model as bm
    from litseg_nb.core import text_overlap
    from litseg_nb.core.paths import data_dir
    from litseg_nb.data.gutenberg import clean_gutenberg_text

    card = json.loads(bm.CARD_FILE.read_text(encoding="utf-8"))
    folder = data_dir() / bt.TRAIN_FOLDER
    if not folder.is_dir():
        pytest.skip(f"{folder} is not here: the training texts cannot be compared")

    def fp(n):
        f = folder / f"{n}.txt.gz"
        return text_overlap.fingerprint(clean_gutenberg_text(gzip.decompress(f.read_bytes()), source=str(f)).text)

    held = {n: fp(n) for n in card["data"]["validation_ids"]}
    trained = {n: fp(n) for n in card["data"]["train_ids"]}
    assert text_overlap.overlapping(held, trained) == []
