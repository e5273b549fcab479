"""Paper recipes (``recipes/*.toml``) and ``rankkit train --config / --print-config``."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
from training_helpers import WORDS, tiny_backbone, write_groups

from rankkit.errors import RankkitError
from rankkit.models.backbone import default_backbone_path, write_tiny_backbone
from rankkit.models.checkpoint import read_meta
from rankkit.models.documents.configs import MatRankSplitConfig
from rankkit.training import recipes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

RECIPES = sorted((Path(__file__).parents[2] / "recipes").glob("*.toml"))
#: Recipes the packaged MiniLM on a CPU cannot run as written, and the message each is refused with.
REFUSED = {
    "matrank-msmarco.toml": "--precision fp16 needs a CUDA device",
    "matrank-wikiqa.toml": "--precision fp16 needs a CUDA device",
    "matrank-semeval.toml": "--precision fp16 needs a CUDA device",
    "matrank-split-msmarco-doc.toml": "--precision fp16 needs a CUDA device",
    "set-encoder-stage2.toml": "needs --init-checkpoint: the stage-1 Set-Encoder checkpoint",
    "parade-robust04-kd.toml": "needs --teacher-checkpoint: the teacher, a PARADE-Transformer on BERT-Base",
    "parade-robust04-kd-electra.toml": "needs --teacher-checkpoint: the teacher, a PARADE-Transformer on ELECTRA-base",
}
#: Settings the papers often leave out (issue 37): each recipe sets it in [train] or says in [recipe.from_rankkit]
#: that rankkit's value applies.
STATED_OR_FROM_RANKKIT = ("optimizer", "lr", "weight_decay", "warmup", "max_grad_norm", "precision", "seed")
#: Groups of settings of which one stated in [train] (or named in from_rankkit) covers the group.
STATED_OR_FROM_RANKKIT_GROUPS = (("epochs", "max_steps"), ("lr_schedule", "lr_decay_to", "lr_decay_rate"))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("recipes")
    return {"backbone": tiny_backbone(root / "tiny", dropout=0.0),
            "groups": write_groups(root / "groups.jsonl", count=8, negatives=3)}


def test_the_paper_experiments_have_recipes() -> None:
    assert {p.name for p in RECIPES} == {
        "repbert-msmarco.toml", "densetrans-quora.toml", "matrank-msmarco.toml", "matrank-wikiqa.toml",
        "matrank-semeval.toml", "set-encoder-stage1.toml", "set-encoder-stage2.toml", "parade-robust04.toml",
        "parade-robust04-bert-base.toml", "parade-robust04-kd.toml", "matrank-split-msmarco-doc.toml",
        "parade-robust04-kd-electra.toml",  # rankkit's alternative teacher (ELECTRA), not the paper's
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


# -- every recipe trains, as written -----------------------------------------------------------------

#: What a recipe's [recipe.requires] are given: the checkpoint another recipe writes (trained first).
TRAINED_FIRST = {
    ("set-encoder-stage2.toml", "init_checkpoint"): "set-encoder-stage1.toml",
    ("parade-robust04-kd.toml", "teacher_checkpoint"): "parade-robust04-bert-base.toml",
    ("parade-robust04-kd-electra.toml", "teacher_checkpoint"): "parade-robust04.toml",
}
#: rankkit.json's record of a [train] setting: ("training", key) or ("hparams", key).
RECORDED = {key: "training" for key in (
    "batch_size", "group_size", "grad_accum", "lr", "optimizer", "weight_decay", "max_grad_norm", "seed", "loss",
    "precision", "gradient_checkpointing", "alpha", "distillation", "whole_lists", "lr_schedule", "lr_decay_to",
    "lr_decay_rate", "lr_decay_every")}
#: Settings a one-step run on this machine replaces, and with what (the rest runs as written).
STEP_OVERRIDES = ("max_steps", "epochs", "device", "backbone", "precision")


def recipe_groups(path: Path, *, count: int, candidates: int, seed: int = 0) -> Path:
    """``count`` groups of ``candidates`` short passages each, every candidate with a teacher score
    (``rankkit mine --teacher-list`` groups, so whole-list recipes have their teacher): 1-3 positives
    per query, graded, the rest negatives."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as out:
        for n in range(count):
            words = rng.sample(WORDS, 2)
            relevant = rng.randint(1, 3)
            pos = [{"docid": f"q{n}p{j}", "text": " ".join([*words, *rng.sample(WORDS, 4)]), "label": 1 + j % 2,
                    "score": float(candidates - j)} for j in range(relevant)]
            neg = [{"docid": f"q{n}n{j}", "text": " ".join(rng.sample(WORDS, 6)), "score": float(candidates - relevant - j)}
                   for j in range(candidates - relevant)]
            out.write(json.dumps({"qid": f"q{n}", "query": " ".join(words), "pos": pos, "neg": neg}) + "\n")
    return path


