"""Checkpoints, configs and recipes written by someone else (what ``--checkpoint ORG/NAME`` downloads):
validated before they are trusted, refused in one line, under ~1 GB of memory, and no code they name
is ever run (docs/RELIABILITY.md, "Files written by others").
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from training_helpers import documents, write_corpus, write_groups, write_topics

from rankkit.formats import write_run

CHECKPOINTS = Path(__file__).parents[1] / "data" / "checkpoints-v0.1.0"
#: A module a checkpoint names as its code: importing it writes a file beside it.
PAYLOAD = "import pathlib\npathlib.Path(__file__).with_name('PWNED').write_text('code from the checkpoint ran')\n"


@pytest.fixture
def ws(tmp_path: Path) -> dict[str, Path]:
    docids = sorted(documents())
    write_run(tmp_path / "first.run", {f"t{i}": {d: float(k) for k, d in enumerate(docids[:3])} for i in range(2)}, "x")
    return {"root": tmp_path, "corpus": write_corpus(tmp_path / "corpus.jsonl"), "run": tmp_path / "first.run",
            "topics": write_topics(tmp_path / "topics.tsv"), "groups": write_groups(tmp_path / "groups.jsonl", count=4)}


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def edit_json(path: Path, change: Callable[[Any], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def claim_400_tb(folder: Path) -> None:
    """A safetensors header whose first tensor claims 400 TB of data."""
    path = folder / "model.safetensors"
    raw = path.read_bytes()
    length = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + length])
    name = next(k for k in header if k != "__metadata__")
    header[name].update(shape=[100_000, 1_000_000, 1_000], data_offsets=[0, 400 * 10**12])
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + raw[8 + length:])


def relink(name: str, target: str) -> Callable[[Path], None]:
    def change(folder: Path) -> None:
        (folder / name).unlink()
        (folder / name).symlink_to(target)

    return change


def set_hparam(name: str, value: Any) -> Callable[[Path], None]:
    return lambda folder: edit_json(folder / "rankkit.json", lambda m: m["hparams"].__setitem__(name, value))


def set_encoder(name: str, value: Any) -> Callable[[Path], None]:
    return lambda folder: edit_json(folder / "config.json", lambda c: c["encoder_config"].__setitem__(name, value))


#: rankkit checkpoints (a copy of tests/data's mono), damaged; re-ranked with: the one-line message.
CHECKPOINT_CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "rankkit.json nested 100k deep": (lambda f: (f / "rankkit.json").write_text('{"a":' + deep(100_000) + "}"),
                                      "rankkit.json: nested more than 64 levels deep"),
    "config.json nested 200k deep": (lambda f: (f / "config.json").write_text('{"a":' + deep(200_000) + "}"),
                                     "config.json: nested more than 64 levels deep"),
    "max_doc_length 1e300": (set_hparam("max_doc_length", 1e300), "--max-doc-length must be at most"),
    "max_doc_length 10**30": (set_hparam("max_doc_length", 10**30), "--max-doc-length must be at most"),
    "a head 10**6 wide": (set_hparam("hidden", 10**6), "weights do not fit"),
    "a 2e9-word vocabulary": (set_encoder("vocab_size", 2 * 10**9), "config.json: describes a model of at least"),
    "100,000 layers": (set_encoder("num_hidden_layers", 100_000), "config.json: describes a model of at least"),
    "a size that is no size": (set_encoder("hidden_size", 1e300), "hidden_size = 1e+300 is not a size"),
    "config.json -> /dev/zero": (relink("config.json", "/dev/zero"), "is a device, FIFO or socket"),
    "rankkit.json -> /dev/zero": (relink("rankkit.json", "/dev/zero"), "is a device, FIFO or socket"),
    "config.json -> a file outside": (relink("config.json", "/etc/hostname"), "links outside its folder"),
    "a 9 MB rankkit.json": (lambda f: (f / "rankkit.json").write_text(" " * (9 << 20) + "{}"), "over the 8 MB"),
    "a header claiming 400 TB": (claim_400_tb, "claims bytes 0 to 400,000,000,000,000"),
    "a header longer than the file": (lambda f: (f / "model.safetensors").write_bytes(struct.pack("<Q", 10**12) + b"{}"),
                                      "its header claims"),
}


@pytest.mark.parametrize("case", sorted(CHECKPOINT_CASES))
def test_hostile_checkpoints_are_refused_in_one_line(cli: Callable[..., Any], ws: dict[str, Path], case: str) -> None:
    change, message = CHECKPOINT_CASES[case]
    folder = ws["root"] / "ck"
    shutil.copytree(CHECKPOINTS / "mono", folder)
    change(folder)
    result = cli("rerank", "--model", "mono", "--checkpoint", folder, "--run", ws["run"], "--topics", ws["topics"],
                 "--corpus", ws["corpus"], "-o", ws["root"] / "out.run", "--device", "cpu")
    lines = result.stderr.strip().splitlines()
    assert result.code == 2 and len(lines) == 1 and lines[0].startswith("rankkit: error: "), result.stderr
    assert message in lines[0] and "Traceback" not in result.stderr, lines[0]
    assert len(lines[0]) < 400 and not (ws["root"] / "out.run").exists()


def hf_folder(root: Path, name: str = "hf") -> Path:
    """A Hugging Face model folder (the repbert checkpoint without its rankkit.json)."""
    folder = root / name
    shutil.copytree(CHECKPOINTS / "repbert", folder)
    (folder / "rankkit.json").unlink()
    return folder


HF_CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "a 2e9-word vocabulary": (lambda f: edit_json(f / "config.json", lambda c: c.__setitem__("vocab_size", 2 * 10**9)),
                              "describes a model of at least 32,000,00"),
    "100,000 layers": (lambda f: edit_json(f / "config.json", lambda c: c.__setitem__("num_hidden_layers", 100_000)),
                       "describes a model of at least"),
    "config.json nested 200k deep": (lambda f: (f / "config.json").write_text('{"a":' + deep(200_000) + "}"),
                                     "nested more than 64 levels deep"),
    "modules.json nested 200k deep": (lambda f: (f / "modules.json").write_text(deep(200_000)),
                                      "modules.json: nested more than 64 levels deep"),
    "tokenizer.json -> /dev/zero": (relink("tokenizer.json", "/dev/zero"), "is a device, FIFO or socket"),
    "a header claiming 400 TB": (claim_400_tb, "claims bytes 0 to 400,000,000,000,000"),
}


@pytest.mark.parametrize("case", sorted(HF_CASES))
def test_hostile_hugging_face_folders_are_refused(cli: Callable[..., Any], ws: dict[str, Path], case: str) -> None:
    change, message = HF_CASES[case]
    folder = hf_folder(ws["root"])
    change(folder)
    result = cli("index", "--kind", "dense", "--model", "repbert", "--checkpoint", folder, "--corpus", ws["corpus"],
                 "--index", ws["root"] / "ix")
    lines = result.stderr.strip().splitlines()
    assert result.code == 2 and lines and lines[-1].startswith("rankkit: error: "), result.stderr
    assert message in lines[-1] and "Traceback" not in result.stderr, lines[-1]


def test_max_model_size_caps_the_weights(cli: Callable[..., Any], ws: dict[str, Path],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANKKIT_MAX_MODEL_SIZE", "10K")
    result = cli("index", "--kind", "dense", "--model", "repbert", "--checkpoint", hf_folder(ws["root"]),
                 "--corpus", ws["corpus"], "--index", ws["root"] / "ix")
    assert result.code == 2 and "over RANKKIT_MAX_MODEL_SIZE=10 KB" in result.stderr, result.stderr


# -- code named by a checkpoint is never run ---------------------------------------------------------

def code_cases(root: Path) -> dict[str, tuple[Path, str]]:
    """Folders whose configs name the payload module as code to run, and the refusal each gets."""
    cases = {}
    folder = hf_folder(root, "auto-map")
    edit_json(folder / "config.json", lambda c: c.__setitem__("auto_map", {"AutoModel": "payload.Evil",
                                                                         "AutoConfig": "payload.EvilConfig"}))
    cases["auto_map in config.json"] = (folder, "names its own Python code (auto_map)")
    folder = hf_folder(root, "model-type")
    edit_json(folder / "config.json", lambda c: c.update(model_type="evil-bert", trust_remote_code=True))
    cases["an unknown model_type"] = (folder, "model_type 'evil-bert' is not one transformers knows")
    folder = hf_folder(root, "tokenizer")
    edit_json(folder / "tokenizer_config.json", lambda c: c.update(auto_map={"AutoTokenizer": ["payload.Evil", None]}))
    cases["auto_map in tokenizer_config.json"] = (folder, "tokenizer_config.json: names its own Python code")
    folder = hf_folder(root, "st-module")
    (folder / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "", "type": "payload.Evil"}]))
    cases["a sentence-transformers module class"] = (folder, "names the module class 'payload.Evil'")
    for folder, _ in cases.values():
        (folder / "payload.py").write_text(PAYLOAD)
    return cases


def test_code_named_by_a_checkpoint_is_never_run(cli: Callable[..., Any], ws: dict[str, Path]) -> None:
    cases = code_cases(ws["root"])
    for case, (folder, message) in cases.items():
        result = cli("index", "--kind", "dense", "--model", "repbert", "--checkpoint", folder, "--corpus", ws["corpus"],
                     "--index", ws["root"] / f"ix-{folder.name}")
        assert result.code == 2 and message in result.stderr, (case, result.stderr)
        assert not (folder / "PWNED").exists(), f"{case}: the checkpoint's code ran"
    # The payload is live: importing it, as trust_remote_code would, writes the file.
    folder = next(iter(cases.values()))[0]
    subprocess.run([sys.executable, "-c", "import payload"], cwd=folder, check=True)
    assert (folder / "PWNED").exists()


# -- memory: refused before any allocation --------------------------------------------------------

DRIVER = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # a regression fails fast, not by swapping
from rankkit.cli import main
for args in ARGS:
    try:
        main(args)
    except SystemExit as done:
        assert done.code == 2, (args, done.code)
# VmHWM: this program's own peak (ru_maxrss keeps a forking parent's peak across exec: pytest's 1.5 GB)
print([int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')][0])
"""


