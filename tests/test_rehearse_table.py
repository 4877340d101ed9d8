"""The rehearsal table's per-notebook columns: LLM usage from the notebook's ledger, peak RSS of its
process tree, and the processes that outlive it."""
from __future__ import annotations

import subprocess
import sys
import time

from litseg_nb.front.rehearse import TreeWatch, notebook_usage


def test_notebook_usage_sums_the_notebooks_ledger(tmp_path):
    usage = tmp_path / "full" / "artifacts" / "usage"
    usage.mkdir(parents=True)
    (usage / "04.csv").write_text("method,book,stage,calls,prompt_tokens,cached_prompt_tokens,completion_tokens,"
                                  "latency_s,cache_hits,reasoning_tokens\n"
                                  "lumber,b,x,3,300,0,30,1.0,1,0\nmargin,b,y,2,200,0,0,1.0,0,0\n")
    assert notebook_usage(tmp_path, "04") == {"calls": 5, "cache_hits": 1, "prompt_tokens": 500,
                                              "completion_tokens": 30}
    assert notebook_usage(tmp_path, "01") == {"calls": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0}


def test_tree_watch_sees_grandchildren_memory_and_the_ones_left_running():
    # a child that starts a grandchild holding ~150 MB, then exits leaving it running for a while
    code = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; x = bytearray(150 * 2**20); time.sleep(8)'], "
            "start_new_session=True); time.sleep(3)")
    proc = subprocess.Popen([sys.executable, "-c", code])
    watch = TreeWatch(proc.pid, every_s=0.3)
    proc.wait()
    watch.stop()
    left = watch.left_alive()
    assert watch.peak > 150 * 2**20 and len(left) == 1  # the grandchild outlived its notebook
    import psutil

    psutil.Process(left[0]).kill()
    time.sleep(0.5)
    assert watch.left_alive() == []


def test_tree_watch_names_vllm_engine_processes():
    w = TreeWatch.__new__(TreeWatch)  # no thread: the record of seen processes only
    w.seen = {1: (0.0, "python -m litseg_nb run"), 2: (0.0, "VLLM::EngineCore python"), 3: (0.0, "python -c x")}
    assert w.engines([1, 2, 3]) == [2] and w.engines([]) == []
