"""The VQA example model finds the objects a plain per-pixel reading finds: its labelling by
runs (Pillow's band operations, then runs of saturated pixels joined row to row) is a speed
change only, checked on every shipped picture and on each image perturbation of a sample."""

from __future__ import annotations

import base64
import colorsys
import functools
import importlib.util
import io
import sys
from pathlib import Path
from types import ModuleType

import pytest
from PIL import Image, ImageFilter

from configs.paths import CONFIG_DIR
from evaluator.inputs.datasets import load_examples
from evaluator.tasks import load_tasks
from perturbations.perturbation import get_perturbation

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
IMAGE_PERTURBATIONS = ("image-noise", "image-blur", "image-jpeg", "image-brightness")


def _model() -> ModuleType:
    sys.path.insert(0, str(MODELS))
    spec = importlib.util.spec_from_file_location(
        "vqa_shapes_model", MODELS / "vqa_shapes" / "model.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


MODEL = _model()


def reference_objects(image_b64: str) -> list[object]:
    """The model's reading written pixel by pixel: a 4-connected flood fill of the pixels
    whose channels spread more than 70 apart, regions in the order of their first pixel."""
    image = Image.open(io.BytesIO(base64.b64decode(image_b64))).convert("RGB")
    image.thumbnail((MODEL.SIDE, MODEL.SIDE))
    image = image.filter(ImageFilter.MedianFilter(3))
    width, height = image.size
    pixels = list(image.getdata())
    mask = [max(p) - min(p) > 70 for p in pixels]
    seen = [False] * len(mask)
    found = []
    for first, on in enumerate(mask):
        if not on or seen[first]:
            continue
        seen[first] = True
        stack, region = [first], []
        while stack:
            i = stack.pop()
            region.append(i)
            x, y = i % width, i // width
            for j, inside in ((i - 1, x > 0), (i + 1, x < width - 1), (i - width, y > 0),
                              (i + width, y < height - 1)):  # fmt: skip
                if inside and mask[j] and not seen[j]:
                    seen[j] = True
                    stack.append(j)
        if len(region) >= MODEL.MIN_PIXELS:
            found.append(_describe(region, pixels, width, height))
    return found


def _describe(region: list[int], pixels: list, width: int, height: int) -> object:
    xs = [i % width for i in region]
    ys = [i // width for i in region]
    r, g, b = (sum(pixels[i][c] for i in region) / len(region) for c in range(3))
    hue = colorsys.rgb_to_hsv(r / 255, g / 255, b / 255)[0] * 360
    hues = MODEL.HUES
    colour = min(hues, key=lambda name: min(abs(hue - hues[name]), 360 - abs(hue - hues[name])))
    fill = len(region) / ((max(xs) - min(xs) + 1) * (max(ys) - min(ys) + 1))
    shape = "square" if fill > 0.9 else "circle" if fill > 0.66 else "triangle"
    cx, cy = sum(xs) / len(xs), sum(ys) / len(ys)
    cell = (min(2, int(3 * cx / width)), min(2, int(3 * cy / height)))
    return MODEL.Found(colour, shape, cx / width, cy / height, cell)


@functools.cache
def pictures() -> list[str]:
    """Every picture the task ships (read when a test first asks: not while collecting)."""
    task = load_tasks(CONFIG_DIR / "tasks")["vqa"]
    return [
        str(example.inputs["image"])
        for round_spec in task.rounds
        for dataset in round_spec.datasets
        for example in load_examples(task, dataset, CONFIG_DIR)
    ]


@pytest.mark.slow  # ~3 s: the reference reads every picture pixel by pixel
def test_every_shipped_picture_gives_the_objects_a_pixel_by_pixel_reading_gives() -> None:
    assert len(pictures()) >= 180
    for number, picture in enumerate(pictures()):
        assert MODEL.objects(picture) == reference_objects(picture), number


@pytest.mark.slow
@pytest.mark.parametrize("name", IMAGE_PERTURBATIONS)
def test_perturbed_pictures_give_the_same_objects_too(name: str) -> None:
    perturbation = get_perturbation(name)
    found_any = False
    for number, picture in enumerate(pictures()[::6]):
        changed = perturbation.apply(picture, seed=number)
        expected = reference_objects(changed)
        found_any = found_any or bool(expected)
        assert MODEL.objects(changed) == expected, (name, number)
    assert found_any


DRAWN = """
#.#..#
#.#...
#.#.#.
###..#
"""


def test_runs_that_share_a_column_join_and_corners_alone_do_not() -> None:
    """The U is one object (its columns meet only on the bottom row); the pixels that touch
    another only at a corner are objects of their own; objects come by their first pixel."""
    rows = DRAWN.split()
    width, height = len(rows[0]), len(rows)
    mask = bytes(255 if cell == "#" else 0 for row in rows for cell in row)
    regions = MODEL._regions(mask, width, height)
    assert [
        sorted((y, x) for y, start, end in region for x in range(start, end)) for region in regions
    ] == [
        sorted([(0, 0), (1, 0), (2, 0), (3, 0), (3, 1), (3, 2), (2, 2), (1, 2), (0, 2)]),
        [(0, 5)],
        [(2, 4)],
        [(3, 5)],
    ]
