"""Model references and model folders written by someone else, round 4 (issue 38): one gate for hub ids and
revisions before huggingface_hub sees them, and one check path for every checkpoint kind (rankkit,
Hugging Face, sentence-transformers, lightning-ir), each refusal one line (docs/RELIABILITY.md).

Cases that would read ``/dev/zero`` whole, allocate a 2e9-word vocabulary or block on a FIFO on the code
before issue 38 run in a child process under a 4 GB address-space limit and a timeout, so the test fails
there instead of taking the machine down with it.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from training_helpers import documents, write_corpus, write_topics

from rankkit import hub
from rankkit.errors import RankkitError
from rankkit.formats import write_run

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
CHECKPOINTS = DATA / "checkpoints-v0.1.0"
LIGHTNING_IR = DATA / "lightning_ir"
#: Address space of a child that may allocate without bound on the old code (torch alone maps ~1-2 GB).
LIMIT = 4 << 30


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A run, topics and corpus to re-rank, and a Hugging Face cache of this test's own."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    hub._RESOLVED.clear()
    docids = sorted(documents())
    write_run(tmp_path / "first.run", {f"t{i}": {d: float(k) for k, d in enumerate(docids[:3])} for i in range(2)}, "x")
    return {"root": tmp_path, "corpus": write_corpus(tmp_path / "corpus.jsonl"), "run": tmp_path / "first.run",
            "topics": write_topics(tmp_path / "topics.tsv"), "hf": tmp_path / "hf", "out": tmp_path / "out.run"}


def rerank_args(ws: dict[str, Path], model: str, checkpoint: object) -> list[object]:
    return ["rerank", "--model", model, "--checkpoint", checkpoint, "--run", ws["run"], "--topics", ws["topics"],
            "--corpus", ws["corpus"], "-o", ws["out"], "--device", "cpu", "--backend", "torch"]


def one_line(code: int, stderr: str, expected: int = 2) -> str:
    """The single error line of a refused command (exit ``expected``, no traceback)."""
    lines = [line for line in stderr.strip().splitlines() if line.startswith("rankkit: error:")]
    assert code == expected and len(lines) == 1, f"exit {code}: {stderr[-2000:]}"
    assert "Traceback" not in stderr, stderr[-2000:]
    return lines[0]


def limited(*args: object, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``rankkit ARGS`` in a child process with at most :data:`LIMIT` bytes of address space."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    environment = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   "RANKKIT_HEARTBEAT": "0", **(env or {})}
    try:
        return subprocess.run([sys.executable, "-m", "rankkit", *map(str, args)], env=environment, capture_output=True,
                              text=True, timeout=timeout, preexec_fn=cap, check=False)
    except subprocess.TimeoutExpired:  # run(timeout=) has killed the child
        pytest.fail(f"rankkit {' '.join(map(str, args[:2]))} did not end within {timeout} s (blocked?)")


# ------------------------------------------------------------------------------------ the hub gate


def test_revisions_that_leave_the_cache_are_refused_before_the_hub_library(cli: Callable[..., Any],
                                                                            ws: dict[str, Path]) -> None:
    """``org/name@../../../ref.txt``: huggingface_hub read ``refs/../../../ref.txt`` as the commit and joined what it
    held onto ``snapshots/``, so the revision pointed rankkit at any folder (here: a mono checkpoint elsewhere,
    re-ranked with exit 0). Now the revision is checked by git's rules first."""
    elsewhere = ws["root"] / "elsewhere"
    shutil.copytree(CHECKPOINTS / "mono", elsewhere)
    storage = ws["hf"] / "hub" / "models--org--name"
    (storage / "refs").mkdir(parents=True)
    (storage / "snapshots").mkdir()
    # refs/../../../ref.txt is HF_HOME/ref.txt; what it holds is joined onto snapshots/.
    (ws["hf"] / "ref.txt").write_text(os.path.relpath(elsewhere, storage / "snapshots"))
    result = cli(*rerank_args(ws, "mono", "org/name@../../../ref.txt"))
    line = one_line(result.code, result.stderr)
    assert "not a Hugging Face model id: a revision cannot hold '..'" in line, line
    assert not ws["out"].exists()


