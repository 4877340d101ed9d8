"""``segment DIR --ray``: on a local Ray cluster the test starts (2 CPUs), the outputs are the single
process's byte for byte (a rule-based method, LitSeg against the fake OpenAI-compatible server), a
worker killed mid-run fails only its book and the rerun resumes, a failing book is listed.

The address checks run without a cluster (and without Ray: then ``--ray`` says how to install it); the
tests on a cluster are skipped where the extra ``ray`` is not installed (``pytest.importorskip``)."""
from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import pytest

from litseg_nb.cli import main
from litseg_nb.core.ray_cluster import RayAddressError, RayUnreachable, parse_address, probe

from fakes import FakeOpenAI, free_port, stderr_lines


def _books(folder: Path, n: int = 3, bad: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(n):
        (folder / f"b{k}.txt").write_text(
            f"Book {k}\n\nCHAPTER I.\n\n" + " ".join(f"Sentence {i} of the first chapter of book {k}." for i in range(1, 9))
            + "\n\nCHAPTER II.\n\n" + " ".join(f"Another sentence {i} in chapter two of book {k}." for i in range(1, 7))
            + "\n", encoding="utf-8")
    if bad:
        (folder / "zz_empty.txt").write_bytes(b"")  # GutenbergFormatError: listed, the others written
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def local_cluster():
    """A Ray cluster of this machine with 2 CPUs, shut down after the module (skipped without the extra)."""
    ray = pytest.importorskip("ray")
    for attempt in range(5):  # Ray gives a local raylet 30 s to register: a busy shared machine may need another go
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            break
        except Exception:
            if ray.is_initialized():
                ray.shutdown()
            if attempt == 4:
                raise
    try:
        yield ray
    finally:
        ray.shutdown()


# ------------------------------------------------------------------ addresses (no cluster)
@pytest.mark.parametrize("value,kind,init", [(None, "local", None), ("local", "local", None), ("auto", "auto", "auto"),
                                             ("10.0.0.5:6379", "gcs", "10.0.0.5:6379"),
                                             ("head.example:6379", "gcs", "head.example:6379"),
                                             ("ray://head:10001", "client", "ray://head:10001"),
                                             ("[::1]:6379", "gcs", "[::1]:6379")])
def test_good_addresses(value, kind, init):
    a = parse_address(value)
    assert (a.kind, a.init_address) == (kind, init)


@pytest.mark.parametrize("value,word", [("http://head:6379", "not a http:// URL"), ("ray://u:tok@head:1", "no user"),
                                        ("head", "expected"), ("head:0", "outside"), ("head:99999", "outside"),
                                        ("../x:1", "no user, path"), (" head:1", "blanks"), ("he ad:1", "not a host"),
                                        ("head:1?key=s3cret", "no user, path or query")])
def test_bad_addresses_are_one_line_usage_errors_without_secrets(value, word):
    with pytest.raises(RayAddressError, match=word) as err:
        parse_address(value)
    assert "s3cret" not in str(err.value) and "tok@" not in str(err.value) and "\n" not in str(err.value)


def test_without_ray_the_flag_is_one_line_saying_how_to_install_it(tmp_path, monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as without the extra
    books = _books(tmp_path / "books", 1, bad=False)
    rc = main(["segment", str(books), "--method", "token", "--profile", "test", "-o", str(tmp_path / "out"), "--ray"])
    err = stderr_lines(capsys.readouterr().err)
    assert rc == 2 and len(err) == 1 and "pip install 'litseg_nb[ray]'" in err[0], err
    assert not (tmp_path / "out").exists()


def test_unreachable_cluster_is_one_line_exit_1_and_nothing_written(tmp_path, capsys):
    ray = pytest.importorskip("ray")
    books = _books(tmp_path / "books", 1, bad=False)
    port = free_port()
    with pytest.raises(RayUnreachable, match="unreachable"):
        probe(parse_address(f"127.0.0.1:{port}"), 2.0)
    if ray.is_initialized():  # an open connection would be used instead of the address
        pytest.skip("a Ray connection is open in this process")
    rc = main(["segment", str(books), "--method", "token", "--profile", "test", "-o", str(tmp_path / "out"),
               "--ray", f"127.0.0.1:{port}"])
    err = stderr_lines(capsys.readouterr().err)
    assert rc == 1 and len(err) == 1 and f"127.0.0.1:{port} is unreachable" in err[0], err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("extra,word", [(["--ray", "ftp://h:1"], "not a ftp:// URL"),
                                        (["--ray-actors", "2"], "without --ray"),
                                        (["--ray", "--ray-actors", "0"], "positive"),
                                        (["--ray", "h:1", "--ray-cpus", "2"], "sizes a local cluster")])
def test_bad_ray_options_are_usage_errors_before_any_work(extra, word, tmp_path, capsys):
    books = _books(tmp_path / "books", 1, bad=False)
    rc = main(["segment", str(books), "--method", "token", "--profile", "test", "-o", str(tmp_path / "out"), *extra])
    err = stderr_lines(capsys.readouterr().err)
    assert rc == 2 and len(err) == 1 and word in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_folder_taken_for_the_address_is_named(tmp_path, capsys):
    books = _books(tmp_path / "books", 1, bad=False)
    rc = main(["segment", "--ray", str(books), str(books), "--method", "token", "--profile", "test"])
    err = stderr_lines(capsys.readouterr().err)
    assert rc == 2 and "put --ray after the inputs" in err[0], err


# ------------------------------------------------------------------ on the local cluster
def test_rule_based_outputs_are_the_single_process_bytes_and_the_failing_book_is_listed(
        local_cluster, tmp_path, fresh_dirs, capsys):
    books = _books(tmp_path / "books", 3)
    base = ["segment", str(books), "--method", "token", "--profile", "test"]
    assert main(base + ["-o", str(tmp_path / "one")]) == 1
    capsys.readouterr()
    assert main(base + ["-o", str(tmp_path / "ray"), "--ray"]) == 1  # a book failed, the others written
    cap = capsys.readouterr()
    assert "zz_empty.txt: GutenbergFormatError" in cap.err and "3 segmented" in cap.out, cap
    one, on_ray = _files(tmp_path / "one"), _files(tmp_path / "ray")
    assert len(one) == 9 and one == on_ray
    assert main(base + ["-o", str(tmp_path / "ray"), "--ray"]) == 1  # rerun: nothing redone
    assert "3 already complete" in capsys.readouterr().out


def _litseg_args(books: Path, url: str, out: Path) -> list[str]:
    return ["segment", str(books), "--method", "litseg", "--profile", "test", "--llm-backend", "openai",
            "--base-url", url, "--llm-model", "fake-model", "-o", str(out)]


def test_llm_method_outputs_are_the_single_process_bytes(local_cluster, tmp_path, monkeypatch, capsys):
    books = _books(tmp_path / "books", 3, bad=False)
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    with FakeOpenAI() as srv:
        monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache-one"))
        assert main(_litseg_args(books, srv.url, tmp_path / "one")) == 0
        asked_one = len(srv.chat_requests)
        monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache-ray"))  # a cold cache: the actors ask too
        assert main(_litseg_args(books, srv.url, tmp_path / "ray") + ["--ray", "--ray-actors", "2"]) == 0
        asked_ray = len(srv.chat_requests) - asked_one
    out = capsys.readouterr().out
    assert asked_one > 0 and asked_ray == asked_one, (asked_one, asked_ray)
    assert f"0 of {asked_ray} replies from the cache" in out, out
    one, on_ray = _files(tmp_path / "one"), _files(tmp_path / "ray")
    assert len(one) == 9 and one == on_ray


def test_a_worker_killed_mid_run_fails_its_book_and_the_rerun_resumes(local_cluster, tmp_path, monkeypatch, capsys):
    ray = local_cluster
    books = _books(tmp_path / "books", 4, bad=False)
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache-one"))
    with FakeOpenAI("hang", hang_s=1.0) as srv:  # every reply after 1 s: the run is long enough to kill a worker in
        assert main(_litseg_args(books, srv.url, tmp_path / "one")) == 0
        monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache-ray"))
        n0 = len(srv.chat_requests)
        rc: list[int] = []
        run = threading.Thread(target=lambda: rc.append(main(_litseg_args(books, srv.url, tmp_path / "ray")
                                                             + ["--ray", "--ray-actors", "2"])))
        run.start()
        deadline = time.monotonic() + 240
        while len(srv.chat_requests) == n0 and time.monotonic() < deadline:  # an actor is mid-book
            time.sleep(0.2)
        names = [n for n in ray.util.list_named_actors() if n.startswith("litseg-segment-")]
        assert len(names) == 2 and len(srv.chat_requests) > n0, "no actor reached the server"
        for name in names:  # SIGKILL of both workers mid-book; new actors take the next books
            ray.kill(ray.get_actor(name))
        run.join(300)
        assert not run.is_alive()
        first = capsys.readouterr()
        assert rc == [1], first
        died = [ln for ln in first.err.splitlines() if "Ray worker died" in ln]
        assert 1 <= len(died) <= 2 and all("rerun to resume" in ln for ln in died), first.err
        written = [p for p in (tmp_path / "ray").glob("*.meta.json")]
        assert len(written) == 4 - len(died)  # the other books were written (by the new actors)
        srv.mode = "ok"
        assert main(_litseg_args(books, srv.url, tmp_path / "ray") + ["--ray", "--ray-actors", "2"]) == 0
    out = capsys.readouterr().out
    assert f"{len(died)} segmented, {4 - len(died)} already complete" in out, out
    assert _files(tmp_path / "one") == _files(tmp_path / "ray")


# ------------------------------------------------------------------ notebook 02's annotation on Ray
def _annotation_view(records):
    return [(r["key"], r["book_id"], r["unit_id"], r["segments"], r["fallback"], r["fallback_types"], r["retries"])
            for r in records]


def _three_books():
    import conftest

    books = [conftest.make_book(f"bk{k}", 2, 5) for k in range(3)]
    return books, [(b, u) for b in books for u in b.units]


def _fake_server_config(srv):
    from litseg_nb.litseg.config import LitSegConfig

    return LitSegConfig.for_profile("test", llm={"backend": "openai", "model": "fake-model",
                                                 "base_urls": (srv.url,), "use_cache": False})


def test_annotation_on_ray_gives_the_single_process_records_and_resumes(local_cluster, tmp_path, fresh_dirs):
    from litseg_nb.litseg.pipeline import annotate_units, read_annotations, records_to_chunks
    from litseg_nb.litseg.ray_annotate import RayAnnotator
    from litseg_nb.llm import make_backend

    books, items = _three_books()
    with FakeOpenAI() as srv:
        cfg = _fake_server_config(srv)
        one = annotate_units(items, make_backend(cfg.llm), cfg, progress=False)
        asked_one = len(srv.chat_requests)
        path = tmp_path / "ann.jsonl"
        on_ray_annotator = RayAnnotator(cfg.replace(ray={"address": "local", "actors": 2}))
        on_ray = annotate_units(items, on_ray_annotator, cfg, annotations_path=path, progress=False)
        asked_ray = len(srv.chat_requests) - asked_one
        ray_requests = srv.chat_requests[asked_one:]
        again = annotate_units(items, on_ray_annotator, cfg, annotations_path=path, progress=False)
        assert len(srv.chat_requests) - asked_one == asked_ray  # resumed: nothing asked again
    assert asked_ray == asked_one == 3 * len(items)
    assert _annotation_view(on_ray.records) == _annotation_view(one.records)
    assert [dataclasses.asdict(c) for c in records_to_chunks(books, on_ray.records)] == \
        [dataclasses.asdict(c) for c in records_to_chunks(books, one.records)]
    assert (again.resumed, again.llm_calls) == (len(items), 0)
    assert _annotation_view(read_annotations(path)) == _annotation_view(one.records)
    for b, u in items:  # each unit's three stages in order (stage k's request after stage k-1's)
        marker = f"of unit {u.ordinal} in {b.book_id}."
        order = [next(i for i, r in enumerate(ray_requests) if marker in r["messages"][-1]["content"]
                      and f"ONLY Step {k}" in r["messages"][-1]["content"]) for k in (1, 2, 3)]
        assert order == sorted(order), (b.book_id, u.unit_id, order)
    # the single process resumes from the Ray run's file (the same keys): the server is gone, nothing is asked
    assert annotate_units(items, make_backend(cfg.llm), cfg, progress=False, annotations_path=path).resumed == len(items)


def test_ray_options_refuse_unknown_keys_and_bad_values():
    from litseg_nb.errors import UsageError
    from litseg_nb.litseg.config import LitSegConfig, RayOptions

    cfg = LitSegConfig.for_profile("test")
    assert cfg.replace(ray={"address": "auto", "actors": 4}).ray == RayOptions("auto", 4)
    with pytest.raises(UsageError, match="unknown key"):
        cfg.replace(ray={"adress": "auto"})
    with pytest.raises(UsageError, match="no user"):
        RayOptions("ray://u:p@h:1")
    with pytest.raises(UsageError, match=">= 0"):
        RayOptions("local", actors=-1)


# ------------------------------------------------------------------ the actors' usage reaches the notebook's ledger
def _usage_view(ledger):
    return [{k: r[k] for k in ("method", "book", "stage", "calls", "prompt_tokens", "completion_tokens", "cache_hits")}
            for r in ledger.rows()]


def test_ledger_merge_sums_another_ledgers_rows():
    from litseg_nb.llm import UsageLedger
    from litseg_nb.llm.base import Generation, UsageTag

    a, b = UsageLedger(), UsageLedger()
    tag = UsageTag("litseg", "bk0", "stage1")
    a.record(tag, Generation(text="x", prompt_tokens=10, completion_tokens=2, latency_s=0.5))
    b.record(tag, Generation(text="y", prompt_tokens=7, completion_tokens=1, latency_s=0.25, cache_hit=True))
    b.record(UsageTag("litseg", "bk1", "stage2"), Generation(text="z", prompt_tokens=3, completion_tokens=4, latency_s=0.1))
    a.merge(b.rows())
    rows = {(r["book"], r["stage"]): r for r in a.rows()}
    assert (rows["bk0", "stage1"]["calls"], rows["bk0", "stage1"]["prompt_tokens"],
            rows["bk0", "stage1"]["completion_tokens"], rows["bk0", "stage1"]["cache_hits"]) == (2, 17, 3, 1)
    assert rows["bk0", "stage1"]["latency_s"] == pytest.approx(0.75)
    assert (rows["bk1", "stage2"]["calls"], rows["bk1", "stage2"]["prompt_tokens"]) == (1, 3)


def test_annotation_on_ray_puts_the_actors_usage_in_the_ledger(local_cluster, tmp_path, fresh_dirs):
    from litseg_nb.litseg.pipeline import annotate_units
    from litseg_nb.litseg.ray_annotate import RayAnnotator, annotator_for
    from litseg_nb.llm import UsageLedger, make_backend

    books, items = _three_books()
    with FakeOpenAI() as srv:
        cfg = _fake_server_config(srv)
        one_ledger = UsageLedger()
        one_backend = make_backend(cfg.llm, one_ledger)
        assert annotator_for(cfg, one_backend) is one_backend  # not on Ray: the backend itself
        annotate_units(items, one_backend, cfg, progress=False)
        ray_cfg = cfg.replace(ray={"address": "local", "actors": 2})
        ray_ledger = UsageLedger()
        annotator = annotator_for(ray_cfg, make_backend(ray_cfg.llm, ray_ledger))
        assert isinstance(annotator, RayAnnotator)
        path = tmp_path / "ann.jsonl"
        on_ray = annotate_units(items, annotator, ray_cfg, annotations_path=path, progress=False)
        assert on_ray.llm_calls > 0
        assert _usage_view(ray_ledger) == _usage_view(one_ledger)  # the driver's own engine asked nothing
        # a resumed run on Ray replays the recorded cost as cache hits, as one process does
        resumed_ray, resumed_one = UsageLedger(), UsageLedger()
        annotate_units(items, annotator_for(ray_cfg, make_backend(ray_cfg.llm, resumed_ray)), ray_cfg,
                       annotations_path=path, progress=False)
        annotate_units(items, make_backend(cfg.llm, resumed_one), cfg, annotations_path=path, progress=False)
    assert _usage_view(resumed_ray) == _usage_view(resumed_one)
    assert all(r["cache_hits"] == r["calls"] > 0 for r in resumed_ray.rows())


def test_ray_options_are_a_field_of_the_litseg_config():
    from litseg_nb.config import ConfigError
    from litseg_nb.litseg.config import LitSegConfig

    assert LitSegConfig.for_profile("test").ray.address == ""  # every profile: one process
    cfg = LitSegConfig.for_profile("test", ray={"address": "10.0.0.2:6379", "gpus_per_actor": 1})
    assert "on Ray (10.0.0.2:6379, one engine per GPU)" in cfg.describe()
    assert "Ray" not in LitSegConfig.for_profile("test").describe()  # the label off Ray is unchanged
    with pytest.raises(ConfigError, match="RayOptions.address.*no user"):
        LitSegConfig.for_profile("test", ray={"address": "ray://me:secret@h:1"})
    with pytest.raises(ConfigError, match="unknown key"):
        LitSegConfig.for_profile("test", ray={"adress": "local"})


@pytest.mark.slow
def test_notebook_02_on_ray_writes_the_tables_of_one_process(notebook_pipeline, tmp_path, monkeypatch, capsys):
    """``run --only 02 -p ray_address=local`` (a Ray cluster the kernel starts, a fresh request cache so
    the actors compute) writes every table of the in-process run with the same values, and its usage
    ledger (``usage/02.csv``, which notebook 08 reads) counts the same calls and tokens."""
    pytest.importorskip("ray")
    import importlib.util

    import pandas as pd

    base = notebook_pipeline("02")
    spec = importlib.util.spec_from_file_location("compare_runs", conftest_root() / "scripts" / "compare_runs.py")
    compare_runs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare_runs)
    outputs = tmp_path / "outputs"
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(outputs))
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache"))
    capsys.readouterr()
    assert main(["run", "--profile", "test", "--only", "02", "-p", "ray_address=local"]) == 0, capsys.readouterr().err
    ray_out = outputs / "test"
    tables = sorted(p.name for p in (base / "tables").glob("02_*.csv"))
    assert tables and tables == sorted(p.name for p in (ray_out / "tables").glob("02_*.csv"))
    for name in tables:
        verdict, detail = compare_runs.compare_table(base / "tables" / name, ray_out / "tables" / name)
        if verdict.startswith("same"):
            continue
        a, b = pd.read_csv(base / "tables" / name), pd.read_csv(ray_out / "tables" / name)
        keep = [c for c in a.columns if c != "cache_hits" and not compare_runs.TIMING.search(str(c))]
        assert a[keep].equals(b[keep]), f"{name}: {detail}"  # only the request cache's hits may differ
    cols = ["method", "book", "stage", "calls", "prompt_tokens", "completion_tokens"]
    one = pd.read_csv(base / "artifacts" / "usage" / "02.csv")[cols]
    on_ray = pd.read_csv(ray_out / "artifacts" / "usage" / "02.csv")[cols]
    assert on_ray.equals(one)
    manifest = (ray_out / "manifests").glob("02_*.json")
    assert any('"address": "local"' in p.read_text() for p in manifest)


