"""Visual question answering: drawn scenes of coloured shapes, a question about each, and ten
annotators' short answers.

Each scene is a 128x128 PNG drawn with Pillow (no anti-aliasing, so colours are exact): 1 to
4 large shapes in round 1, 3 to 6 smaller ones in round 2, one per cell of a 3x3 grid with
jitter, on a light or a dark background. Questions ask for a colour, a shape, a count, a
yes/no existence or a position. Round 2 is harder: more and smaller objects, shapes repeated
in other colours, counts by colour, near-miss existence questions, above/below relations,
and (four questions in ten) forms no lookup answers: the nearest neighbour's colour or
shape, "how many shapes are not red", "are there more circles than squares", "how many
shapes are above".

The ten answers mimic annotators: most give the right answer, a few a near one (a neighbour
colour, "ball" for a circle, a count off by one, a number written as a word), so VQA
accuracy's min(matches/3, 1) averaging has something to average. Image metadata
(``background``; ``crowding``: four objects or more) and the ``question_type`` are slice
columns.
"""

from __future__ import annotations

import base64
import io
import random
from dataclasses import dataclass

from common import Row
from PIL import Image, ImageDraw

ROWS_PER_FILE = 90
SIZE = 128
CELL = SIZE // 3
BACKGROUNDS = {"light": (236, 236, 230), "dark": (38, 40, 48)}
COLOURS = {
    "red": (214, 40, 40),
    "green": (46, 160, 67),
    "blue": (48, 96, 220),
    "yellow": (232, 196, 38),
    "purple": (146, 62, 186),
    "orange": (240, 128, 32),
}
NEAR_COLOUR = {"red": "orange", "orange": "red", "yellow": "orange", "green": "blue",
               "blue": "purple", "purple": "blue"}  # fmt: skip