@pytest.mark.parametrize("reference, message", [
    ("org/a..b", "'--' and '..' are not allowed in a repository name"),
    ("org/name@..", "a revision cannot hold '..'"),
    ("org/name@refs/../x", "a revision cannot hold '..'"),
    ("org/name@.hidden", "no part of a revision can start with '.'"),
    ("org/name@main.lock", "end with '.lock'"),
    ("org/name@a:b", "a revision cannot hold ':'"),
    ("org/name@x\ny", "a revision cannot hold '\\n'"),
    ("org/name@", "the revision after '@' is empty"),
    ("org/na me", "is not a repository or organisation name"),
    ("-org/name", "must start and end with a letter, a digit or '_'"),
])
def test_malformed_ids_and_revisions_say_what_is_wrong(cli: Callable[..., Any], ws: dict[str, Path], reference: str,
                                                      message: str) -> None:
    """A malformed id or revision is a user error that says what is wrong (before: the hub library's
    validation error ended in "download failed ... run again to resume", or a cache miss)."""
    result = cli(*rerank_args(ws, "mono", reference))
    line = one_line(result.code, result.stderr)
    assert "not a Hugging Face model id" in line and message in line and "run again" not in line, line
    assert hub.hub_id_problem(*hub.hub_parts(reference) or ("", None)) is not None
    assert not hub.looks_like_hub_id(reference)


def test_valid_revisions_pass_the_gate() -> None:
    for reference in ("org/name", "org/name@main", "org/name@v1.0", "org/name@refs/pr/1", "bert-base-uncased",
                      "org/name@" + "a" * 40, "cross-encoder/ms-marco-MiniLM-L-6-v2@release_2024-01"):
        parts = hub.hub_parts(reference)
        assert parts is not None and hub.hub_id_problem(*parts) is None, reference


def fake_repo(ws: dict[str, Path], ref: Callable[[Path], None]) -> Path:
    """``models--org--name`` in the test's cache with a snapshot of the mono checkpoint; ``ref(refs/main)`` writes the ref."""
    storage = ws["hf"] / "hub" / "models--org--name"
    commit = "0123456789abcdef0123456789abcdef01234567"
    shutil.copytree(CHECKPOINTS / "mono", storage / "snapshots" / commit)
    (storage / "refs").mkdir(parents=True)
    ref(storage / "refs" / "main")
    return storage


@pytest.mark.parametrize("reference, prepare, message", [
    ("nobody/nothing@/dev/zero", None, "a revision cannot start or end with '/'"),
    ("org/name@../../../../../../../../../../dev/zero", None, "a revision cannot hold '..'"),
    ("org/name", lambda ref: ref.symlink_to("/dev/zero"), "is a device, FIFO or socket"),
    ("org/name", lambda ref: ref.write_text("../../../../../../etc"), "does not hold a commit hash"),
])
def test_ref_files_are_read_bounded_and_must_hold_a_commit(ws: dict[str, Path], reference: str,
                                                           prepare: Callable[[Path], None] | None, message: str) -> None:
    """``@/dev/zero`` (with no cache entry at all) and a ``refs/main`` linked to ``/dev/zero``: the "ref file" was
    read whole until memory ran out (1.9 GB in 1.4 s, then a line blaming --batch-size); a ref that names a
    path sent huggingface_hub out of the cache. Now: one line, exit 2, in bounded memory."""
    if prepare is not None:
        fake_repo(ws, prepare)
    result = limited(*rerank_args(ws, "mono", reference), env={"HF_HOME": str(ws["hf"]), "HF_HUB_OFFLINE": "1"})
    line = one_line(result.returncode, result.stderr)
    assert message in line, line
    assert not ws["out"].exists()


