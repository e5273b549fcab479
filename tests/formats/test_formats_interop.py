"""Inputs other tools write, read as they are (issue 14): TREC SGML topics, MS MARCO 3-column runs and
triples (text and qidpidtriples), BEIR folders and 3-column qrels, and ``irds:`` ir_datasets ids.

Every format is read from a small real fixture in tests/data/interop (see its PROVENANCE.txt).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from rankkit.errors import InputError, RankkitError
from rankkit.formats import iter_corpus, read_groups, read_qrels, read_run, read_topics
from rankkit.formats.sources import irds_corpus_path, load_qrels, load_topics, resolve_corpus

from training_helpers import WORDS

DATA = Path(__file__).parents[1] / "data"
INTEROP = DATA / "interop"
ROBUST04 = INTEROP / "topics.robust04.301-305.txt"
TERABYTE = INTEROP / "topics.terabyte04.701-703.txt"
BEIR = INTEROP / "beir-squad-dev"
TRIPLES = INTEROP / "msmarco-triples.head20.tsv"
ID_TRIPLES = INTEROP / "qidpidtriples.squad-train.tsv"
COLLECTION = INTEROP / "collection.squad-train.tsv"
QUERIES = INTEROP / "queries.squad-train.tsv"
MSMARCO_RUN = INTEROP / "msmarco-run.bm25.dl19.tsv"
TREC_RUN = DATA / "dl19" / "BM25.trec_results_dl19.txt"
DL19_QRELS = DATA / "dl19" / "qrels.dl19-passage.txt"


# ------------------------------------------------------------------------------ TREC SGML topics


@pytest.mark.parametrize("path", [ROBUST04, TERABYTE])
@pytest.mark.parametrize("field", ["title", "description", "narrative"])
def test_sgml_topics_match_ir_datasets_parser(path: Path, field: str) -> None:
    """Every field of the robust04 / terabyte topics as ir_datasets' TrecQueries reads them."""
    from ir_datasets.formats import TrecQueries
    from ir_datasets.util import LocalDownload

    reference = {q.query_id: " ".join(getattr(q, field).split())
                 for q in TrecQueries(LocalDownload(path), namespace="test", lang="en").queries_iter()}
    topics = read_topics(path, field)
    assert topics == reference
    assert len(topics) == (5 if path == ROBUST04 else 3)


def test_sgml_topic_fields() -> None:
    assert read_topics(ROBUST04)["301"] == "International Organized Crime"
    assert read_topics(ROBUST04, "description")["302"] == "Is the disease of Poliomyelitis (polio) under control in the world?"
    assert read_topics(ROBUST04, "narrative")["301"].startswith("A relevant document must as a minimum identify")
    assert read_topics(TERABYTE)["701"] == "U.S. oil industry history"


def test_sgml_topic_errors(tmp_path: Path) -> None:
    unclosed = tmp_path / "unclosed.txt"
    unclosed.write_text("<top>\n<num> Number: 1\n<title> a b\n")
    with pytest.raises(InputError, match=r"unclosed.txt:1: topic is not closed by </top>"):
        read_topics(unclosed)
    no_desc = tmp_path / "nodesc.txt"
    no_desc.write_text("<top>\n<num> Number: 7\n<title> only a title\n</top>\n")
    with pytest.raises(InputError, match=r"nodesc.txt:1: topic '7' has no <desc> text for --topic-field description"):
        read_topics(no_desc, "description")
    tsv = tmp_path / "topics.tsv"
    tsv.write_text("1\tquery one\n")
    with pytest.raises(InputError, match="--topic-field narrative needs TREC SGML topics"):
        read_topics(tsv, "narrative")
    with pytest.raises(RankkitError, match="--topic-field must be one of title, description, narrative"):
        read_topics(ROBUST04, "desc")
    xml = tmp_path / "topics.xml"
    xml.write_text('<topics>\n<topic number="1"><query>coronavirus origin</query></topic>\n</topics>\n')
    with pytest.raises(InputError, match=r"topics.xml:1: markup that is not TREC SGML topics"):
        read_topics(xml)


# ------------------------------------------------------------------------------- MS MARCO runs


