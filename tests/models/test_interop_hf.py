"""Cross-encoders as standard Hugging Face sequence classifiers, both ways (issue 14).

``mono`` checkpoints load in ``transformers.AutoModelForSequenceClassification`` and in
sentence-transformers' ``CrossEncoder`` with rankkit's scores; a Hugging Face cross-encoder folder
(no rankkit.json) re-ranks through ``rankkit rerank --model mono --checkpoint DIR`` with its own
scores and starts MatRank training as its ``--backbone``. Tiny random models, built here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from training_helpers import TOPICS, build_model, documents, write_corpus, write_groups, write_topics

from rankkit.errors import RankkitError
from rankkit.formats import read_run, write_run
from rankkit.models.checkpoint import load_for_inference, load_model, save_model
from rankkit.models.cross_encoders.matrank import MatRank
from rankkit.models.cross_encoders.mono import Mono

QUERIES = ["apple fruit", "river water"]
TEXTS = [["red apple fruit tree", "car engine", "apple"], ["river water flows", "apple fruit red"]]



@pytest.fixture(scope="module")
def hf_cross_encoder(tmp_path_factory: pytest.TempPathFactory, backbone: Path) -> Path:
    """A folder exactly as transformers writes a cross-encoder: no rankkit.json, a trained-looking head."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = tmp_path_factory.mktemp("hf") / "cross-encoder"
    torch.manual_seed(3)
    model = AutoModelForSequenceClassification.from_pretrained(str(backbone), num_labels=1)
    with torch.no_grad():  # a head far from its initialisation, so a wrong head would show
        model.classifier.weight.normal_(0, 1.0)
        model.classifier.bias.fill_(0.5)
    model.save_pretrained(str(folder))
    AutoTokenizer.from_pretrained(str(backbone)).save_pretrained(str(folder))
    return folder


def flat(scores: list[torch.Tensor]) -> list[float]:
    return [float(x) for s in scores for x in s]


def pairs() -> list[tuple[str, str]]:
    return [(q, t) for q, texts in zip(QUERIES, TEXTS) for t in texts]


def test_new_mono_checkpoint_is_a_standard_sequence_classifier(backbone: Path, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = build_model(Mono, backbone)
    assert model.hparams["hf_head"] is True
    save_model(model, tmp_path / "ck", {})
    config = json.loads((tmp_path / "ck" / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["BertForSequenceClassification"] and len(config["id2label"]) == 1
    ours = flat(load_model(tmp_path / "ck").rerank_scores(QUERIES, TEXTS, batch_size=2))

    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    hf = AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "ck")).eval()
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "ck"))
    with torch.no_grad():
        feats = tok([q for q, _ in pairs()], [t for _, t in pairs()], padding=True, return_tensors="pt")
        logits = hf(**feats).logits[:, 0].tolist()
    assert ours == pytest.approx(logits, abs=1e-5)

    from sentence_transformers import CrossEncoder

    cross = CrossEncoder(str(tmp_path / "ck"), device="cpu", activation_fn=torch.nn.Identity())
    assert ours == pytest.approx(cross.predict(pairs()).tolist(), abs=1e-5)
    # The default CrossEncoder applies a sigmoid: the same order.
    default = CrossEncoder(str(tmp_path / "ck"), device="cpu").predict(pairs()).tolist()
    assert default == pytest.approx(torch.sigmoid(torch.tensor(ours)).tolist(), abs=1e-5)


