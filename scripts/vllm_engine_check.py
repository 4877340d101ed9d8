"""The rehearsal's VLLMBackend piece (``python -m litseg_nb rehearse``): one engine, chat, guided JSON,
log-probs (next-token, and a batch of prompt log-probs), a LoRA request on the same engine and release. Prints one ``RESULT {...}`` line.

    python scripts/vllm_engine_check.py ENGINE_JSON LORA_ADAPTER_DIR
"""
from __future__ import annotations

import json
import sys
import time


def main(engine: str, adapter: str) -> None:
    from litseg_nb.config import LLMConfig
    from litseg_nb.llm import SamplingParams, make_backend, vllm_backend
    from litseg_nb.llm import release_backend

    cfg = LLMConfig(backend="vllm", model="smollm2-135m-instruct", dtype="float32", max_model_len=2048,
                    max_new_tokens=16, use_cache=False, engine=json.loads(engine))
    out = {}
    t0 = time.time()
    b = make_backend(cfg)
    out["engine start s"] = round(time.time() - t0, 1)
    conv = [[{"role": "user", "content": "What is the capital of France? Answer in one word."}]]
    out["chat"] = b.chat(conv, SamplingParams(max_new_tokens=8))[0].text
    so = make_backend(cfg.replace(structured_output=True))  # the same engine, guided per request
    schema = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
              "required": ["answer"]}
    out["guided"] = so.chat([[{"role": "user", "content": "Is Paris in France? JSON."}]],
                            SamplingParams(max_new_tokens=16, json_schema=schema))[0].text
    ex = b.next_token_logprobs_ex(conv, ["Paris", "London"])
    out["logprobs"], out["logprob prompt tokens"] = ex[0][0], ex[0][1].prompt_tokens
    out["extra logprob requests"] = b.extra_logprob_requests
    # prompt log-probs of a batch (perplexity, margin sampling) on this engine with LoRA enabled
    seqs = [b.prompt_ids(c) for c in (conv[0], conv[0][:1], [{"role": "user", "content": "Hello there."}])]
    out["prompt log-probs, batch of 3"] = [len(v) for v, _ in b.token_logprobs_ex(seqs)]
    lora = make_backend(cfg.replace(lora_adapter=adapter))  # a LoRA request on the same engine
    out["lora chat"] = lora.chat(conv, SamplingParams(max_new_tokens=8))[0].text
    out["engines alive"] = len(vllm_backend.live_engines())
    for x in (b, so, lora):
        release_backend(x)
    out["engines after close"] = len(vllm_backend.live_engines())
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