def conftest_root():
    from conftest import REPO_ROOT

    return REPO_ROOT


@pytest.mark.parametrize("value", ["ray://me:hunter2@h:1", "me:hunter2@h:1", "h:1?token=hunter2", "h:1#k=hunter2"])
def test_notebook_02_refuses_a_bad_ray_address_before_any_kernel_without_its_secret(value, capsys):
    assert main(["run", "--profile", "test", "--only", "02", "-p", f"ray_address={value}"]) == 2
    err = capsys.readouterr().err
    assert "RayOptions.address" in err and "hunter2" not in err, err


def test_actors_asking_for_gpus_a_cluster_without_any_fail_fast():
    """Ray would queue such actors silently for ever (segment --ray-gpus 1, notebook 02's gpus_per_actor=1)."""
    pytest.importorskip("ray")
    from litseg_nb.core.ray_cluster import RayResourcesError, run_on_actors

    class NoGpuCluster:
        def cluster_resources(self):
            return {"CPU": 2.0}

        def remote(self, **kw):
            raise AssertionError("an actor was requested")

    for gpus in (1, 0.5):
        with pytest.raises(RayResourcesError, match="0 GPU"):
            run_on_actors(NoGpuCluster(), object, (), 1, ["book"], None, None, None, name="litseg-segment",
                          num_gpus=gpus)
