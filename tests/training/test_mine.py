"""Hard-negative mining: positives, which documents may be negatives, strategies, determinism, CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from _lexical_index import CORPUS, QRELS, TOPICS, small_index

from rankkit.docstore import open_docstore
from rankkit.errors import RankkitError
from rankkit.formats import read_groups, read_qrels, write_qrels, write_run, write_topics
from rankkit.lexical.search import retrieve_bm25
from rankkit.training.mine import MineConfig, MineReport, draw_order, iter_mined_groups, mine

RUN = {
    # q1: d1 (rel 3), d2 (rel 2), d3 (rel 1), d4 (judged 0); dmissing has no text in the corpus.
    "q1": {
        "d1": 10.0,
        "d4": 9.0,
        "d7": 8.0,
        "d2": 7.0,
        "d8": 6.0,
        "d9": 5.0,
        "d3": 4.0,
        "d10": 3.0,
        "d11": 2.0,
        "dmissing": 1.5,
        "d12": 1.0,
    },
    "q2": {"d5": 3.0, "d6": 2.0},  # only a judged non-relevant: no positive
    "q3": {"d6": 5.0, "d7": 4.0},  # has a positive but no topic text
    "q5": {"d7": 2.0, "d8": 1.0},  # its only positive has no text
    "q6": {"d6": 9.0},  # positive d6, but no negative candidate
}
QRELS_INLINE = {
    "q1": {"d1": 3, "d2": 2, "d3": 1, "d4": 0, "dX": 2},
    "q2": {"d5": 0},
    "q3": {"d6": 1},
    "q4": {"d7": 1},  # not in the run
    "q5": {"dY": 1},
    "q6": {"d6": 1},
}
TOPICS_INLINE = {"q1": "first query", "q2": "second query", "q4": "fourth", "q5": "fifth", "q6": "sixth"}


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path / "cache"))
    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("".join(f"d{i}\ttext of d{i}\n" for i in range(1, 13)), encoding="utf-8")
    paths = {
        "corpus": corpus,
        "run": tmp_path / "run.txt",
        "qrels": tmp_path / "qrels.txt",
        "topics": tmp_path / "topics.tsv",
        "out": tmp_path / "groups.jsonl",
    }
    write_run(paths["run"], RUN, "bm25")
    write_qrels(paths["qrels"], QRELS_INLINE)
    write_topics(paths["topics"], TOPICS_INLINE)
    return paths


def mined(files: dict[str, Path], **config: object) -> tuple[dict, MineReport]:
    report = MineReport()
    with open_docstore(corpus=files["corpus"]) as store:
        groups = list(
            iter_mined_groups(files["run"], QRELS_INLINE, TOPICS_INLINE, store, MineConfig(**config), report)
        )  # type: ignore[arg-type]
    return {g.qid: g for g in groups}, report


def test_top_negatives_exclude_every_judged_relevant(files: dict[str, Path]) -> None:
    groups, report = mined(files, strategy="top", negatives=3, min_rel=2)
    q1 = groups["q1"]
    assert [(p.docid, p.label) for p in q1.pos] == [("d1", 3), ("d2", 2)]  # dX has no text
    assert [p.text for p in q1.pos] == ["text of d1", "text of d2"]
    # d3 (0 < rel 1 < min_rel) is not clearly negative: excluded; d4 (judged 0) is a fine negative.
    assert [(n.docid, n.score, n.label) for n in q1.neg] == [("d4", 9.0, 0), ("d7", 8.0, 0), ("d8", 6.0, 0)]
    assert report.missing_positive_text == ["dX"]


def test_skip_top_and_depth(files: dict[str, Path]) -> None:
    groups, _ = mined(files, strategy="top", negatives=3, skip_top=2)
    assert [n.docid for n in groups["q1"].neg] == ["d7", "d8", "d9"]
    groups, report = mined(files, strategy="top", negatives=8, depth=5)
    assert [n.docid for n in groups["q1"].neg] == ["d4", "d7", "d8"]
    assert report.short == 1 and report.min_negatives == 3


def test_candidate_without_text_is_replaced(files: dict[str, Path]) -> None:
    groups, report = mined(files, strategy="top", negatives=3, skip_top=7)
    assert [n.docid for n in groups["q1"].neg] == ["d10", "d11", "d12"]
    assert report.missing_candidate_text == ["dmissing"]


def test_random_is_seeded_per_query_and_order_independent(files: dict[str, Path], tmp_path: Path) -> None:
    a, _ = mined(files, negatives=4, seed=1)
    b, _ = mined(files, negatives=4, seed=1)
    assert [n.docid for n in a["q1"].neg] == [n.docid for n in b["q1"].neg]
    # Same qid, same seed: same draw whatever else the run holds and in whatever order.
    alone = tmp_path / "alone.txt"
    write_run(alone, {"q9": {"x": 1.0}, "q1": RUN["q1"]}, "bm25")
    report = MineReport()
    with open_docstore(corpus=files["corpus"]) as store:
        c = {
            g.qid: g
            for g in iter_mined_groups(
                alone, QRELS_INLINE, TOPICS_INLINE, store, MineConfig(negatives=4, seed=1), report
            )
        }
    assert [n.docid for n in c["q1"].neg] == [n.docid for n in a["q1"].neg]
    draws = {tuple(n.docid for n in mined(files, negatives=4, seed=s)[0]["q1"].neg) for s in range(8)}
    assert len(draws) > 1  # the seed matters
    allowed = ["d4", "d7", "d8", "d9", "d10", "d11", "d12"]
    for draw in draws:
        assert set(draw) <= set(allowed) and list(draw) == sorted(draw, key=allowed.index)  # in rank order


def test_draw_order_is_a_permutation() -> None:
    candidates = [(f"d{i}", float(-i)) for i in range(20)]
    shuffled = draw_order("q", candidates, MineConfig(seed=3))
    assert sorted(shuffled) == sorted(candidates) and shuffled != candidates
    assert draw_order("q", candidates, MineConfig(strategy="top")) == candidates


def test_summary_counts(files: dict[str, Path]) -> None:
    groups, report = mined(files, negatives=2)
    assert list(groups) == ["q1"]
    assert (
        report.written,
        report.no_positive,
        report.not_in_topics,
        report.no_text,
        report.no_negatives,
        report.not_in_run,
    ) == (1, 1, 1, 1, 1, 1)
    lines = "\n".join(report.lines(2))
    assert "groups written: 1" in lines and "absent from the run: 1" in lines


@pytest.mark.parametrize(
    "config, message",
    [
        (MineConfig(strategy="best"), "unknown --strategy 'best'; known: random, top"),  # type: ignore[arg-type]
        (MineConfig(depth=10, skip_top=10), "--skip-top must be in"),
        (MineConfig(min_rel=0), "--min-rel must be at least 1"),
        (MineConfig(negatives=0), "--negatives must be at least 1"),
    ],
)
def test_bad_settings(config: MineConfig, message: str) -> None:
    with pytest.raises(RankkitError, match=message):
        config.check()


def test_cli_mine_writes_groups_train_reads(cli, files: dict[str, Path]) -> None:
    args = [
        "mine",
        "--run",
        files["run"],
        "--qrels",
        files["qrels"],
        "--topics",
        files["topics"],
        "--output",
        files["out"],
        "--negatives",
        "2",
        "--strategy",
        "top",
    ]
    result = cli(*args, "--corpus", files["corpus"])
    assert result.code == 0, result.stderr
    assert "groups written: 1" in result.stderr and "2 judged positives have no text" in result.stderr
    groups = read_groups(files["out"])
    assert [(g.qid, [n.docid for n in g.neg]) for g in groups] == [("q1", ["d4", "d7"])]
    first = files["out"].read_bytes()
    assert cli(*args, "--corpus", files["corpus"]).code == 0 and files["out"].read_bytes() == first
    neither = cli(*args)
    assert neither.code == 2 and "exactly one" in neither.stderr
    missing = cli(
        "mine",
        "--run",
        files["run"].with_name("nope.txt"),
        "--qrels",
        files["qrels"],
        "--topics",
        files["topics"],
        "--output",
        files["out"],
        "--corpus",
        files["corpus"],
    )
    assert missing.code == 2 and "nope.txt: no such file" in missing.stderr


def test_mine_real_bm25_run_from_index_and_corpus(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path / "cache"))
    index = small_index()
    run = tmp_path / "bm25.txt"
    retrieve_bm25(index, TOPICS, run, k=100)
    outputs = []
    for source in (["--index", index], ["--corpus", CORPUS, "--cache-dir", tmp_path / "cache"]):
        out = tmp_path / f"groups{len(outputs)}.jsonl"
        result = cli(
            "mine",
            "--run",
            run,
            "--qrels",
            QRELS,
            "--topics",
            TOPICS,
            "--output",
            out,
            "--depth",
            "100",
            "--negatives",
            "8",
            "--seed",
            "5",
            *source,
        )
        assert result.code == 0, result.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]  # same groups whichever store supplies the text
    qrels = read_qrels(QRELS)
    groups = read_groups(tmp_path / "groups0.jsonl")
    assert len(groups) == 8
    for group in groups:
        assert len(group.neg) == 8
        assert all(qrels[group.qid].get(n.docid, 0) <= 0 for n in group.neg)
        assert all(qrels[group.qid][p.docid] == p.label >= 1 for p in group.pos)


def test_mine_function_returns_report(files: dict[str, Path]) -> None:
    with open_docstore(corpus=files["corpus"]) as store:
        report = mine(
            files["run"], files["qrels"], files["topics"], store, files["out"], MineConfig(negatives=2)
        )
    assert report.written == 1 and len(read_groups(files["out"])) == 1
