"""A small visual-question-answering model that reads the image: colour and shape heuristics.

It finds the coloured objects in the picture (a median filter against noise, then every
4-connected region of saturated pixels), names each one's colour by its hue (so a darker
or brighter picture keeps its colours) and its shape by how much of its bounding box it
fills (square ~1, circle ~0.79, triangle ~0.5), and places it in a 3x3 grid. The question
is parsed with a few patterns (colour, shape, count, existence, left/right, above/below)
and answered from the objects found. Pillow decodes PNG and JPEG alike.

python examples/models/vqa_shapes/model.py [--key answer]
"""

from __future__ import annotations

import argparse
import base64
import colorsys
import io
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageFilter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dynaeval_server import serve  # noqa: E402

SIDE = 128  # pictures are read at this size at most
HUES = {"red": 0, "orange": 28, "yellow": 47, "green": 135, "blue": 223, "purple": 281}
SHAPES = ("circle", "square", "triangle")
PLACES = {"top": 0, "middle": 1, "bottom": 2, "left": 0, "center": 1, "right": 2}
MIN_PIXELS = 20
NUMBERS = {0: "0", 1: "1", 2: "2", 3: "3", 4: "4", 5: "5", 6: "6"}


@dataclass(frozen=True)
class Found:
    """An object in the picture: its colour and shape names, centroid and grid cell."""

    colour: str
    shape: str
    x: float
    y: float
    cell: tuple[int, int]


def objects(image_b64: str) -> list[Found]:
    """Every coloured object in the base64 PNG or JPEG."""
    image = Image.open(io.BytesIO(base64.b64decode(image_b64))).convert("RGB")
    image.thumbnail((SIDE, SIDE))
    image = image.filter(ImageFilter.MedianFilter(3))
    width, height = image.size
    pixels = list(image.getdata())
    mask = [max(p) - min(p) > 70 for p in pixels]
    found = []
    for region in _regions(mask, width, height):
        if len(region) >= MIN_PIXELS:
            found.append(_describe(region, pixels, width, height))
    return found


def _regions(mask: list[bool], width: int, height: int) -> list[list[int]]:
    seen = [False] * len(mask)
    regions = []
    for start, on in enumerate(mask):
        if not on or seen[start]:
            continue
        seen[start] = True
        stack, region = [start], []
        while stack:
            i = stack.pop()
            region.append(i)
            x, y = i % width, i // width
            for j, ok in ((i - 1, x > 0), (i + 1, x < width - 1), (i - width, y > 0),
                          (i + width, y < height - 1)):  # fmt: skip
                if ok and mask[j] and not seen[j]:
                    seen[j] = True
                    stack.append(j)
        regions.append(region)
    return regions


def _describe(
    region: list[int], pixels: list[tuple[int, int, int]], width: int, height: int
) -> Found:
    xs = [i % width for i in region]
    ys = [i // width for i in region]
    r, g, b = (sum(pixels[i][c] for i in region) / len(region) for c in range(3))
    hue = colorsys.rgb_to_hsv(r / 255, g / 255, b / 255)[0] * 360
    colour = min(HUES, key=lambda name: min(abs(hue - HUES[name]), 360 - abs(hue - HUES[name])))
    box = (max(xs) - min(xs) + 1) * (max(ys) - min(ys) + 1)
    fill = len(region) / box
    shape = "square" if fill > 0.9 else "circle" if fill > 0.66 else "triangle"
    cx, cy = sum(xs) / len(xs), sum(ys) / len(ys)
    cell = (min(2, int(3 * cx / width)), min(2, int(3 * cy / height)))
    return Found(colour, shape, cx / width, cy / height, cell)


def _place(words: str | None) -> tuple[int, int] | None:
    """'top left' -> (0, 0); 'center' -> (1, 1); 'middle right' -> (2, 1)."""
    if not words:
        return None
    parts = words.split()
    if parts == ["center"]:
        return (1, 1)
    if len(parts) == 2 and parts[0] in PLACES and parts[1] in PLACES:
        return (PLACES[parts[1]], PLACES[parts[0]])
    return None


def _pick(found: list[Found], colour: str | None, shape: str | None, place=None) -> Found | None:
    matches = [
        f for f in found
        if (colour is None or f.colour == colour) and (shape is None or f.shape == shape)
        and (place is None or f.cell == place)
    ]  # fmt: skip
    if not matches and place is not None:  # a misplaced centroid: drop the place
        return _pick(found, colour, shape)
    return matches[0] if matches else None


_COLOUR = "|".join(HUES)
_SHAPE = "|".join(SHAPES)
_DESC = rf"the (?:({_COLOUR}) )?({_SHAPE})"
PATTERNS = (
    ("colour", re.compile(rf"what colou?r is the ({_SHAPE})(?: in the ([a-z ]+?))?\?")),
    ("shape", re.compile(rf"what shape is the ({_COLOUR}) object(?: in the ([a-z ]+?))?\?")),
    ("count_colour", re.compile(rf"how many ({_COLOUR}) shapes")),
    ("count_shape", re.compile(rf"how many ({_SHAPE})s")),
    ("exists", re.compile(rf"is there an? ({_COLOUR}) ({_SHAPE})")),
    ("side", re.compile(rf"is {_DESC} on the left or the right")),
    ("above", re.compile(rf"is {_DESC} above or below {_DESC}")),
)


def answer(question: str, found: list[Found]) -> str:
    """The answer to ``question`` about the objects ``found``."""
    q = question.lower().strip()
    for kind, pattern in PATTERNS:
        match = pattern.search(q)
        if match:
            return _answer(kind, match.groups(), found)
    return "yes"


def _answer(kind: str, groups: tuple, found: list[Found]) -> str:
    if kind == "colour":
        hit = _pick(found, None, groups[0], _place(groups[1]))
        return hit.colour if hit else "red"
    if kind == "shape":
        hit = _pick(found, groups[0], None, _place(groups[1]))
        return hit.shape if hit else "circle"
    if kind == "count_colour":
        return NUMBERS.get(sum(f.colour == groups[0] for f in found), "2")
    if kind == "count_shape":
        return NUMBERS.get(sum(f.shape == groups[0] for f in found), "2")
    if kind == "exists":
        return "yes" if _pick(found, groups[0], groups[1]) else "no"
    if kind == "side":
        hit = _pick(found, groups[0], groups[1])
        return "left" if hit is None or hit.x < 0.5 else "right"
    first, second = _pick(found, groups[0], groups[1]), _pick(found, groups[2], groups[3])
    if first is None or second is None:
        return "above"
    return "above" if first.y < second.y else "below"


def make_predict(key: str):
    """A predict function answering under ``key``."""

    def predict(task: str, instances: list[dict]) -> list[dict]:
        replies = []
        for inst in instances:
            try:
                found = objects(str(inst.get("image") or ""))
            except (OSError, ValueError):  # an unreadable picture: answer from the words alone
                found = []
            replies.append({"uid": inst.get("uid"), key: answer(str(inst.get("question")), found)})
        return replies

    return predict


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--key", default="answer", help="the task's output key")
    args = parser.parse_args(argv)
    serve(make_predict(args.key), {"name": "vqa-shapes", "version": "1.0", "framework": "pillow"})


if __name__ == "__main__":
    main()