def test_hostile_configs_are_refused_under_1_gb(ws: dict[str, Path]) -> None:
    """The configs that used to allocate until the allocator failed (5.6 GB before a MemoryError), in
    one process: its peak resident memory stays under 1 GB."""
    commands = []
    for case in ("a 2e9-word vocabulary", "100,000 layers", "config.json -> /dev/zero", "a header claiming 400 TB"):
        folder = ws["root"] / f"ck-{len(commands)}"
        shutil.copytree(CHECKPOINTS / "mono", folder)
        CHECKPOINT_CASES[case][0](folder)
        commands.append(["rerank", "--model", "mono", "--checkpoint", str(folder), "--run", str(ws["run"]), "--topics",
                         str(ws["topics"]), "--corpus", str(ws["corpus"]), "-o", str(ws["root"] / "out.run")])
    for case in ("a 2e9-word vocabulary", "100,000 layers"):
        folder = hf_folder(ws["root"], f"hf-{len(commands)}")
        HF_CASES[case][0](folder)
        commands.append(["index", "--kind", "dense", "--model", "repbert", "--checkpoint", str(folder), "--corpus",
                         str(ws["corpus"]), "--index", str(ws["root"] / "ix")])
    done = subprocess.run([sys.executable, "-c", DRIVER.replace("ARGS", repr(commands))], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.count("rankkit: error:") == len(commands) and "Traceback" not in done.stderr, done.stderr
    peak_kb = int(done.stdout.strip().splitlines()[-1])
    assert peak_kb < 1 << 20, f"peak RSS {peak_kb / 1024:.0f} MB"


# -- recipes and settings ---------------------------------------------------------------------------

def recipe(ws: dict[str, Path], body: str) -> Path:
    path = ws["root"] / "recipe.toml"
    path.write_text(f'[train]\nmodel = "mono"\ntrain = ["{ws["groups"]}"]\noutput = "{ws["root"] / "ck"}"\n'
                    f'backbone = "{CHECKPOINTS / "repbert"}"\n{body}\n')
    return path


@pytest.mark.parametrize("body, message", [
    ("seed = 1180591620717411303424", "--seed must be at most 4.29497e+09, got 1180591620717411303424"),  # 2**70
    ("max_steps = 9223372036854775807", "--max-steps must be at most 1e+09"),  # 2**63 - 1
    ("group_size = 1000000000", "--group-size must be at most 4096"),
    ("lr = 1e300", "--lr must be at most 10"),
    ("max_doc_length = 1000000000000000000000000000000", "--max-doc-length must be at most 1.04858e+06"),
    ("warmup = 1e308", "--warmup must be at most 1e+09"),
    ("batch_size = 100000000", "--batch-size must be at most 65536"),
    ("hidden = 10000000000", "hidden must be at most 1.04858e+06 for model mono"),
    ("x = " + "[" * 50_000 + "]" * 50_000, "nested more than 64 levels deep"),
    ("x." + ".".join(["a"] * 200) + " = 1", "nested more than 64 levels deep"),
])
def test_recipe_values_are_range_checked_before_any_work(cli: Callable[..., Any], ws: dict[str, Path], body: str,
                                                         message: str) -> None:
    result = cli("train", "--config", recipe(ws, body))
    lines = result.stderr.strip().splitlines()
    assert result.code == 2 and len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr and not (ws["root"] / "ck").exists()


@pytest.mark.parametrize("flag, value, message", [
    ("--seed", str(2**70), "--seed must be at most"),
    ("--max-steps", str(2**63 - 1), "--max-steps must be at most"),
    ("--warmup", "1e308", "--warmup must be at most"),
    ("--max-doc-length", str(10**30), "--max-doc-length must be at most"),
])
def test_train_flags_are_range_checked(cli: Callable[..., Any], ws: dict[str, Path], flag: str, value: str,
                                       message: str) -> None:
    result = cli("train", "--model", "mono", "--train", ws["groups"], "--output", ws["root"] / "ck", "--backbone",
                 CHECKPOINTS / "repbert", flag, value)
    assert result.code == 2 and message in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not (ws["root"] / "ck").exists()


@pytest.mark.parametrize("args, message", [
    (["rerank", "--max-length", str(10**30)], "--max-length must be between 1 and 1048576, got 1e+30"),
    (["rerank", "--batch-size", str(10**30)], "--batch-size must be between 1 and 2147483647"),
    (["eval", "--rel-level", str(10**30)], "--rel-level must be between"),
    (["eval", "-m", f"nDCG@{10**30}"], "the cutoff must be at most 2,147,483,647"),
])
def test_command_numbers_are_range_checked(cli: Callable[..., Any], ws: dict[str, Path], args: list[str],
                                           message: str) -> None:
    """Numbers no command can use, refused by name (before: overflow tracebacks from tokenizers and trec_eval)."""
    qrels = ws["root"] / "qrels.txt"
    qrels.write_text("t0 0 d0_0 1\n")
    command, *extra = args
    if command == "rerank":
        full = ["rerank", "--model", "mono", "--checkpoint", CHECKPOINTS / "mono", "--run", ws["run"], "--topics",
                ws["topics"], "--corpus", ws["corpus"], "-o", ws["root"] / "o.run", *extra]
    else:
        full = ["eval", ws["run"], "--qrels", qrels, *extra]
    result = cli(*full)
    lines = result.stderr.strip().splitlines()
    assert result.code == 2 and len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_real_folders_pass_the_checks() -> None:
    """No false alarm: every checkpoint in tests/data and the packaged MiniLM pass, and the size a
    config implies stays below what its weights hold (the estimate is a lower bound)."""
    from rankkit.models import safe_loading
    from rankkit.models.backbone import default_backbone_path

    folders = sorted(p for p in CHECKPOINTS.iterdir() if p.is_dir())
    folders += sorted(p for p in (CHECKPOINTS.parent / "checkpoints-issue17").iterdir() if p.is_dir())
    for folder in folders:
        safe_loading.check_checkpoint(folder)
    minilm = default_backbone_path()
    safe_loading.check_hf_folder(minilm)
    config = json.loads((minilm / "config.json").read_text())
    implied = safe_loading.config_parameters(config, minilm / "config.json")
    weights, _ = safe_loading.folder_weights(minilm)
    assert 0.8 * weights < implied <= weights, (implied, weights)  # tight, and below
