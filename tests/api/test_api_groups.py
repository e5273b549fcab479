"""Training groups in memory (issue 39): ``rankkit.mine`` in Python returns what ``rankkit mine`` writes, and
``rankkit.train`` takes groups as a list of dicts, a pandas DataFrame or a ``datasets.Dataset`` as well as files,
training to the same weights as from the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from training_helpers import TOPICS, documents, tiny_backbone

import rankkit
from rankkit.errors import RankkitError

SETTINGS: dict[str, Any] = dict(max_steps=3, batch_size=4, group_size=3, lr=2e-3, seed=5, device="cpu")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Twelve queries, a first-stage run of every document per query, qrels of each topic's first two documents."""
    root = tmp_path_factory.mktemp("groups")
    docs = documents()
    queries = {f"t{i}": " ".join(topic.split()[:2]) for i, topic in enumerate(TOPICS)}
    run = {qid: {docid: float(len(docs) - n) for n, docid in enumerate(docs)} for qid in queries}
    qrels = {f"t{i}": {f"d{i}_0": 1, f"d{i}_1": 2} for i in range(len(TOPICS))}
    files = {"run": root / "run", "qrels": root / "qrels", "topics": root / "topics.tsv", "corpus": root / "corpus.tsv"}
    rankkit.write_run(files["run"], run, "bm25")
    files["qrels"].write_text("".join(f"{q} 0 {d} {r}\n" for q, js in qrels.items() for d, r in js.items()),
                              encoding="utf-8")
    files["topics"].write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()), encoding="utf-8")
    files["corpus"].write_text("".join(f"{d}\t{t}\n" for d, t in docs.items()), encoding="utf-8")
    return {"root": root, "backbone": tiny_backbone(root / "tiny"), "run": run, "qrels": qrels, "queries": queries,
            "docs": docs, "files": files}


def test_mine_in_python_returns_what_rankkit_mine_writes(cli: Callable[..., Any], inputs: dict[str, Any],
                                                          tmp_path: Path) -> None:
    groups = rankkit.mine(inputs["run"], inputs["qrels"], inputs["queries"], inputs["docs"], depth=20, negatives=4,
                          seed=7, output=tmp_path / "python.jsonl")
    files = inputs["files"]
    result = cli("mine", "--run", files["run"], "--qrels", files["qrels"], "--topics", files["topics"], "--corpus",
                 files["corpus"], "--output", tmp_path / "cli.jsonl", "--depth", 20, "--negatives", 4, "--seed", 7)
    assert result.code == 0, result.stderr
    written = (tmp_path / "cli.jsonl").read_text(encoding="utf-8")
    assert [json.loads(line) for line in written.splitlines()] == groups
    assert (tmp_path / "python.jsonl").read_text(encoding="utf-8") == written
    assert len(groups) == 12 and all(len(g["neg"]) == 4 and len(g["pos"]) == 2 for g in groups)
    # Inputs in other forms: files, and a DataFrame of passages.
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame({"docno": list(inputs["docs"]), "text": list(inputs["docs"].values())})
    assert rankkit.mine(files["run"], files["qrels"], files["topics"], frame, depth=20, negatives=4, seed=7) == groups
    ids = rankkit.mine(inputs["run"], inputs["qrels"], inputs["queries"], inputs["docs"], negatives=4, ids_only=True)
    assert "query" not in ids[0] and "text" not in ids[0]["pos"][0]


def test_mine_refuses_in_one_line(inputs: dict[str, Any]) -> None:
    with pytest.raises(RankkitError, match="no training group could be built from the run"):
        rankkit.mine(inputs["run"], {"nope": {"d0_0": 1}}, inputs["queries"], inputs["docs"])
    with pytest.raises(RankkitError, match="negatives must be an integer of at least 1"):
        rankkit.mine(inputs["run"], inputs["qrels"], inputs["queries"], inputs["docs"], negatives=0)


def weights(folder: Path) -> bytes:
    return (folder / "model.safetensors").read_bytes()


def test_train_takes_groups_in_memory_and_trains_as_from_the_file(inputs: dict[str, Any], tmp_path: Path) -> None:
    groups = rankkit.mine(inputs["run"], inputs["qrels"], inputs["queries"], inputs["docs"], negatives=4,
                          output=tmp_path / "groups.jsonl")
    common = dict(backbone=inputs["backbone"], **SETTINGS)
    rankkit.train("mono", tmp_path / "groups.jsonl", tmp_path / "file", **common)
    rankkit.train("mono", groups, tmp_path / "dicts", **common)
    assert weights(tmp_path / "dicts") == weights(tmp_path / "file")
    assert (tmp_path / "dicts" / "train-groups.jsonl").read_bytes() == (tmp_path / "groups.jsonl").read_bytes()
    recorded = json.loads((tmp_path / "dicts" / "rankkit.json").read_text(encoding="utf-8"))["data"]["train"]
    assert recorded[0]["path"].endswith("train-groups.jsonl")
    pandas = pytest.importorskip("pandas")
    rankkit.train("mono", pandas.DataFrame(groups), tmp_path / "frame", dev=groups[:3], **common)
    assert weights(tmp_path / "frame") == weights(tmp_path / "file")
    assert (tmp_path / "frame" / "dev-groups.jsonl").is_file()
    datasets = pytest.importorskip("datasets")
    rankkit.train("mono", datasets.Dataset.from_list(groups), tmp_path / "dataset", **common)
    assert weights(tmp_path / "dataset") == weights(tmp_path / "file")


def test_bad_groups_in_memory_are_one_line_naming_the_group(inputs: dict[str, Any], tmp_path: Path) -> None:
    good = {"query": "apple fruit", "pos": ["apple fruit red"], "neg": ["car engine"]}
    with pytest.raises(RankkitError, match=r"^train\[1\]: group has no positive passage$"):
        rankkit.train("mono", [good, {**good, "pos": []}], tmp_path / "out", backbone=inputs["backbone"], **SETTINGS)
    with pytest.raises(RankkitError, match=r"train\[0\] must be a group: a dict with query, pos and neg; got int"):
        rankkit.train("mono", [3], tmp_path / "out", backbone=inputs["backbone"], **SETTINGS)
    with pytest.raises(RankkitError, match="groups given in memory need output="):
        rankkit.train("mono", [good], backbone=inputs["backbone"], **SETTINGS)
