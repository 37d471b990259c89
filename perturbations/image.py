"""Image perturbations for the robustness axis: Gaussian noise, blur, low-quality JPEG and a
brightness change, each a pure function of (base64 image, seed).

The per-example seed picks the strength within a fixed range (so a set holds mild and
strong cases alike) and, for noise, the noise itself; the same (image, seed) gives the same
bytes in any process with the same Pillow and NumPy. Strengths stay where a person still
reads the picture alike: the model should answer the same question the same way.

The output is PNG (JPEG for the JPEG perturbation), never larger in pixels than the input.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable

import numpy as np
from PIL import Image, ImageEnhance, ImageFilter

from configs.vocabulary.images import encode
from perturbations.perturbation import Perturbation, register

# Perturbed images are decoded from sets the evaluator already checked; this only bounds
# what a perturbation will decode if handed something else.
_MAX_DECODED_BYTES = 64 * 1024 * 1024


def _open(text: str) -> Image.Image:
    data = base64.b64decode(text, validate=True)
    if len(data) > _MAX_DECODED_BYTES:
        raise ValueError("image too large to perturb")
    with Image.open(io.BytesIO(data)) as image:
        rgb: Image.Image = image.convert("RGB")
    return rgb


def _png(image: Image.Image) -> str:
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=1)  # speed over size: sets are cached
    return encode(out.getvalue())


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


class ImagePerturbation(Perturbation):
    """An image field's perturbation; ``change`` maps an RGB image and a NumPy generator to
    the perturbed base64 image."""

    field_kind = "image"
    version = "1"

    def __init__(self, name: str, change: Callable[[Image.Image, np.random.Generator], str]):
        self.name = name
        self._change = change

    def apply(self, text: str, seed: int) -> str:
        return self._change(_open(text), _rng(seed))


def gaussian_noise(image: Image.Image, rng: np.random.Generator) -> str:
    """Additive Gaussian noise, sigma 6 to 16 on the 0-255 scale, per pixel and channel."""
    pixels = np.asarray(image, dtype=np.float32)
    sigma = rng.uniform(6.0, 16.0)
    noisy = pixels + rng.normal(0.0, sigma, size=pixels.shape).astype(np.float32)
    return _png(Image.fromarray(np.clip(noisy + 0.5, 0, 255).astype(np.uint8)))


def blur(image: Image.Image, rng: np.random.Generator) -> str:
    """Gaussian blur with a radius of 0.8 to 1.8 pixels."""
    return _png(image.filter(ImageFilter.GaussianBlur(radius=float(rng.uniform(0.8, 1.8)))))


def low_quality_jpeg(image: Image.Image, rng: np.random.Generator) -> str:
    """Re-encoded as JPEG at quality 10 to 30 (blocking and colour bleeding)."""
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=int(rng.integers(10, 31)))
    return encode(out.getvalue())


def brightness(image: Image.Image, rng: np.random.Generator) -> str:
    """Darker (x0.6 to 0.8) or brighter (x1.2 to 1.4), chosen by the seed."""
    factor = rng.uniform(0.6, 0.8) if rng.random() < 0.5 else rng.uniform(1.2, 1.4)
    return _png(ImageEnhance.Brightness(image).enhance(float(factor)))


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