def test_a_recipe_backbone_goes_through_the_same_gate(ws: dict[str, Path]) -> None:
    """The same revision in a recipe's ``backbone``: the same gate (before: /dev/zero read until memory ran out)."""
    recipe = ws["root"] / "recipe.toml"
    recipe.write_text('[train]\nmodel = "mono"\nbackbone = "nobody/nothing@/dev/zero"\n', encoding="utf-8")
    groups = ws["root"] / "groups.jsonl"
    from training_helpers import write_groups

    write_groups(groups, count=4)
    result = limited("train", "--config", recipe, "--train", groups, "--output", ws["root"] / "ck", "--max-steps", 1,
                     env={"HF_HOME": str(ws["hf"]), "HF_HUB_OFFLINE": "1"})
    line = one_line(result.returncode, result.stderr)
    assert "not a Hugging Face model id" in line and "cannot start or end with '/'" in line, line
    assert not (ws["root"] / "ck" / "model.safetensors").exists()


def test_what_the_hub_library_returns_must_be_a_snapshot_in_the_cache(ws: dict[str, Path],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever huggingface_hub returns must be ``snapshots/COMMIT`` of the repository in the cache."""
    import huggingface_hub

    elsewhere = ws["root"] / "elsewhere"
    shutil.copytree(CHECKPOINTS / "mono", elsewhere)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **k: str(elsewhere))
    with pytest.raises(RankkitError, match="not a snapshot folder inside"):
        hub.resolve_model("org/name")


def test_relative_cache_variables_are_made_absolute_or_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``XDG_CACHE_HOME=relative`` put rankkit's caches (and the hub's) into whatever folder a command ran in.
    A relative XDG_CACHE_HOME is ignored (the XDG rule); a relative RANKKIT_CACHE_DIR or HF_HOME is absolute."""
    from rankkit.files import user_cache_root

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RANKKIT_CACHE_DIR", raising=False)
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "relative-cache")
    assert user_cache_root() == Path.home() / ".cache" / "rankkit"
    assert hub.hub_cache() == Path.home() / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache_root() == tmp_path / "xdg" / "rankkit"
    monkeypatch.setenv("RANKKIT_CACHE_DIR", "mine")
    monkeypatch.setenv("HF_HOME", "hf")
    assert user_cache_root() == tmp_path / "mine" and hub.hub_cache() == tmp_path / "hf" / "hub"


# ------------------------------------------------------------------ every checkpoint kind checked alike


def sharded_with_a_fifo(root: Path) -> Path:
    """A Hugging Face folder whose model.safetensors.index.json names a FIFO outside the folder as a shard."""
    folder = root / "sharded"
    shutil.copytree(CHECKPOINTS / "repbert", folder)
    (folder / "rankkit.json").unlink()
    (folder / "model.safetensors").rename(folder / "model-00001-of-00002.safetensors")
    (root / "outside").mkdir()
    os.mkfifo(root / "outside" / "model-00002-of-00002.safetensors")
    from rankkit.models.safe_loading import safetensors_header

    names = [k for k in safetensors_header(folder / "model-00001-of-00002.safetensors") if k != "__metadata__"]
    weight_map = {name: "model-00001-of-00002.safetensors" for name in names}
    weight_map[names[-1]] = "../outside/model-00002-of-00002.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


def test_a_shard_that_is_a_fifo_outside_the_folder_is_refused(ws: dict[str, Path]) -> None:
    """A sharded index naming a FIFO outside the folder: the loader blocked forever (SIGTERM did not end it)."""
    folder = sharded_with_a_fifo(ws["root"])
    result = limited("index", "--kind", "dense", "--model", "repbert", "--checkpoint", folder, "--corpus", ws["corpus"],
                     "--index", ws["root"] / "ix", "--backend", "torch", timeout=90)
    line = one_line(result.returncode, result.stderr)
    assert "model-00002-of-00002.safetensors: is a device, FIFO or socket" in line, line
    assert not (ws["root"] / "ix").exists()


def edit_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def setting(name: str, value: Any, file: str = "config.json") -> Callable[[Path], None]:
    return lambda folder: edit_json(folder / file, lambda c: c.__setitem__(name, value))


def drop(*names: str) -> Callable[[Path], None]:
    def change(folder: Path) -> None:
        for name in names:
            (folder / name).unlink()

    return change