def test_trained_mono_round_trips_through_the_classifier(backbone: Path, tmp_path: Path) -> None:
    from training_helpers import loss_drops_after_steps

    from rankkit.formats import read_groups
    from rankkit.training import sampling

    groups = read_groups(write_groups(tmp_path / "g.jsonl", count=8, negatives=3))
    torch.manual_seed(0)
    model = build_model(Mono, backbone)
    batch = model.prepare(sampling.collate([sampling.sample_group(g, 4, sampling.group_rng(0, 0, i))
                                            for i, g in enumerate(groups)]))
    assert loss_drops_after_steps(model, batch)
    save_model(model, tmp_path / "ck", {})
    from sentence_transformers import CrossEncoder

    model.eval()
    ours = flat(model.rerank_scores(QUERIES, TEXTS, batch_size=3))
    cross = CrossEncoder(str(tmp_path / "ck"), device="cpu", activation_fn=torch.nn.Identity())
    assert ours == pytest.approx(cross.predict(pairs()).tolist(), abs=1e-5)


def test_rankkit_head_keeps_the_old_format(backbone: Path, tmp_path: Path) -> None:
    model = build_model(Mono, backbone, {"hf_head": False})
    save_model(model, tmp_path / "ck", {})
    assert json.loads((tmp_path / "ck" / "config.json").read_text(encoding="utf-8"))["model_type"] == "rankkit-mono"
    again = load_model(tmp_path / "ck")
    assert again.hparams["hf_head"] is False
    assert flat(again.rerank_scores(QUERIES, TEXTS)) == flat(model.eval().rerank_scores(QUERIES, TEXTS))
    with pytest.raises(RankkitError, match="--hf-head needs --encoder cross"):
        build_model(Mono, backbone, {"hf_head": True, "encoder": "bi"})


def test_loading_a_rankkit_head_mono_prints_no_model_type_warning(backbone: Path, tmp_path: Path) -> None:
    """In Python (a notebook), where transformers logs at warning level, loading a rankkit-format mono said "You are
    using a model of type `rankkit-mono` to instantiate a model of type ``" twice (its tokenizer reads config.json)."""
    import logging

    import transformers

    class Collect(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.WARNING)
            self.messages: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.messages.append(record.getMessage())

    save_model(build_model(Mono, backbone, {"hf_head": False}), tmp_path / "ck", {})
    collect = Collect()
    library = logging.getLogger("transformers")  # what transformers' own stderr handler hangs on
    before = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_warning()
    library.addHandler(collect)
    try:
        load_model(tmp_path / "ck")
    finally:
        library.removeHandler(collect)
        transformers.logging.set_verbosity(before)
    assert not [m for m in collect.messages if "model of type" in m], collect.messages


def test_hf_cross_encoder_folder_scores_with_its_own_head(hf_cross_encoder: Path) -> None:
    from sentence_transformers import CrossEncoder

    model = load_for_inference("mono", hf_cross_encoder)
    ours = flat(model.rerank_scores(QUERIES, TEXTS, batch_size=2))
    cross = CrossEncoder(str(hf_cross_encoder), device="cpu", activation_fn=torch.nn.Identity())
    assert ours == pytest.approx(cross.predict(pairs()).tolist(), abs=1e-5)


