"""Models by name: hub ids resolved from a Hugging Face cache (offline) and downloaded from a stand-in hub
on 127.0.0.1 (tests/hub_server.py). Nothing here reaches the network: conftest.py sets HF_HUB_OFFLINE=1
and a throw-away HF_HOME; the download tests run rankkit in subprocesses pointed at the local server."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from hub_server import FakeHub, folder_files
from training_helpers import tiny_backbone, write_groups, write_topics

from rankkit import hub
from rankkit.errors import InputError, RankkitError
from rankkit.models.checkpoint import read_meta

ROOT = Path(__file__).resolve().parents[1]
LIGHTNING_IR = Path(__file__).parent / "data" / "lightning_ir"


def cache_root() -> Path:
    return Path(os.environ["HF_HOME"]) / "hub"


def put_in_cache(repo_id: str, folder: Path, *, branch: str = "main", seed: str = "") -> str:
    """``folder`` as snapshot COMMIT of ``repo_id`` in the test's Hugging Face cache, ``refs/BRANCH`` -> COMMIT."""
    commit = hashlib.sha1(f"{repo_id}{seed}{sorted(os.listdir(folder))}".encode()).hexdigest()
    repo = cache_root() / f"models--{repo_id.replace('/', '--')}"
    shutil.copytree(folder, repo / "snapshots" / commit, dirs_exist_ok=True)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / branch).write_text(commit)
    return commit


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny backbone and a trained tiny mono checkpoint, both also in the cache under hub ids."""
    from rankkit.training import TrainConfig, train

    root = tmp_path_factory.mktemp("hub")
    backbone = tiny_backbone(root / "tiny", dropout=0.0)
    groups = write_groups(root / "groups.jsonl", count=8, negatives=3)
    train(TrainConfig(model="mono", train=[groups], output=root / "mono", backbone=str(backbone), max_steps=2,
                      batch_size=4, group_size=3, lr=1e-2, warmup=0, device="cpu", seed=1))
    train(TrainConfig(model="mono", train=[groups], output=root / "mono2", backbone=str(backbone), max_steps=2,
                      batch_size=4, group_size=3, lr=1e-2, warmup=0, device="cpu", seed=2))
    ids = {"backbone": "test-org/tiny-bert", "mono": "test-org/tiny-mono", "set-encoder": "webis-test/set-encoder-int"}
    commits = {"backbone": put_in_cache(ids["backbone"], backbone), "mono": put_in_cache(ids["mono"], root / "mono")}
    commits["set-encoder"] = put_in_cache(ids["set-encoder"], LIGHTNING_IR / "set-encoder-electra-int")
    # A second snapshot of the mono repo becomes main; the first stays reachable by its commit.
    commits["mono-main"] = put_in_cache(ids["mono"], root / "mono2", seed="2")
    run = root / "run.txt"
    run.write_text("".join(f"t{i} Q0 d{i}_{j} {r + 1} {10 - r} bm25\n"
                           for i in range(3) for r, j in enumerate((0, 1, 2))), encoding="utf-8")
    corpus = root / "corpus.jsonl"
    from training_helpers import write_corpus

    write_corpus(corpus)
    return {"root": root, "backbone": backbone, "groups": groups, "ids": ids, "commits": commits, "run": run,
            "corpus": corpus, "topics": write_topics(root / "topics.tsv")}


@pytest.fixture(autouse=True)
def fresh_resolutions() -> None:
    hub._RESOLVED.clear()


def rerank(cli: Callable[..., Any], models: dict[str, Any], model: str, checkpoint: str, out: Path) -> Any:
    return cli("rerank", "--model", model, "--checkpoint", checkpoint, "--run", models["run"], "--topics",
               models["topics"], "--corpus", models["corpus"], "--output", out, "--depth", 3)


def test_a_hub_id_in_the_cache_reranks_as_its_folder(cli: Callable[..., Any], models: dict[str, Any],
                                                     tmp_path: Path) -> None:
    by_id = rerank(cli, models, "mono", models["ids"]["mono"] + "@" + models["commits"]["mono"], tmp_path / "id.run")
    by_path = rerank(cli, models, "mono", str(models["root"] / "mono"), tmp_path / "path.run")
    assert by_id.code == 0 and by_path.code == 0, by_id.stderr + by_path.stderr
    assert "the ONNX scorer, without torch" in by_id.stderr  # a tiny one-label mono: auto's choice, by id too
    assert (tmp_path / "id.run").read_bytes() == (tmp_path / "path.run").read_bytes()
    main = rerank(cli, models, "mono", models["ids"]["mono"], tmp_path / "main.run")  # refs/main: the second model
    assert main.code == 0, main.stderr
    assert (tmp_path / "main.run").read_bytes() != (tmp_path / "id.run").read_bytes()
    zero_shot = rerank(cli, models, "repbert", models["ids"]["backbone"], tmp_path / "zs.run")
    assert zero_shot.code == 0, zero_shot.stderr


def test_the_python_api_and_every_training_option_take_hub_ids(models: dict[str, Any], tmp_path: Path) -> None:
    import rankkit
    from rankkit.training import TrainConfig, train

    model = rankkit.load_model("mono", models["ids"]["mono"])
    assert model.source is not None and model.source.repo_id == models["ids"]["mono"]
    assert model.source.commit == models["commits"]["mono-main"]
    common: dict[str, Any] = {"train": [models["groups"]], "max_steps": 1, "batch_size": 4, "group_size": 3,
                              "lr": 1e-2, "warmup": 0, "device": "cpu"}
    train(TrainConfig(model="matrank", output=tmp_path / "bb", backbone=models["ids"]["backbone"], **common))
    meta = read_meta(tmp_path / "bb")
    assert meta["hparams"]["backbone"] == models["ids"]["backbone"]
    assert meta["base_model"] == {"repo_id": models["ids"]["backbone"], "revision": "main",
                                  "commit": models["commits"]["backbone"]}
    card = (tmp_path / "bb" / "README.md").read_text(encoding="utf-8")
    assert models["ids"]["backbone"] in card and models["commits"]["backbone"] in card
    assert "[metrics.csv](metrics.csv)" in card and "[training.png](training.png)" in card  # issue 27's files
    # --init-checkpoint alone: the checkpoint's architecture (its classifier, its vocabulary) and weights.
    train(TrainConfig(model="mono", output=tmp_path / "init", init_checkpoint=models["ids"]["mono"], **common))
    meta = read_meta(tmp_path / "init")
    assert meta["base_model"]["via_init_checkpoint"]["repo_id"] == models["ids"]["mono"]
    assert meta["base_model"]["local_folder"] == "tiny"  # what the mono checkpoint itself was built on
    train(TrainConfig(model="mono", output=tmp_path / "kd", backbone=str(models["backbone"]),
                      teacher_checkpoint=models["ids"]["mono"], **common))
    assert read_meta(tmp_path / "kd")["training"]["teacher_checkpoint"] == models["ids"]["mono"]


def test_the_authors_set_encoder_layout_loads_by_hub_id(cli: Callable[..., Any], models: dict[str, Any],
                                                        tmp_path: Path) -> None:
    result = rerank(cli, models, "set-encoder", models["ids"]["set-encoder"], tmp_path / "se.run")
    assert result.code == 0, result.stderr
    wrong = rerank(cli, models, "mono", models["ids"]["set-encoder"], tmp_path / "no.run")
    assert wrong.code == 2 and "lightning-ir set-encoder checkpoint: re-rank it with --model set-encoder" in wrong.stderr


def test_offline_and_missing_ids_are_one_line(cli: Callable[..., Any], models: dict[str, Any], tmp_path: Path) -> None:
    result = rerank(cli, models, "mono", "test-org/not-downloaded", tmp_path / "x.run")
    assert result.code == 2 and result.stderr.count("\n") == 1
    assert "test-org/not-downloaded is not in the cache" in result.stderr and "offline" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "x.run").exists()
    missing = rerank(cli, models, "mono", str(tmp_path / "no" / "such" / "folder"), tmp_path / "y.run")
    assert missing.code == 2 and "no such checkpoint folder" in missing.stderr
    with pytest.raises(InputError, match="no such backbone folder"):
        hub.resolve_model("./not-here", option="--backbone", what="backbone")


def test_a_cache_snapshot_path_records_its_repo_and_commit(models: dict[str, Any]) -> None:
    commit = models["commits"]["backbone"]
    snapshot = cache_root() / "models--test-org--tiny-bert" / "snapshots" / commit
    source = hub.resolve_model(str(snapshot))
    assert (source.repo_id, source.commit) == ("test-org/tiny-bert", commit)
    assert source.pinned == f"test-org/tiny-bert@{commit}"
    local = hub.resolve_model(str(models["backbone"]))
    assert local.repo_id is None and local.provenance()["weights_sha256"] == hashlib.sha256(
        (models["backbone"] / "model.safetensors").read_bytes()).hexdigest()


def test_a_cross_encoder_for_a_bi_encoder_and_the_reverse_are_refused(cli: Callable[..., Any], models: dict[str, Any],
                                                                      tmp_path: Path) -> None:
    plain = tmp_path / "cross-encoder"  # a published cross-encoder: an HF sequence classifier, no rankkit.json
    shutil.copytree(models["root"] / "mono", plain, ignore=shutil.ignore_patterns("rankkit.json", "*.log", "README.md"))
    cross = rerank(cli, models, "repbert", str(plain), tmp_path / "a.run")
    assert cross.code == 2 and "is a cross-encoder" in cross.stderr and "--model mono" in cross.stderr
    from rankkit.models.backbone import default_backbone_path

    bi = rerank(cli, models, "mono", str(default_backbone_path()), tmp_path / "b.run")
    assert bi.code == 2 and "sentence-transformers bi-encoder" in bi.stderr


def test_hub_id_syntax() -> None:
    assert hub.looks_like_hub_id("bert-base-uncased") and hub.looks_like_hub_id("org/name@v1.0")
    assert hub.looks_like_hub_id("cross-encoder/ms-marco-MiniLM-L-6-v2")
    assert not hub.looks_like_hub_id("a/b/c") and not hub.looks_like_hub_id("./x") and not hub.looks_like_hub_id("/abs")
    assert list(hub.references(["rerank", "--checkpoint", "a/b", "--backbone=c", "--run", "r"],
                               ("--checkpoint", "--backbone"))) == [("--checkpoint", "a/b"), ("--backbone", "c")]


# ------------------------------------------------------------------------------ the download path


def run_rankkit(code: str, hub_url: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_ENDPOINT": hub_url, "HF_HOME": str(home), "HF_HUB_OFFLINE": "0",
           "RANKKIT_HEARTBEAT": "0.05", "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300,
                          check=False)


RESOLVE = """
import sys
from rankkit.cli import command_settings
from rankkit.errors import RankkitError
command_settings()  # what the rankkit command sets up before resolving its model references
from rankkit.hub import resolve_model
try:
    source = resolve_model(sys.argv[1])
