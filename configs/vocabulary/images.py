"""Images as input fields: a base64 PNG or JPEG string, checked before it goes anywhere.

A task's image field travels to models inside the same JSON batch as its text fields, so
an image is a string here too. :func:`check_image` is the one gate every image passes on
its way in (a held-out row, a writer's example, a perturbed variant): strict base64, a PNG
or JPEG signature, decoded size within the task's limit, and a header Pillow can read with
bounded dimensions and pixel count, decoded in full (a truncated JPEG fails here, not in a
model), so no decompression bomb reaches a model, a perturbation or a page.
"""

from __future__ import annotations

import base64
import binascii
import io
from dataclasses import dataclass

FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg"}
MAX_SIDE = 4096  # pixels along either side
MAX_PIXELS = 2048 * 2048  # in all: bounds what decoding (and perturbing) an image costs
_SIGNATURES = {b"\x89PNG\r\n\x1a\n": "PNG", b"\xff\xd8\xff": "JPEG"}


class ImageError(ValueError):
    """An image field is not a usable base64 PNG or JPEG; ``str()`` says why."""


@dataclass(frozen=True)
class CheckedImage:
    """What the check learned of an image: its format, size in pixels and bytes."""

    format: str  # "PNG" or "JPEG"
    width: int
    height: int
    size_bytes: int

    @property
    def media_type(self) -> str:
        return FORMATS[self.format]


def decoded_bytes(text: str, max_bytes: int) -> bytes:
    """The bytes of a base64 image, refusing anything over ``max_bytes`` before decoding."""
    if not isinstance(text, str) or not text:
        raise ImageError("an image must be a non-empty base64 string")
    if text.startswith("data:"):
        raise ImageError("send the base64 bytes alone, without a 'data:' URI prefix")
    # base64 holds 3 bytes in every 4 characters: refuse by length before decoding anything
    if (len(text) // 4) * 3 > max_bytes + 2:
        raise ImageError(f"the image is over the task's limit of {max_bytes} bytes")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("the image is not valid base64") from None
    if len(data) > max_bytes:
        raise ImageError(f"the image is over the task's limit of {max_bytes} bytes")
    return data


def check_image(text: str, max_bytes: int) -> CheckedImage:
    """The image in ``text`` checked (ImageError naming the problem otherwise)."""
    from PIL import Image, UnidentifiedImageError  # Pillow loads when a picture comes

    data = decoded_bytes(text, max_bytes)
    signature = next((fmt for sig, fmt in _SIGNATURES.items() if data.startswith(sig)), None)
    if signature is None:
        raise ImageError("the image is neither PNG nor JPEG")
    try:
        with Image.open(io.BytesIO(data), formats=[signature]) as image:
            width, height = image.size
            _check_size(width, height)
            image.verify()  # structure and checksums (a damaged PNG chunk)
        with Image.open(io.BytesIO(data), formats=[signature]) as image:
            # every pixel decoded too: verify() reads no JPEG data, so a truncated JPEG
            # would pass and then fail in every model and perturbation
            image.load()
    except ImageError:
        raise
    except Image.DecompressionBombError:  # Pillow's own bound, met before ours: same answer
        raise ImageError(f"the image has too many pixels (at most {MAX_PIXELS})") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        raise ImageError(f"the {signature} image is damaged or truncated") from None
    return CheckedImage(signature, width, height, len(data))


def _check_size(width: int, height: int) -> None:
    if width < 1 or height < 1 or width > MAX_SIDE or height > MAX_SIDE:
        raise ImageError(f"the image is {width}x{height} pixels; each side must be 1 to {MAX_SIDE}")
    if width * height > MAX_PIXELS:
        raise ImageError(
            f"the image is {width}x{height} pixels; at most {MAX_PIXELS} in all (2048x2048)"
        )


def encode(data: bytes) -> str:
    """Image bytes as the base64 text an image field holds."""
    return base64.b64encode(data).decode("ascii")


_BASE64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
# how the base64 of each format's signature starts
_ENCODED_SIGNATURES = (("iVBORw0KGgo", "image/png"), ("/9j/", "image/jpeg"))


def plain_base64(value: str) -> bool:
    """Whether ``value`` holds only the base64 alphabet (so JSON and HTML need no escapes in
    it), checked in C at a fraction of the cost of decoding."""
    return value.isascii() and not value.encode("ascii").translate(None, _BASE64_ALPHABET)


def data_uri(value: object) -> str:
    """A stored image field as a ``data:`` address for ``<img src>``; empty when it is not
    plain base64 of a PNG or JPEG (a stored value passed :func:`check_image` on its way in,
    so this only re-reads the signature and the alphabet)."""
    if not isinstance(value, str) or not plain_base64(value):
        return ""
    media = next((m for prefix, m in _ENCODED_SIGNATURES if value.startswith(prefix)), None)
    return f"data:{media};base64,{value}" if media else ""