def weights_outside(folder: Path) -> None:
    outside = folder.parent / "outside.safetensors"
    (folder / "model.safetensors").rename(outside)
    (folder / "model.safetensors").symlink_to(outside)


#: lightning-ir mono folders (tests/data's mono-electra), damaged: what was not checked like other kinds.
LIGHTNING_CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "query_length 'thirty-two'": (setting("query_length", "thirty-two"), "query_length = 'thirty-two' is not a whole"),
    "query_length true": (setting("query_length", True), "query_length = True is not a whole number"),
    "doc_length 10**30": (setting("doc_length", 10**30), "doc_length = 1000000000000000000000000000000 is not a whole"),
    "linear_bias 'yes'": (setting("linear_bias", "yes"), "linear_bias = 'yes' is not true or false"),
    "model.safetensors linked outside": (weights_outside, "links outside its folder"),
    "no vocab.txt, no tokenizer.json": (drop("vocab.txt", "tokenizer.json"), "its tokenizer has"),
}


@pytest.mark.parametrize("case", sorted(LIGHTNING_CASES))
def test_lightning_ir_folders_are_checked_like_every_folder(cli: Callable[..., Any], ws: dict[str, Path],
                                                           case: str) -> None:
    change, message = LIGHTNING_CASES[case]
    folder = ws["root"] / "li"
    shutil.copytree(LIGHTNING_IR / "mono-electra", folder)
    change(folder)
    result = cli(*rerank_args(ws, "mono", folder))
    line = one_line(result.code, result.stderr)
    assert message in line, line
    assert not ws["out"].exists()


@pytest.mark.parametrize("name, value", [("vocab_size", 2 * 10**9), ("num_hidden_layers", 100_000)])
def test_lightning_ir_sizes_are_measured_before_allocation(ws: dict[str, Path], name: str, value: int) -> None:
    """``vocab_size`` 2e9 and 100,000 layers in a lightning-ir config: tracebacks or allocation until killed."""
    folder = ws["root"] / "li"
    shutil.copytree(LIGHTNING_IR / "mono-electra", folder)
    setting(name, value)(folder)
    result = limited(*rerank_args(ws, "mono", folder))
    line = one_line(result.returncode, result.stderr)
    assert "config.json: describes a model of at least" in line, line


def outside_tokenizer_file(folder: Path) -> None:
    """An HF folder whose tokenizer_config.json names a tokenizer file outside it (and has none of its own)."""
    outside = folder.parent / "elsewhere"
    outside.mkdir()
    shutil.move(str(folder / "tokenizer.json"), outside / "tokenizer.json")
    edit_json(folder / "tokenizer_config.json", lambda c: c.__setitem__("tokenizer_file", str(outside / "tokenizer.json")))


def hparam(name: str, value: Any) -> Callable[[Path], None]:
    return lambda folder: edit_json(folder / "rankkit.json", lambda m: m["hparams"].__setitem__(name, value))


RANKKIT_CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "no tokenizer.json": (drop("tokenizer.json"), "its tokenizer has"),
    "max_query_length true": (hparam("max_query_length", True), "--max-query-length takes an integer for model "
                                                                "MonoConfig, got True"),
    "hidden '0'": (hparam("hidden", "0"), "--hidden takes an integer for model MonoConfig, got '0'"),
    "format 'x'": (setting("format", "x", "rankkit.json"), "format 'x' is not a checkpoint format"),
    "format 99": (setting("format", 99, "rankkit.json"), "format 99 is not a checkpoint format"),
}


@pytest.mark.parametrize("case", sorted(RANKKIT_CASES))
def test_rankkit_checkpoints_are_typed_and_need_their_tokenizer(cli: Callable[..., Any], ws: dict[str, Path],
                                                                case: str) -> None:
    """A rankkit checkpoint without tokenizer.json re-ranked with a tokenizer of special tokens only (scores off
    by up to 1.14); ``max_query_length: true`` was taken as 1, ``format: "x"`` not checked."""
    change, message = RANKKIT_CASES[case]
    folder = ws["root"] / "ck"
    shutil.copytree(CHECKPOINTS / "mono", folder)
    change(folder)
    result = cli(*rerank_args(ws, "mono", folder))
    line = one_line(result.code, result.stderr)
    assert message in line, line
    assert not ws["out"].exists()


