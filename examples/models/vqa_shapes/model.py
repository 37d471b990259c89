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

from PIL import Image, ImageChops, ImageFilter

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
    pixels = image.tobytes()  # r, g, b of each pixel in turn
    found = []
    for region in _regions(_saturated(image), width, height):
        if sum(end - start for _, start, end in region) >= MIN_PIXELS:
            found.append(_describe(region, pixels, width, height))
    return found


def _saturated(image: Image.Image) -> bytes:
    """One byte per pixel, non-zero where its channels spread more than 70 apart (Pillow's
    band operations do per pixel what a loop in Python would take ~10 ms for)."""
    red, green, blue = image.split()
    brightest = ImageChops.lighter(ImageChops.lighter(red, green), blue)
    darkest = ImageChops.darker(ImageChops.darker(red, green), blue)
    spread = ImageChops.subtract(brightest, darkest)
    return spread.point(lambda value: 255 if value > 70 else 0).tobytes()


Run = tuple[int, int, int]  # a row's stretch of saturated pixels: y, first x, x after the last
_RUN = re.compile(rb"[^\x00]+")


def _regions(mask: bytes, width: int, height: int) -> list[list[Run]]:
    """Every 4-connected region of non-zero pixels as its runs, the regions in the order of
    their first pixel row by row: runs on neighbouring rows whose columns overlap touch."""
    runs: list[Run] = []
    parent: list[int] = []

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    above: list[int] = []
    for y in range(height):
        row = []
        for match in _RUN.finditer(mask, y * width, (y + 1) * width):
            row.append(len(runs))
            parent.append(len(runs))
            runs.append((y, match.start() - y * width, match.end() - y * width))
        i = j = 0
        while i < len(above) and j < len(row):
            _, top_start, top_end = runs[above[i]]
            _, start, end = runs[row[j]]
            if top_start < end and start < top_end:
                parent[root(row[j])] = root(above[i])
            if top_end < end:
                i += 1
            else:
                j += 1
        above = row
    regions: dict[int, list[Run]] = {}  # by root, in the order of each region's first run
    for index, run in enumerate(runs):
        regions.setdefault(root(index), []).append(run)
    return list(regions.values())


def _describe(region: list[Run], pixels: bytes, width: int, height: int) -> Found:
    size = sum(end - start for _, start, end in region)
    stretches = [(3 * (y * width + start), 3 * (y * width + end)) for y, start, end in region]
    r, g, b = (sum(sum(pixels[a + c : z : 3]) for a, z in stretches) / size for c in range(3))
    hue = colorsys.rgb_to_hsv(r / 255, g / 255, b / 255)[0] * 360
    colour = min(HUES, key=lambda name: min(abs(hue - HUES[name]), 360 - abs(hue - HUES[name])))
    left, right = min(run[1] for run in region), max(run[2] for run in region) - 1
    top, bottom = region[0][0], region[-1][0]  # runs come row by row
    fill = size / ((right - left + 1) * (bottom - top + 1))
    shape = "square" if fill > 0.9 else "circle" if fill > 0.66 else "triangle"
    # sums of the columns and rows of every pixel (a run from s to e - 1 adds s + ... + e - 1)
    cx = sum((start + end - 1) * (end - start) // 2 for _, start, end in region) / size
    cy = sum(y * (end - start) for y, start, end in region) / size
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