@pytest.fixture(scope="module")
def step_data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("recipe-steps")
    # 512 positions: the paper recipes' inputs (MatRank-Split's 512-token pieces) fit, as on BERT-base.
    backbone = write_tiny_backbone(root / "tiny512", words=WORDS, hidden=24, layers=2, heads=2, intermediate=48,
                                   dropout=0.0, max_positions=512)
    # Enough groups for the largest global batch (RepBERT: 26 x 2) and candidates for the largest group (100).
    return {"root": root, "backbone": backbone, "groups": recipe_groups(root / "groups.jsonl", count=56, candidates=100)}


_TRAINED: dict[str, Path] = {}


def train_one_step(cli: Callable[..., Any], data: dict[str, Path], name: str) -> Path:
    """Train recipe ``name`` for one step on the tiny data with the inputs it requires (recipes it
    depends on first); the checkpoint folder, cached for the module."""
    if name in _TRAINED:
        return _TRAINED[name]
    path = next(p for p in RECIPES if p.name == name)
    recipe = recipes.load_recipe(path, recipes.train_kinds())
    inputs: list[Any] = []
    for key in recipe.requires:
        assert (name, key) in TRAINED_FIRST, f"{name} requires {key}: give it in TRAINED_FIRST"
        inputs += [f"--{key.replace('_', '-')}", train_one_step(cli, data, TRAINED_FIRST[(name, key)])]
    precision = recipe.settings.get("precision", "fp32")
    if precision == "fp16" and not torch.cuda.is_available():
        precision = "bf16"  # fp16 autocast needs CUDA: the same recipe, in the CPU's half precision
    out = data["root"] / name.removesuffix(".toml")
    result = cli("train", "--config", path, "--train", data["groups"], "--output", out, "--backbone", data["backbone"],
                 "--max-steps", 1, "--device", "cuda" if torch.cuda.is_available() else "cpu",
                 "--precision", precision, *inputs)
    assert result.code == 0, f"{name}: {result.stderr}"
    _TRAINED[name] = out
    return out


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_every_recipe_trains_one_step_as_written(cli: Any, step_data: dict[str, Path], path: Path) -> None:
    """Each recipe, with only the machine's settings replaced (steps, device, backbone, fp16 on a CPU)
    and the inputs its [recipe.requires] names, trains, and its checkpoint records the recipe's settings."""
    out = train_one_step(cli, step_data, path.name)
    recipe = recipes.load_recipe(path, recipes.train_kinds())
    meta = read_meta(out)
    assert meta["steps"] == 1
    for key, value in recipe.settings.items():
        if key in STEP_OVERRIDES or key == "model":
            continue
        if key == "warmup" and value >= 1:  # a number of steps (a fraction depends on the replaced step count)
            assert meta["training"]["warmup_steps"] == int(value)
            continue
        where = meta[RECORDED[key]] if key in RECORDED else meta["hparams"]
        if key in where:
            assert where[key] == value, f"{path.name}: {key} = {where[key]!r}, the recipe says {value!r}"
        else:
            assert key in ("warmup",), f"{path.name}: {key} is not recorded in rankkit.json"
    for key in recipe.requires:
        assert meta["training"][key] is not None


def test_set_encoder_recipes_are_table_1s_headline_row() -> None:
    """Stage 1: HN (8) with LCE; stage 2: whole teacher lists of 100 with RankNet, from stage 1."""
    first = recipes.load_recipe(Path("recipes/set-encoder-stage1.toml"), recipes.train_kinds()).settings
    second = recipes.load_recipe(Path("recipes/set-encoder-stage2.toml"), recipes.train_kinds())
    assert (first["group_size"], first["loss"], first.get("whole_lists", False)) == (8, "listwise-ce", False)
    assert (second.settings["group_size"], second.settings["loss"], second.settings["whole_lists"]) == (100, "ranknet", True)
    assert "init_checkpoint" in second.requires
    for settings in (first, second.settings):  # the authors' configs: lr 1e-5, 256-token pairs, constant rate
        assert settings["lr"] == 1e-5 and settings["max_query_length"] + settings["max_doc_length"] + 3 == 256
        assert (settings["warmup"], settings["lr_decay_to"]) == (0, 1.0)
        assert settings["freeze_position_embeddings"] is True  # set-encoder.yaml: freeze_position_embeddings: true


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
    ("[recipe.from_rankkit]\nlrr = 'x'\n[train]\nmodel = 'mono'\n", "unknown key 'lrr' in [recipe.from_rankkit]"),
    ("[recipe.from_rankkit]\nlr = 3\n[train]\nmodel = 'mono'\n", "[recipe.from_rankkit] must map setting names"),
    ("[recipe]\nfirst_stage = 3\n[train]\nmodel = 'mono'\n", "[recipe] first_stage must be a string"),
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


@pytest.mark.parametrize("name", ["parade-robust04.toml", "parade-robust04-bert-base.toml", "parade-robust04-kd.toml",
                                  "parade-robust04-kd-electra.toml"])
