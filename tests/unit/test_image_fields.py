"""Image input fields: the kind in the task spec, the gate every image passes, the image
perturbations, and which fields each kind of perturbation may change."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from PIL import Image

from configs.schema import ConfigError
from configs.vocabulary.examples import Example
from configs.vocabulary.images import ImageError, check_image
from evaluator.adversary import AdversarySettings, candidates
from evaluator.inputs.datasets import DatasetError, parse_lines
from evaluator.tasks import load_task, load_tasks
from perturbations.perturbation import example_seed, get_perturbation, perturb_example
from tests.conftest import make_config_dir

IMAGE_PERTURBATIONS = ("image-noise", "image-blur", "image-jpeg", "image-brightness")


def picture(fmt: str = "PNG", size: tuple[int, int] = (32, 24), **save: Any) -> str:
    image = Image.new("RGB", size, (200, 40, 40))
    image.paste((40, 40, 200), (4, 4, 14, 14))
    out = io.BytesIO()
    image.save(out, format=fmt, **save)
    return base64.b64encode(out.getvalue()).decode()


def pixels(b64: str) -> np.ndarray:
    with Image.open(io.BytesIO(base64.b64decode(b64))) as image:
        return np.asarray(image.convert("RGB"), dtype=np.int16)


# -- the gate ---------------------------------------------------------------------------------
def test_png_and_jpeg_pass_with_their_format_and_size() -> None:
    png, jpeg = check_image(picture(), 10_000), check_image(picture("JPEG"), 10_000)
    assert (png.format, png.width, png.height, png.media_type) == ("PNG", 32, 24, "image/png")
    assert (jpeg.format, jpeg.media_type) == ("JPEG", "image/jpeg")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "non-empty base64"),
        ("data:image/png;base64," + picture(), "without a 'data:' URI"),
        ("not base64 at all!", "not valid base64"),
        (picture("GIF"), "neither PNG nor JPEG"),
        (base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 40).decode(), "damaged or truncated"),
        (picture()[:-40] + "A" * 40, "damaged or truncated"),
        (picture(size=(4097, 1)), "each side must be 1 to 4096"),
    ],
)
def test_every_bad_image_gets_a_reason(text: str, problem: str) -> None:
    with pytest.raises(ImageError, match=problem):
        check_image(text, 1_000_000)


def test_an_oversized_image_is_refused_by_its_length_before_it_is_decoded(monkeypatch) -> None:
    decoded: list[str] = []
    monkeypatch.setattr(
        "configs.vocabulary.images.base64.b64decode", lambda *a, **k: decoded.append("x")
    )
    with pytest.raises(ImageError, match="over the task's limit of 1000 bytes"):
        check_image("A" * 4000, 1000)
    assert decoded == []


# -- the spec ---------------------------------------------------------------------------------
def vqa_spec() -> dict[str, Any]:
    return yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "configs" / "tasks" / "vqa.yaml").read_text()
    )


def load_spec(tmp_path: Path, spec: dict[str, Any]):
    config_dir = make_config_dir(tmp_path)
    data = Path(__file__).resolve().parents[2] / "configs" / "datasets" / "vqa"
    (config_dir / "datasets" / "vqa").mkdir(parents=True, exist_ok=True)
    for rnd in ("r1", "r2"):
        (config_dir / "datasets" / "vqa" / f"{rnd}.jsonl").write_bytes(
            (data / f"{rnd}.jsonl").read_bytes()
        )
    path = config_dir / "tasks" / "vqa.yaml"
    path.write_text(yaml.safe_dump(spec))
    return load_task(path, config_dir)


def test_the_shipped_vqa_task_declares_its_image_field() -> None:
    task = load_tasks()["vqa"]
    assert task.image_fields == ("image",) and task.text_fields == ("question",)
    assert task.public_dict()["image_fields"] == ["image"]
    assert task.fields_to_perturb("image", False) == ("image",)
    assert task.fields_to_perturb("text", True) == ("question",)


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        ({"input_fields": [{"name": "image", "kind": "video"}, "question"]},
         "input_fields[0].kind", "must be one of text, image"),
        ({"input_fields": [{"name": "image", "kind": "image", "size": 3}, "question"]},
         "input_fields[0]", "takes only 'name' and 'kind'"),
        ({"input_fields": [{"name": "image", "kind": "image"}], "perturb_fields": ["image"]},
         "input_fields", "at least one text field"),
        ({"input_fields": [{"name": "image", "kind": "image"}, {"name": "image"}]},
         "input_fields", "has duplicates"),
        ({"perturb_fields": ["question"]},
         "perturbations.robustness[0].name", "'image-noise' changes image fields"),
        ({"input_fields": [{"name": "answers", "kind": "image"}, "question"]},
         "input_fields", "is the gold or the uid"),
    ],
)  # fmt: skip
def test_field_kinds_are_checked_and_the_error_names_the_field(
    tmp_path: Path, change: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(ConfigError, match=problem) as caught:
        load_spec(tmp_path, {**vqa_spec(), **change})
    assert caught.value.field == field


def test_a_text_task_cannot_list_an_image_perturbation(tmp_path: Path) -> None:
    spec = vqa_spec()
    spec["input_fields"] = ["image", "question"]  # both text now
    with pytest.raises(ConfigError, match="'image-noise' changes image fields, and the task"):
        load_spec(tmp_path, spec)


# -- rows -------------------------------------------------------------------------------------
def row(**change: Any) -> str:
    import json

    base = {"uid": "u1", "image": picture(), "question": "What color is it?",
            "answers": ["red"] * 3, "question_type": "colour", "background": "light",
            "crowding": "sparse"}  # fmt: skip
    return json.dumps({**base, **change})


def test_a_row_with_a_bad_or_oversized_image_is_refused_with_line_and_field() -> None:
    task = load_tasks()["vqa"]
    assert parse_lines(task, [row()], "rows")[0].inputs["image"] == picture()
    with pytest.raises(DatasetError, match=r"rows:1: field 'image': .*neither PNG nor JPEG"):
        parse_lines(task, [row(image=picture("GIF"))], "rows")
    big = picture(size=(400, 400), compress_level=0)
    assert len(base64.b64decode(big)) > task.limits.max_input_image_bytes
    with pytest.raises(DatasetError, match=r"rows:1: field 'image': .*over the task's limit"):
        parse_lines(task, [row(image=big)], "rows")


# -- perturbations ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", IMAGE_PERTURBATIONS)
def test_image_perturbations_are_seeded_change_the_picture_and_stay_valid(name: str) -> None:
    perturbation = get_perturbation(name)
    original = picture(size=(64, 64))
    first, again = perturbation.apply(original, 7), perturbation.apply(original, 7)
    other = perturbation.apply(original, 8)
    assert first == again and first != original and first != other
    checked = check_image(first, 1_000_000)
    assert (checked.width, checked.height) == (64, 64)
    assert checked.format == ("JPEG" if name == "image-jpeg" else "PNG")
    difference = np.abs(pixels(first) - pixels(original)).mean()
    assert 0 < difference < 60  # visibly changed, still the same picture


def test_brightness_scales_and_noise_keeps_the_mean() -> None:
    flat = base64.b64encode(_flat_png(100)).decode()
    darker_or_brighter = pixels(get_perturbation("image-brightness").apply(flat, 1)).mean() / 100
    assert 0.6 <= darker_or_brighter <= 0.8 or 1.2 <= darker_or_brighter <= 1.4
    noisy = pixels(get_perturbation("image-noise").apply(flat, 1))
    assert abs(noisy.mean() - 100) < 1.5 and 6 <= noisy.std() <= 16.5


def _flat_png(level: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (96, 96), (level, level, level)).save(out, format="PNG")
    return out.getvalue()


def test_each_kind_of_perturbation_changes_only_fields_of_its_kind() -> None:
    task = load_tasks()["vqa"]
    example = Example("u1", {"image": picture(), "question": "What color is the square?"}, "red")
    noise, typo = get_perturbation("image-noise"), get_perturbation("typo")
    noisy = perturb_example(example, noise, 3, task.fields_to_perturb("image", False))
    assert noisy.inputs["question"] == example.inputs["question"]
    assert noisy.inputs["image"] != example.inputs["image"]
    typed = perturb_example(example, typo, 3, task.fields_to_perturb("text", False))
    assert typed.inputs["image"] == example.inputs["image"]


def test_the_adversary_edits_text_fields_only_and_never_the_image() -> None:
    task = load_tasks()["vqa"]
    example = Example(
        "u1", {"image": picture(), "question": "What color is the square on the left?"}, "red"
    )
    found = candidates(task, example, AdversarySettings(name_swaps=True, edit_budget=3))
    assert found, "the question has words a typo can change"
    assert all(c.example.inputs["image"] == example.inputs["image"] for c in found)
    assert any(c.example.inputs["question"] != example.inputs["question"] for c in found)


def test_per_example_seeds_give_each_picture_its_own_noise() -> None:
    noise = get_perturbation("image-noise")
    original = picture(size=(48, 48))
    a = noise.apply(original, example_seed("a", 0))
    b = noise.apply(original, example_seed("b", 0))
    assert a != b


# -- found by an outside trial ----------------------------------------------------------------
def test_a_truncated_jpeg_is_refused_though_its_header_reads() -> None:
    whole = base64.b64decode(picture("JPEG", size=(64, 64)))
    half = base64.b64encode(whole[: len(whole) // 2]).decode()
    with pytest.raises(ImageError, match="damaged or truncated"):
        check_image(half, 1_000_000)


def _png_claiming(width: int, height: int) -> str:
    """A 1x1 PNG whose header claims ``width`` x ``height`` (CRC fixed, data too short)."""
    import struct
    import zlib

    raw = bytearray(base64.b64decode(picture(size=(1, 1))))
    ihdr = raw.index(b"IHDR")
    raw[ihdr + 4 : ihdr + 12] = struct.pack(">II", width, height)
    crc = zlib.crc32(bytes(raw[ihdr : ihdr + 17]))
    raw[ihdr + 17 : ihdr + 21] = struct.pack(">I", crc)
    return base64.b64encode(bytes(raw)).decode()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (_png_claiming(100_000, 100_000), "too many pixels|each side must be 1 to 4096"),
        (_png_claiming(4096, 4096), r"at most 4194304 in all"),
    ],
)
def test_a_bomb_is_refused_for_its_size_not_called_damaged(text: str, problem: str) -> None:
    with pytest.raises(ImageError, match=problem):
        check_image(text, 1_000_000)


def photo(side: int) -> str:
    """A smooth gradient (a photograph's PNG compresses well until noise is added)."""
    ramp = np.linspace(0, 255, side, dtype=np.float32)
    rgb = np.stack([np.add.outer(ramp, ramp) / 2, np.tile(ramp, (side, 1)),
                    np.tile(ramp[:, None], (1, side))], axis=-1)  # fmt: skip
    out = io.BytesIO()
    Image.fromarray(rgb.astype(np.uint8)).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode()


def test_a_noisy_photograph_stays_within_its_originals_budget() -> None:
    original = photo(600)
    noisy = get_perturbation("image-noise").apply(original, 5)
    budget = max(len(base64.b64decode(original)), 64 * 1024)
    checked = check_image(noisy, budget)
    assert checked.format == "JPEG" and (checked.width, checked.height) == (600, 600)
    small = picture(size=(64, 64))  # a flat drawing: its noisy PNG fits the 64 KiB floor
    assert check_image(get_perturbation("image-noise").apply(small, 5), 65536).format == "PNG"


def test_a_perturbed_picture_over_the_tasks_limit_stops_the_run_naming_it() -> None:
    from dataclasses import replace

    from evaluator.inputs.perturbed_sets import check_perturbed_images

    task = load_tasks()["vqa"]
    tight = replace(task, limits=replace(task.limits, max_input_image_bytes=2000))
    noisy = get_perturbation("image-noise").apply(picture(size=(64, 64)), 1)
    example = Example("u7", {"image": noisy, "question": "What color?"}, "red")
    with pytest.raises(DatasetError, match=r"image-noise made example 'u7'.*'image'.*limit"):
        check_perturbed_images(tight, "image-noise", [example], ["image"])
    check_perturbed_images(task, "image-noise", [example], ["image"])  # within 256 KiB


def test_an_image_field_is_no_slice_column(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is an image field, not a group label") as caught:
        load_spec(tmp_path, {**vqa_spec(), "slices": ["image"]})
    assert caught.value.field == "slices"


def test_a_stored_picture_becomes_a_data_address_only_when_it_is_plain_base64() -> None:
    from configs.vocabulary.images import data_uri

    png, jpeg = picture(), picture("JPEG")
    assert data_uri(png) == f"data:image/png;base64,{png}"
    assert data_uri(jpeg) == f"data:image/jpeg;base64,{jpeg}"
    assert data_uri(png + '"><script>') == "" and data_uri(png[:20] + "é") == ""
    assert data_uri(picture("GIF")) == "" and data_uri(None) == ""
