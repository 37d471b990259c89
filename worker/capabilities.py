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
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from configs.vocabulary.capabilities import LABEL, Capabilities, GpuSample, common_model

LOG = logging.getLogger(__name__)
DEVICE = re.compile(r"[0-9]{1,3}|GPU-[0-9a-fA-F-]{8,64}")


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


def detect(
    labels: Iterable[str] = (), nvml: Any | None = None, devices: Sequence[str] | None = None
) -> Capabilities:
    """This machine's capabilities with the operator's ``labels`` (ValueError for a label
    that is not 1-63 of a-z 0-9 . _ -). ``nvml``: an initialised NVML (found when None).
    ``devices``: the GPUs this worker may use (indices or ``GPU-…`` UUIDs, as the operator
    gives them with ``--gpu-devices``); every GPU NVML finds when None. An index NVML does
    not know is refused; without NVML the operator's list is taken as it is."""
    chosen = frozenset(labels)
    bad = sorted(label for label in chosen if not LABEL.fullmatch(label))
    if bad:
        raise ValueError(f"a worker label is 1-63 of a-z 0-9 . _ -: {bad[0]!r}")
    nvml = nvml if nvml is not None else load_nvml()
    gpus = gpu_samples(nvml) if nvml is not None else []
    by_index = {str(gpu.index): gpu.name for gpu in gpus}
    offered = tuple(by_index) if devices is None else tuple(devices)
    unknown = [d for d in offered if gpus and d.isdigit() and d not in by_index]
    if unknown:
        raise ValueError(f"this machine has no GPU {unknown[0]} (it has {', '.join(by_index)})")
    # each offered device's model where NVML names it by index; a UUID's is unknown here,
    # then the machine's model is theirs only when every GPU of the machine is the same
    named = all(device in by_index for device in offered)
    names = tuple(by_index[device] for device in offered) if named else ()
    model = common_model(names) if named else common_model(list(by_index.values()))
    return Capabilities(
        cpus=len(os.sched_getaffinity(0)),
        memory_gib=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
        gpus=len(offered),
        gpu_model=model if offered else None,
        labels=chosen,
        gpu_devices=offered,
        gpu_names=names,
    )


def parse_devices(text: str) -> tuple[str, ...]:
    """``--gpu-devices 0,2`` (indices or ``GPU-…`` UUIDs) as a tuple; ValueError when empty
    or malformed."""
    devices = tuple(part.strip() for part in text.split(",") if part.strip())
    if not devices:
        raise ValueError("--gpu-devices names at least one GPU (e.g. 0,1)")
    bad = [d for d in devices if not DEVICE.fullmatch(d)]
    if bad:
        raise ValueError(f"a GPU is an index or a GPU-… UUID: {bad[0][:40]!r}")
    return devices


def only_devices(
    sampler: Callable[[], Sequence[GpuSample]], devices: Sequence[str]
) -> Callable[[], Sequence[GpuSample]]:
    """``sampler`` narrowed to the GPUs ``devices`` names by index (a job's own); a UUID
    cannot be matched to NVML's index here, so then every GPU is sampled."""
    if not all(device.isdigit() for device in devices):
        return sampler
    wanted = {int(device) for device in devices}
    return lambda: [sample for sample in sampler() if sample.index in wanted]