def test_a_hugging_face_tokenizer_config_naming_an_outside_file_is_refused(cli: Callable[..., Any],
                                                                          ws: dict[str, Path]) -> None:
    folder = ws["root"] / "hf"
    shutil.copytree(CHECKPOINTS / "repbert", folder)
    (folder / "rankkit.json").unlink()
    outside_tokenizer_file(folder)
    result = cli("index", "--kind", "dense", "--model", "repbert", "--checkpoint", folder, "--corpus", ws["corpus"],
                 "--index", ws["root"] / "ix", "--backend", "torch")
    line = one_line(result.code, result.stderr)
    assert "tokenizer_file names" in line and "links outside its folder" in line, line


def test_a_hugging_face_folder_without_its_vocabulary_is_refused(cli: Callable[..., Any], ws: dict[str, Path]) -> None:
    folder = ws["root"] / "hf"
    shutil.copytree(CHECKPOINTS / "repbert", folder)
    (folder / "rankkit.json").unlink()
    (folder / "tokenizer.json").unlink()
    result = cli("index", "--kind", "dense", "--model", "repbert", "--checkpoint", folder, "--corpus", ws["corpus"],
                 "--index", ws["root"] / "ix", "--backend", "torch")
    line = one_line(result.code, result.stderr)
    assert "its tokenizer has" in line and "token embeddings" in line, line


def test_every_file_at_the_top_of_a_model_folder_is_checked(cli: Callable[..., Any], ws: dict[str, Path]) -> None:
    """Not only the names rankkit knows: transformers opens what a config names (a FIFO named like a weights
    file, a chat template linked out of the folder)."""
    folder = ws["root"] / "ck"
    shutil.copytree(CHECKPOINTS / "mono", folder)
    (ws["root"] / "template.txt").write_text("{{ messages }}")
    (folder / "chat_template.jinja").symlink_to(ws["root"] / "template.txt")
    result = cli(*rerank_args(ws, "mono", folder))
    assert "chat_template.jinja: links outside its folder" in one_line(result.code, result.stderr)
    (folder / "chat_template.jinja").unlink()
    os.mkfifo(folder / "added_tokens.json")
    result = cli(*rerank_args(ws, "mono", folder))
    assert "added_tokens.json: is a device, FIFO or socket" in one_line(result.code, result.stderr)


def test_the_bundled_folders_of_every_kind_still_load(cli: Callable[..., Any], ws: dict[str, Path]) -> None:
    """The checks refuse nothing real: a rankkit checkpoint, a lightning-ir folder and an HF folder re-rank."""
    for model, folder in (("mono", CHECKPOINTS / "mono"), ("mono", LIGHTNING_IR / "mono-electra"),
                          ("set-encoder", LIGHTNING_IR / "set-encoder-bert")):
        result = cli(*rerank_args(ws, model, folder))
        assert result.code == 0, result.stderr
        ws["out"].unlink()


@pytest.mark.parametrize("field, value, message", [
    ("step", "x", "step = 'x' is not a whole number"),
    ("step", True, "step = True is not a whole number"),
    ("best_dev_mrr", "high", "best_dev_mrr = 'high' is not a finite number"),
])
def test_a_step_checkpoints_state_is_typed(cli: Callable[..., Any], ws: dict[str, Path], backbone: Path, field: str,
                                          value: Any, message: str) -> None:
    """A step checkpoint is a checkpoint kind too: ``"step": "x"`` in trainer_state.json was a ValueError
    traceback on --resume, ``"step": true`` resumed at step 1."""
    from training_helpers import write_groups

    groups = write_groups(ws["root"] / "groups.jsonl", count=8)
    output = ws["root"] / "run"
    common = ["train", "--model", "mono", "--backbone", backbone, "--train", groups, "--output", output, "--batch-size", 2,
              "--group-size", 3, "--device", "cpu", "--warmup", 0, "--save-every", 1]
    assert cli(*common, "--max-steps", 2).code == 0
    (state,) = output.glob("checkpoints/step-*/trainer_state.json")
    setting(field, value, state.name)(state.parent)
    result = cli(*common, "--max-steps", 2, "--resume")  # the same settings: only the state differs
    line = one_line(result.code, result.stderr)
    assert f"{state}: {message}" in line, line


