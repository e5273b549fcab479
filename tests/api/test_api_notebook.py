"""The Python API as a notebook uses it (issue 27): paths, dicts and DataFrames alike, experiment tables equal
to ``rankkit eval --format json``, ``rankkit.train``, ``load_model(...).rank``, and one-line errors."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

import pytest

import rankkit
from rankkit.errors import RankkitError
from rankkit.formats import read_qrels, read_run, read_topics

pandas = pytest.importorskip("pandas")

ROOT = Path(__file__).resolve().parents[2]
DL19 = ROOT / "examples" / "data" / "dl19"
QRELS = DL19 / "qrels.dl19-passage.txt"
RUNS = {name: DL19 / "runs" / f"{name}.dl19.txt"
        for name in ("BM25", "BM25_RM3", "D_BERT_KD_TASB", "OPEN_AI_ADA2", "SPLADE_P_P_ENSEMBLE_DISTIL")}
SMALL = Path(__file__).parents[1] / "data" / "corpus_small"
CHECKPOINTS = Path(__file__).parents[1] / "data" / "checkpoints-v0.1.0"


def close(a: Any, b: Any, tolerance: float = 1e-9) -> bool:
    """Nested dicts/lists equal, numbers to ``tolerance`` (None and NaN stand for the same missing value)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(close(a[k], b[k], tolerance) for k in a)
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str):
        return a == b
    missing = [x is None or (isinstance(x, float) and math.isnan(x)) for x in (a, b)]
    if any(missing):
        return all(missing)
    return abs(float(a) - float(b)) <= tolerance


# -- experiment equals rankkit eval ---------------------------------------------------------------------------

@pytest.mark.parametrize("options", [
    {},
    {"test": "both", "correction": "bonferroni", "alpha": 0.01, "permutations": 2000, "seed": 7},
])
def test_experiment_equals_rankkit_eval_json(cli: Callable[..., Any], options: dict[str, Any]) -> None:
    measures = ["nDCG@10", "RR(rel=2)@10", "AP", "R@1000", "num_ret"]
    paths = [str(p) for p in RUNS.values()]
    flags = [f for key, value in options.items() for f in (f"--{key}", str(value))]
    result = cli("eval", "--qrels", QRELS, *paths, "-b", paths[0], *[f for m in measures for f in ("-m", m)],
                 "--format", "json", *flags)
    assert result.code == 0, result.stderr
    expected = json.loads(result.stdout)
    data = rankkit.experiment(paths, str(QRELS), measures, baseline=0, as_frame=False, **options)
    assert data == expected  # the same code computes them: equal, not just close
    table = rankkit.experiment(paths, QRELS, measures, baseline=paths[0], **options)
    assert list(table["name"]) == paths  # baseline first, then the runs in the order given
    for _, row in table.iterrows():
        entry = expected[row["name"]]
        for m in measures:
            assert close(row[m], entry[m])
            tests = entry.get("significance", {}).get(m)
            if m == "num_ret":
                assert f"{m} delta" not in table.columns  # a counter: not tested, as in the CLI
                continue
            for field in ("delta", "p_t", "p_t_adjusted", "p_randomization", "p_randomization_adjusted"):
                assert close(row[f"{m} {field}"], None if tests is None else tests[field])
            mark = row[f"{m} significant"]
            assert (mark is pandas.NA) if tests is None else bool(mark) == tests["significant"]
    per_query = rankkit.experiment(paths, QRELS, measures[:2], per_query=True)
    assert list(per_query.columns) == ["name", "qid", "measure", "value"] and len(per_query) == 5 * 43 * 2