def test_msmarco_three_column_run_reads_as_its_ranks() -> None:
    three, six = read_run(MSMARCO_RUN), read_run(TREC_RUN)
    assert list(three) == list(six)
    for qid in six:
        by_score = sorted(six[qid], key=lambda d: (-six[qid][d], d))
        by_three = sorted(three[qid], key=lambda d: (-three[qid][d], d))
        assert by_three == by_score
    assert three["264014"]["5611210"] == 1.0  # rank 1 -> score 1/1


def test_msmarco_run_evaluates_as_the_trec_run(cli: Callable[..., Any]) -> None:
    # The BM25 run has no tied scores, so rank order = trec_eval order: every measure agrees.
    results = [cli("eval", run, "--qrels", DL19_QRELS, "-m", "official", "-m", "nDCG@10", "-f", "tsv")
               for run in (MSMARCO_RUN, TREC_RUN)]
    assert all(r.code == 0 for r in results), results[0].stderr
    values = [[line.split("\t")[2:] for line in r.stdout.splitlines()[1:]] for r in results]
    assert values[0] == values[1] and len(values[0]) > 20


def test_mixed_run_shapes_are_refused(tmp_path: Path, cli: Callable[..., Any]) -> None:
    mixed = tmp_path / "mixed.tsv"
    mixed.write_text("1\td1\t1\n1 Q0 d2 2 0.5 tag\n")
    with pytest.raises(InputError, match=r"mixed.tsv:2: expected 3 columns 'qid docid rank' \(MS MARCO run\) as on the first"):
        read_run(mixed)
    bad = tmp_path / "rank0.tsv"
    bad.write_text("1\td1\t0\n")
    with pytest.raises(InputError, match="rank 0 of a 3-column MS MARCO run must be at least 1"):
        read_run(bad)
    fixed = tmp_path / "fixed.run"
    assert cli("validate", MSMARCO_RUN, "--fix", fixed).code == 0
    assert read_run(fixed) == read_run(MSMARCO_RUN)
    assert fixed.read_text().splitlines()[0] == "264014 Q0 5611210 1 1.0 msmarco"


# ------------------------------------------------------------------------------- validate --fix


def test_validate_fix_refuses_to_write_an_empty_run(tmp_path: Path, cli: Callable[..., Any]) -> None:
    broken = tmp_path / "broken.run"
    broken.write_text("q1 Q0 d1 1 nan tag\nq1 Q0 d2 two 1.0 tag\n")
    out = tmp_path / "fixed.run"
    result = cli("validate", broken, "--fix", out)
    assert result.code == 2 and not out.exists()
    assert result.stderr.strip().splitlines()[-1] == (
        f"rankkit: error: {broken}: no valid run line to keep; --fix writes no empty run")


# ------------------------------------------------------------------------- BEIR folders and qrels


def test_beir_folder_stands_for_its_corpus_queries_and_qrels() -> None:
    qrels = load_qrels(BEIR)
    assert qrels == read_qrels(BEIR / "qrels" / "test.tsv")
    assert len(qrels) == 8 and qrels["5725b33f6a3fe71400b8952d"] == {"dev-a000-p000": 1}
    topics = load_topics(BEIR)
    assert set(topics) == set(qrels) and topics["5725b33f6a3fe71400b8952d"] == "When did the 1973 oil crisis begin?"
    corpus = resolve_corpus(BEIR)
    assert corpus == BEIR / "corpus.jsonl"
    docs = list(iter_corpus(corpus))
    assert len(docs) == 24 and docs[0].contents.startswith("1973 oil crisis The 1973 oil crisis began")


