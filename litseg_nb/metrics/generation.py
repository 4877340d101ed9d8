"""Answer-quality metrics of the LitSeg paper's Appendix F: EM, token F1, ROUGE-L, METEOR and RAGAS."""
from __future__ import annotations

import gzip
import logging
import os
import shutil
import re
import string
import warnings
from collections import Counter
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence
from ..core.paths import cache_dir
from ..core.safe_io import atomic_path
from ..llm.base import SamplingParams, UsageTag

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation) | {"\u2018", "\u2019", "\u201c", "\u201d", "\u2014", "\u2013"}
DEBIAN_WORDNET = Path("/usr/share/wordnet")
DEBIAN_LEXNAMES_MAN = Path("/usr/share/man/man5/lexnames.5WN.gz")


def normalize_answer(text: str) -> str:
    t = (text or "").lower()
    t = "".join(ch for ch in t if ch not in _PUNCT)
    t = _ARTICLES.sub(" ", t)
    return " ".join(t.split())


def _refs(references: str | Sequence[str]) -> list[str]:
    refs = [references] if isinstance(references, str) else list(references)
    if not refs:
        raise ValueError("at least one reference answer is needed")
    return refs


def exact_match(prediction: str, references: str | Sequence[str]) -> float:
    p = normalize_answer(prediction)
    return float(any(p == normalize_answer(r) for r in _refs(references)))


def _f1(pred: str, ref: str) -> float:
    pt, rt = normalize_answer(pred).split(), normalize_answer(ref).split()
    if not pt or not rt:
        return float(pt == rt)
    same = (Counter(pt) & Counter(rt)).total()
    if same == 0:
        return 0.0
    precision, recall = same / len(pt), same / len(rt)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, references: str | Sequence[str]) -> float:
    return max(_f1(prediction, r) for r in _refs(references))


@lru_cache(maxsize=1)
def _rouge():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(prediction: str, references: str | Sequence[str]) -> float:
    if not (prediction or "").strip():
        return 0.0
    return max(_rouge().score(r, prediction)["rougeL"].fmeasure for r in _refs(references))


def _build_debian_wordnet_dir(target: Path) -> Path:
    """A folder NLTK's reader accepts: copies of the Debian files + a rebuilt ``lexnames``."""
    target.mkdir(parents=True, exist_ok=True)
    for f in DEBIAN_WORDNET.iterdir():
        dst = target / f.name
        if f.is_file() and not dst.exists():
            with atomic_path(dst) as tmp:  # NLTK's path sandbox refuses links: copy (28 MB, once)
                shutil.copyfile(f, tmp)
    lex = target / "lexnames"
    if not lex.exists():
        pos_num = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
        man = gzip.open(DEBIAN_LEXNAMES_MAN, "rt", encoding="utf-8", errors="replace").read()
        rows = [f"{m.group(1)}\t{m.group(2)}\t{pos_num[m.group(3)]}"
                for m in re.finditer(r"^(\d\d)\s+((noun|verb|adj|adv)\.\w+)", man, re.M)]
        if len(rows) != 45:
            raise RuntimeError(f"expected 45 lexicographer files in {DEBIAN_LEXNAMES_MAN}, found {len(rows)}")
        lex.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return target


@lru_cache(maxsize=1)
def load_wordnet() -> tuple[Any, str]:
    """``(wordnet_reader_or_None, description)`` — see the module docstring for the search order."""
    import nltk

    try:
        from nltk.corpus import wordnet

        wordnet.ensure_loaded()
        return wordnet, f"WordNet {wordnet.get_version()} (NLTK data)"
    except LookupError:
        pass
    if (DEBIAN_WORDNET / "data.noun").is_file() and DEBIAN_LEXNAMES_MAN.is_file():
        from nltk.corpus.reader.wordnet import WordNetCorpusReader

        root = _build_debian_wordnet_dir(cache_dir() / "wordnet-debian")
        for p in (str(root), str(DEBIAN_WORDNET)):
            if p not in nltk.data.path:
                nltk.data.path.append(p)  # NLTK only reads corpora under its data path
        class _Debian30Reader(WordNetCorpusReader):
            # Debian ships WordNet 3.0, the version NLTK calls "wordnet": the cross-version synset
            # map is the identity, and building it would look up NLTK's own (absent) copy.
            def map_wn(self, version="wordnet"):
                return super().map_wn(version) if self.get_version() != "3.0" else None

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "multilingual functions are not available"
            reader = _Debian30Reader(str(root), None)
        return reader, f"WordNet {reader.get_version()} (Debian wordnet-base)"
    return None, "no WordNet found: METEOR with exact and stem matches only (no synonyms)"


