"""A new model costs one file plus one registry line: a model defined here trains and re-ranks via the CLI.

``WordOverlap`` below is that one file (a config dataclass with one option, a network, its
checkpoint files) and ``register(WordOverlap)`` the one line; nothing else in rankkit changes, yet
``rankkit train`` gets its ``--bias-init`` option, validates it, saves a checkpoint that
``rankkit rerank`` loads, and refuses options the model does not have.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, Sequence

import pytest
import safetensors.torch
import torch
from training_helpers import documents, tiny_backbone, write_corpus, write_groups, write_topics

from rankkit.formats import read_run, write_run
from rankkit.models import MODELS, ModelConfig, RankingModel, option, register
from rankkit.models import backbone as bb
from rankkit.models.inputs import GroupBatch, PairFeatures
from rankkit.models.outputs import RankingOutput


@dataclass
class WordOverlapConfig(ModelConfig):
    """Settings of the test model."""

    max_doc_length: int = option(64, help="document tokens", minimum=1, cli=False)
    bias_init: float = option(0.0, help="initial score bias", minimum=-10.0, maximum=10.0)


class WordOverlap(RankingModel):
    """score = w * |query tokens found in the document| + b (one weight, one bias)."""

    name = "test-word-overlap"
    config_class: ClassVar[type[ModelConfig]] = WordOverlapConfig

    def __init__(self, tokenizer: Any, config: ModelConfig) -> None:
        super().__init__(config)
        assert isinstance(config, WordOverlapConfig)
        self.tokenizer = tokenizer
        self.weight = torch.nn.Parameter(torch.tensor(0.1))
        self.bias = torch.nn.Parameter(torch.tensor(float(config.bias_init)))

    @classmethod
    def for_training(cls, backbone: Path | None, config: ModelConfig) -> "WordOverlap":
        return cls(bb.load_tokenizer(bb.resolve_backbone(backbone)), config)

    @classmethod
    def load(cls, folder: Path, config: ModelConfig) -> "WordOverlap":
        model = cls(bb.load_tokenizer(folder), config)
        model.load_state_dict(safetensors.torch.load_file(str(folder / "model.safetensors")))
        return model

    def save(self, folder: Path) -> None:
        safetensors.torch.save_file({k: v.detach().contiguous() for k, v in self.state_dict().items()},
                                    str(folder / "model.safetensors"))
        self.tokenizer.save_pretrained(str(folder))

    def overlap(self, queries: Sequence[str], texts: Sequence[str]) -> torch.Tensor:
        out = []
        for q, t in zip(queries, texts):
            words = set(self.tokenizer.tokenize(t)[: self.config.max_doc_length])
            out.append(float(sum(w in words for w in self.tokenizer.tokenize(q))))
        return torch.tensor(out)

    def prepare(self, batch: GroupBatch) -> GroupBatch:
        _, texts, where = batch.flat_documents()
        counts = self.overlap([batch.queries[g] for g, _ in where], texts)
        batch.features = PairFeatures(pairs={"overlap": counts}, where=torch.tensor(where).reshape(-1, 2))
        return batch

    def forward(self, batch: GroupBatch) -> RankingOutput:  # type: ignore[override]
        features = batch.features
        assert isinstance(features, PairFeatures)
        flat = self.weight * features.pairs["overlap"] + self.bias
        scores = flat.new_zeros(batch.mask.shape).index_put((features.where[:, 0], features.where[:, 1]), flat)
        return RankingOutput(scores)

    @torch.inference_mode()
    def rerank_scores(self, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                      batch_size: int = 32) -> list[torch.Tensor]:
        return [(self.weight * self.overlap([q] * len(c), c) + self.bias).double() for q, c in zip(queries, candidates)]


@pytest.fixture
def registered() -> Iterator[None]:
    register(WordOverlap)  # the one registry line
    yield
    MODELS.pop(WordOverlap.name)


@pytest.fixture
def data(tmp_path: Path) -> dict[str, Path]:
    docids = sorted(documents())
    write_run(tmp_path / "first.run", {f"t{i}": {d: float(k) for k, d in enumerate(docids[:8])} for i in range(3)}, "x")
    return {"corpus": write_corpus(tmp_path / "corpus.jsonl"), "topics": write_topics(tmp_path / "topics.tsv"),
            "groups": write_groups(tmp_path / "groups.jsonl", count=8), "run": tmp_path / "first.run",
            "backbone": tiny_backbone(tmp_path / "tiny", dropout=0.0)}


def test_a_model_defined_outside_rankkit_trains_and_reranks(registered: None, cli: Callable[..., Any],
                                                             data: dict[str, Path], tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    train = cli("train", "--model", WordOverlap.name, "--train", data["groups"], "--output", ck, "--backbone",
                data["backbone"], "--max-steps", 3, "--batch-size", 2, "--group-size", 3, "--lr", 0.1, "--device", "cpu",
                "--bias-init", 0.5)
    assert train.code == 0, train.stderr
    out = tmp_path / "reranked.run"
    rerank = cli("rerank", "--model", WordOverlap.name, "--checkpoint", ck, "--run", data["run"], "--topics",
                 data["topics"], "--corpus", data["corpus"], "--depth", 5, "--output", out, "--device", "cpu")
    assert rerank.code == 0, rerank.stderr
    assert set(read_run(out)) == set(read_run(data["run"]))
    from rankkit.models.checkpoint import read_meta

    assert read_meta(ck)["hparams"]["bias_init"] == 0.5  # the typed config is recorded
    bad = cli("train", "--model", WordOverlap.name, "--train", data["groups"], "--output", tmp_path / "x",
              "--bias-init", 99)
    assert bad.code == 2 and "--bias-init must be at most 10" in bad.stderr and not (tmp_path / "x").exists()
    help_ = cli("train", "--model", WordOverlap.name, "--help")
    assert help_.code == 0 and "--bias-init" in help_.stdout and "initial score bias" in help_.stdout


def test_an_option_of_another_model_is_refused_with_the_models_own_options(cli: Callable[..., Any],
                                                                            data: dict[str, Path], tmp_path: Path) -> None:
    result = cli("train", "--model", "mono", "--train", data["groups"], "--output", tmp_path / "ck", "--d-model", 8)
    assert result.code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--d-model is not an option of model mono" in lines[0]
    assert "--encoder" in lines[0] and "--freeze-encoder/--tune-encoder" in lines[0] and "--hidden" in lines[0]
    assert not (tmp_path / "ck").exists()
    result = cli("train", "--model", "matrank", "--train", data["groups"], "--output", tmp_path / "ck", "--no-dense")
    assert result.code == 2 and "--no-dense is not an option of model matrank" in result.stderr
    result = cli("rerank", "--model", "mono", "--run", data["run"], "--topics", data["topics"], "--corpus",
                 data["corpus"], "--output", tmp_path / "y.run", "--max-passages", 2)
    assert result.code == 2 and "--max-passages applies to " in result.stderr and "only, not 'mono'" in result.stderr


def test_train_help_for_a_model_lists_its_options_with_defaults(cli: Callable[..., Any]) -> None:
    result = cli("train", "--model", "densetrans", "--help")
    assert result.code == 0
    for text in ("--num-layers", "--num-heads", "--dropout", "--variant", "--no-dense", "DenseTrans Table 3"):
        assert text in result.stdout
    assert "--encoder" not in result.stdout
    assert cli("train", "--model", "nope", "--help").code == 2