except RankkitError as err:
    sys.exit(f"rankkit: error: {err}")
print(source.path, source.commit)
"""


def messages(stderr: str) -> list[str]:
    """stderr without the download's heartbeat lines."""
    return [line for line in stderr.splitlines() if not line.startswith("downloading ")]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("served")
    backbone = tiny_backbone(root / "tiny", dropout=0.0)
    other = tiny_backbone(root / "tiny2", hidden=32)
    with FakeHub() as fake:
        first = fake.repo("org/tiny").add_commit(folder_files(backbone))
        second = fake.repo("org/tiny").add_commit(folder_files(other))  # now main
        files = folder_files(backbone)
        files["pytorch_model.bin"] = b"pickle" * 10
        files["onnx/model.onnx"] = b"not fetched"
        files["README.md"] = b"not fetched"
        fake.repo("org/with-extras").add_commit(files)
        fake.repo("org/pickled").add_commit({"config.json": b"{}", "pytorch_model.bin": b"pickle" * 10})
        fake.repo("org/dropped").add_commit(folder_files(backbone))
        yield {"hub": fake, "root": root, "backbone": backbone, "other": other, "first": first, "second": second}


def test_download_caches_pins_and_fetches_only_what_rankkit_loads(served: dict[str, Any]) -> None:
    fake, home = served["hub"], served["root"] / "home1"
    fake.delay = 0.01  # ~0.3 s for the weights: the heartbeat beats
    done = run_rankkit(RESOLVE, fake.url, home, "org/tiny")
    fake.delay = 0.0
    assert done.returncode == 0, done.stderr
    folder, commit = done.stdout.split()
    assert commit == served["second"] and sha256(Path(folder) / "model.safetensors") == sha256(
        served["other"] / "model.safetensors")
    beats = [line for line in done.stderr.splitlines() if line.startswith("downloading org/tiny:")]
    assert beats and " B (" in beats[0] and "B/s" in beats[-1] and "100.0%" in beats[-1]
    fetched = len(fake.downloads)
    again = run_rankkit(RESOLVE, fake.url, home, "org/tiny")
    assert again.returncode == 0 and again.stdout == done.stdout and len(fake.downloads) == fetched  # the cache
    pinned = run_rankkit(RESOLVE, fake.url, home, f"org/tiny@{served['first']}")
    assert pinned.returncode == 0, pinned.stderr
    assert sha256(Path(pinned.stdout.split()[0]) / "model.safetensors") == sha256(
        served["backbone"] / "model.safetensors")
    extras = run_rankkit(RESOLVE, fake.url, home, "org/with-extras")
    assert extras.returncode == 0, extras.stderr
    names = sorted(p.name for p in Path(extras.stdout.split()[0]).iterdir())
    assert "pytorch_model.bin" not in names and "onnx" not in names and "README.md" not in names
    assert "model.safetensors" in names and "config.json" in names