def test_experiment_names_and_baselines() -> None:
    frames = {name: rankkit.to_frame(read_run(path)) for name, path in RUNS.items()}
    by_name = rankkit.experiment(frames, QRELS, "nDCG@10", baseline="BM25")
    listed = rankkit.experiment(list(RUNS.values()), QRELS, "nDCG@10", names=list(RUNS), baseline=0)
    pandas.testing.assert_frame_equal(by_name, listed)
    assert by_name["nDCG@10 significant"].tolist()[1:] == [False, True, True, True]  # RM3 is not, the dense runs are
    later = rankkit.experiment(list(RUNS.values()), QRELS, "nDCG@10", names=list(RUNS), baseline="OPEN_AI_ADA2")
    assert later["name"].tolist()[0] == "OPEN_AI_ADA2"
    # A baseline file that is not among the runs is added to them, as rankkit eval -b FILE does.
    added = rankkit.experiment([RUNS["OPEN_AI_ADA2"]], QRELS, "nDCG@10", baseline=str(RUNS["BM25"]))
    assert added["name"].tolist() == [str(RUNS["BM25"]), str(RUNS["OPEN_AI_ADA2"])]
    unnamed = rankkit.experiment([read_run(RUNS["BM25"]), frames["OPEN_AI_ADA2"]], QRELS, "nDCG@10")
    assert unnamed["name"].tolist() == ["run1", "run2"]


# -- paths, dicts and DataFrames give the same numbers ------------------------------------------------------------

def frames_of(run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]], style: str) -> tuple[Any, Any]:
    return rankkit.to_frame(run, columns=style), rankkit.to_frame(qrels, kind="qrels", columns=style)


def test_paths_dicts_and_frames_give_the_same_numbers() -> None:
    run, qrels = read_run(RUNS["BM25"]), read_qrels(QRELS)
    pt_run, pt_qrels = frames_of(run, qrels, "pyterrier")
    im_run, im_qrels = frames_of(run, qrels, "ir_measures")
    assert list(pt_run.columns) == ["qid", "docno", "score", "rank"] and list(pt_qrels.columns) == ["qid", "docno", "label"]
    assert list(im_run.columns) == ["query_id", "doc_id", "score"] and list(im_qrels.columns) == [
        "query_id", "doc_id", "relevance"]
    measures = ["nDCG@10", "AP", "R@1000", "P(rel=2)@10"]
    reference = rankkit.evaluate(RUNS["BM25"], QRELS, measures)
    assert reference["nDCG@10"] == pytest.approx(0.5058, abs=5e-5)
    for given_run, given_qrels in [(str(RUNS["BM25"]), str(QRELS)), (run, qrels), (pt_run, pt_qrels), (im_run, im_qrels),
                                   (pt_run, QRELS), (run, im_qrels)]:
        assert rankkit.evaluate(given_run, given_qrels, measures) == reference
    # Frames in: a frame of per-query values out (dicts in: a dict).
    per_query = rankkit.evaluate(pt_run, qrels, "nDCG@10", per_query=True)
    assert list(per_query.columns) == ["qid", "measure", "value"] and len(per_query) == 43
    as_dict = rankkit.evaluate(run, qrels, "nDCG@10", per_query=True)
    assert dict(zip(per_query["qid"], per_query["value"])) == {q: v["nDCG@10"] for q, v in as_dict.items()}
    # A PyTerrier frame with docid (internal numbers) beside docno reads docno; a rank-only frame keeps its order.
    with_docid = pt_run.assign(docid=range(len(pt_run)))
    assert rankkit.evaluate(with_docid, qrels, measures) == reference
    rank_only = pt_run.drop(columns="score")
    assert rankkit.evaluate(rank_only, qrels, measures) == reference
    # fuse: frames in, a frame out, the same fused run.
    tasb = read_run(RUNS["D_BERT_KD_TASB"])
    fused = rankkit.fuse([run, tasb], "rrf", k=100)
    fused_frame = rankkit.fuse([pt_run, str(RUNS["D_BERT_KD_TASB"])], "rrf", k=100)
    assert list(fused_frame.columns) == ["qid", "docno", "score", "rank"]
    assert rankkit.from_frame(fused_frame) == fused
    assert rankkit.evaluate(fused_frame, pt_qrels, measures) == rankkit.evaluate(fused, qrels, measures)


