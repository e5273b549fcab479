"""Help texts tell the truth (issue 27): every command a help text names exists (with the options it names),
and every default a help text states is the default rankkit uses.

Help texts are read from the click commands typer builds, with the generated model options installed
(as ``rankkit train``/``rerank``/``index`` install them), so the check covers every ``--help``.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
import typer

from rankkit.cli import app
from rankkit.cli.model_options import GENERATED, dense_index_options, install, rerank_options, train_options


def commands() -> dict[str, Any]:
    for function, build, panel in GENERATED.values():
        install(function, build(), panel)
    group = typer.main.get_command(app)
    return dict(group.commands)  # type: ignore[attr-defined]


COMMANDS = commands()
#: Options generated from the models' declared settings: their defaults are the declarations' own.
GENERATED_FLAGS = {o.decls.split("/")[0] for o in train_options() + rerank_options() + dense_index_options()}


def help_texts() -> list[tuple[str, str | None, str]]:
    """``(command, option or None, text)`` of the top-level help, each command's help and each option's help."""
    group = typer.main.get_command(app)
    texts: list[tuple[str, str | None, str]] = [("rankkit", None, group.help or "")]
    for name, command in COMMANDS.items():
        texts.append((name, None, command.help or ""))
        for param in command.params:
            texts.append((name, param.opts[0] if param.opts else param.name, getattr(param, "help", None) or ""))
    return texts


def flags_of(command: str) -> set[str]:
    return {opt for param in COMMANDS[command].params for opt in (*param.opts, *param.secondary_opts)}


#: Words that follow "rankkit" in prose ("a rankkit checkpoint", "rankkit or FlagEmbedding shape"): not commands.
#: ("rankkit models" is not one of them: it read as a command and there was none.)
PROSE = {"checkpoint", "checkpoints", "needs", "or", "otherwise"}
MENTION = re.compile(r"`?rankkit ([a-z][a-z-]*)((?: --?[a-z][a-z0-9-]*(?:[ =](?![-`])[A-Za-z0-9_.:/*|-]+)?)*)")


def test_every_command_a_help_text_names_exists() -> None:
    """`rankkit models lists them` named a command that did not exist; every `rankkit CMD --flag` must."""
    seen = 0
    for command, option, text in help_texts():
        for match in MENTION.finditer(text):
            name, rest = match.group(1), match.group(2)
            if name in PROSE:
                continue
            where = f"{command} {option or ''}: {match.group(0)!r}"
            assert name in COMMANDS, f"{where} names no command (commands: {', '.join(sorted(COMMANDS))})"
            for flag in re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", rest):
                assert flag in flags_of(name) or flag == "--help", f"{where}: rankkit {name} has no {flag}"
            seen += 1
    assert seen > 10  # the texts do name commands (the pattern is not dead)


def hand_written_defaults() -> dict[tuple[str, str], str]:
    """``{(command, flag): text}`` of each default a help text states in words ("(default: 64)")."""
    found = {}
    for command, option, text in help_texts():
        if option is None or option in GENERATED_FLAGS:
            continue
        match = re.search(r"[\[(]default:? ([^\])]*)[\])]", text)
        if match:
            found[(command, option)] = match.group(1)
    return found


def recorded_call(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, run: Callable[[], Any]) -> dict[str, Any]:
    """The keyword arguments ``run()`` passes to ``module.name`` (stopped there)."""
    seen: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def record(*args: Any, **kwargs: Any) -> None:
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(module, name, record)
    with pytest.raises(Stop):
        run()
    return seen


def true_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[tuple[str, str], Callable[[str], bool]]:
    """For each stated default, a check that it is what the code does (from the code's own constants and calls)."""
    import rankkit.dense
    from rankkit.cli import eval_cmd, index_cmd, retrieve_cmd
    from rankkit.cli.consistency_cmd import DEFAULT_DEPTHS
    from rankkit.docstore.corpus import default_table_dir
    from rankkit.fusion.comb import fuse_combsum
    from rankkit.fusion.interpolate import fuse_interpolate
    from rankkit.fusion.rrf import fuse_rrf
    from rankkit.lexical.index import default_threads
    from rankkit.lexical.search import Bm25Params
    from rankkit.models import get_model_class
    from rankkit.models.backbone import default_backbone_path
    from rankkit.training.config import TrainConfig

    dense_build = recorded_call(monkeypatch, rankkit.dense, "build_dense_index", lambda: index_cmd._build_dense(
        index_cmd.IndexRequest(tmp_path / "corpus.jsonl", tmp_path / "index", None, False, {"model": "repbert"})))
    dense_search = recorded_call(monkeypatch, rankkit.dense, "iter_dense_search", lambda: retrieve_cmd._retrieve_dense(
        retrieve_cmd.RetrieveRequest(tmp_path / "index", {"q": "x"}, tmp_path / "out.run", 10, None, None, False, {}),
        "repbert"))
    params = Bm25Params()

    def default_of(function: Callable[..., Any], name: str) -> Any:
        return inspect.signature(function).parameters[name].default

    def models_say(text: str, value: Callable[[str], Any]) -> bool:
        """'the model's, e.g. repbert 20, densetrans 30': each named model's own default."""
        pairs = re.findall(r"([a-z][a-z-]+) ([0-9.e-]+)", text)
        return bool(pairs) and all(float(value(model)) == float(number) for model, number in pairs)

    def setting(name: str) -> Callable[[str], Any]:
        return lambda model: next(s.default for s in get_model_class(model).config_class.specs() if s.name == name)

    def cache(text: str) -> bool:
        corpus = tmp_path / "c.tsv"
        monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path / "cache"))
        explicit = default_table_dir(corpus).parent == tmp_path / "cache" / "docstore"
        monkeypatch.delenv("RANKKIT_CACHE_DIR")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        xdg = default_table_dir(corpus).parent == tmp_path / "xdg" / "rankkit" / "docstore"
        return explicit and xdg and text.startswith("$RANKKIT_CACHE_DIR/docstore, else ${XDG_CACHE_HOME:-~/.cache}"
                                                   "/rankkit/docstore; never beside the corpus")

    def equal(value: Any) -> Callable[[str], bool]:
        return lambda text: text == str(value)

    def index_model(text: str) -> bool:
        """retrieve without --model: a dense index's recorded model (a Lucene index: bm25, tests/dense/test_dense_cli.py)."""
        from rankkit.indexes import new_manifest, write_manifest

        folder = tmp_path / "dense-index"
        folder.mkdir()
        write_manifest(folder, new_manifest("dense", {"path": "c"}, {}, model="densetrans"))
        return (text == "the index's own: bm25 for Lucene indexes, the encoder a dense index records"
                and retrieve_cmd.model_of_index(folder) == "densetrans")

    def session_batching(device: str) -> Any:
        from rankkit.runtime.session import default_batching

        return default_batching(torch.device(device))

    def max_tokens_say(text: str) -> bool:
        cuda, cpu = session_batching("cuda"), session_batching("cpu")
        return (text == "32,768 on CUDA, where lengths are also rounded up to multiples of 8 and the next chunk is "
                        "prepared on a thread; none on the CPU"
                and (cuda.tokens, cuda.bucket, cuda.prefetch) == (32_768, 8, 1) and cpu.tokens is None)

    return {
        ("index", "--threads"): lambda text: text == "CPU cores" and default_threads() >= 1,
        ("index", "--faiss"): equal(dense_build["faiss_kind"]),
        ("index", "--nlist"): equal(dense_build["nlist"]),
        ("index", "--pq-m"): equal(dense_build["pq_m"]),
        ("index", "--pq-bits"): equal(dense_build["pq_bits"]),
        ("index", "--chunk-size"): equal(dense_build["chunk_size"]),
        ("index", "--device"): equal(dense_build["device"]),
        ("index", "--max-query-length"): lambda text: models_say(text, setting("max_query_length")),
        ("index", "--max-doc-length"): lambda text: models_say(text, setting("max_doc_length")),
        ("retrieve", "--model"): index_model,
        ("retrieve", "--threads"): lambda text: text == "CPU cores",  # retrieve_bm25: threads or default_threads()
        ("retrieve", "--runtag"): equal("the model name"),  # write_run(..., request.runtag or model)
        ("retrieve", "--k1"): equal(params.k1),
        ("retrieve", "--b"): equal(params.b),
        ("retrieve", "--fb-terms"): equal(params.fb_terms),
        ("retrieve", "--fb-docs"): equal(params.fb_docs),
        ("retrieve", "--original-weight"): equal(params.original_weight),
        ("retrieve", "--nprobe"): lambda text: text == "as built, 10" and dense_search["nprobe"] is None,
        ("retrieve", "--batch-size"): equal(dense_search["batch_size"]),
        ("retrieve", "--device"): equal(dense_search["device"]),
        ("retrieve", "--max-query-length"): lambda text: text == "as recorded in the index"
        and dense_search["max_query_length"] is None,
        ("mine", "--cache-dir"): cache,
        ("rerank", "--cache-dir"): cache,
        ("train", "--backbone"): lambda text: text == f"packaged {default_backbone_path().name}"
        or (text == "packaged all-MiniLM-L6-v2" and (default_backbone_path() / "config.json").is_file()),
        ("train", "--epochs"): equal(1),  # Trainer: (epochs or 1) * steps per epoch
        ("train", "--lr"): lambda text: models_say(text, lambda m: get_model_class(m).training_defaults.lr),
        ("train", "--weight-decay"): lambda text: models_say(
            text, lambda m: get_model_class(m).training_defaults.weight_decay),
        ("train", "--max-query-length"): lambda text: models_say(text, setting("max_query_length")),
        ("train", "--max-doc-length"): lambda text: models_say(text, setting("max_doc_length")),
        ("train", "--loss"): equal("the model's"),
        ("train", "--alpha"): equal(TrainConfig.alpha),
        ("fuse", "--runtag"): equal("fuse-METHOD"),
        ("fuse", "--rrf-k"): lambda text: float(text) == default_of(fuse_rrf, "rrf_k"),
        ("fuse", "--norm"): lambda text: text == default_of(fuse_combsum, "norm") == default_of(fuse_interpolate, "norm"),
        ("fuse", "--alpha"): lambda text: float(text) == default_of(fuse_interpolate, "alpha"),
        ("consistency", "--depth"): equal(", ".join(map(str, DEFAULT_DEPTHS))),
        ("plot-training", "--label"): equal("the folder names"),  # read_curves: label or the folder's name
        ("rerank", "--threads"): equal("torch's, the CPU cores"),
        # The inference session's batches (rankkit/runtime/session.py): the constants and what a session makes.
        ("rerank", "--batch-size"): lambda text: text == "32 on the CPU; on CUDA as many as --max-tokens allows"
        and session_batching("cpu").rows == 32 and session_batching("cuda").rows >= 1024,
        ("index", "--batch-size"): lambda text: text == "64 on the CPU; on CUDA as many as --max-tokens allows"
        and dense_build["batch_size"] is None,
        ("rerank", "--max-tokens"): max_tokens_say,
        # rankkit serve loads its model as rerank does (rankkit.serve.open_service: the same session options).
        ("serve", "--batch-size"): lambda text: text == "32 on the CPU; on CUDA as many as --max-tokens allows"
        and session_batching("cpu").rows == 32 and session_batching("cuda").rows >= 1024,
        ("serve", "--max-tokens"): max_tokens_say,
        ("serve", "--threads"): equal("torch's, the CPU cores"),
        ("index", "--max-tokens"): max_tokens_say,
        ("explain", "--threads"): equal("torch's, the CPU cores"),
        # Under pytest stdout is captured, not a terminal: the default is TSV (a terminal's is the box table).
        ("eval", "--format"): lambda text: text == "table on a terminal, tsv when the output is a file or a pipe"
        and eval_cmd.default_format(None) == "tsv" and eval_cmd.default_format("eval.txt") == "tsv",
    }


