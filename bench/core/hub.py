"""Fail fast without the Hugging Face hub: offline mode is switched on when a short probe cannot reach it.

With ``HF_HUB_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` unset and no network, ``huggingface_hub`` retries
every request five times with back-off (about 25 s per file, 50-60 s before a missing encoder is
reported). So before anything asks the hub for a model or a dataset, ``offline_unless_reachable()``
sends one HEAD request to the hub's endpoint (``HF_ENDPOINT``, proxies honoured) with a
``PROBE_TIMEOUT_S`` timeout, once per process. When no answer comes, offline mode is switched on for the
rest of the process: ids in the local cache still load from it, any other id fails at once, and
``hub_unreachable()`` lets the error say why. Any HTTP answer (even 404) counts as reachable.
urllib (with http, ssl and email) is imported by the probe alone.
"""

from __future__ import annotations

import os
import sys

PROBE_TIMEOUT_S = 3.0  # one HEAD request; a blackholed network costs this much once per process
DEFAULT_ENDPOINT = "https://huggingface.co"
_TRUE = {"1", "on", "yes", "true"}

_state: dict[str, bool] = {}  # "reachable" once probed; "switched" when this module turned offline mode on


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def offline_requested() -> bool:
    """Whether the user already chose offline mode (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``)."""
    return _env_true("HF_HUB_OFFLINE") or _env_true("TRANSFORMERS_OFFLINE")


def endpoint() -> str:
    """The hub's address (``HF_ENDPOINT``, else huggingface.co)."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _probe(url: str, timeout: float) -> bool:
    """True when ``url`` answers an HTTP request at all within ``timeout`` seconds."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True  # an answer, even an error status, means the hub is there
    except (OSError, ValueError):  # DNS failure, refused, timed out, a malformed HF_ENDPOINT
        return False


def offline_unless_reachable() -> bool:
    """Switch Hugging Face offline mode on for this process when the hub cannot be reached; True when offline.

    Called before a hub id or hub dataset is resolved. Does nothing (and sends nothing) when the user set
    offline mode already.
    """
    if offline_requested():
        return True
    if "reachable" not in _state:
        _state["reachable"] = _probe(endpoint(), PROBE_TIMEOUT_S)
    if not _state["reachable"]:
        _go_offline()
        return True
    return False


def hub_unreachable() -> bool:
    """Whether this process switched offline mode on because the probe found no hub."""
    return _state.get("switched", False)


def unreachable_note() -> str:
    """Why a hub id failed when offline mode was switched on here ('' otherwise), for one-sentence errors."""
    if not hub_unreachable():
        return ""
    return (f"the Hugging Face hub at {endpoint()} could not be reached within {PROBE_TIMEOUT_S:g} s, so "
            "only the local cache was searched")


def _go_offline() -> None:
    """Offline mode for everything that reads it: the variables (libraries imported later) and the flags of
    ``huggingface_hub`` (read by transformers) and ``datasets`` already imported."""
    _state["switched"] = True
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = True
    config = sys.modules.get("datasets.config")
    if config is not None:
        config.HF_HUB_OFFLINE = True
        config.HF_DATASETS_OFFLINE = True


def reset() -> None:
    """Forget the probe (tests)."""
    _state.clear()
