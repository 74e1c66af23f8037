"""Provenance of a record: package versions, the git sha of the code, the hardware it ran on."""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import bench
from bench.core.errors import BenchError
from bench.core.machine import cpu_model
from bench.core.spec import RunSpec
from bench.core.versions import component_versions


@functools.lru_cache(maxsize=1)  # the code a process runs is the code it started with
def git_sha() -> str:
    """The commit the process runs (with -dirty when code changed since), read once per process."""
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        changed = subprocess.run(  # code edited since the commit (results/ does not count)
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results"],
            cwd=root, capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        return f"{sha}-dirty" if changed else sha
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def check_publishable(store) -> None:
    """Refuse to add records to the published board (``results/``) from code with uncommitted changes: such a
    record's git sha (``...-dirty``) would name code nobody else can check out."""
    if store.is_published() and git_sha().endswith("-dirty"):
        raise BenchError(f"{store.root} is the published board and this checkout's code has uncommitted changes "
                         "(git status); commit them first, so that each record names the commit that made it, or "
                         "run into another --results-dir.")


def versions(spec: RunSpec, encoder) -> dict[str, str]:
    """Package, code and component versions for a record."""
    from importlib.metadata import version

    import torch

    task_version, defense_version, attack_version = component_versions(spec).split(" ")
    versions = {
        "bench": bench.__version__,
        "git_sha": git_sha(),
        "torch": torch.__version__,
        "transformers": version("transformers"),  # from its metadata: a cached run need not import it
        "task": task_version,
        "defense": defense_version,
        "encoder": f"{spec.encoder}@{encoder.revision}",
    }
    if attack_version:
        versions["attack"] = attack_version
    return versions


def hardware(device: str) -> dict[str, Any]:
    """The device, CPU and thread count a record was measured on."""
    import torch

    info: dict[str, Any] = {
        "device": device,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        # the CPU model and the kernels torch picked for it: features (and so trained heads) differ in the
        # last bits between CPUs, which 120 epochs can amplify to a visible utility difference
        "cpu_model": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
    return info