def test_frames_round_trip() -> None:
    run, qrels, topics = read_run(RUNS["BM25"]), read_qrels(QRELS), read_topics(DL19 / "topics.dl19-passage.txt")
    frame = rankkit.to_frame(run, queries=topics)
    assert list(frame.columns) == ["qid", "query", "docno", "score", "rank"]
    first = frame[frame["qid"] == "264014"]
    assert first["rank"].tolist() == list(range(1, len(first) + 1))
    assert first["score"].is_monotonic_decreasing
    assert rankkit.from_frame(frame) == run and rankkit.from_frame(frame, "topics") == topics
    assert rankkit.from_frame(rankkit.to_frame(qrels)) == qrels  # int labels: qrels
    assert rankkit.from_frame(rankkit.to_frame(topics)) == topics
    passages = {"d1": "one", "d2": "two"}
    assert rankkit.from_frame(rankkit.to_frame(passages, kind="passages")) == passages
    # Numeric ids (as pandas reads them from CSV) become strings.
    numeric = pandas.DataFrame({"qid": [1, 1], "docno": [10, 11], "score": [0.5, 0.7]})
    assert rankkit.from_frame(numeric) == {"1": {"10": 0.5, "11": 0.7}}


def test_rerank_takes_frames_with_query_and_text_columns(tmp_path: Path) -> None:
    from rankkit.docstore import open_docstore
    from rankkit.formats.sources import resolve_corpus

    from rankkit.formats import iter_corpus

    topics = read_topics(SMALL / "topics.tsv")
    docids = [doc.docid for doc, _ in zip(iter_corpus(SMALL / "passages.tsv.gz"), range(5))]
    run = {qid: {d: float(-i) for i, d in enumerate(docids[k:k + 3])} for k, qid in enumerate(list(topics)[:2])}
    with open_docstore(corpus=resolve_corpus(SMALL / "passages.tsv.gz")) as store:
        texts = store.get_many(sorted(set(docids)))
    model = rankkit.load_model("mono", CHECKPOINTS / "mono")
    as_dict = rankkit.rerank(model, run, topics, texts)
    frame = rankkit.to_frame(run, queries=topics)
    frame["text"] = [texts[d] for d in frame["docno"]]  # PyTerrier's text column
    as_frame = rankkit.rerank(model, frame)  # queries and passages from the frame's columns
    assert list(as_frame.columns) == ["qid", "query", "docno", "score", "rank"]
    assert rankkit.from_frame(as_frame) == as_dict
    topics_frame = pandas.DataFrame({"qid": list(topics), "query": list(topics.values())})
    passages_frame = pandas.DataFrame({"docno": list(texts), "text": list(texts.values())})
    assert rankkit.from_frame(rankkit.rerank(model, frame[["qid", "docno", "score"]], topics_frame,
                                             passages_frame)) == as_dict
    from_corpus = rankkit.rerank(model, run, SMALL / "topics.tsv", SMALL / "passages.tsv.gz")
    assert from_corpus == as_dict


def test_search_with_a_frame_of_queries() -> None:
    from _lexical_index import TOPICS, small_index

    topics = read_topics(TOPICS)
    frame = pandas.DataFrame({"qid": list(topics), "query": list(topics.values())})
    as_frame = rankkit.search(small_index(), frame, k=5)
    assert list(as_frame.columns) == ["qid", "query", "docno", "score", "rank"]
    assert rankkit.from_frame(as_frame) == rankkit.search(small_index(), topics, k=5)


# -- rank() like sentence-transformers' CrossEncoder.rank -----------------------------------------------------------

