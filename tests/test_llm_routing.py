"""Prefix-affine routing over several OpenAI-compatible replicas, against fake
loopback servers that record what each received: related requests stay on one replica, a replica
changes only on failure, and one hot prefix is spread within the bounded-load cap."""
from __future__ import annotations

import math
import time

import pytest

from litseg_nb.llm import SamplingParams
from litseg_nb.llm.openai_backend import OpenAIBackend

from fakes import LoopbackServer, chat_reply

pytestmark = pytest.mark.timeout(60)


class Replica(LoopbackServer):
    """A fake server recording each request; ``down`` answers 503, ``delay_s`` slows replies."""

    def __init__(self, delay_s: float = 0.0, down: bool = False) -> None:
        self.delay_s, self.down = delay_s, down
        super().__init__()

    @property
    def received(self) -> list[dict]:
        return self.requests

    def respond(self, handler, body: dict) -> None:
        time.sleep(self.delay_s)
        if self.down:
            self.send(handler, 503, {"error": "down"})
        else:
            self.send(handler, 200, chat_reply("ok"))

    def systems(self) -> set[str]:
        return {b["messages"][0]["content"] for b in self.received}


@pytest.fixture
def replicas():
    made: list[Replica] = []

    def make(n: int, **kw) -> list[Replica]:
        out = [Replica(**kw) for _ in range(n)]
        made.extend(out)
        return out

    yield make
    for r in made:
        r.close()


def client(reps, **kw) -> OpenAIBackend:
    opts = dict(timeout_s=5.0, max_retries=2, max_concurrency=1, tokenizer=False)
    opts.update(kw)
    return OpenAIBackend("fake", base_urls=[r.url for r in reps], **opts)


def prompt(system: str, user: str):
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


SYSTEMS = [f"System prompt {k}: segment the novel, keep every sentence. " * 30 for k in range(8)]


def test_requests_sharing_a_prefix_go_to_one_replica(replicas):
    reps = replicas(4)
    b = client(reps)  # one request at a time: no load pressure, pure affinity
    convs = [prompt(SYSTEMS[k], f"unit {u} stage {s}") for u in range(3) for s in range(3)
             for k in range(8)]
    b.chat(convs, SamplingParams(max_new_tokens=8))
    owner = {}
    for i, r in enumerate(reps):
        for s in r.systems():
            assert s not in owner, "one prefix was split over replicas"
            owner[s] = i
    assert len(owner) == 8 and len({*owner.values()}) >= 2  # 8 prefixes over >= 2 of 4 replicas
    # the owner is the prefix's first choice in the rendezvous ranking
    for s, i in owner.items():
        assert b.replica_ranking(b.route_key({"messages": prompt(s, "x")}))[0] == i
    assert sum(b.routed) == len(convs) == sum(len(r.received) for r in reps)


def test_ranking_is_stable_and_moves_only_a_removed_replicas_keys(replicas):
    reps = replicas(4)
    full = client(reps)
    three = client(reps[:3])
    keys = [f"key {i}" for i in range(200)]
    moved = 0
    for k in keys:
        a, c = full.replica_ranking(k), three.replica_ranking(k)
        assert full.replica_ranking(k) == a  # deterministic
        if a[0] == 3:
            moved += 1
        else:
            assert c[0] == a[0]  # keys of the remaining replicas keep their replica
    assert 20 < moved < 100  # about a quarter of the keys lived on the removed replica


def test_failure_moves_to_the_next_replica_of_the_ranking_only(replicas):
    reps = replicas(3)
    b = client(reps, max_retries=2)
    key_system = next(s for s in (f"Sys {i}. " * 200 for i in range(100))
                      if b.replica_ranking(b.route_key({"messages": prompt(s, "")}))[0] == 0)
    ranking = b.replica_ranking(b.route_key({"messages": prompt(key_system, "")}))
    reps[0].down = True
    gens = b.chat([prompt(key_system, f"u{i}") for i in range(4)], SamplingParams(max_new_tokens=4))
    assert [g.text for g in gens] == ["ok"] * 4
    second, third = ranking[1], ranking[2]
    assert len(reps[0].received) == 4  # each tried its first choice once ...
    assert len(reps[second].received) == 4 and not reps[third].received  # ... then the next one
    reps[0].down = False
    b.chat([prompt(key_system, "back")], SamplingParams(max_new_tokens=4))
    assert reps[0].received[-1]["messages"][1]["content"] == "back"  # healthy again: back home


def test_one_hot_prefix_is_spread_within_the_load_cap(replicas):
    reps = replicas(4, delay_s=0.15)
    b = client(reps, max_concurrency=8)
    convs = [prompt(SYSTEMS[0], f"unit {i}") for i in range(32)]
    b.chat(convs, SamplingParams(max_new_tokens=4))
    cap = math.ceil(8 * 1.25 / 4)  # in-flight bound per replica at 8 requests in flight
    assert all(r.max_active <= cap for r in reps)
    counts = [len(r.received) for r in reps]
    # 8 in flight, cap 3 each: the ranking's first three replicas take 3 + 3 + 2 at a time
    assert sum(counts) == 32 and sum(c > 0 for c in counts) >= 3
    home = b.replica_ranking(b.route_key({"messages": convs[0]}))[0]
    assert counts[home] == max(counts)  # the prefix's own replica still takes the largest share