def test_parade_recipe_pairs_fit_256_tokens(step_data: dict[str, Path], name: str) -> None:
    """PARADE §4.2: "The maximum passage sequence length is set as 256": with the recipe's 20-token query
    budget (the authors' maxqlen) a full window and a long query make a pair of 20 + window + 3 tokens;
    rankkit's default query budget (32) would make 260 with 225-token windows."""
    from rankkit.models import MODELS

    recipe = recipes.load_recipe(next(p for p in RECIPES if p.name == name), recipes.train_kinds())
    cls = MODELS[recipe.settings["model"]]
    own = {s.name for s in cls.config_class.specs()}
    settings = {k: v for k, v in recipe.settings.items() if k in own}
    model = cls.for_training(step_data["backbone"], cls.config_class.build(settings, cls.name))
    query = " ".join(WORDS[:40])  # 40 tokens: cut to the recipe's 20
    document = " ".join(WORDS[i % len(WORDS)] for i in range(4000))
    passages = model.split_documents([document], None)[0]
    assert len(passages) == 16 and max(len(p) for p in passages) == settings["window"]
    lengths = model.pairs.pair_lengths([query] * len(passages), passages)
    assert max(lengths) == 20 + settings["window"] + 3 <= 256
    if name == "parade-robust04.toml":
        default = cls.for_training(step_data["backbone"], cls.config_class.build(
            {k: v for k, v in settings.items() if k != "max_query_length"}, cls.name))
        assert max(default.pairs.pair_lengths([query] * len(passages), passages)) == 32 + 225 + 3 == 260


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_every_recipe_says_which_settings_are_rankkits(path: Path) -> None:
    """Issue 37: clipping, weight decay, precision, warm-up and the like are either stated in [train] (under
    the paper's or the authors' words) or named in [recipe.from_rankkit] with rankkit's value and why."""
    recipe = recipes.load_recipe(path, recipes.train_kinds())
    covered = set(recipe.settings) | set(recipe.from_rankkit)
    missing = [key for key in STATED_OR_FROM_RANKKIT if key not in covered]
    missing += ["/".join(group) for group in STATED_OR_FROM_RANKKIT_GROUPS if not covered & set(group)]
    assert not missing, f"{path.name}: say where {', '.join(missing)} come(s) from in [recipe.from_rankkit]"
    assert all(len(why) > 20 for why in recipe.from_rankkit.values())


def test_from_rankkit_and_first_stage_are_printed_and_read_back(cli: Any, tmp_path: Path) -> None:
    printed = cli("train", "--config", "recipes/densetrans-quora.toml", "--print-config")
    assert printed.code == 0, printed.stderr
    merged = tomllib.loads(printed.stdout)
    recipe = recipes.load_recipe(Path("recipes/densetrans-quora.toml"), recipes.train_kinds())
    assert merged["recipe"]["from_rankkit"] == recipe.from_rankkit and "max_grad_norm" in recipe.from_rankkit
    assert merged["recipe"]["first_stage"] == recipe.first_stage
    again = tmp_path / "printed.toml"
    again.write_text(printed.stdout, encoding="utf-8")
    back = recipes.load_recipe(again, recipes.train_kinds())
    assert (back.from_rankkit, back.first_stage) == (recipe.from_rankkit, recipe.first_stage)


def test_densetrans_recipe_gives_the_papers_bm25_settings() -> None:
    """DenseTrans §4.2.3: "The key hyper-parameters of BM25 are tuned to k1 = 3.44 and b = 0.87" (negative
    sampling): a first-stage setting, given as rankkit retrieve's flags."""
    recipe = recipes.load_recipe(Path("recipes/densetrans-quora.toml"), recipes.train_kinds())
    assert recipe.first_stage is not None
    assert "rankkit retrieve --model bm25" in recipe.first_stage and "--k1 3.44 --b 0.87" in recipe.first_stage
    assert "rankkit mine" in recipe.first_stage and "--depth 100" in recipe.first_stage


def test_parade_distillation_teacher_is_the_papers() -> None:
    """PARADE §5.3 / Table 9: the teacher is a BERT-Base PARADE-Transformer in the reduced setting (BM25 top 100,
    point-wise cross-entropy, 150/100-token windows); the ELECTRA teacher is a named alternative."""
    teacher = recipes.load_recipe(Path("recipes/parade-robust04-bert-base.toml"), recipes.train_kinds())
    assert (teacher.settings["model"], teacher.settings["loss"]) == ("parade-transformer", "pointwise-ce")
    assert (teacher.settings["window"], teacher.settings["stride"]) == (150, 100)
    assert teacher.backbone is not None and "BERT-Base" in teacher.backbone
    assert teacher.first_stage is not None and "top 100" in teacher.first_stage
    student = recipes.load_recipe(Path("recipes/parade-robust04-kd.toml"), recipes.train_kinds())
    assert "parade-robust04-bert-base.toml" in student.requires["teacher_checkpoint"]
    electra = recipes.load_recipe(Path("recipes/parade-robust04-kd-electra.toml"), recipes.train_kinds())
    assert "recipes/parade-robust04.toml" in electra.requires["teacher_checkpoint"]
    assert "teacher_checkpoint" in electra.from_rankkit
    assert electra.settings == student.settings  # only the teacher differs
