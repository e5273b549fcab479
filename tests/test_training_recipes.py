"""Paper recipes (``recipes/*.toml``) and ``rankkit train --config / --print-config``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from training_helpers import tiny_backbone, write_groups

from rankkit.errors import RankkitError
from rankkit.models.backbone import default_backbone_path
from rankkit.models.checkpoint import read_meta
from rankkit.models.documents.matrank_split import MatRankSplitConfig
from rankkit.training import recipes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

RECIPES = sorted((Path(__file__).parent.parent / "recipes").glob("*.toml"))
#: Recipes the packaged MiniLM on a CPU cannot run as written, and the message each is refused with.
REFUSED = {
    "matrank-msmarco.toml": "--precision fp16 needs a CUDA device",
    "matrank-wikiqa.toml": "--precision fp16 needs a CUDA device",
    "matrank-semeval.toml": "--precision fp16 needs a CUDA device",
    "matrank-split-msmarco-doc.toml": "--precision fp16 needs a CUDA device",
    "set-encoder-stage2.toml": "needs --init-checkpoint: the stage-1 Set-Encoder checkpoint",
    "parade-robust04-kd.toml": "needs --teacher-checkpoint: the teacher, a PARADE-Transformer",
}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("recipes")
    return {"backbone": tiny_backbone(root / "tiny", dropout=0.0),
            "groups": write_groups(root / "groups.jsonl", count=8, negatives=3)}


def test_the_paper_experiments_have_recipes() -> None:
    assert {p.name for p in RECIPES} == {
        "repbert-msmarco.toml", "densetrans-quora.toml", "matrank-msmarco.toml", "matrank-wikiqa.toml",
        "matrank-semeval.toml", "set-encoder-stage1.toml", "set-encoder-stage2.toml", "parade-robust04.toml",
        "parade-robust04-kd.toml", "matrank-split-msmarco-doc.toml",
        "dl19-cpu.toml"}  # rankkit's own CPU recipe (issue 18), not a paper's


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_recipe_loads_prints_and_round_trips(cli: Any, tmp_path: Path, path: Path) -> None:
    recipe = recipes.load_recipe(path, recipes.train_kinds())
    assert recipe.paper and recipe.experiment and recipe.backbone
    printed = cli("train", "--config", path, "--print-config")
    assert printed.code == 0, printed.stderr
    merged = tomllib.loads(printed.stdout)
    assert merged["train"]["model"] == recipe.settings["model"]
    for key, value in recipe.settings.items():
        assert merged["train"][key] == (value if not isinstance(value, Path) else str(value)), key
    again = tmp_path / "printed.toml"
    again.write_text(printed.stdout, encoding="utf-8")
    assert cli("train", "--config", again, "--print-config").stdout.splitlines()[1:] == printed.stdout.splitlines()[1:]


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_every_setting_sits_under_its_source_comment(path: Path) -> None:
    """Each [train] key follows a comment (the paper's sentence, or why the paper gives none)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    section = None
    for n, line in enumerate(lines):
        if line.startswith("["):
            section = line.strip()
            continue
        if section == "[train]" and line and not line.startswith(("#", "model =")):  # the model is the experiment
            above = n - 1
            while above >= 0 and lines[above] and not lines[above].startswith(("#", "[")):
                above -= 1  # a block of settings shares the comment above it
            assert lines[above].startswith("#"), f"{path.name}:{n + 1}: {line!r} has no source comment"


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_recipe_runs_or_is_refused_with_its_reason(cli: Any, data: dict[str, Path], tmp_path: Path, path: Path) -> None:
    """On this CPU, with the packaged MiniLM: refused in one line where the paper's setting cannot
    run; otherwise the command gets as far as reading the training data."""
    result = cli("train", "--config", path, "--train", tmp_path / "absent.jsonl", "--output", tmp_path / "o",
                 "--device", "cpu")
    assert result.code == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    expected = REFUSED.get(path.name, "absent.jsonl: no such file")
    assert expected in result.stderr


def test_matrank_split_paper_pieces_fit_the_backbone() -> None:
    """--piece-length counts the whole piece input, so the paper's L=512 fits 512 positions."""
    config = json.loads((default_backbone_path() / "config.json").read_text())
    path = next(p for p in RECIPES if p.name == "matrank-split-msmarco-doc.toml")
    recipe = recipes.load_recipe(path, recipes.train_kinds())
    assert recipe.settings["piece_length"] == config["max_position_embeddings"] == 512
    assert recipe.cannot_run is None
    MatRankSplitConfig(piece_length=512, max_pieces=5).resolve()


def test_cannot_run_is_refused_with_its_reason_and_lifted_by_overrides(tmp_path: Path) -> None:
    path = tmp_path / "long.toml"
    path.write_text('[recipe]\npaper = "p"\nexperiment = "e"\nbackbone = "b"\n'
                    'cannot_run = "pieces longer than the backbone"\ncannot_run_settings = ["piece_length"]\n'
                    '[train]\nmodel = "matrank-split"\npiece_length = 1024\n', encoding="utf-8")
    recipe = recipes.load_recipe(path, recipes.train_kinds())
    with pytest.raises(RankkitError, match="cannot run with the packaged all-MiniLM-L6-v2: pieces longer"):
        recipes.check_runnable(recipe, {**recipe.settings, "backbone": None})
    recipes.check_runnable(recipe, {**recipe.settings, "backbone": None, "piece_length": 512})
    recipes.check_runnable(recipe, {**recipe.settings, "backbone": Path("/models/longformer")})


def test_flags_override_the_recipe(cli: Any, data: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "wikiqa"
    result = cli("train", "--config", "recipes/matrank-wikiqa.toml", "--train", data["groups"], "--output", out,
                 "--backbone", data["backbone"], "--precision", "fp32", "--batch-size", 2, "--group-size", 3,
                 "--max-steps", 1, "--device", "cpu", "--hidden", 8)
    assert result.code == 0, result.stderr
    meta = read_meta(out)
    training = meta["training"]
    assert (training["optimizer"], training["lr"], training["precision"]) == ("adafactor", 1e-5, "fp32")
    assert (training["batch_size"], training["group_size"], training["loss"]) == (2, 3, "matrank")
    assert meta["hparams"]["hidden"] == 8 and meta["hparams"]["encoder"] == "cross"


@pytest.mark.parametrize(("text", "message"), [
    ("[train]\nmodel = 'mono'\nbatchsize = 3\n", "unknown key 'batchsize' in [train]"),
    ("[training]\nmodel = 'mono'\n", "unknown section or key 'training'"),
    ("[recipe]\nauthor = 'x'\n[train]\nmodel = 'mono'\n", "unknown key 'author' in [recipe]"),
    ("[train]\nmodel = 'mono'\nbatch_size = '8'\n", "batch_size = \"8\": expected an integer"),
    ("[train]\nmodel = 'mono'\nwindow = 8\n", "key 'window' is not a setting of model mono"),
    ("[train]\nmodel = 'mono'\nlr = = 3\n", "not valid TOML"),
    ("[train]\nmodel = 'mono'\nencoder = 'tri'\n", "encoder"),
])
def test_bad_config_files_are_one_line_errors(cli: Any, tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    result = cli("train", "--config", path, "--print-config")
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert message in result.stderr
    if "window" not in message and "encoder" not in message:
        assert str(path) in result.stderr


def test_missing_required_settings(cli: Any, tmp_path: Path) -> None:
    result = cli("train", "--print-config")
    assert result.code == 2 and "--model is required" in result.stderr
    result = cli("train", "--model", "mono", "--output", tmp_path / "o")
    assert result.code == 2 and "--train is required" in result.stderr
