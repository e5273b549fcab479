"""Plug-in models through the ``rankkit.models`` entry-point group, in a throwaway distribution: the
``rankkit`` command finds the model, ``rankkit models`` lists it with its package, its checkpoints
record the package, and a checkpoint of a missing plug-in fails with a hint naming that package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from training_helpers import tiny_backbone, write_corpus, write_groups, write_topics

ROOT = Path(__file__).resolve().parents[2]

PLUGIN = '''"""A plug-in model: one file plus one register() line (score = w * word overlap + b)."""
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import safetensors.torch
import torch

from rankkit.models import ModelConfig, RankingModel, option, register
from rankkit.models import backbone as bb
from rankkit.models.inputs import GroupBatch, PairFeatures
from rankkit.models.outputs import RankingOutput


@dataclass
class OverlapConfig(ModelConfig):
    bias_init: float = option(0.0, help="initial score bias", minimum=-10.0, maximum=10.0)


class Overlap(RankingModel):
    """score = w * |query tokens in the document| + b."""

    name = "plugin-overlap"
    paper: ClassVar[str] = "Nobody, 2026, \\"A test plug-in\\""
    config_class: ClassVar[type[ModelConfig]] = OverlapConfig

    def __init__(self, tokenizer: Any, config: ModelConfig) -> None:
        super().__init__(config)
        self.tokenizer = tokenizer
        self.weight = torch.nn.Parameter(torch.tensor(0.1))
        self.bias = torch.nn.Parameter(torch.tensor(float(config.bias_init)))

    @classmethod
    def for_training(cls, backbone: Path | None, config: ModelConfig) -> "Overlap":
        return cls(bb.load_tokenizer(bb.resolve_backbone(backbone)), config)

    @classmethod
    def load(cls, folder: Path, config: ModelConfig) -> "Overlap":
        model = cls(bb.load_tokenizer(folder), config)
        model.load_state_dict(safetensors.torch.load_file(str(folder / "model.safetensors")))
        return model

    def save(self, folder: Path) -> None:
        safetensors.torch.save_file({k: v.detach().contiguous() for k, v in self.state_dict().items()},
                                    str(folder / "model.safetensors"))
        self.tokenizer.save_pretrained(str(folder))

    def overlap(self, queries, texts) -> torch.Tensor:
        return torch.tensor([float(len(set(self.tokenizer.tokenize(q)) & set(self.tokenizer.tokenize(t))))
                             for q, t in zip(queries, texts)])

    def prepare(self, batch: GroupBatch) -> GroupBatch:
        _, texts, where = batch.flat_documents()
        counts = self.overlap([batch.queries[g] for g, _ in where], texts)
        batch.features = PairFeatures(pairs={"overlap": counts}, where=torch.tensor(where).reshape(-1, 2))
        return batch

    def forward(self, batch: GroupBatch) -> RankingOutput:
        features = batch.features
        flat = self.weight * features.pairs["overlap"] + self.bias
        scores = flat.new_zeros(batch.mask.shape).index_put((features.where[:, 0], features.where[:, 1]), flat)
        return RankingOutput(scores)

    def rerank_scores(self, queries, candidates, batch_size: int = 32):
        with torch.no_grad():
            return [(self.weight * self.overlap([q] * len(texts), texts) + self.bias).double()
                    for q, texts in zip(queries, candidates)]


register(Overlap)
'''


def make_distribution(root: Path) -> Path:
    """``rankkit_plugin_demo`` 0.1 as an installed distribution would look on sys.path (a dist-info folder)."""
    site = root / "site"
    (site / "rankkit_plugin_demo").mkdir(parents=True)
    (site / "rankkit_plugin_demo" / "__init__.py").write_text(PLUGIN, encoding="utf-8")
    info = site / "rankkit_plugin_demo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rankkit-plugin-demo\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[rankkit.models]\nplugin-overlap = rankkit_plugin_demo\n", encoding="utf-8")
    return site


def rankkit(site: Path | None, *args: object) -> subprocess.CompletedProcess[str]:
    paths = [str(ROOT), *([str(site)] if site is not None else []), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    code = "import sys\nfrom rankkit.cli import main\nmain(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=600, check=False)


def test_an_entry_point_model_trains_reranks_and_is_listed(tmp_path: Path) -> None:
    site = make_distribution(tmp_path)
    backbone = tiny_backbone(tmp_path / "tiny")
    groups = write_groups(tmp_path / "groups.jsonl", count=8, negatives=3)
    listed = rankkit(site, "models")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("plugin-overlap"))
    assert "rankkit-plugin-demo==0.1" in row and "Nobody, 2026" in row and "--bias-init" in row
    trained = rankkit(site, "train", "--model", "plugin-overlap", "--backbone", backbone, "--train", groups, "--output",
                      tmp_path / "ck", "--max-steps", 2, "--batch-size", 4, "--group-size", 3, "--bias-init", 0.5)
    assert trained.returncode == 0, trained.stderr
    meta = json.loads((tmp_path / "ck" / "rankkit.json").read_text(encoding="utf-8"))
    assert meta["provider"] == "rankkit-plugin-demo==0.1" and meta["model"] == "plugin-overlap"
    run = tmp_path / "run"
    run.write_text("".join(f"t0 Q0 d{i}_0 {i + 1} {-i} bm25\n" for i in range(4)), encoding="utf-8")
    args = ("rerank", "--model", "plugin-overlap", "--checkpoint", tmp_path / "ck", "--run", run, "--topics",
            write_topics(tmp_path / "topics.tsv"), "--corpus", write_corpus(tmp_path / "corpus.jsonl"))
    reranked = rankkit(site, *args, "--output", tmp_path / "out.run")
    assert reranked.returncode == 0, reranked.stderr
    assert len((tmp_path / "out.run").read_text().splitlines()) == 4
    missing = rankkit(None, *args, "--output", tmp_path / "no.run")  # the plug-in is not installed here
    assert missing.returncode == 2 and not (tmp_path / "no.run").exists()
    assert "comes from the plug-in package rankkit-plugin-demo==0.1" in missing.stderr
    assert "pip install rankkit-plugin-demo" in missing.stderr


def test_a_broken_plugin_is_one_warning_not_a_crash(tmp_path: Path) -> None:
    site = make_distribution(tmp_path)
    (site / "rankkit_plugin_demo" / "__init__.py").write_text("raise ImportError('no torch here')\n", encoding="utf-8")
    listed = rankkit(site, "models")
    assert listed.returncode == 0 and "mono" in listed.stdout
    assert "plug-in plugin-overlap (rankkit-plugin-demo==0.1) could not be loaded" in listed.stderr


def test_rankkit_models_lists_the_registry(cli: Callable[..., Any]) -> None:
    from rankkit.models import MODELS

    result = cli("models")
    assert result.code == 0
    names = [line.split()[0] for line in result.stdout.splitlines()[1:] if line.strip() and not line.startswith("`")]
    assert names == sorted(MODELS)
    one = cli("models", "set-encoder")
    assert one.code == 0 and "--interaction-token" in one.stdout
    unknown = cli("models", "nope")
    assert unknown.code == 2 and "unknown model 'nope'" in unknown.stderr


def test_the_loss_help_is_generated_from_the_losses_and_the_registry() -> None:
    from rankkit.cli.model_options import loss_help
    from rankkit.models.losses import LOSSES

    text = loss_help()
    assert all(name in text for name in LOSSES)
    assert "multilabel-margin, softmax-ce (densetrans, repbert)" in text and "(every model)" in text