def test_every_default_a_help_text_states_is_true(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`rerank --cache-dir [default: beside the corpus]` was false; each stated default is checked against the code."""
    stated = hand_written_defaults()
    truths = true_defaults(monkeypatch, tmp_path)
    unchecked = sorted(set(stated) - set(truths))
    assert not unchecked, f"defaults stated in help with no check here (add one to true_defaults): {unchecked}"
    wrong = [f"rankkit {c} {f}: help says {stated[(c, f)]!r}" for c, f in sorted(stated) if not truths[(c, f)](stated[(c, f)])]
    assert not wrong, "\n".join(wrong)
    # And a shown default never contradicts a stated one.
    for name, command in COMMANDS.items():
        for param in command.params:
            flag = param.opts[0] if param.opts else param.name
            if (name, flag) in stated and param.default not in (None, [], ()):
                assert stated[(name, flag)] == str(param.default), (name, flag)


def test_norm_takes_ranx_spellings(tmp_path: Path, cli: Callable[..., Any]) -> None:
    runs = tmp_path / "a.run", tmp_path / "b.run"
    runs[0].write_text("1 Q0 x 1 3.0 a\n1 Q0 y 2 1.0 a\n1 Q0 z 3 0.5 a\n")
    runs[1].write_text("1 Q0 y 1 9.0 b\n1 Q0 z 2 2.0 b\n")
    outputs = {}
    for norm in ("minmax", "min-max", "zscore", "zmuv"):
        out = tmp_path / f"{norm}.run"
        result = cli("fuse", "--method", "combsum", "--norm", norm, *runs, "--output", out)
        assert result.code == 0, result.stderr
        outputs[norm] = out.read_text()
    assert outputs["min-max"] == outputs["minmax"] and outputs["zmuv"] == outputs["zscore"]
    assert outputs["minmax"] != outputs["zscore"]  # the missing-document rule follows the canonical name
    bad = cli("fuse", "--method", "combsum", "--norm", "max", *runs, "--output", tmp_path / "x.run")
    assert bad.code == 2 and "choose one of: minmax (min-max), zscore (zmuv), none" in bad.stderr
