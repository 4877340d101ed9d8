"""API keys come only from the environment and never reach any output file or the console.

A notebook run (test profile, through the runner and papermill) calls a fake OpenAI-compatible server
on 127.0.0.1 with the key from the environment variable the config names; afterwards every file the
run wrote (executed notebook, tables, labels, usage, manifest, request cache, step caches) and the
console output are searched for the key.
"""
from __future__ import annotations


import nbformat
import pytest

from litseg_nb.llm import BackendUnavailableError, LLMError
from litseg_nb.llm.openai_backend import OpenAIBackend

from litseg_nb.front import runner
from litseg_nb.config import ConfigError, LLMConfig, StageConfig

from fakes import FakeOpenAI, LoopbackServer, chat_reply

SECRET = "sk-litseg-test-7f3a9c1e5b2d4f60a8e1"
CONV = [{"role": "user", "content": "hello"}]


class KeyServer(LoopbackServer):
    """Minimal OpenAI-compatible chat server; ``auth`` lists the Authorization headers it got."""

    @property
    def auth(self) -> list[str]:
        return [next((v for k, v in r["_headers"].items() if k.lower() == "authorization"), "")
                for r in self.requests]

    def respond(self, handler, body: dict) -> None:
        self.send(handler, 200, chat_reply("reply to: " + body["messages"][-1]["content"], completion_tokens=3))


NOTEBOOK_CODE = [
    """import logging, sys
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, force=True)  # every log line lands in the notebook
from litseg_nb.core.artifacts import artifact_path, save_table, write_manifest
from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.llm import SamplingParams, UsageTag, make_backend
from litseg_nb.core.safe_io import atomic_path
cfg = LitSegConfig.for_profile(profile, seed=seed, llm={"backend": "openai", "model": "fake-model",
                                                         "base_urls": [base_url], "api_key_env": key_env})
label = cfg.describe()
print(cfg)
print(label)""",
    """backend = make_backend(cfg.llm)
gens = backend.chat([[{"role": "user", "content": "Segment this unit."}]], SamplingParams(max_new_tokens=8),
                    UsageTag(method="litseg", book="b", stage="segment"))
print(gens)
backend""",
    """usage = backend.ledger.to_frame()
save_table(usage, "99_usage", profile, label)
with atomic_path(artifact_path(profile, "usage", "99.csv")) as tmp:
    usage.to_csv(tmp, index=False)
write_manifest(profile, "99_secret", {"profile": profile, "seed": seed, "base_url": base_url},
               extra={"config": cfg.to_dict(), "model": cfg.llm.model})
usage""",
]


def test_api_key_is_not_a_config_field():
    with pytest.raises(ConfigError, match="api_key"):
        StageConfig.for_profile("test", llm={"api_key": "x"})
    assert "api_key" not in LLMConfig().to_dict() and LLMConfig().api_key_env == "OPENAI_API_KEY"


@pytest.mark.slow
def test_key_from_environment_reaches_the_server_and_no_output(tmp_path, fresh_dirs, monkeypatch, capfd):
    server = KeyServer()
    monkeypatch.setenv("LITSEG_TEST_API_KEY", SECRET)
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# secret check"),
                nbformat.v4.new_code_cell('profile: str = "test"\nseed: int = 0\nbase_url: str = ""\n'
                                          'key_env: str = "OPENAI_API_KEY"', metadata={"tags": ["parameters"]})]
    nb.cells += [nbformat.v4.new_code_cell(src) for src in NOTEBOOK_CODE]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, nbdir / "99_secret.ipynb")
    monkeypatch.setattr(runner, "NOTEBOOKS_DIR", nbdir)
    try:
        runs = runner.run_notebooks("test", parameters={"base_url": server.url, "key_env": "LITSEG_TEST_API_KEY"})
    finally:
        server.close()
    console = "".join(capfd.readouterr())
    assert server.auth == [f"Bearer {SECRET}"]  # the key was used ...
    written = [p for p in fresh_dirs.rglob("*") if p.is_file() and nbdir not in p.parents]
    names = {p.name for p in written}
    assert {"99_secret.ipynb", "99_usage.csv", "99_usage.md", "99_usage.label.txt", "99.csv", "99_secret.json",
            "llm_requests.sqlite"} <= names, names
    assert "reply to: Segment this unit." in runs[0].executed.read_text()
    leaked = [str(p) for p in written if SECRET.encode() in p.read_bytes()]
    assert not leaked, f"API key written to {leaked}"  # ... and written nowhere
    assert SECRET not in console


# ------------------------------------------------------------------ echoed keys, URL credentials
def test_key_echoed_in_a_401_body_is_redacted():
    with FakeOpenAI("401_echo") as srv:
        b = OpenAIBackend("fake-model", base_urls=[srv.url], api_key=SECRET, max_retries=2, tokenizer=False)
        with pytest.raises(BackendUnavailableError) as err:
            b.chat([CONV])
    assert "HTTP 401" in str(err.value) and "Bearer ***" in str(err.value)
    assert SECRET not in str(err.value) and len(srv.requests) == 1  # a 4xx is not retried


def test_credentials_in_the_base_url_are_refused_and_redacted():
    with FakeOpenAI("ok") as srv:
        url = srv.url.replace("http://", "http://alice:tok-9f8e7d6c@")
        with pytest.raises(LLMError) as err:
            OpenAIBackend("fake-model", base_urls=[url], api_key=SECRET)
        assert srv.requests == []
    msg = str(err.value)
    assert "tok-9f8e7d6c" not in msg and "alice" not in msg and "http://***@127.0.0.1" in msg
    assert "api_key_env" in msg


def test_url_credentials_never_reach_the_segment_api_error():
    import litseg_nb

    with pytest.raises(LLMError) as err:
        litseg_nb.segment("One sentence here. And another one there.", method="lumber", profile="test",
                          llm={"backend": "openai", "model": "m", "base_urls": ("https://bob:tok-1a2b3c4d@127.0.0.1:9/v1",)})
    assert "tok-1a2b3c4d" not in str(err.value) and "bob" not in str(err.value)