def test_download_refusals_are_one_line(served: dict[str, Any]) -> None:
    fake, home = served["hub"], served["root"] / "home2"
    pickled = run_rankkit(RESOLVE, fake.url, home, "org/pickled")
    assert pickled.returncode == 1 and "no safetensors weights" in pickled.stderr
    assert "pytorch_model.bin" in pickled.stderr and len(messages(pickled.stderr)) == 1
    missing = run_rankkit(RESOLVE, fake.url, home, "org/missing")
    assert missing.returncode == 1 and "no model org/missing on the Hugging Face hub" in missing.stderr
    revision = run_rankkit(RESOLVE, fake.url, home, "org/tiny@no-such-branch")
    assert revision.returncode == 1 and "has no revision 'no-such-branch'" in revision.stderr
    unreachable = run_rankkit(RESOLVE, "http://127.0.0.1:9", home, "org/elsewhere")
    assert unreachable.returncode == 1 and "could not be reached" in unreachable.stderr
    assert len(messages(unreachable.stderr)) == 1


def test_a_connection_dropped_mid_file_leaves_nothing_a_later_run_trusts(served: dict[str, Any]) -> None:
    fake, home = served["hub"], served["root"] / "home3"
    fake.drop = {"model.safetensors"}
    try:
        cut = run_rankkit(RESOLVE, fake.url, home, "org/dropped")
    finally:
        fake.drop = set()
    assert cut.returncode == 1 and "run again to resume" in cut.stderr and len(messages(cut.stderr)) == 1
    repo = home / "hub" / "models--org--dropped"
    assert not list(repo.glob("snapshots/*/model.safetensors"))  # no partial weights in a snapshot
    offline = run_rankkit(RESOLVE + "", fake.url, home, "org/dropped")  # online again: completes the download
    assert offline.returncode == 0, offline.stderr
    assert sha256(Path(offline.stdout.split()[0]) / "model.safetensors") == sha256(served["backbone"] / "model.safetensors")