def test_rank_like_cross_encoder_rank() -> None:
    model = rankkit.load_model("mono", CHECKPOINTS / "mono")
    passages = ["apple fruit red apple", "car engine fuel car", "river water flow", "apple red fruit"]
    ranked = model.rank("apple fruit", passages, return_documents=True)
    scores = model.rerank_scores(["apple fruit"], [passages])[0].tolist()
    assert [r["corpus_id"] for r in ranked] == sorted(range(4), key=lambda i: -scores[i])
    assert [r["score"] for r in ranked] == pytest.approx(sorted(scores, reverse=True))
    assert all(r["text"] == passages[r["corpus_id"]] for r in ranked)
    assert model.rank("apple fruit", passages, top_k=2) == [{k: v for k, v in r.items() if k != "text"} for r in ranked[:2]]
    by_id = model.rank("apple fruit", dict(zip("abcd", passages)), top_k=1)
    assert by_id == [{"corpus_id": "abcd"[ranked[0]["corpus_id"]], "score": ranked[0]["score"]}]
    assert model.rank("apple fruit", []) == []
    assert not model.training  # scored in eval mode, left as it was


# -- rankkit.train --------------------------------------------------------------------------------------------------

def test_train_equals_the_command(cli: Callable[..., Any], tmp_path: Path) -> None:
    from training_helpers import tiny_backbone, write_groups

    backbone, groups = tiny_backbone(tmp_path / "tiny"), write_groups(tmp_path / "groups.jsonl", count=16)
    settings = {"max_steps": 3, "batch_size": 4, "group_size": 3, "lr": 1e-3, "seed": 5, "device": "cpu"}
    seen: list[int] = []
    result = rankkit.train("matrank", groups, tmp_path / "api", backbone=backbone, encoder="bi", hidden=16,
                           callbacks=[lambda info: seen.append(info.step)], **settings)
    assert result.steps == 3 and seen == [1, 2, 3]
    assert (tmp_path / "api" / "metrics.csv").is_file() and (tmp_path / "api" / "training.png").is_file()
    flags = [f for key, value in settings.items() for f in (f"--{key.replace('_', '-')}", str(value))]
    done = cli("train", "--model", "matrank", "--train", groups, "--output", tmp_path / "cli", "--backbone", backbone,
               "--encoder", "bi", "--hidden", "16", *flags)
    assert done.code == 0, done.stderr
    assert (tmp_path / "api" / "model.safetensors").read_bytes() == (tmp_path / "cli" / "model.safetensors").read_bytes()
    api_meta = json.loads((tmp_path / "api" / "rankkit.json").read_text())
    cli_meta = json.loads((tmp_path / "cli" / "rankkit.json").read_text())
    assert api_meta["hparams"] == cli_meta["hparams"] and api_meta["training"] == cli_meta["training"]


def test_train_settings_match_the_command_defaults() -> None:
    """``rankkit.train`` and ``rankkit train`` start from the same defaults (one declaration: TrainConfig)."""
    import inspect

    from rankkit.cli.train_cmd import train_command
    from rankkit.training.settings import defaults, setting_names

    options = {name: p.default for name, p in inspect.signature(train_command).parameters.items()
               if hasattr(p.default, "default")}
    assert set(setting_names()) <= set(options)
    assert {name: options[name].default for name in setting_names()} == defaults()


# -- one-line errors --------------------------------------------------------------------------------------------------