def test_beir_qrels_header_is_required_and_splits_are_chosen(tmp_path: Path) -> None:
    headerless = tmp_path / "qrels.tsv"
    headerless.write_text("q1\td1\t1\n")
    with pytest.raises(InputError, match="expected 4 columns 'qid iter docid rel', found 3 .*header 'query-id corpus-id score'"):
        read_qrels(headerless)
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    for split in ("train", "dev"):
        (folder / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    with pytest.raises(InputError, match=r"no test.tsv and not exactly one split \(dev.tsv, train.tsv\)"):
        load_qrels(folder)
    (folder / "qrels" / "train.tsv").unlink()
    assert load_qrels(folder) == {"q1": {"d1": 1}}
    with pytest.raises(InputError, match="is a directory without corpus.jsonl"):
        resolve_corpus(folder)


def test_zero_shot_rerank_and_eval_straight_from_a_beir_folder(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """Every (query, paragraph) pair of the article re-ranked by the packaged MiniLM, judged by BEIR's qrels."""
    run = tmp_path / "all.run"
    docs = [d.docid for d in iter_corpus(BEIR / "corpus.jsonl")]
    run.write_text("".join(f"{qid} Q0 {d} {i + 1} {-float(i)} all\n"
                           for qid in load_topics(BEIR) for i, d in enumerate(docs)))
    out = tmp_path / "reranked.run"
    result = cli("rerank", "--model", "repbert", "--run", run, "--topics", BEIR, "--corpus", BEIR, "-o", out,
                 "--runtag", "minilm", "--device", "cpu")
    assert result.code == 0, result.stderr
    assert out.read_text().split("\n", 1)[0].endswith(" minilm")
    evaluated = cli("eval", out, run, "--qrels", BEIR, "-m", "RR@10", "-f", "json")
    assert evaluated.code == 0, evaluated.stderr
    means = {run: values["RR@10"] for run, values in json.loads(evaluated.stdout).items()}
    # The question's own paragraph is ranked high by a sentence encoder; the input order (paragraph order) is not.
    assert means[str(out)] > 0.6 > means[str(run)]


# ------------------------------------------------------------------------------ MS MARCO triples


def test_text_triples_are_groups() -> None:
    groups = read_groups(TRIPLES)
    assert len(groups) == 20
    first = groups[0]
    assert first.qid == "line1" and first.query == "is a little caffeine ok during pregnancy"
    assert first.pos[0].text.startswith("We don\u00e2\u0080\u0099t know a lot")  # the original file's mojibake, kept
    assert first.neg[0].text.startswith("It is generally safe for pregnant women to eat chocolate")
    # a passage known by its text gets the id FlagEmbedding records get: the same text, the same id
    from rankkit.formats.groups import text_docid

    assert first.pos[0].docid == text_docid(first.pos[0].text)


def test_qidpidtriples_need_texts(tmp_path: Path, cli: Callable[..., Any]) -> None:
    with pytest.raises(InputError, match="qidpidtriples .* hold ids only"):
        read_groups(ID_TRIPLES)
    out = tmp_path / "groups.jsonl"
    result = cli("mine", "--triples", ID_TRIPLES, "--collection", COLLECTION, "--queries", QUERIES, "-o", out)
    assert result.code == 0, result.stderr
    groups = read_groups(out)
    passages = {d.docid: d.text for d in iter_corpus(COLLECTION)}
    queries = read_topics(QUERIES)
    rows = [line.split("\t") for line in ID_TRIPLES.read_text().splitlines()]
    assert [(g.qid, g.pos[0].docid, g.neg[0].docid) for g in groups] == [tuple(r) for r in rows]
    assert all(g.query == queries[g.qid] and g.pos[0].text == passages[g.pos[0].docid] for g in groups)
    missing = cli("mine", "--triples", ID_TRIPLES, "-o", tmp_path / "x.jsonl")
    assert missing.code == 2 and "qidpidtriples hold ids" in missing.stderr
    short = tmp_path / "short.tsv"
    short.write_text("".join(COLLECTION.read_text().splitlines(keepends=True)[1:]))
    gone = cli("mine", "--triples", ID_TRIPLES, "--collection", short, "--queries", QUERIES, "-o", tmp_path / "y.jsonl")
    first_pid = COLLECTION.read_text().split("\t", 1)[0]
    assert gone.code == 2 and f"passage {first_pid!r} is not in" in gone.stderr
    assert not (tmp_path / "y.jsonl").exists()


def test_train_reads_text_triples_and_qidpidtriples(tmp_path: Path, cli: Callable[..., Any]) -> None:
    from rankkit.models.backbone import write_tiny_backbone

    backbone = write_tiny_backbone(tmp_path / "tiny", words=WORDS, hidden=24, layers=2, heads=2, intermediate=48,
                                   max_positions=512)
    common = ["--model", "mono", "--backbone", backbone, "--max-steps", "2", "--batch-size", "4",
              "--group-size", "2", "--device", "cpu"]
    text = cli("train", "--train", TRIPLES, "--output", tmp_path / "a", *common)
    assert text.code == 0, text.stderr
    meta = json.loads((tmp_path / "a" / "rankkit.json").read_text())
    assert meta["data"]["train"][0]["groups"] == 20
    ids = cli("train", "--train", ID_TRIPLES, "--collection", COLLECTION, "--queries", QUERIES,
              "--output", tmp_path / "b", *common)
    assert ids.code == 0, ids.stderr
    meta = json.loads((tmp_path / "b" / "rankkit.json").read_text())
    assert meta["data"]["train"][0]["groups"] == 20
    refused = cli("train", "--train", ID_TRIPLES, "--output", tmp_path / "c", *common)
    assert refused.code == 2 and "need --collection COLLECTION and --queries QUERIES" in refused.stderr
    stray = cli("train", "--train", TRIPLES, "--queries", QUERIES, "--output", tmp_path / "d", *common)
    assert stray.code == 2 and "--collection and --queries give the texts of qidpidtriples" in stray.stderr


# ------------------------------------------------------------------------------ irds: ids


@pytest.fixture(scope="module")
def irds_fixtures(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Data sets registered with ir_datasets that read the fixture files (this machine has no network)."""
    import ir_datasets
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TrecQrels, TrecQueries, TsvDocs, TsvQueries
    from ir_datasets.util import LocalDownload

    prefix = "rankkit-test"
    registry = ir_datasets.registry
    added = {
        f"{prefix}/squad-train": Dataset(TsvDocs(LocalDownload(COLLECTION), namespace=prefix, lang="en"),
                                         TsvQueries(LocalDownload(QUERIES), namespace=prefix, lang="en")),
        f"{prefix}/robust04-topics": Dataset(TrecQueries(LocalDownload(ROBUST04), namespace=prefix, lang="en")),
        f"{prefix}/dl19-qrels": Dataset(TrecQrels(LocalDownload(DL19_QRELS), {0: "not", 1: "rel", 2: "high", 3: "perfect"})),
        f"{prefix}/gone": Dataset(TsvQueries(LocalDownload(tmp_path_factory.mktemp("irds") / "absent.tsv"),
                                             namespace=prefix, lang="en")),
    }
    for name, dataset in added.items():
        if name not in registry._registered:
            registry.register(name, dataset)
    yield prefix


def test_irds_topics_qrels_and_corpus(irds_fixtures: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path / "cache"))
    assert load_topics(f"irds:{irds_fixtures}/squad-train") == read_topics(QUERIES)
    assert load_topics(f"irds:{irds_fixtures}/robust04-topics", "description") == read_topics(ROBUST04, "description")
    assert load_qrels(f"irds:{irds_fixtures}/dl19-qrels") == read_qrels(DL19_QRELS)
    corpus = resolve_corpus(f"irds:{irds_fixtures}/squad-train")
    assert corpus == irds_corpus_path(f"irds:{irds_fixtures}/squad-train") and str(corpus).startswith(str(tmp_path))
    assert {d.docid: d.contents for d in iter_corpus(corpus)} == {d.docid: d.text for d in iter_corpus(COLLECTION)}
    with pytest.raises(RankkitError, match="this ir_datasets data set has no docs"):
        resolve_corpus(f"irds:{irds_fixtures}/robust04-topics")


def test_irds_in_the_cli_and_its_one_line_errors(irds_fixtures: str, cli: Callable[..., Any], tmp_path: Path) -> None:
    by_id = cli("eval", TREC_RUN, "--qrels", f"irds:{irds_fixtures}/dl19-qrels", "-m", "nDCG@10", "-f", "tsv")
    by_file = cli("eval", TREC_RUN, "--qrels", DL19_QRELS, "-m", "nDCG@10", "-f", "tsv")
    assert by_id.code == 0 and by_id.stdout == by_file.stdout
    unknown = cli("eval", TREC_RUN, "--qrels", "irds:no-such/data-set")
    assert unknown.code == 2
    assert unknown.stderr.strip().splitlines() == [
        "rankkit: error: irds:no-such/data-set: ir_datasets knows no data set 'no-such/data-set' "
        "(see ir-datasets.com for the ids)"]
    never = tmp_path / "never.run"
    gone = cli("retrieve", "--index", tmp_path / "index", "--topics", f"irds:{irds_fixtures}/gone", "-o", never)
    lines = gone.stderr.strip().splitlines()
    assert gone.code == 2 and len(lines) == 1 and not never.exists()
    assert lines[0].startswith(f"rankkit: error: irds:{irds_fixtures}/gone: cannot read this ir_datasets data set (")
