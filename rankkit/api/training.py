"""The Python API's training: :func:`mine` (``rankkit mine`` on inputs in any form, groups back in memory) and
:func:`train` (``rankkit train`` with the same settings under their Python names, on group files or groups in
memory: a list of dicts, a pandas DataFrame, a ``datasets.Dataset``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Mapping, Sequence, cast

from rankkit.api.inputs import (
    Passages, PathLike, QrelsLike, Queries, RunLike, check_count, is_path, kind_error, qrels_of, queries_of, run_of,
)
from rankkit.errors import InputError, RankkitError
from rankkit.formats.frames import is_frame
from rankkit.formats.runs import sort_ranking

if TYPE_CHECKING:
    from rankkit.docstore import DocStore
    from rankkit.formats.groups import TrainingGroup
    from rankkit.training.config import StepInfo, TrainResult

#: Where :func:`train` writes groups given in memory, in its output folder (the file the checkpoint records as its
#: training data, and a resumed run reads again).
IN_MEMORY_FILES = {"train": "train-groups.jsonl", "dev": "dev-groups.jsonl"}
GROUP_FORMS = ("a groups file (JSONL, or MS MARCO triples) or a list of them, or groups in memory: a list of dicts "
               "(rankkit's {qid, query, pos, neg} or FlagEmbedding's {query, pos, neg}), a pandas DataFrame or a "
               "datasets.Dataset with those columns")


def _is_dataset(value: object) -> bool:
    """A Hugging Face ``datasets.Dataset`` (not imported: only recognised)."""
    return type(value).__module__.split(".")[0] == "datasets" and hasattr(value, "to_list")


def _plain(value: Any) -> Any:
    """A cell of a DataFrame or Dataset row as plain Python (numpy arrays and scalars from parquet or Arrow)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return _plain(value.tolist())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def group_records(groups: object, what: str = "train") -> list[dict[str, Any]] | None:
    """The records of groups given in memory (None when ``groups`` is a path or a list of paths)."""
    if groups is None or is_path(groups) or isinstance(groups, Sequence) and not isinstance(groups, str) \
            and groups and all(is_path(g) for g in groups):
        return None
    if is_frame(groups):
        rows: Iterable[Any] = groups.to_dict("records")  # type: ignore[attr-defined]
    elif _is_dataset(groups):
        rows = groups.to_list()  # type: ignore[attr-defined]
    elif isinstance(groups, Sequence) and not isinstance(groups, (str, bytes)):
        rows = groups
    else:
        raise kind_error(what, GROUP_FORMS, groups)
    from rankkit.formats.groups import TrainingGroup

    records = []
    for row in rows:
        if isinstance(row, TrainingGroup):
            records.append(row.to_json())
        elif isinstance(row, Mapping):
            records.append({str(k): _plain(v) for k, v in row.items() if not _missing(v)})
        else:
            raise kind_error(f"{what}[{len(records)}]", "a group: a dict with query, pos and neg", row)
    if not records:
        raise RankkitError(f"{what}: no training group given")
    return records


def _missing(value: Any) -> bool:
    """A DataFrame cell pandas fills where a row lacks the column (NaN/None): the key is left out."""
    return value is None or isinstance(value, float) and value != value


