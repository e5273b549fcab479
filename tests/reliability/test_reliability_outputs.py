"""Outputs that are what they say, round 4 (issue 38): nothing written into (or deleted through) a checkpoint
folder, export temporaries cleaned on failure, ids that stay valid from input to run, a training file
pinned while training reads it, model cards rendered by a serializer, bounded log readers, blank-line
floods that end quickly, and a calibration child bound to its parent (docs/RELIABILITY.md).
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from training_helpers import documents, write_corpus, write_groups, write_topics

from rankkit.errors import RankkitError
from rankkit.formats import write_run

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINTS = ROOT / "tests" / "data" / "checkpoints-v0.1.0"


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A run, topics and corpus to re-rank, and a cache folder of this test's own."""
    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path / "cache"))
    docids = sorted(documents())
    write_run(tmp_path / "first.run", {f"t{i}": {d: float(k) for k, d in enumerate(docids[:3])} for i in range(2)}, "x")
    return {"root": tmp_path, "corpus": write_corpus(tmp_path / "corpus.jsonl"), "run": tmp_path / "first.run",
            "topics": write_topics(tmp_path / "topics.tsv"), "cache": tmp_path / "cache", "out": tmp_path / "out.run"}


def one_line(code: int, stderr: str, expected: int = 2) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.startswith("rankkit: error:")]
    assert code == expected and len(lines) == 1, f"exit {code}: {stderr[-2000:]}"
    assert "Traceback" not in stderr, stderr[-2000:]
    return lines[0]


def tree(folder: Path) -> dict[str, bytes | str]:
    """Every entry below ``folder`` (links not followed) with its bytes, or its link target."""
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        out[key] = f"-> {os.readlink(path)}" if path.is_symlink() else path.read_bytes() if path.is_file() else "dir"
    return out


def rerank_onnx(cli: Callable[..., Any], ws: dict[str, Path], checkpoint: Path, *extra: object) -> Any:
    return cli("rerank", "--model", "mono", "--checkpoint", checkpoint, "--run", ws["run"], "--topics", ws["topics"],
               "--corpus", ws["corpus"], "-o", ws["out"], "--device", "cpu", "--backend", "onnx", *extra)


# ------------------------------------------------------------------ nothing written into a checkpoint


def test_onnx_exports_are_never_written_into_the_checkpoint(cli: Callable[..., Any], ws: dict[str, Path]) -> None:
    """``--backend onnx`` wrote ``CHECKPOINT/onnx/`` (into a read-only checkpoint too: root writes anyway);
    the export now lives in the cache, keyed by the weights, and the checkpoint is unchanged byte for byte."""
    folder = ws["root"] / "ck"
    shutil.copytree(CHECKPOINTS / "mono", folder)
    before = tree(folder)
    result = rerank_onnx(cli, ws, folder)
    assert result.code == 0, result.stderr
    assert tree(folder) == before
    exports = sorted(p.name for p in (ws["cache"] / "onnx").rglob("*.onnx"))
    assert len(exports) == 1 and exports[0].startswith("encoder-")


def test_no_export_file_is_deleted_through_a_link(cli: Callable[..., Any], ws: dict[str, Path]) -> None:
    """``CHECKPOINT/onnx`` a link to another folder: its ``encoder-*.json``, ``.bin`` and ``.onnx`` files were
    deleted as stale exports (data loss outside every output). Now nothing there is touched."""
    folder = ws["root"] / "ck"
    shutil.copytree(CHECKPOINTS / "mono", folder)
    other = ws["root"] / "someone-elses"
    other.mkdir()
    for name in ("encoder-0123456789abcdef.fp32.onnx", "encoder-0123456789abcdef.fp32.json", "encoder-weights.bin",
                 "encoder-notes.json"):
        (other / name).write_text(f"{name}: not rankkit's")
    (folder / "onnx").symlink_to(other)
    before = tree(other)
    result = rerank_onnx(cli, ws, folder)
    assert result.code == 0, result.stderr
    assert tree(other) == before and (folder / "onnx").is_symlink()