BAD_CALLS: list[tuple[str, Callable[[], Any], str]] = [
    ("a number as a run", lambda: rankkit.evaluate(123, {"1": {"a": 1}}), "run must be a TREC run file"),
    ("a list as qrels", lambda: rankkit.evaluate({"1": {"a": 1.0}}, [1, 2]), "qrels must be a qrels file"),
    ("a run file that is not there", lambda: rankkit.evaluate("nope.run", QRELS), "nope.run: no such file"),
    ("a ranking as a list", lambda: rankkit.evaluate({"1": ["a"]}, QRELS), "query '1' maps to a list"),
    ("a score that is text", lambda: rankkit.evaluate({"1": {"a": "x"}}, QRELS), "'x' is not a number"),
    ("a NaN score", lambda: rankkit.evaluate({"1": {"a": float("nan")}}, QRELS), "is not a finite number"),
    ("a fractional label", lambda: rankkit.evaluate({"1": {"a": 1.0}}, {"1": {"a": 0.5}}), "label 0.5 is not an integer"),
    ("measures as a number", lambda: rankkit.evaluate({"1": {"a": 1.0}}, {"1": {"a": 1}}, 5), "not a int (5)"),
    ("a frame without docno", lambda: rankkit.evaluate(pandas.DataFrame({"qid": ["1"], "score": [1.0]}), QRELS),
     "has no 'docno' or 'docid' or 'doc_id' column (its columns: qid, score)"),
    ("a frame with a NaN score", lambda: rankkit.evaluate(
        pandas.DataFrame({"qid": ["1"], "docno": ["a"], "score": [float("nan")]}), QRELS), "row 0: score nan is not"),
    ("a frame with a pair twice", lambda: rankkit.evaluate(
        pandas.DataFrame({"qid": ["1", "1"], "docno": ["a", "a"], "score": [1.0, 2.0]}), QRELS),
     "row 1: document 'a' of query '1' appears twice"),
    ("a frame of text labels", lambda: rankkit.evaluate({"1": {"a": 1.0}}, pandas.DataFrame(
        {"qid": ["1"], "docno": ["a"], "label": ["high"]})), "label 'high' is not an integer"),
    ("a frame without a query id", lambda: rankkit.from_frame(pandas.DataFrame({"x": [1]})), "cannot tell what"),
    ("to_frame of a number", lambda: rankkit.to_frame(5), "to_frame takes a run, qrels"),
    ("an unknown kind", lambda: rankkit.to_frame({"1": "a"}, kind="corpus"), "unknown kind 'corpus'"),
    ("from_frame of a dict", lambda: rankkit.from_frame({"1": "a"}), "from_frame takes a pandas DataFrame"),
    ("experiment of a number", lambda: rankkit.experiment(5, QRELS), "runs must be a list of runs"),
    ("too few names", lambda: rankkit.experiment([RUNS["BM25"], RUNS["BM25_RM3"]], QRELS, names=["a"]), "one name per run"),
    ("the same name twice", lambda: rankkit.experiment([{"1": {"a": 1.0}}] * 2, QRELS, names=["a", "a"]),
     "two runs are named 'a'"),
    ("a baseline out of range", lambda: rankkit.experiment([RUNS["BM25"]], QRELS, baseline=3), "baseline=3 is not the index"),
    ("an unknown baseline", lambda: rankkit.experiment({"a": RUNS["BM25"]}, QRELS, baseline="b"), "baseline 'b' is not among"),
    ("an unknown test", lambda: rankkit.experiment([RUNS["BM25"], RUNS["BM25_RM3"]], QRELS, baseline=0, test="z"),
     "unknown test 'z'"),
    ("a negative seed", lambda: rankkit.experiment([RUNS["BM25"]], QRELS, seed=-1), "seed must be an integer of at least 0"),
    ("a measure that does not exist", lambda: rankkit.evaluate(RUNS["BM25"], QRELS, "nDCG@ten"), "nDCG@ten"),
    ("fuse of one path", lambda: rankkit.fuse(str(RUNS["BM25"])), "fuse: runs must be a list of runs"),
    ("a run without texts", lambda: rankkit.rerank("repbert", {"1": {"a": 1.0}}), "no queries given"),
    ("a model that is a number", lambda: rankkit.rerank(3, {"1": {"a": 1.0}}, {"1": "q"}, {"a": "p"}), "model must be"),
    ("passages that are a number", lambda: rankkit.rerank("repbert", {"1": {"a": 1.0}}, {"1": "q"}, 7), "passages must be"),
    ("a passage that is not text", lambda: rankkit.rerank("repbert", {"1": {"a": 1.0}}, {"1": "q"}, {"a": 3}),
     "the text of 'a' is a int"),
    ("depth zero", lambda: rankkit.rerank("repbert", {"1": {"a": 1.0}}, {"1": "q"}, {"a": "p"}, depth=0), "depth must be"),
    ("k as text", lambda: rankkit.fuse([{"1": {"a": 1.0}}] * 2, k="10"), "k must be an integer"),
    ("a write_run tag with a space", lambda: rankkit.write_run("/tmp/x.run", {"1": {"a": 1.0}}, "my tag"), "one non-empty word"),
    ("rank with a number as query", lambda: rankkit.load_model("mono", CHECKPOINTS / "mono").rank(3, ["a"]),
     "the query must be a string"),
    ("rank of one string", lambda: rankkit.load_model("mono", CHECKPOINTS / "mono").rank("q", "abc"), "passages must be a list"),
    ("rank with top_k 0", lambda: rankkit.load_model("mono", CHECKPOINTS / "mono").rank("q", ["a"], top_k=0), "top_k must be"),
    ("train: a setting of the wrong type", lambda: rankkit.train("repbert", "g.jsonl", "/tmp/o", batch_size="8"),
     "train(): batch_size must be an integer, got '8'"),
    ("train: an unknown setting", lambda: rankkit.train("repbert", "g.jsonl", "/tmp/o", epoch=2),
     "train(): 'epoch' is neither a rankkit train setting"),
    ("train: model_options", lambda: rankkit.train("repbert", "g.jsonl", "/tmp/o", model_options={}), "keyword arguments"),
    ("train: a model option of the wrong value", lambda: rankkit.train("matrank", "g.jsonl", "/tmp/o", encoder="tri"),
     "encoder must be one of"),
    ("train: no model", lambda: rankkit.train(train="g.jsonl", output="/tmp/o"), "--model is required"),
]