def test_a_resumed_runs_log_is_read_bounded_and_leniently(cli: Callable[..., Any], ws: dict[str, Path],
                                                          backbone: Path) -> None:
    """--resume trims train.log to the step it restarts from: a log holding bytes that are not UTF-8, a step that
    is a list or 1e400 was a traceback (UnicodeDecodeError, TypeError, OverflowError); such lines are dropped."""
    from training_helpers import write_groups

    groups = write_groups(ws["root"] / "groups.jsonl", count=8)
    output = ws["root"] / "run"
    common = ["train", "--model", "mono", "--backbone", backbone, "--train", groups, "--output", output, "--batch-size", 2,
              "--group-size", 3, "--device", "cpu", "--warmup", 0, "--save-every", 1, "--max-steps", 2]
    assert cli(*common).code == 0
    with open(output / "train.log", "ab") as log:
        log.write(b'{"step": [1]}\n{"step": 1e400}\n\xff\xfe not UTF-8\n')
    result = cli(*common, "--resume")
    assert result.code == 0, result.stderr
    assert b"\xff" not in (output / "train.log").read_bytes()


def encoder_setting(name: str, value: Any) -> Callable[[Path], None]:
    return lambda folder: edit_json(folder / "config.json", lambda c: c["encoder_config"].__setitem__(name, value))


#: Files that parse as JSON but that the tokenizer or model library cannot use: each raised its own
#: exception type (KeyError, TypeError, AttributeError, ValueError), a traceback.
MALFORMED_CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "tokenizer.json {}": (lambda f: (f / "tokenizer.json").write_text("{}"), "cannot load a tokenizer: KeyError"),
    "tokenizer.json []": (lambda f: (f / "tokenizer.json").write_text("[]"), "cannot load a tokenizer: TypeError"),
    "pad_token an object": (setting("pad_token", {"content": 5}, "tokenizer_config.json"),
                            "cannot load a tokenizer: TypeError"),
    "tokenizer_config.json a list": (lambda f: (f / "tokenizer_config.json").write_text("[]"),
                                     "cannot load a tokenizer: AttributeError"),
    "7 heads for 16 dimensions": (encoder_setting("num_attention_heads", 7), "cannot load its encoder: ValueError"),
    "hidden_act 'x'": (encoder_setting("hidden_act", "x"), "cannot load its encoder: KeyError"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_CASES))
def test_files_the_libraries_cannot_use_are_one_line(cli: Callable[..., Any], ws: dict[str, Path], case: str) -> None:
    change, message = MALFORMED_CASES[case]
    folder = ws["root"] / "ck"
    shutil.copytree(CHECKPOINTS / "mono", folder)
    change(folder)
    result = cli(*rerank_args(ws, "mono", folder))
    assert message in one_line(result.code, result.stderr)


@pytest.mark.parametrize("name", ["max_position_embeddings", "type_vocab_size"])
def test_position_and_segment_tables_are_measured_before_allocation(ws: dict[str, Path], name: str) -> None:
    """10^9 positions (or segments) in a lightning-ir config: a 64 GB table allocated before any weight was read
    (a rankkit checkpoint's meta-device dry run caught it; a lightning-ir backbone is built for real). The
    learned tables of BERT-like models now count in the size a config implies, for every kind."""
    folder = ws["root"] / "li"
    shutil.copytree(LIGHTNING_IR / "mono-electra", folder)
    setting(name, 10**9)(folder)
    result = limited(*rerank_args(ws, "mono", folder))
    assert "config.json: describes a model of at least" in one_line(result.returncode, result.stderr)