def test_the_rankkit_command_downloads_before_importing_torch(served: dict[str, Any], tmp_path: Path) -> None:
    fake, home = served["hub"], served["root"] / "home4"
    code = ("import sys\nfrom rankkit.cli import main\nmain(sys.argv[1:])")
    missing = run_rankkit(code + "\n", fake.url, home, "rerank", "--model", "mono", "--checkpoint", "org/missing",
                          "--run", "r", "--topics", "t", "--corpus", "c", "--output", str(tmp_path / "o"))
    assert missing.returncode == 2 and "no model org/missing" in missing.stderr
    probe = ("import sys\nfrom rankkit.cli import resolve_model_references\n"
             "resolve_model_references(sys.argv[1:])\nprint('torch' in sys.modules)")
    checked = run_rankkit(probe, fake.url, home, "rerank", "--checkpoint", "org/tiny")
    assert checked.returncode == 0 and checked.stdout.strip() == "False", checked.stderr


def test_rankkit_offline_flag_keeps_the_network_out(served: dict[str, Any], tmp_path: Path) -> None:
    fake, home = served["hub"], served["root"] / "home5"
    code = "import sys\nfrom rankkit.cli import main\nmain(sys.argv[1:])"
    before = len(fake.downloads)
    result = run_rankkit(code, fake.url, home, "--offline", "rerank", "--model", "mono", "--checkpoint", "org/tiny",
                         "--run", "r", "--topics", "t", "--corpus", "c", "--output", str(tmp_path / "o"))
    assert result.returncode == 2 and "offline mode is on" in result.stderr and result.stderr.count("\n") == 1
    assert len(fake.downloads) == before and not list(home.rglob("*.safetensors"))