@pytest.mark.parametrize(("call", "message"), [(c, m) for _, c, m in BAD_CALLS], ids=[n for n, _, _ in BAD_CALLS])
def test_user_mistakes_are_one_line_errors(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(RankkitError) as caught:
        call()
    text = str(caught.value)
    assert message in text and "\n" not in text, text


def test_pandas_is_optional(tmp_path: Path) -> None:
    """Without pandas: dicts and paths work, asking for a frame is one line (checked in a fresh process)."""
    code = f"""
import sys
sys.modules["pandas"] = None  # as if not installed: import pandas raises ImportError
import rankkit
from rankkit.errors import RankkitError
print(rankkit.evaluate({str(RUNS["BM25"])!r}, {str(QRELS)!r}, "nDCG@10"))
data = rankkit.experiment([{str(RUNS["BM25"])!r}, {str(RUNS["BM25_RM3"])!r}], {str(QRELS)!r}, "nDCG@10", baseline=0,
                          as_frame=False)
print(sorted(data))
for call in (lambda: rankkit.experiment([{str(RUNS["BM25"])!r}], {str(QRELS)!r}),
             lambda: rankkit.to_frame({{"1": {{"a": 1.0}}}})):
    try:
        call()
    except RankkitError as err:
        print(err)
"""
    from test_api import run_python

    result = run_python(code)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "{'nDCG@10': 0.5058310024399072}"
    assert lines[1] == str(sorted(str(p) for p in (RUNS["BM25"], RUNS["BM25_RM3"])))
    assert lines[2] == ("rankkit.experiment (as_frame=False returns plain dicts) needs pandas, which is not installed "
                        "(pip install pandas)")
    assert lines[3] == "a run as a DataFrame needs pandas, which is not installed (pip install pandas)"


def test_dicts_never_import_pandas() -> None:
    from test_api import run_python

    code = f"""
import sys, rankkit
rankkit.evaluate({str(RUNS["BM25"])!r}, {str(QRELS)!r}, "nDCG@10")
rankkit.fuse([{{"1": {{"a": 1.0}}}}, {{"1": {{"b": 2.0}}}}])
rankkit.experiment([{str(RUNS["BM25"])!r}, {str(RUNS["BM25_RM3"])!r}], {str(QRELS)!r}, baseline=0, as_frame=False)
print(sorted(m for m in ("pandas", "matplotlib", "torch") if m in sys.modules))
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
