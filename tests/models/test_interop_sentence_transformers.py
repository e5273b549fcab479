"""Bi-encoders as sentence-transformers folders, both ways (issue 14).

A ``repbert`` checkpoint is a sentence-transformers folder whose ``encode_query``/``encode_document``
give rankkit's vectors (pooling, normalisation and prefixes included); a backbone's own
sentence-transformers pooling (BGE-style [CLS]), normalisation and prompts are honoured; prefixes
reach the tokens. Tiny random models, built here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from training_helpers import build_model

from rankkit.errors import RankkitError
from rankkit.models import RepBERT
from rankkit.models.checkpoint import load_for_inference, load_model, save_model

st = pytest.importorskip("sentence_transformers")

QUERIES = ["apple fruit", "river water flow"]
DOCUMENTS = ["red apple fruit tree in the garden", "car engine fuel", "the river water flows to the sea"]



def sentence_transformers_folder(backbone: Path, out: Path, pooling: str, normalize: bool,
                                 prompts: dict[str, str] | None = None) -> Path:
    """A folder written by sentence-transformers itself (not by rankkit), e.g. a BGE-style CLS model."""
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    transformer = Transformer(str(backbone), max_seq_length=64)
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), pooling)]
    if normalize:
        modules.append(Normalize())
    st.SentenceTransformer(modules=modules, device="cpu", prompts=prompts).save(str(out))
    return out


def perturb(model: RepBERT) -> None:
    """Move the weights off their initialisation (and segment embedding 1 away from 0) as training would."""
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        for param in model.encoder.parameters():
            param.add_(0.05 * torch.randn_like(param))


def assert_same_vectors(model: RepBERT, folder: Path) -> None:
    reference = st.SentenceTransformer(str(folder), device="cpu")
    ours_q = model.encode(QUERIES, is_query=True, batch_size=2)
    ours_d = model.encode(DOCUMENTS, is_query=False, batch_size=2)
    theirs_q = reference.encode_query(QUERIES, convert_to_tensor=True).cpu()
    theirs_d = reference.encode_document(DOCUMENTS, convert_to_tensor=True).cpu()
    torch.testing.assert_close(ours_q, theirs_q, rtol=0, atol=1e-5)
    torch.testing.assert_close(ours_d, theirs_d, rtol=0, atol=1e-5)


@pytest.mark.parametrize("settings", [
    {},  # the paper's raw inner product, mean pooling
    {"normalize": True, "pooling": "cls"},
    {"pooling": "max", "query_prefix": "query: ", "doc_prefix": "passage: "},
])
def test_repbert_checkpoint_is_a_sentence_transformer(backbone: Path, tmp_path: Path, settings: dict) -> None:
    model = build_model(RepBERT, backbone, settings)
    perturb(model)
    model.eval()
    save_model(model, tmp_path / "ck", {})
    modules = json.loads((tmp_path / "ck" / "modules.json").read_text(encoding="utf-8"))
    assert [m["path"] for m in modules] == ["", "1_Pooling"] + (["2_Normalize"] if settings.get("normalize") else [])
    assert_same_vectors(model, tmp_path / "ck")
    again = load_model(tmp_path / "ck")
    assert again.hparams == model.hparams
    assert_same_vectors(again, tmp_path / "ck")  # type: ignore[arg-type]
    save_model(again, tmp_path / "ck", {})  # saving over a folder with sub-folders works
    assert_same_vectors(again, tmp_path / "ck")  # type: ignore[arg-type]


def test_footnote_2_segments_differ_from_sentence_transformers_documents(backbone: Path, tmp_path: Path) -> None:
    model = build_model(RepBERT, backbone, {"doc_segment_id": 1})
    perturb(model)
    model.eval()
    save_model(model, tmp_path / "ck", {})
    reference = st.SentenceTransformer(str(tmp_path / "ck"), device="cpu")
    torch.testing.assert_close(model.encode(QUERIES, is_query=True),
                               reference.encode_query(QUERIES, convert_to_tensor=True).cpu(), rtol=0, atol=1e-5)
    theirs = reference.encode_document(DOCUMENTS, convert_to_tensor=True).cpu()
    assert (model.encode(DOCUMENTS, is_query=False) - theirs).abs().max() > 1e-3


def test_cls_pooling_folder_is_honoured_zero_shot(backbone: Path, tmp_path: Path) -> None:
    folder = sentence_transformers_folder(backbone, tmp_path / "bge", "cls", normalize=True)
    model = load_for_inference("repbert", folder)
    assert isinstance(model, RepBERT)
    assert model.hparams["pooling"] == "cls" and model.normalized
    assert_same_vectors(model, folder)
    mean = RepBERT.zero_shot(folder, RepBERT.config_class(pooling="mean"))  # type: ignore[call-arg]
    assert (mean.encode(DOCUMENTS, is_query=False) - model.encode(DOCUMENTS, is_query=False)).abs().max() > 1e-3


def test_prompts_of_the_backbone_become_prefixes(backbone: Path, tmp_path: Path) -> None:
    folder = sentence_transformers_folder(backbone, tmp_path / "e5", "mean", normalize=True,
                                          prompts={"query": "query: ", "document": "passage: "})
    model = load_for_inference("repbert", folder)
    assert (model.hparams["query_prefix"], model.hparams["doc_prefix"]) == ("query: ", "passage: ")
    assert_same_vectors(model, folder)  # type: ignore[arg-type]


def test_prefixes_reach_the_tokens(backbone: Path) -> None:
    plain = build_model(RepBERT, backbone)
    prefixed = build_model(RepBERT, backbone, {"query_prefix": "query: ", "doc_prefix": "passage: "})
    tok = plain.tokenizer
    head = tok("query:", add_special_tokens=False)["input_ids"]
    q = prefixed.tokenize(["apple fruit"], is_query=True)[0]
    assert q[1:1 + len(head)] == head and q[1 + len(head):] == plain.tokenize(["apple fruit"], is_query=True)[0][1:]
    d = prefixed.tokenize(["apple"], is_query=False)[0]
    assert d[1:-2] == tok("passage:", add_special_tokens=False)["input_ids"]
    # Changed on re-ranking (rankkit rerank --query-prefix): read at every call.
    prefixed.override("query_prefix", "")
    assert prefixed.tokenize(["apple fruit"], is_query=True) == plain.tokenize(["apple fruit"], is_query=True)


def test_unsupported_pipelines_are_refused(backbone: Path, tmp_path: Path) -> None:
    folder = sentence_transformers_folder(backbone, tmp_path / "lasttoken", "lasttoken", normalize=False)
    with pytest.raises(RankkitError, match="pooling 'lasttoken' is not supported; pass --pooling"):
        load_for_inference("repbert", folder)
    model = RepBERT.zero_shot(folder, RepBERT.config_class(pooling="cls"))  # type: ignore[call-arg]
    assert model.hparams["pooling"] == "cls"


def test_cli_options_are_generated(cli, backbone: Path) -> None:
    result = cli("train", "--model", "repbert", "--help")
    assert result.code == 0
    for flag in ("--pooling", "--query-prefix", "--doc-prefix"):
        assert flag in result.stdout
    result = cli("rerank", "--help")
    assert "--query-prefix" in result.stdout and "--pooling" in result.stdout


def test_dense_index_records_prefixes_for_a_zero_shot_backbone(cli, backbone: Path, tmp_path: Path) -> None:
    """E5-style use: prefixes given to `rankkit index` are recorded and the searches use them."""
    from training_helpers import write_corpus, write_topics

    from rankkit.formats import iter_corpus, read_run, read_topics

    corpus, topics = write_corpus(tmp_path / "corpus.jsonl"), write_topics(tmp_path / "topics.tsv")
    result = cli("index", "--kind", "dense", "--model", "repbert", "--checkpoint", backbone, "--corpus", corpus,
                 "--index", tmp_path / "index", "--query-prefix", "query: ", "--doc-prefix", "passage: ",
                 "--pooling", "max", "--max-doc-length", 60, "--device", "cpu")
    assert result.code == 0, result.stderr
    manifest = json.loads((tmp_path / "index" / "rankkit-index.json").read_text(encoding="utf-8"))
    hparams = manifest["model_hparams"]
    assert (hparams["query_prefix"], hparams["doc_prefix"], hparams["pooling"]) == ("query: ", "passage: ", "max")
    result = cli("retrieve", "--model", "repbert", "--index", tmp_path / "index", "--topics", topics,
                 "--output", tmp_path / "run.txt", "--k", 3, "--device", "cpu")
    assert result.code == 0, result.stderr
    run = read_run(tmp_path / "run.txt")

    model = RepBERT.zero_shot(backbone, RepBERT.config_class(  # type: ignore[call-arg]
        pooling="max", query_prefix="query: ", doc_prefix="passage: ", max_doc_length=60))
    docs = list(iter_corpus(corpus))
    scores = model.encode(list(read_topics(topics).values()), is_query=True) @ \
        model.encode([d.contents for d in docs], is_query=False).T
    for qid, row in zip(read_topics(topics), scores):
        assert list(run[qid].values()) == pytest.approx(torch.topk(row, 3).values.tolist(), rel=1e-5)

    result = cli("index", "--kind", "bm25", "--corpus", corpus, "--index", tmp_path / "bm25", "--pooling", "cls")
    # In a fresh process the option is unknown to a BM25 build ("No such option"); once generated
    # (in this process, by the dense build above) it is refused by name.
    assert result.code == 2 and "--pooling" in result.stderr and not (tmp_path / "bm25").exists()


def test_bi_variant_of_the_rerankers_pools_as_the_backbone(backbone: Path, tmp_path: Path) -> None:
    """``--encoder bi`` of mono/matrank starts at the backbone's own zero-shot cosine (x 20): [CLS] for BGE."""
    from rankkit.models import Mono

    folder = sentence_transformers_folder(backbone, tmp_path / "bge", "cls", normalize=True)
    model = build_model(Mono, folder, {"encoder": "bi"}).eval()
    assert model.hparams["bi_pooling"] == "cls"
    ours = model.rerank_scores(QUERIES[:1], [DOCUMENTS])[0]
    reference = st.SentenceTransformer(str(folder), device="cpu")
    cosine = reference.similarity(reference.encode(QUERIES[:1]), reference.encode(DOCUMENTS))[0]
    torch.testing.assert_close(ours.float(), 20 * cosine, rtol=0, atol=1e-4)
    save_model(model, tmp_path / "ck", {})
    assert load_model(tmp_path / "ck").rerank_scores(QUERIES[:1], [DOCUMENTS])[0].tolist() == ours.tolist()
