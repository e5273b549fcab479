"""Whole teacher lists: ``rankkit mine --teacher-list K`` and ``rankkit train --whole-lists`` (Set-Encoder §4.3)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from training_helpers import documents, tiny_backbone

from rankkit.docstore import open_docstore
from rankkit.errors import RankkitError
from rankkit.formats import Passage, TrainingGroup, read_groups, write_groups, write_qrels, write_run, write_topics
from rankkit.training import TrainConfig, train
from rankkit.training.mine import MineConfig, MineReport, iter_mined_groups
from rankkit.training.sampling import GroupScores, MicroBatches, whole_list

RUN = {"q1": {"d1": 5.0, "d2": 4.0, "d3": 4.0, "d4": 2.0, "d5": 1.0, "d6": 0.5},
       "q2": {"d4": 3.0, "d5": 2.0}}  # q2: no positive in its list
QRELS = {"q1": {"d2": 2, "d4": 1, "d6": 3}, "q2": {"d1": 1}}


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path / "cache"))
    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("".join(f"d{i}\ttext of d{i}\n" for i in range(1, 6)), encoding="utf-8")  # d6: no text
    paths = {"corpus": corpus, "run": tmp_path / "teacher.run", "qrels": tmp_path / "qrels.txt",
             "topics": tmp_path / "topics.tsv", "out": tmp_path / "lists.jsonl"}
    write_run(paths["run"], RUN, "teacher")
    write_qrels(paths["qrels"], QRELS)
    write_topics(paths["topics"], {"q1": "first", "q2": "second"})
    return paths


def test_mine_teacher_list_keeps_the_top_k_with_scores_and_graded_positives(files: dict[str, Path]) -> None:
    report = MineReport()
    with open_docstore(corpus=files["corpus"]) as store:
        groups = list(iter_mined_groups(files["run"], QRELS, {"q1": "first", "q2": "second"}, store,
                                        MineConfig(teacher_list=5), report))
    assert [g.qid for g in groups] == ["q1"] and report.no_positive_in_list == 1
    q1 = groups[0]
    # run order d1, d3, d2 (tie 4.0: docid descending), d4, d5; d6 is below the top 5.
    assert [(p.docid, p.label, p.score) for p in q1.pos] == [("d2", 2, 4.0), ("d4", 1, 2.0)]
    assert [(n.docid, n.score) for n in q1.neg] == [("d1", 5.0), ("d3", 4.0), ("d5", 1.0)]
    sampled = whole_list(q1, 10)
    assert sampled.docids == ("d1", "d3", "d2", "d4", "d5")  # the teacher's order, whole
    assert sampled.labels == (0, 0, 2, 1, 0)
    assert whole_list(q1, 3).docids == ("d1", "d3", "d2")  # cut to the group size, never sampled


def test_cli_teacher_list_round_trips_scores(cli: Any, files: dict[str, Path]) -> None:
    args = ["mine", "--run", files["run"], "--qrels", files["qrels"], "--topics", files["topics"],
            "--corpus", files["corpus"], "--output", files["out"], "--teacher-list", "6"]
    result = cli(*args)
    assert result.code == 0, result.stderr
    first = json.loads(files["out"].read_text().splitlines()[0])
    assert first["pos"][0] == {"docid": "d2", "text": "text of d2", "label": 2, "score": 4.0}
    group = read_groups(files["out"])[0]
    whole = whole_list(group, 10)
    assert whole.docids == ("d1", "d3", "d2", "d4", "d5")  # d6 has no text
    assert GroupScores().scores_of(whole) == [5.0, 4.0, 4.0, 2.0, 1.0]  # the teacher's scores, read from the group
    assert cli(*args[:-1], "0").code == 2
    assert "--skip-top does not apply" in cli(*args, "--skip-top", "1").stderr


def test_scores_are_read_only_when_every_candidate_has_one() -> None:
    group = TrainingGroup("q", "x", [Passage("a", "t", 1)], [Passage("b", "u", 0, 1.0)])
    assert whole_list(group, 5).scores is None
    with pytest.raises(RankkitError, match="without a score"):
        GroupScores().scores_of(whole_list(group, 5))
    assert whole_list(group, 5).docids == ("a", "b")  # no scores: positives, then negatives as stored


def write_lists(path: Path, count: int = 16, size: int = 6) -> Path:
    """Teacher lists over the tiny topics: the teacher scores a query's own-topic documents highest."""
    rng = random.Random(3)
    docs = documents()
    groups = []
    for n in range(count):
        topic = n % 12
        own = [f"d{topic}_{j}" for j in range(3)]
        others = rng.sample([d for d in docs if d not in own], size - 3)
        scored = [(d, 10.0 - i) for i, d in enumerate(own)] + [(d, 3.0 - i) for i, d in enumerate(others)]
        groups.append(TrainingGroup(
            f"q{n}", docs[own[0]].split()[0] + " " + docs[own[0]].split()[1],
            [Passage(d, docs[d], 3 - i, s) for i, (d, s) in enumerate(scored[:2])],
            [Passage(d, docs[d], 0, s) for d, s in scored[2:]]))
    write_groups(path, groups)
    return path


def test_whole_lists_train_the_set_encoder_with_ranknet_on_the_groups_scores(tmp_path: Path) -> None:
    backbone = tiny_backbone(tmp_path / "tiny", dropout=0.0)
    lists = write_lists(tmp_path / "lists.jsonl")
    groups = read_groups(lists)
    batches = MicroBatches(groups, seed=1, batch_size=4, group_size=6, grad_accum=1, rank=0, world=1,
                           teacher=GroupScores(), whole_lists=True)
    batch = batches.at_step(0)[0]
    assert batch.mask.all() and batch.teacher is not None
    assert all(t == sorted(t, reverse=True) for t in batch.teacher.tolist())  # teacher order, whole list
    assert [row[:2] for row in batch.labels.tolist()] == [[3.0, 2.0]] * 4  # two graded positives per list

    common: dict[str, Any] = dict(model="set-encoder", train=[lists], backbone=backbone, batch_size=4, group_size=6,
                                  lr=3e-3, seed=2, device="cpu", log_every=1, whole_lists=True)
    out = tmp_path / "stage2"
    train(TrainConfig(output=out, loss="ranknet", max_steps=12, **common))
    log = [json.loads(line) for line in (out / "train.log").read_text().splitlines()]
    curve = [r["loss"] for r in log if "loss" in r]
    assert sum(curve[-4:]) < sum(curve[:4])  # it learns the teacher's order
    assert json.loads((out / "rankkit.json").read_text())["training"]["loss"] == "ranknet"
    with pytest.raises(RankkitError, match="--loss listwise-ce reads slot 0"):
        train(TrainConfig(output=tmp_path / "lce", loss="listwise-ce", max_steps=1, **common))
