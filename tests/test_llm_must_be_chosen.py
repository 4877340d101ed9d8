"""An LLM method never runs the profile's default model unasked: without a chosen LLM the CLI, the API and the
adapters give a one-line error naming both ways to choose one; an explicit ``--llm-backend hf`` runs the local
model after a line naming it with a time estimate."""
from __future__ import annotations

import pytest

from litseg_nb.config import ConfigError

STORY = "It was a cold morning. The wind came down the hill.\n\nLater the rain stopped.\n"


@pytest.mark.parametrize("method", ["litseg", "lumber", "litseg-lite"])
def test_the_cli_refuses_an_llm_method_without_a_chosen_llm(method, tmp_path, capsys, monkeypatch):
    from litseg_nb import api
    from litseg_nb.cli import main

    monkeypatch.setattr(api, "build_models", lambda *a, **k: pytest.fail("a model was built"))
    book = tmp_path / "my_book.txt"
    book.write_text(STORY)
    assert main(["segment", str(book), "--method", method, "-o", str(tmp_path / "c.jsonl")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "calls an LLM and none is chosen" in err[0]
    assert "--base-url" in err[0] and "--llm-backend hf" in err[0] and "smollm2-135m-instruct" in err[0]
    assert not (tmp_path / "c.jsonl").exists()


def test_an_explicit_local_backend_names_the_model_and_an_estimate(tmp_path, capsys):
    from litseg_nb.cli import main

    book = tmp_path / "my_book.txt"
    book.write_text(STORY)
    assert main(["segment", str(book), "--method", "lumber", "--profile", "test", "--llm-backend", "hf",
                 "-o", str(tmp_path / "c.jsonl")]) == 0
    err = capsys.readouterr().err
    assert "lumber runs the local model tiny-random (--llm-backend hf)" in err and "minute(s) on a CPU for 15 words" in err


def test_the_notice_estimates_smollm2_from_the_words():
    from litseg_nb.front.batch_segment import local_model_notice

    from pathlib import Path
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "b.txt"
        f.write_text("word " * 30_000)
        line = local_model_notice("litseg", "smollm2-135m-instruct", [f])
    assert "smollm2-135m-instruct" in line and "about 60 minute(s) on a CPU for 30,000 words" in line
    assert "no time estimate" in local_model_notice("litseg", "Qwen/Qwen3-8B", [])


def test_the_api_and_the_adapters_refuse_an_llm_method_without_a_chosen_llm():
    import litseg_nb
    from litseg_nb.api import LLMNotChosenError
    from litseg_nb.integrations import Segmenter

    for call in (lambda: litseg_nb.segment(text=STORY, method="litseg"),
                 lambda: Segmenter("lumber", "smoke"),
                 lambda: Segmenter()):  # the default method is litseg
        with pytest.raises(LLMNotChosenError, match=r"none is chosen: pass llm=.*'backend': 'hf'"):
            call()
    assert issubclass(LLMNotChosenError, ConfigError)
    Segmenter("lumber", "test", llm={"backend": "hf"})  # chosen: built on first use
    Segmenter("litseg", "smoke", llm={"backend": "openai", "base_urls": ("http://127.0.0.1:9/v1",)})