def test_model_reference_errors_name_the_option() -> None:
    with pytest.raises(RankkitError, match="--backbone org/x"):
        hub.resolve_model("org/x", option="--backbone", what="backbone")


def test_cli_training_options_recipes_and_dense_indexes_take_hub_ids(cli: Callable[..., Any], models: dict[str, Any],
                                                                     tmp_path: Path) -> None:
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(f'[train]\nmodel = "mono"\nbackbone = "{models["ids"]["backbone"]}"\nmax_steps = 1\n'
                      'batch_size = 4\ngroup_size = 3\nwarmup = 0\ndevice = "cpu"\n', encoding="utf-8")
    trained = cli("train", "--config", recipe, "--train", models["groups"], "--output", tmp_path / "recipe")
    assert trained.code == 0, trained.stderr
    assert read_meta(tmp_path / "recipe")["base_model"]["repo_id"] == models["ids"]["backbone"]
    init = cli("train", "--model", "set-encoder", "--init-checkpoint", models["ids"]["mono"], "--train", models["groups"],
               "--output", tmp_path / "se", "--max-steps", 1, "--batch-size", 4, "--group-size", 3, "--warmup", 0)
    assert init.code == 0, init.stderr  # a mono checkpoint's encoder under a Set-Encoder, its architecture built
    index = cli("index", "--kind", "dense", "--model", "repbert", "--checkpoint", models["ids"]["backbone"], "--corpus",
                models["corpus"], "--index", tmp_path / "dense")
    assert index.code == 0, index.stderr
    manifest = json.loads((tmp_path / "dense" / "rankkit-index.json").read_text(encoding="utf-8"))
    assert manifest["checkpoint"] == f"{models['ids']['backbone']}@{models['commits']['backbone']}"
    assert manifest["checkpoint_source"]["repo_id"] == models["ids"]["backbone"]
    searched = cli("retrieve", "--model", "repbert", "--index", tmp_path / "dense", "--topics", models["topics"],
                   "--output", tmp_path / "dense.run", "--k", 5)
    assert searched.code == 0, searched.stderr


def test_sigterm_during_a_download_stops_cleanly_and_the_next_run_completes(served: dict[str, Any],
                                                                            tmp_path: Path) -> None:
    import signal

    fake, home = served["hub"], served["root"] / "home6"
    fake.repo("org/slow").add_commit(folder_files(served["backbone"]))
    env = {**os.environ, "HF_ENDPOINT": fake.url, "HF_HOME": str(home), "HF_HUB_OFFLINE": "0",
           "RANKKIT_HEARTBEAT": "0.1", "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    code = "import sys\nfrom rankkit.cli import main\nmain(sys.argv[1:])"
    fake.delay = 0.05
    try:
        process = subprocess.Popen([sys.executable, "-c", code, "rerank", "--model", "mono", "--checkpoint", "org/slow",
                                    "--run", "r", "--topics", "t", "--corpus", "c", "-o", str(tmp_path / "o")],
                                   env=env, stderr=subprocess.PIPE, text=True)
        assert process.stderr is not None
        for line in process.stderr:  # wait until bytes are flowing
            if line.startswith("downloading org/slow:"):
                break
        process.send_signal(signal.SIGTERM)
        _, rest = process.communicate(timeout=120)
    finally:
        fake.delay = 0.0
    assert process.returncode == 128 + signal.SIGTERM and "rankkit: terminated by SIGTERM" in rest
    assert not (tmp_path / "o").exists()
    for linked in (home / "hub" / "models--org--slow").glob("snapshots/*/*"):  # only complete files are linked
        assert linked.read_bytes() == (served["backbone"] / linked.name).read_bytes()
    again = run_rankkit(RESOLVE, fake.url, home, "org/slow")
    assert again.returncode == 0, again.stderr
    assert sha256(Path(again.stdout.split()[0]) / "model.safetensors") == sha256(served["backbone"] / "model.safetensors")