def meteor_variant() -> str:
    wn, desc = load_wordnet()
    return "METEOR (NLTK, exact+stem+synonym; " + desc + ")" if wn is not None else "METEOR (NLTK; " + desc + ")"


_TOKEN = re.compile(r"\w+(?:'\w+)?")
_NO_SYNONYMS = SimpleNamespace(synsets=lambda *_a, **_k: [])  # stands in for WordNet: METEOR without synonyms


def _tok(text: str) -> list[str]:
    return _TOKEN.findall((text or "").lower())


def meteor(prediction: str, references: str | Sequence[str]) -> float:
    from nltk.translate.meteor_score import meteor_score

    hyp = _tok(prediction)
    refs = [_tok(r) for r in _refs(references)]
    if not hyp or not any(refs):
        return 0.0
    wn, _ = load_wordnet()
    return float(meteor_score([r for r in refs if r] or [[""]], hyp, wordnet=wn or _NO_SYNONYMS))


def generation_scores(prediction: str, references: str | Sequence[str]) -> dict[str, float]:
    """All four lexical metrics for one answer."""
    return {"EM": exact_match(prediction, references), "F1": token_f1(prediction, references),
            "ROUGE-L": rouge_l(prediction, references), "METEOR": meteor(prediction, references)}


def ragas_scores(backend: Any, samples: Sequence[dict[str, Any]], max_new_tokens: int = 8,
                 retries: int = 5) -> list[dict[str, float]]:
    """Per sample (``question``, ``contexts``, ``answer``, ``reference``) ``{"context_relevance",
    "answer_accuracy"}``, NaN when the judge gave no rating; ragas' LLM sends every prompt as one user turn to
    ``backend.chat``."""
    os.environ["RAGAS_DO_NOT_TRACK"] = "true"  # before ragas is imported
    from langchain_core.outputs import Generation as LCGeneration, LLMResult
    from ragas.dataset_schema import SingleTurnSample
    from ragas.llms.base import BaseRagasLLM
    from ragas.metrics._nv_metrics import AnswerAccuracy, ContextRelevance
    from ragas.run_config import RunConfig

    class BackendRagasLLM(BaseRagasLLM):
        def __init__(self):
            self.run_config = RunConfig(max_retries=1)
            self.multiple_completion_supported = False
            self.cache = None

        def generate_text(self, prompt, n=1, temperature=0.01, stop=None, callbacks=None):
            conv = [{"role": "user", "content": prompt.to_string()}]
            temp = 0.0 if temperature is None or temperature <= 0.05 else float(temperature)
            gens = backend.chat([conv] * n, SamplingParams(max_new_tokens=max_new_tokens, temperature=temp),
                                UsageTag("rag-ragas-judge", stage="ragas"))
            return LLMResult(generations=[[LCGeneration(text=g.text) for g in gens]])

        async def agenerate_text(self, prompt, n=1, temperature=0.01, stop=None, callbacks=None):
            return self.generate_text(prompt, n, temperature, stop, callbacks)

        def is_finished(self, response):
            return True

        def __repr__(self):
            return f"BackendRagasLLM({getattr(backend, 'model_id', '?')})"

    llm = BackendRagasLLM()
    cr, aa = ContextRelevance(llm=llm), AnswerAccuracy(llm=llm)
    cr.retry = aa.retry = max(1, int(retries))  # attempts per judge template
    out = []
    # ragas logs a warning per retry of a reply without a rating; only the outcome matters (NaN after
    # the last retry, in the returned scores), so the per-retry lines are noise
    nv_log = logging.getLogger("ragas.metrics._nv_metrics")
    level = nv_log.level
    nv_log.setLevel(logging.ERROR)
    try:
        for s in samples:
            sample = SingleTurnSample(user_input=s["question"], retrieved_contexts=list(s["contexts"]),
                                      response=s["answer"] or " ", reference=s["reference"])
            out.append({"context_relevance": float(cr.single_turn_score(sample)),
                        "answer_accuracy": float(aa.single_turn_score(sample))})
    finally:
        nv_log.setLevel(level)
    return out
