"""Image perturbations for the robustness axis: Gaussian noise, blur, low-quality JPEG and a
brightness change, each a pure function of (base64 image, seed).

The per-example seed picks the strength within a fixed range (so a set holds mild and
strong cases alike) and, for noise, the noise itself; the same (image, seed) gives the same
bytes in any process with the same Pillow and NumPy. Strengths stay where a person still
reads the picture alike: the model should answer the same question the same way.

The output is PNG (JPEG for the JPEG perturbation), the same size in pixels as the input; a
PNG that would take more bytes than the original (or 64 KiB, if more) is written as a JPEG
of quality 90, 75 or 60 instead (the first within that budget), so a noisy photograph stays
near its original's size. The evaluator still checks every perturbed image against the
limit before sending it.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # NumPy and Pillow load when a picture is first perturbed, not before
    import numpy as np
    from PIL import Image

from configs.vocabulary.images import decoded_bytes, encode
from perturbations.perturbation import Perturbation, register

# Perturbed images are decoded from sets the evaluator already checked; this only bounds
# what a perturbation will decode if handed something else.
_MAX_DECODED_BYTES = 64 * 1024 * 1024
# A perturbed picture may take as many bytes as its original, or this many if more: noise
# makes a flat drawing's PNG incompressible, and a task's byte limit still holds for it.
MIN_BUDGET_BYTES = 64 * 1024


def _open(text: str) -> tuple[Image.Image, int]:
    """The picture as RGB, and the byte budget of its perturbed version."""
    from PIL import Image

    data = decoded_bytes(text, _MAX_DECODED_BYTES)
    with Image.open(io.BytesIO(data)) as image:
        rgb: Image.Image = image.convert("RGB")
    return rgb, max(len(data), MIN_BUDGET_BYTES)


JPEG_QUALITIES = (90, 75, 60)  # tried in turn when a PNG would be over its budget


def _png(image: Image.Image, budget: int) -> str:
    """PNG, or, when the PNG would take more than ``budget`` bytes (a noisy photograph),
    the first JPEG of quality 90, 75 or 60 within it (the smallest if none is)."""
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=1)  # speed over size: sets are cached
    for quality in JPEG_QUALITIES:
        if out.tell() <= budget:
            break
        jpeg = io.BytesIO()
        image.save(jpeg, format="JPEG", quality=quality)
        if jpeg.tell() < out.tell():
            out = jpeg
    return encode(out.getvalue())


def _rng(seed: int) -> np.random.Generator:
    import numpy as np

    return np.random.default_rng(seed)


class ImagePerturbation(Perturbation):
    """An image field's perturbation; ``change`` maps an RGB image and a NumPy generator to
    the perturbed base64 image."""

    field_kind = "image"
    version = "2"  # 2: a PNG over its budget is written as JPEG

    def __init__(
        self, name: str, change: Callable[[Image.Image, np.random.Generator, int], str]
    ) -> None:
        self.name = name
        self._change = change

    def apply(self, text: str, seed: int) -> str:
        image, budget = _open(text)
        return self._change(image, _rng(seed), budget)


def gaussian_noise(image: Image.Image, rng: np.random.Generator, budget: int) -> str:
    """Additive Gaussian noise, sigma 6 to 16 on the 0-255 scale, per pixel and channel."""
    import numpy as np
    from PIL import Image

    pixels = np.asarray(image, dtype=np.float32)
    sigma = rng.uniform(6.0, 16.0)
    noisy = pixels + rng.normal(0.0, sigma, size=pixels.shape).astype(np.float32)
    return _png(Image.fromarray(np.clip(noisy + 0.5, 0, 255).astype(np.uint8)), budget)


def blur(image: Image.Image, rng: np.random.Generator, budget: int) -> str:
    """Gaussian blur with a radius of 0.8 to 1.8 pixels."""
    from PIL import ImageFilter

    radius = float(rng.uniform(0.8, 1.8))
    return _png(image.filter(ImageFilter.GaussianBlur(radius=radius)), budget)


def low_quality_jpeg(image: Image.Image, rng: np.random.Generator, budget: int) -> str:
    """Re-encoded as JPEG at quality 10 to 30 (blocking and colour bleeding)."""
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=int(rng.integers(10, 31)))
    return encode(out.getvalue())


def brightness(image: Image.Image, rng: np.random.Generator, budget: int) -> str:
    """Darker (x0.6 to 0.8) or brighter (x1.2 to 1.4), chosen by the seed."""
    from PIL import ImageEnhance

    factor = rng.uniform(0.6, 0.8) if rng.random() < 0.5 else rng.uniform(1.2, 1.4)
    return _png(ImageEnhance.Brightness(image).enhance(float(factor)), budget)


_CHANGES = {
    "image-noise": gaussian_noise,
    "image-blur": blur,
    "image-jpeg": low_quality_jpeg,
    "image-brightness": brightness,
}


def _factory(name: str) -> Callable[[], Perturbation]:
    def build() -> Perturbation:
        return ImagePerturbation(name, _CHANGES[name])

    return build


for _name in _CHANGES:
    register(_name)(_factory(_name))