def test_an_export_cache_folder_that_is_a_link_is_refused(cli: Callable[..., Any], ws: dict[str, Path]) -> None:
    """The cache's own key folder replaced by a link: refused in one line, nothing built or removed there."""
    folder = ws["root"] / "ck"
    shutil.copytree(CHECKPOINTS / "mono", folder)
    assert rerank_onnx(cli, ws, folder).code == 0
    (key,) = (ws["cache"] / "onnx").iterdir()
    other = ws["root"] / "elsewhere"
    shutil.move(str(key), other)
    stale = other / "encoder-ffffffffffffffff.fp32.onnx"  # what the stale-export sweep would remove
    stale.write_text("someone else's")
    key.symlink_to(other)
    before = tree(other)
    ws["out"].unlink()
    result = rerank_onnx(cli, ws, folder)
    assert "is a link" in one_line(result.code, result.stderr)
    assert tree(other) == before and not ws["out"].exists()


def test_a_full_disk_during_the_int8_export_leaves_nothing(cli: Callable[..., Any], ws: dict[str, Path],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """ONNX Runtime's quantizer writes ``<fp32>-inferred.onnx`` beside its input and left it behind when the disk
    filled (``encoder-*.fp32-inferred.onnx`` in the export folder). It now works in a staging folder of its own."""
    import onnx.shape_inference

    def full_disk(source: str, target: str, *args: Any, **kwargs: Any) -> None:
        Path(target).write_bytes(b"half an inferred model")
        raise OSError(errno.ENOSPC, "No space left on device", target)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes_path", full_disk)
    folder = ws["root"] / "ck"
    shutil.copytree(CHECKPOINTS / "mono", folder)
    result = rerank_onnx(cli, ws, folder, "--quantize", "int8")
    assert "No space left on device" in one_line(result.code, result.stderr, expected=1)
    left = [p for p in ws["root"].rglob("*") if "inferred" in p.name or ".rktmp-" in p.name]
    assert not left, left
    assert not ws["out"].exists() and not list(ws["cache"].rglob("*.int8.onnx"))


def test_a_link_is_removed_as_a_link(tmp_path: Path) -> None:
    """``remove_tree`` (step-checkpoint rotation, temporaries, caches) never deletes through a link."""
    from rankkit.files import remove_tree

    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.txt").write_text("kept")
    link = tmp_path / "link"
    link.symlink_to(target)
    remove_tree(link)
    assert not os.path.lexists(link) and (target / "keep.txt").read_text() == "kept"


# --------------------------------------------------------------------------------------- ids


def test_a_docid_with_whitespace_is_refused_where_it_enters(cli: Callable[..., Any], ws: dict[str, Path]) -> None:
    """A corpus docid holding a space gave a dense index, then a run that `rankkit validate` rejects (exit 0)."""
    corpus = ws["root"] / "spaced.jsonl"
    lines = ws["corpus"].read_text().splitlines()
    lines[2] = json.dumps({"id": "doc 2", "contents": "a passage whose id holds a space"})
    corpus.write_text("\n".join(lines) + "\n")
    result = cli("index", "--kind", "dense", "--model", "repbert", "--corpus", corpus, "--index", ws["root"] / "ix",
                 "--backend", "torch")
    line = one_line(result.code, result.stderr)
    assert f"{corpus}:3: document id 'doc 2' holds whitespace" in line, line
    # A dense index keeps its resumable encoding state (embeddings/), never a searchable index.
    assert not list((ws["root"] / "ix").glob("*.faiss")) and not (ws["root"] / "ix" / "rankkit-index.json").exists()


@pytest.mark.parametrize("topics, where", [
    ("t0\tapple fruit\nq 1\tcar engine\n", ":2: query id 'q 1' holds whitespace"),
    ('{"qid": "t0", "text": "apple"}\n{"qid": "q\\u00a01", "text": "car"}\n', ":2: query id 'q\\xa01' holds whitespace"),
    ("<top>\n<num> Number: 301 extra\n<title> apple fruit\n</top>\n", ":1: query id (<num>) '301 extra' holds"),
])
def test_a_qid_with_whitespace_is_refused_where_it_enters(cli: Callable[..., Any], ws: dict[str, Path], topics: str,
                                                          where: str) -> None:
    """Topics whose qid holds whitespace (TSV, JSONL with a no-break space, TREC SGML) gave runs validate rejects."""
    index = ws["root"] / "ix"
    assert cli("index", "--kind", "dense", "--model", "repbert", "--corpus", ws["corpus"], "--index", index,
               "--backend", "torch").code == 0
    path = ws["root"] / "spaced-topics.txt"
    path.write_text(topics, encoding="utf-8")
    result = cli("retrieve", "--model", "repbert", "--index", index, "--topics", path, "-o", ws["out"], "--k", 3,
                 "--backend", "torch")
    line = one_line(result.code, result.stderr)
    assert str(path) + where in line, line
    assert not ws["out"].exists()


def test_runs_leave_with_valid_ids_only(tmp_path: Path) -> None:
    """``rankkit.write_run`` of a DataFrame or a dict whose ids hold whitespace (or are empty): refused, nothing written."""
    import pandas

    import rankkit

    out = tmp_path / "x.run"
    frame = pandas.DataFrame({"qid": ["q1", "q1"], "docno": ["d1", "d 2"], "score": [2.0, 1.0]})
    with pytest.raises(RankkitError, match=r"run: row 1: docno 'd 2' holds whitespace"):
        rankkit.write_run(out, frame)
    for run, message in (({"q1": {"d\t2": 1.0}}, r"document id \(query 'q1'\) 'd\\t2' holds whitespace"),
                         ({"q 1": {"d1": 1.0}}, "query id 'q 1' holds whitespace"),
                         ({"q1": {"": 1.0}}, "document id .* is empty")):
        with pytest.raises(RankkitError, match=message):
            rankkit.write_run(out, run)
    assert not out.exists() and not list(tmp_path.iterdir())


def test_training_groups_with_whitespace_ids_are_refused(tmp_path: Path) -> None:
    from rankkit.errors import InputError
    from rankkit.formats import read_groups

    path = tmp_path / "groups.jsonl"
    path.write_text(json.dumps({"qid": "q1", "query": "a", "pos": [{"docid": "d 1", "text": "x"}]}) + "\n")
    with pytest.raises(InputError, match=r"groups.jsonl:1: 'pos\[0\].docid' 'd 1' holds whitespace"):
        read_groups(path)


# ------------------------------------------------------------------------------------ frames


def test_frames_with_a_column_twice_or_no_rows_are_one_line() -> None:
    """``rankkit.evaluate`` of a frame with two ``qid`` columns was an AttributeError traceback; of an empty frame,
    a message about a dict of runs."""
    import pandas

    import rankkit

    qrels = {"q1": {"d1": 1}}
    twice = pandas.DataFrame([["q1", "d1", 1.0, "q1"]], columns=["qid", "docno", "score", "qid"])
    with pytest.raises(RankkitError, match="the DataFrame has 2 columns named 'qid'"):
        rankkit.evaluate(twice, qrels)
    for empty in (pandas.DataFrame(), pandas.DataFrame(columns=["qid", "docno", "score"])):
        with pytest.raises(RankkitError, match="run: the DataFrame has no rows"):
            rankkit.evaluate(empty, qrels)
    with pytest.raises(RankkitError, match="qrels: the DataFrame has no rows"):
        rankkit.evaluate({"q1": {"d1": 1.0}}, pandas.DataFrame(columns=["qid", "docno", "label"]))


# ------------------------------------------------------------------- a training file pinned while read


def test_a_training_file_rewritten_in_place_stops_training(cli: Callable[..., Any], ws: dict[str, Path],
                                                           monkeypatch: pytest.MonkeyPatch, backbone: Path) -> None:
    """A training file rewritten in place while `train` read it (same size, other text) was trained on silently
    and the checkpoint recorded the old file's SHA-256. Now: one line naming the file and line, no model."""
    from rankkit.training import group_table

    groups = write_groups(ws["root"] / "groups.jsonl", count=8)
    original = group_table.GroupFile.place
    state = {"calls": 0}

    def place(self: Any, index: int) -> Any:
        state["calls"] += 1
        if state["calls"] == 3:  # after two groups were read: the same bytes count, other words
            text = groups.read_text(encoding="utf-8")
            groups.write_text(text.replace("apple", "grape").replace("river", "ocean"), encoding="utf-8")
        return original(self, index)

    monkeypatch.setattr(group_table.GroupFile, "place", place)
    output = ws["root"] / "ck"
    result = cli("train", "--model", "mono", "--backbone", backbone, "--train", groups, "--output", output,
                 "--max-steps", 4, "--batch-size", 2, "--group-size", 3, "--device", "cpu", "--warmup", 0)
    line = one_line(result.code, result.stderr)
    assert f"{groups}:" in line and "changed while training read it" in line, line
    assert not (output / "model.safetensors").exists() and not (output / "rankkit.json").exists()


def test_a_group_whose_bytes_changed_is_refused_even_with_the_same_size_and_time(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The content check: the bytes of the line read must hash as when the table was built."""
    from rankkit.errors import InputError
    from rankkit.training.group_table import GroupFile

    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path / "cache"))
    groups = write_groups(tmp_path / "groups.jsonl", count=4)
    stat = groups.stat()
    file = GroupFile.open(groups)
    try:
        assert file[0].qid == "q0"
        with open(groups, "r+b") as handle:  # one byte of group 2's query, in place
            text = handle.read()
            at = text.index(b'"query": "', text.index(b'"qid": "q2"')) + len(b'"query": "')
            handle.seek(at)
            handle.write(b"X")
        os.utime(groups, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # size and time as they were
        assert file[1].qid == "q1"
        with pytest.raises(InputError, match=r"groups.jsonl:3: changed while training read it \(the group on this "
                                             r"line is not the one indexed"):
            file[2]
    finally:
        file.close()


def test_a_corpus_rewritten_while_passages_are_read_is_refused(ws: dict[str, Path]) -> None:
    """Passages are read by byte offset (a long rerank, ids-only training's --collection): a corpus rewritten
    in place (same size, same ids, other text) gave other texts silently. Now one line naming the corpus."""
    from rankkit.docstore import CorpusDocStore
    from rankkit.errors import InputError

    store = CorpusDocStore(ws["corpus"], cache_dir=ws["root"] / "tables")
    try:
        first = store.get_many(["d0_0"])
        text = ws["corpus"].read_text(encoding="utf-8")
        ws["corpus"].write_text(text.replace("apple", "grape"), encoding="utf-8")
        with pytest.raises(InputError, match="corpus.jsonl: changed while it was read"):
            store.get_many(["d0_1"])
    finally:
        store.close()
    assert "apple" in first["d0_0"]


# -------------------------------------------------------------------------------- model cards


def test_the_model_card_is_rendered_by_a_serializer(cli: Callable[..., Any], ws: dict[str, Path], backbone: Path) -> None:
    """An --init-checkpoint whose recorded base model holds newlines wrote its own keys into the new card's YAML
    front matter; file names with newlines, ``|`` and backticks broke the card's tables."""
    import yaml

    init = ws["root"] / "init"
    assert cli("train", "--model", "mono", "--backbone", backbone, "--train", write_groups(ws["root"] / "g.jsonl", count=4),
               "--output", init, "--max-steps", 1, "--batch-size", 2, "--group-size", 3, "--device", "cpu").code == 0
    meta = json.loads((init / "rankkit.json").read_text())
    meta["base_model"] = {"repo_id": "org/x\npipeline_tag: injected\nlicense: stolen", "commit": "c`|\nd",
                          "local_folder": "f"}
    (init / "rankkit.json").write_text(json.dumps(meta))
    named = ws["root"] / "a|b`c\nd.jsonl"
    shutil.copy(ws["root"] / "g.jsonl", named)
    output = ws["root"] / "ck"
    result = cli("train", "--model", "mono", "--init-checkpoint", init, "--train", named, "--output", output,
                 "--max-steps", 1, "--batch-size", 2, "--group-size", 3, "--device", "cpu")
    assert result.code == 0, result.stderr
    card = (output / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\n")
    front = yaml.safe_load(card.split("---\n")[1])
    assert set(front) == {"library_name", "tags", "pipeline_tag"} and front["pipeline_tag"] == "text-ranking", front
    assert "license" not in front and "base_model" not in front
    rows = [line for line in card.splitlines() if line.startswith("| `") and ".jsonl" in line]
    assert len(rows) == 1, card
    cells = re.split(r"(?<!\\)\|", rows[0])[1:-1]
    assert len(cells) == 3 and "a\\|b" in cells[0] and "\\n" in cells[0], rows[0]
    body = card.split("---\n", 2)[2]
    assert not any(line.startswith(("d.jsonl", "pipeline_tag", "license")) for line in body.splitlines()), body


@pytest.mark.parametrize("fmt", ["tsv", "markdown"])
def test_eval_tables_keep_their_shape_whatever_a_run_is_called(cli: Callable[..., Any], tmp_path: Path, fmt: str) -> None:
    """A run's name is its file name, which may hold a tab, a newline or ``|``: the same class of break as the
    card's tables (a TSV row split in two, a Markdown row with an extra cell)."""
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    run = tmp_path / "a\tb|c\nd.run"
    run.write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 1.0 x\n")
    result = cli("eval", run, "--qrels", qrels, "--format", fmt, "-m", "nDCG@10", "-m", "P@1")
    assert result.code == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    if fmt == "tsv":
        assert len(lines) == 3 and all(len(line.split("\t")) == 4 for line in lines), lines
    else:
        rows = [line for line in lines if line.startswith("|")]
        widths = {len(re.split(r"(?<!\\)\|", row)) for row in rows}
        assert len(widths) == 1 and not [line for line in lines if "d.run" in line and not line.startswith("|")], lines


# --------------------------------------------------------------------------- bounded log readers


@pytest.mark.parametrize("content, message", [
    ("step,epoch,loss\n1,0,1e308\n2,0,-1e308\n", "loss = '1e308' is beyond 1e+39"),
    ("step,epoch,loss\n1,0,1.0\n1e400,0,2.0\n", "metrics.csv:3: row without a step"),
    ("step,epoch,loss\n0.5,0,1.0\n", "step = '0.5' is not a whole number"),
    ("step,epoch,loss\n1,0,one\n", "loss = 'one' is not a number"),
])
def test_plot_training_validates_every_value(cli: Callable[..., Any], tmp_path: Path, content: str, message: str) -> None:
    """Losses of +-1e308 were a matplotlib traceback (its axis arithmetic overflows)."""
    path = tmp_path / "metrics.csv"
    path.write_text(content)
    result = cli("plot-training", path, "-o", tmp_path / "p.png")
    assert message in one_line(result.code, result.stderr)
    assert not (tmp_path / "p.png").exists()


def test_plot_training_reads_with_a_line_limit(cli: Callable[..., Any], tmp_path: Path) -> None:
    """One 100 MB line was the csv module's field-size traceback; a train.log of the same: bounded too."""
    path = tmp_path / "metrics.csv"
    with open(path, "w") as out:
        out.write("step,epoch,loss\n1,0,")
        block = "9" * (1 << 20)
        for _ in range(100):
            out.write(block)
        out.write("\n")
    result = cli("plot-training", path, "-o", tmp_path / "p.png")
    assert "metrics.csv:2: line longer than" in one_line(result.code, result.stderr)
    log = tmp_path / "train.log"
    log.write_text(json.dumps({"step": 1, "loss": 1.0, "lr": "x" * (2 << 20)}) + "\n")
    result = cli("plot-training", log, "-o", tmp_path / "p.png")
    assert "train.log:1: a line of" in one_line(result.code, result.stderr)
    log.write_text(json.dumps({"step": "one", "loss": 1.0}) + "\n")
    result = cli("plot-training", log, "-o", tmp_path / "p.png")
    assert "train.log:1: step = 'one' is not a number" in one_line(result.code, result.stderr)


# ---------------------------------------------------------------------------- blank-line floods


@pytest.fixture(scope="module")
def flood(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 GiB of newlines gzipped to ~9 MB (one 64 MiB member, written 32 times: a valid multi-member gzip)."""
    path = tmp_path_factory.mktemp("flood") / "flood.gz"
    member = gzip.compress(b"\n" * (64 << 20), compresslevel=9, mtime=0)
    with open(path, "wb") as out:
        for _ in range(32):
            out.write(member)
    return path


def rankkit_process(*args: object, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), "RANKKIT_HEARTBEAT": "0"}
    try:
        return subprocess.run([sys.executable, "-m", "rankkit", *map(str, args)], env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"rankkit {args[0]} did not end within {timeout} s")


def test_a_flood_of_blank_lines_as_a_run_ends_quickly(flood: Path, tmp_path: Path) -> None:
    """2 GB of newlines (9 MB gzipped) as a run for `eval`: no end after 150 s. Now one line within seconds."""
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\n")
    started = time.monotonic()
    result = rankkit_process("eval", flood, "--qrels", qrels, timeout=60)
    line = one_line(result.returncode, result.stderr)
    assert "a flood of empty lines" in line and time.monotonic() - started < 60, line


def test_a_flood_of_blank_lines_as_a_corpus_ends_quickly(flood: Path, ws: dict[str, Path]) -> None:
    started = time.monotonic()
    result = rankkit_process("rerank", "--model", "repbert", "--run", ws["run"], "--topics", ws["topics"],
                             "--corpus", flood, "-o", ws["out"], "--backend", "torch", timeout=90)
    line = one_line(result.returncode, result.stderr)
    assert "a flood of empty lines" in line and time.monotonic() - started < 90, line
    assert not ws["out"].exists() and not list(ws["cache"].rglob("*.rktmp-*"))


def test_blank_lines_in_a_real_file_are_still_skipped(tmp_path: Path) -> None:
    from rankkit.files import iter_lines

    path = tmp_path / "run.txt"
    path.write_text("\n\n" + "q1 Q0 d1 1 1.0 x\n\n" * 3 + "\n" * 5)
    assert [n for n, _ in iter_lines(path)] == [3, 5, 7]


# ------------------------------------------------------------------ the calibration child and its parent


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_calibration_child_is_bound_to_its_parent_from_its_first_instruction(tmp_path: Path) -> None:
    """A killed `rerank --backend openvino --quantize int8` left its calibration child running for ~10 s: it armed
    its parent-death signal only after its imports. Here the child's interpreter start itself takes 30 s (a
    sitecustomize that sleeps): the child must still die with its parent at once."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os, time\nif os.environ.get('RANKKIT_QUANTIZE_PARENT'):\n    time.sleep(30)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    code = "from rankkit.runtime import openvino_quantize\nopenvino_quantize.run('in.onnx', 'out.xml', 'samples.npz')\n"
    parent = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    children: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not children and time.monotonic() < deadline and parent.poll() is None:
            time.sleep(0.05)
            children = _children(parent.pid)
        assert children, "the parent started no calibration child"
        time.sleep(0.5)  # the child is inside its interpreter's start-up (the 30 s sleep)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        end = time.monotonic() + 5
        while any(_alive(pid) for pid in children) and time.monotonic() < end:
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in children), "the calibration child outlived its killed parent"
    finally:
        for pid in children + [parent.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
