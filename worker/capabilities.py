"""What this machine offers the jobs a worker claims: CPUs (the ones this process may use),
memory, and GPUs with their model through NVML (``nvidia-ml-py``, imported as ``pynvml``)
when the library and a driver are present; labels come from the operator. NVML also gives
the GPU samples a profile records (``gpu_samples``).

Not exercised on real hardware here (the development machine has no GPU): NVML is read
through the module interface ``pynvml`` documents, and tested against recorded answers."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

from configs.vocabulary.capabilities import LABEL, Capabilities, GpuSample

LOG = logging.getLogger(__name__)


def load_nvml() -> Any | None:
    """The initialised ``pynvml`` module, or None without the library or a driver."""
    try:
        import pynvml  # optional: nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver, no device: pynvml raises its own NVMLError subclasses
        LOG.info("NVML present but not usable: no GPUs offered")
        return None
    return pynvml


def gpu_samples(nvml: Any) -> list[GpuSample]:
    """Every GPU's memory and utilisation now, through an initialised NVML."""
    samples = []
    for index in range(int(nvml.nvmlDeviceGetCount())):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        name = nvml.nvmlDeviceGetName(handle)
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        rates = nvml.nvmlDeviceGetUtilizationRates(handle)
        samples.append(
            GpuSample(
                index=index,
                name=name.decode() if isinstance(name, bytes) else str(name),
                memory_used_gib=memory.used / 2**30,
                memory_total_gib=memory.total / 2**30,
                utilisation_percent=float(rates.gpu),
            )
        )
    return samples


def nvml_sampler() -> Callable[[], list[GpuSample]] | None:
    """Every GPU's memory and utilisation, read when called (None without NVML)."""
    nvml = load_nvml()
    return None if nvml is None else functools.partial(gpu_samples, nvml)


def detect(labels: Iterable[str] = (), nvml: Any | None = None) -> Capabilities:
    """This machine's capabilities with the operator's ``labels`` (ValueError for a label
    that is not 1-63 of a-z 0-9 . _ -). ``nvml``: an initialised NVML (found when None)."""
    chosen = frozenset(labels)
    bad = sorted(label for label in chosen if not LABEL.fullmatch(label))
    if bad:
        raise ValueError(f"a worker label is 1-63 of a-z 0-9 . _ -: {bad[0]!r}")
    nvml = nvml if nvml is not None else load_nvml()
    gpus = gpu_samples(nvml) if nvml is not None else []
    return Capabilities(
        cpus=len(os.sched_getaffinity(0)),
        memory_gib=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
        gpus=len(gpus),
        gpu_model=gpus[0].name if gpus else None,
        labels=chosen,
    )