def _write_groups(records: list[dict[str, Any]], path: Path, what: str) -> Path:
    """Check each record as ``rankkit train`` checks a line (the record's index named) and write them as JSONL."""
    from rankkit.files import atomic_write
    from rankkit.formats.groups import parse_group

    lines = []
    for i, record in enumerate(records):
        try:
            line = json.dumps(record, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise RankkitError(f"{what}[{i}]: not a JSON-ready group ({err})") from None
        try:
            parse_group(what, i + 1, line)
        except InputError as err:
            raise RankkitError(f"{what}[{i}]: {err.problem}") from None
        lines.append(line)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as out:
        out.write("".join(line + "\n" for line in lines))
    return path


def train(model: str | None = None, train: Any = None, output: PathLike | None = None, *,
          config: PathLike | None = None, collection: PathLike | None = None, queries: PathLike | None = None,
          callbacks: Sequence[Callable[[StepInfo], None]] = (), **settings: Any) -> TrainResult:
    """Train a model as ``rankkit train`` does, with the same settings under their Python names.

    ``train`` (and the ``dev`` setting) is a groups file or a list of them, or groups in memory: a list of dicts in
    rankkit's shape (what :func:`mine` returns) or FlagEmbedding's, a pandas DataFrame with those columns
    (``qid``, ``query``, ``pos``, ``neg``) or a ``datasets.Dataset``; groups in memory are checked as ``rankkit
    train`` checks a file's lines and written to ``OUTPUT/train-groups.jsonl`` (``dev-groups.jsonl``), the
    training data the checkpoint records. ``settings`` are ``rankkit train``'s options (``epochs``,
    ``max_steps``, ``batch_size``, ``lr``, ``report_to``, ... the fields of :class:`rankkit.training.TrainConfig`,
    same defaults) and the model's own settings (``rankkit train --model NAME --help``: ``encoder="bi"``, ...),
    each checked against its declared type. ``config`` is a TOML recipe (``recipes/*.toml``); arguments given
    here override it. ``callbacks`` run after every optimiser step with a :class:`~rankkit.training.StepInfo`.
    Returns where the model went, its steps and metrics; the folder holds the model, ``train.log``,
    ``metrics.csv`` and ``training.png``.
    """
    from rankkit.training import train as run_training
    from rankkit.training.settings import API, api_settings, finish_config, merge_recipe, model_options, model_spec

    if model is not None:
        settings["model"] = model
    if train is not None:
        settings["train"] = train
    if output is not None:
        settings["output"] = output
    if collection is not None:
        settings["collection"] = collection
    if queries is not None:
        settings["queries"] = queries
    in_memory = {key: group_records(settings[key], key) for key in IN_MEMORY_FILES if key in settings}
    if any(records is not None for records in in_memory.values()):
        if settings.get("output") is None:
            raise RankkitError("train(): groups given in memory need output= (they are written into it)")
        for key, records in in_memory.items():
            if records is not None:
                settings[key] = [_write_groups(records, Path(settings["output"]) / IN_MEMORY_FILES[key], key)]
    values, given, own = api_settings(settings)
    values, file_options, recipe = merge_recipe(values, given, None if config is None else Path(config))
    cls = model_spec(values)
    options = {**model_options(cls, file_options, str(config)), **model_options(cls, own, API)}
    return run_training(finish_config(values, options, recipe), callbacks)


def mine(run: RunLike, qrels: QrelsLike, queries: Queries, passages: Passages, *, depth: int = 100,
         negatives: int = 8, strategy: Literal["random", "top"] = "random", skip_top: int = 0, min_rel: int = 1,
         seed: int = 0, teacher_list: int | None = None, ids_only: bool = False,
         output: PathLike | None = None) -> list[dict[str, Any]]:
    """``rankkit mine`` in Python: one training group per query of ``run`` with a judged positive (``qrels``, rel >=
    ``min_rel``), its positives and ``negatives`` hard negatives drawn from the run's top ``depth`` (``strategy``,
    ``skip_top``, ``seed``: as ``rankkit mine``'s options; ``teacher_list=K``: each query's whole top K with scores).

    Inputs in any form (paths, dicts, DataFrames; ``passages`` a ``{docid: text}`` dict, a DataFrame or a corpus).
    Returns the groups as rankkit's JSONL records (dicts), which :func:`train` takes as they are (or as
    ``pandas.DataFrame(groups)``); ``output`` also writes them there (what ``rankkit mine -o`` writes). The
    summary (groups written, queries skipped and why) goes to stderr, as from the command.
    """
    from rankkit.console import log, progress_bar
    from rankkit.files import check_outputs
    from rankkit.formats.groups import write_groups
    from rankkit.training.mine import MineConfig, MineReport, iter_mined_groups, no_group_error

    for name, value, minimum in (("depth", depth, 1), ("negatives", negatives, 1), ("skip_top", skip_top, 0),
                                 ("min_rel", min_rel, 1)):
        check_count(value, name, minimum)
    check_count(teacher_list, "teacher_list", optional=True)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise kind_error("seed", "an integer", seed)
    config = MineConfig(depth=depth, negatives=negatives, strategy=strategy, skip_top=skip_top, min_rel=min_rel,
                        seed=seed, teacher_list=teacher_list)
    config.check()
    if output is not None:
        check_outputs([("output", output)])
    scores, _ = run_of(run)
    judged, _ = qrels_of(qrels)
    texts, _ = queries_of(queries)
    report = MineReport()
    with _store(passages) as store, progress_bar("q") as bar:
        task = bar.add_task("mining", total=len(scores))
        groups: list[TrainingGroup] = list(iter_mined_groups(
            ((qid, sort_ranking(docs)) for qid, docs in scores.items()), judged, texts, store, config, report,
            on_query=lambda: bar.advance(task)))
    if not groups:
        raise no_group_error(report, "the run")
    if ids_only:
        groups = [group.without_texts() for group in groups]
    if output is not None:
        write_groups(output, groups)
    for line in report.lines(teacher_list or negatives):
        log(line)
    return [group.to_json() for group in groups]


def _store(passages: object) -> DocStore:
    """Passage texts by docid from a dict or DataFrame (in memory) or a corpus (its docid table, as the CLI)."""
    from rankkit.docstore import DocStore, open_docstore
    from rankkit.formats.frames import passages_from_frame

    if is_frame(passages):
        passages = passages_from_frame(passages)
    if isinstance(passages, Mapping):
        held = {str(docid): text for docid, text in passages.items()}
        wrong = next((docid for docid, text in held.items() if not isinstance(text, str)), None)
        if wrong is not None:
            raise RankkitError(f"passages: the text of {wrong!r} is a {type(held[wrong]).__name__}, expected a string")

        class InMemory(DocStore):
            source = "the passages given"

            def get_many(self, docids: Iterable[str], *, missing: Literal["error", "skip"] = "error") -> dict[str, str]:
                from rankkit.docstore import MissingDocumentsError

                wanted = list(docids)
                absent = [docid for docid in wanted if docid not in held]
                if absent and missing == "error":
                    raise MissingDocumentsError(absent, self.source)
                return {docid: held[docid] for docid in wanted if docid in held}

            def __len__(self) -> int:
                return len(held)

        return InMemory()
    if not is_path(passages):
        raise kind_error("passages", "a {docid: text} dict, a DataFrame with docno and text columns or a corpus "
                                     "(file, BEIR folder or irds: id)", passages)
    from rankkit.formats.sources import resolve_corpus

    return open_docstore(corpus=resolve_corpus(cast(PathLike, passages)))