def test_two_label_classifier_scores_by_log_probability_of_relevant(backbone: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(1)
    hf = AutoModelForSequenceClassification.from_pretrained(str(backbone), num_labels=2).eval()
    hf.save_pretrained(str(tmp_path / "two"))
    AutoTokenizer.from_pretrained(str(backbone)).save_pretrained(str(tmp_path / "two"))
    ours = flat(load_for_inference("mono", tmp_path / "two").rerank_scores(QUERIES, TEXTS))
    tok = AutoTokenizer.from_pretrained(str(backbone))
    with torch.no_grad():
        feats = tok([q for q, _ in pairs()], [t for _, t in pairs()], padding=True, return_tensors="pt")
        want = torch.log_softmax(hf(**feats).logits, dim=-1)[:, 1].tolist()
    assert ours == pytest.approx(want, abs=1e-5)


def test_a_plain_encoder_folder_is_no_zero_shot_mono(backbone: Path) -> None:
    with pytest.raises(RankkitError, match=r"no zero-shot form on .*BertModel.*ForSequenceClassification folder"):
        load_for_inference("mono", backbone)


def test_cli_rerank_with_a_hf_cross_encoder(cli, hf_cross_encoder: Path, tmp_path: Path) -> None:
    from sentence_transformers import CrossEncoder

    corpus = write_corpus(tmp_path / "corpus.jsonl")
    topics = write_topics(tmp_path / "topics.tsv")
    docs = documents()
    docids = sorted(docs)[:6]
    write_run(tmp_path / "first.txt", {f"t{i}": {d: float(k) for k, d in enumerate(docids)}
                                       for i in range(len(TOPICS))}, "first")
    result = cli("rerank", "--model", "mono", "--checkpoint", hf_cross_encoder, "--run", tmp_path / "first.txt",
                 "--topics", topics, "--corpus", corpus, "--output", tmp_path / "out.txt", "--device", "cpu")
    assert result.code == 0, result.stderr
    run = read_run(tmp_path / "out.txt")
    cross = CrossEncoder(str(hf_cross_encoder), device="cpu", activation_fn=torch.nn.Identity())
    for i, topic in enumerate(TOPICS):
        query = " ".join(topic.split()[:2])  # what write_topics writes
        want = cross.predict([(query, docs[d]) for d in docids]).tolist()
        got = [run[f"t{i}"][d] for d in docids]
        assert got == pytest.approx(want, abs=1e-5)


def test_matrank_starts_from_a_hf_cross_encoder(hf_cross_encoder: Path) -> None:
    from transformers import AutoModel

    model = build_model(MatRank, hf_cross_encoder)
    reference = AutoModel.from_pretrained(str(hf_cross_encoder))
    for name, value in reference.state_dict().items():
        assert torch.equal(model.pairs.encoder.state_dict()[name], value), name


@pytest.mark.parametrize("name", ["set-encoder", "maxp", "parade-max"])
def test_other_cross_encoders_start_from_a_hf_cross_encoder(hf_cross_encoder: Path, name: str) -> None:
    from transformers import AutoModel

    from rankkit.models import get_model_class

    model = build_model(get_model_class(name), hf_cross_encoder)
    reference = AutoModel.from_pretrained(str(hf_cross_encoder)).state_dict()
    own = model.pairs.encoder.state_dict()
    assert all(torch.equal(own[key], value) for key, value in reference.items() if key in own)
    assert sum(key in own for key in reference) >= len(reference) - 2  # the Set-Encoder rebuilds its attention


def test_a_frozen_encoder_keeps_the_classifier_head_trainable(backbone: Path) -> None:
    model = build_model(Mono, backbone, {"freeze_encoder": True})
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"pairs.encoder.classifier.weight", "pairs.encoder.classifier.bias"}


def test_starting_from_a_cross_encoder_keeps_its_head(hf_cross_encoder: Path) -> None:
    from sentence_transformers import CrossEncoder

    model = build_model(Mono, hf_cross_encoder).eval()
    cross = CrossEncoder(str(hf_cross_encoder), device="cpu", activation_fn=torch.nn.Identity())
    assert flat(model.rerank_scores(QUERIES, TEXTS)) == pytest.approx(cross.predict(pairs()).tolist(), abs=1e-5)


def test_long_passages_are_cut_where_cross_encoder_cuts_them(backbone: Path, tmp_path: Path) -> None:
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    model = build_model(Mono, backbone, {"max_query_length": 8, "max_doc_length": 40}).eval()
    save_model(model, tmp_path / "ck", {})
    long = " ".join(["red apple fruit tree river water"] * 20)  # far beyond the 51-token pair
    ours = flat(model.rerank_scores(["apple fruit"], [[long, "car engine"]]))
    cross = CrossEncoder(str(tmp_path / "ck"), device="cpu", activation_fn=torch.nn.Identity())
    assert ours == pytest.approx(cross.predict([("apple fruit", long), ("apple fruit", "car engine")]).tolist(), abs=1e-5)