SHAPES = ("circle", "square", "triangle")
OTHER_NAMES = {"circle": "ball", "square": "box", "triangle": "cone"}
NUMBER_WORDS = {0: "zero", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
QUESTION_TYPES = ("colour", "shape", "count", "exists", "position")


@dataclass(frozen=True)
class Shape:
    """One drawn object: its kind, colour name, grid cell and centre and half-size."""

    kind: str
    colour: str
    cell: tuple[int, int]  # (column, row)
    x: int
    y: int
    half: int


def build_vqa(round_name: str, rng: random.Random) -> list[Row]:
    """The rows of one round: question types balanced, backgrounds alternating."""
    hard = round_name != "r1"
    rows: list[Row] = []
    for i in range(ROWS_PER_FILE):
        background = ("light", "dark")[i % 2]
        kind = QUESTION_TYPES[(i // 2) % len(QUESTION_TYPES)]
        rows.append(_row(kind, background, hard, rng))
    return rows


def _row(kind: str, background: str, hard: bool, rng: random.Random) -> Row:
    shapes = _scene(hard, rng)
    while kind == "position" and all(s.cell[0] == 1 for s in shapes):
        shapes = _scene(hard, rng)  # a position question needs a shape off the middle
    question, answer = _ask(kind, shapes, hard, rng)
    return {
        "image": _png(shapes, background),
        "question": question,
        "answers": _annotators(kind, answer, rng),
        "question_type": kind,
        "background": background,
        "crowding": "crowded" if len(shapes) >= 4 else "sparse",
    }


def _scene(hard: bool, rng: random.Random) -> list[Shape]:
    count = rng.randint(3, 6) if hard else rng.randint(1, 4)
    cells = rng.sample([(c, r) for r in range(3) for c in range(3)], count)
    shapes: list[Shape] = []
    seen: set[tuple[str, str]] = set()
    for column, row in cells:
        kind, colour = rng.choice(SHAPES), rng.choice(list(COLOURS))
        while (kind, colour) in seen:  # each (shape, colour) once, so a question can name one
            kind, colour = rng.choice(SHAPES), rng.choice(list(COLOURS))
        seen.add((kind, colour))
        half = rng.randint(8, 11) if hard else rng.randint(12, 16)
        x = column * CELL + CELL // 2 + rng.randint(-3, 3)
        y = row * CELL + CELL // 2 + rng.randint(-3, 3)
        shapes.append(Shape(kind, colour, (column, row), x, y, half))
    return shapes


def _png(shapes: list[Shape], background: str) -> str:
    image = Image.new("RGB", (SIZE, SIZE), BACKGROUNDS[background])
    draw = ImageDraw.Draw(image)
    for s in shapes:
        fill = COLOURS[s.colour]
        box = (s.x - s.half, s.y - s.half, s.x + s.half, s.y + s.half)
        if s.kind == "circle":
            draw.ellipse(box, fill=fill)
        elif s.kind == "square":
            draw.rectangle(box, fill=fill)
        else:
            draw.polygon([(s.x, s.y - s.half), (s.x - s.half, s.y + s.half),
                          (s.x + s.half, s.y + s.half)], fill=fill)  # fmt: skip
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=9)
    return base64.b64encode(out.getvalue()).decode("ascii")


def _name(shape: Shape, shapes: list[Shape]) -> str:
    """The shortest words that pick ``shape`` out: 'the circle', or 'the red circle'."""
    if sum(s.kind == shape.kind for s in shapes) == 1:
        return f"the {shape.kind}"
    return f"the {shape.colour} {shape.kind}"


def _ask(kind: str, shapes: list[Shape], hard: bool, rng: random.Random) -> tuple[str, str]:
    target = rng.choice(shapes)
    if hard and rng.random() < 0.4:  # a form that needs a relation or a negation, not a lookup
        return _harder(kind, target, shapes, rng)
    if kind == "colour":
        if sum(s.kind == target.kind for s in shapes) == 1:
            return f"What color is the {target.kind}?", target.colour
        return f"What color is the {target.kind} in the {_where(target)}?", target.colour
    if kind == "shape":
        if sum(s.colour == target.colour for s in shapes) == 1:
            return f"What shape is the {target.colour} object?", target.kind
        return f"What shape is the {target.colour} object in the {_where(target)}?", target.kind
    if kind == "count":
        if hard and rng.random() < 0.5:
            colour = target.colour
            n = sum(s.colour == colour for s in shapes)
            return f"How many {colour} shapes are there?", str(n)
        n = sum(s.kind == target.kind for s in shapes)
        return f"How many {target.kind}s are there?", str(n)
    if kind == "exists":
        return _exists(shapes, hard, rng)
    return _position(shapes, hard, rng)


def _harder(kind: str, target: Shape, shapes: list[Shape], rng: random.Random) -> tuple[str, str]:
    """Round 2's harder forms of each question type."""
    nearest = _clearly_nearest(target, shapes)
    if kind == "colour" and nearest is not None:
        return f"What color is the shape nearest to {_name(target, shapes)}?", nearest.colour
    if kind == "shape" and nearest is not None:
        return f"What shape is {_name(target, shapes)}'s nearest neighbour?", nearest.kind
    if kind in ("colour", "shape"):
        return _ask(kind, shapes, False, rng)
    if kind == "count":
        n = sum(s.colour != target.colour for s in shapes)
        return f"How many shapes are not {target.colour}?", str(n)
    if kind == "exists":
        first, second = rng.sample(SHAPES, 2)
        more = sum(s.kind == first for s in shapes) > sum(s.kind == second for s in shapes)
        return f"Are there more {first}s than {second}s?", "yes" if more else "no"
    above = sum(s.y < target.y - CELL // 2 for s in shapes)
    return f"How many shapes are above {_name(target, shapes)}?", str(above)


def _clearly_nearest(target: Shape, shapes: list[Shape]) -> Shape | None:
    """The shape nearest to ``target`` when no other is within a fifth of its distance
    (annotators would disagree on a near tie), else None."""
    by_distance = sorted(
        ((s.x - target.x) ** 2 + (s.y - target.y) ** 2, i) for i, s in enumerate(shapes)
        if s is not target
    )  # fmt: skip
    if len(by_distance) > 1 and by_distance[0][0] * 1.44 > by_distance[1][0]:
        return None
    return shapes[by_distance[0][1]]


def _where(shape: Shape) -> str:
    column, row = shape.cell
    vertical = ("top", "middle", "bottom")[row]
    horizontal = ("left", "center", "right")[column]
    return (
        "center"
        if (vertical, horizontal) == ("middle", "center")
        else (f"{vertical} {horizontal}" if vertical != "middle" else f"middle {horizontal}")
    )


def _exists(shapes: list[Shape], hard: bool, rng: random.Random) -> tuple[str, str]:
    present = {(s.colour, s.kind) for s in shapes}
    if rng.random() < 0.5:
        colour, kind = rng.choice(sorted(present))
        return f"Is there a {colour} {kind}?", "yes"
    if hard:  # a near miss: the colour and the shape are both in the scene, not together
        colours, kinds = {c for c, _ in present}, {k for _, k in present}
        misses = sorted((c, k) for c in colours for k in kinds if (c, k) not in present)
        if misses:
            colour, kind = rng.choice(misses)
            return f"Is there a {colour} {kind}?", "no"
    absent = sorted((c, k) for c in COLOURS for k in SHAPES if (c, k) not in present)
    colour, kind = rng.choice(absent)
    return f"Is there a {colour} {kind}?", "no"


def _position(shapes: list[Shape], hard: bool, rng: random.Random) -> tuple[str, str]:
    pairs = [(a, b) for a in shapes for b in shapes if a.cell[1] != b.cell[1]]
    if hard and pairs:
        target, other = rng.choice(pairs)
        answer = "above" if target.y < other.y else "below"
        return f"Is {_name(target, shapes)} above or below {_name(other, shapes)}?", answer
    # only a shape outside the middle column is plainly on one side
    target = rng.choice([s for s in shapes if s.cell[0] != 1])
    answer = "left" if target.x < SIZE // 2 else "right"
    return f"Is {_name(target, shapes)} on the left or the right?", answer


def _annotators(kind: str, answer: str, rng: random.Random) -> list[str]:
    """Ten answers: the right one from most annotators, a near one from up to three."""
    answers = [answer] * 10
    for i in rng.sample(range(10), rng.choice((0, 1, 1, 2, 3))):
        answers[i] = _near(kind, answer, rng)
    return answers


def _near(kind: str, answer: str, rng: random.Random) -> str:
    if answer in NEAR_COLOUR:
        return NEAR_COLOUR[answer]
    if answer in OTHER_NAMES:
        return OTHER_NAMES[answer]
    if answer.isdigit():
        n = int(answer)
        return NUMBER_WORDS[n] if rng.random() < 0.5 else str(max(0, n + rng.choice((-1, 1))))
    if answer in ("yes", "no"):
        return {"yes": "no", "no": "yes"}[answer]
    return {"left": "right", "right": "left", "above": "below", "below": "above"}[answer]
