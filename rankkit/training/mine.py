"""``rankkit mine``: training groups of judged positives and first-stage hard negatives.

As DenseTrans (Cai et al. 2021, §4.1, §4.4.3) and the re-ranker papers build them: for each query
with at least one positive in the qrels (rel >= ``min_rel``), the positives with their graded
labels, and negatives drawn from the first-stage run's top ``depth``:

* never a judged positive, and never a judged document with ``0 < rel < min_rel`` either: such a
  document is partially relevant, not clearly negative. Judged non-relevant (rel <= 0) and
  unjudged documents are negatives;
* ``skip_top`` ignores the run's first ranks entirely, where unjudged false negatives
  (relevant but never judged) concentrate;
* ``random`` samples uniformly among the remaining candidates (DenseTrans' "random from the
  BM25 top-N"), seeded by ``seed`` mixed with the qid, so a query gets the same negatives whatever
  the order or subset of queries; ``top`` takes the highest ranked.

``teacher_list`` = K (``rankkit mine --run TEACHER --teacher-list K``) writes a teacher's whole
lists instead (Set-Encoder distillation, :mod:`rankkit.training.lists`): each query's top K of the
run, in run order, every candidate with its run score; judged ones (rel >= ``min_rel``) are the
positives with their graded labels, the others negatives (no sampling, no judged document left
out). A query whose top K holds no positive is skipped (counted); candidates without text are left
out (counted). Pseudo-qrels from the teacher's own top ranks serve queries without judgments
(docs/TRAINING.md).

Texts come from a :mod:`rankkit.docstore`; a candidate without text is replaced by the next
candidate (and counted), a positive without text is dropped (and counted). Each negative keeps
its run score. Groups are written in the run's query order with
:func:`rankkit.formats.write_groups`, the format ``rankkit train`` reads.

``ids_only`` (``rankkit mine --ids-only``) writes the same groups without their texts (qid,
docids, labels, scores: :meth:`~rankkit.formats.TrainingGroup.without_texts`), ~30x smaller for
MS MARCO passages; ``rankkit train --collection --queries`` looks the texts up again when a step
draws them, and trains to the same weights as on the groups with texts.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Literal, Mapping

from rankkit.console import log, progress_bar, warn
from rankkit.docstore import DocStore
from rankkit.errors import RankkitError
from rankkit.files import PathLike
from rankkit.formats.groups import Passage, TrainingGroup, write_groups
from rankkit.formats.qrels import read_qrels
from rankkit.formats.runs import count_run_queries, iter_run_queries
from rankkit.formats.topics import read_topics

Strategy = Literal["random", "top"]
STRATEGIES: tuple[str, ...] = ("random", "top")


@dataclass(frozen=True)
class MineConfig:
    """How negatives are drawn; see the module docstring."""

    depth: int = 100
    negatives: int = 8
    strategy: Strategy = "random"
    skip_top: int = 0
    min_rel: int = 1
    seed: int = 0
    #: Write each query's whole top ``teacher_list`` with scores (see the module docstring).
    teacher_list: int | None = None

    def check(self) -> None:
        """One-line errors for impossible settings."""
        if self.strategy not in STRATEGIES:
            raise RankkitError(f"unknown --strategy {self.strategy!r}; known: {', '.join(STRATEGIES)}")
        if self.depth < 1:
            raise RankkitError(f"--depth must be at least 1, got {self.depth}")
        if self.negatives < 1:
            raise RankkitError(f"--negatives must be at least 1, got {self.negatives}")
        if not 0 <= self.skip_top < self.depth:
            raise RankkitError(
                f"--skip-top must be in [0, depth), got {self.skip_top} with --depth {self.depth}"
            )
        if self.teacher_list is not None:
            if self.teacher_list < 1:
                raise RankkitError(f"--teacher-list must be at least 1, got {self.teacher_list}")
            if self.skip_top:
                raise RankkitError("--skip-top does not apply to --teacher-list (the teacher's list is kept whole)")
        if self.min_rel < 1:
            raise RankkitError(
                f"--min-rel must be at least 1 (rel <= 0 means not relevant), got {self.min_rel}"
            )


@dataclass
class MineReport:
    """Counts for the summary ``rankkit mine`` prints."""

    written: int = 0
    no_positive: int = 0
    not_in_topics: int = 0
    no_text: int = 0
    no_negatives: int = 0
    not_in_run: int = 0
    short: int = 0
    no_positive_in_list: int = 0
    positives: int = 0
    negatives: int = 0
    min_negatives: int | None = None
    max_negatives: int = 0
    missing_positive_text: list[str] = field(default_factory=list)
    missing_candidate_text: list[str] = field(default_factory=list)

    def add_group(self, group: TrainingGroup) -> None:
        self.written += 1
        self.positives += len(group.pos)
        self.negatives += len(group.neg)
        n = len(group.neg)
        self.min_negatives = n if self.min_negatives is None else min(self.min_negatives, n)
        self.max_negatives = max(self.max_negatives, n)

    def lines(self, wanted: int) -> list[str]:
        """The summary, one fact per line."""
        mean_neg = self.negatives / self.written if self.written else 0.0
        mean_pos = self.positives / self.written if self.written else 0.0
        out = [
            f"groups written: {self.written:,} (positives per query {mean_pos:.2f}; negatives per query "
            f"{mean_neg:.2f}, min {self.min_negatives or 0}, max {self.max_negatives}, wanted {wanted})",
            f"queries skipped: {self.no_positive:,} no positive in the qrels, "
            f"{self.not_in_topics:,} not in the topics, "
            f"{self.no_text:,} no positive with text, {self.no_negatives:,} no negative candidate",
            f"judged queries with a positive but absent from the run: {self.not_in_run:,}",
        ]
        if self.no_positive_in_list:
            out.append(f"queries skipped, no positive in the teacher's list: {self.no_positive_in_list:,}")
        if self.short:
            out.append(f"queries with fewer than {wanted} negatives: {self.short:,}")
        return out


def negative_candidates(
    ranking: list[tuple[str, float]], judged: Mapping[str, int], config: MineConfig
) -> list[tuple[str, float]]:
    """The run's ranks ``skip_top+1 .. depth`` minus every judged document with rel > 0."""
    return [
        (docid, score)
        for docid, score in ranking[config.skip_top : config.depth]
        if judged.get(docid, 0) <= 0
    ]


def draw_order(qid: str, candidates: list[tuple[str, float]], config: MineConfig) -> list[tuple[str, float]]:
    """Candidates in the order they are taken: rank order (``top``) or a seeded shuffle (``random``).

    The shuffle's seed is the string ``"{seed}:{qid}"`` (Python seeds ``random`` from a string
    through SHA-512), so it does not depend on query order or ``PYTHONHASHSEED``.
    """
    if config.strategy == "top":
        return list(candidates)
    order = list(candidates)
    random.Random(f"{config.seed}:{qid}").shuffle(order)
    return order


def take_negatives(
    order: list[tuple[str, float]], rank: Mapping[str, int], store: DocStore, wanted: int, missing: list[str]
) -> list[Passage]:
    """The first ``wanted`` candidates (in draw order) that have text, returned in run-rank order."""
    chosen: list[tuple[str, float, str]] = []
    start = 0
    while len(chosen) < wanted and start < len(order):
        batch = order[start : start + wanted - len(chosen)]
        start += len(batch)
        texts = store.get_many([docid for docid, _ in batch], missing="skip")
        for docid, score in batch:
            if docid in texts:
                chosen.append((docid, score, texts[docid]))
            else:
                missing.append(docid)
    chosen.sort(key=lambda item: rank[item[0]])
    return [Passage(docid, text, 0, score) for docid, score, text in chosen]


def teacher_list_group(qid: str, query: str, top: list[tuple[str, float]], judged: Mapping[str, int],
                       store: DocStore, config: MineConfig, report: MineReport) -> TrainingGroup | None:
    """The teacher's top list of one query as a group: every candidate with its score, positives graded."""
    texts = store.get_many([docid for docid, _ in top], missing="skip")
    report.missing_candidate_text.extend(docid for docid, _ in top if docid not in texts)
    pos = [Passage(d, texts[d], judged[d], s) for d, s in top if d in texts and judged.get(d, 0) >= config.min_rel]
    neg = [Passage(d, texts[d], 0, s) for d, s in top if d in texts and judged.get(d, 0) < config.min_rel]
    if not pos:
        report.no_positive_in_list += 1
        return None
    return TrainingGroup(qid, query, pos, neg)


def iter_mined_groups(
    run: PathLike | Iterable[tuple[str, list[tuple[str, float]]]],
    qrels: Mapping[str, Mapping[str, int]],
    topics: Mapping[str, str],
    store: DocStore,
    config: MineConfig,
    report: MineReport,
    on_query: Callable[[], None] | None = None,
) -> Iterator[TrainingGroup]:
    """Stream one training group per usable query of ``run`` (see the module docstring): a run file, or its
    queries in memory as ``(qid, ranking in trec_eval order)`` pairs (:func:`rankkit.formats.sort_ranking`).

    ``on_query()`` is called as each query of the run is reached (progress bars).
    """
    config.check()
    seen: set[str] = set()
    rankings = iter_run_queries(run) if isinstance(run, (str, os.PathLike)) else run
    for qid, ranking in rankings:
        if on_query is not None:
            on_query()
        seen.add(qid)
        judged = qrels.get(qid, {})
        positives = sorted(
            ((docid, rel) for docid, rel in judged.items() if rel >= config.min_rel),
            key=lambda item: -item[1],
        )
        if not positives:
            report.no_positive += 1
            continue
        if qid not in topics:
            report.not_in_topics += 1
            continue
        texts = store.get_many([docid for docid, _ in positives], missing="skip")
        report.missing_positive_text.extend(docid for docid, _ in positives if docid not in texts)
        pos = [Passage(docid, texts[docid], rel) for docid, rel in positives if docid in texts]
        if not pos:
            report.no_text += 1
            continue
        if config.teacher_list is not None:
            group = teacher_list_group(qid, topics[qid], ranking[:config.teacher_list], judged, store, config, report)
            if group is not None:
                report.add_group(group)
                yield group
            continue
        candidates = negative_candidates(ranking, judged, config)
        rank = {docid: i for i, (docid, _) in enumerate(ranking)}
        neg = take_negatives(
            draw_order(qid, candidates, config), rank, store, config.negatives, report.missing_candidate_text
        )
        if not neg:
            report.no_negatives += 1
            continue
        if len(neg) < config.negatives:
            report.short += 1
        group = TrainingGroup(qid, topics[qid], pos, neg)
        report.add_group(group)
        yield group
    report.not_in_run = sum(
        1
        for qid, judged in qrels.items()
        if qid not in seen and any(rel >= config.min_rel for rel in judged.values())
    )


def mine(
    run: PathLike,
    qrels: PathLike | Mapping[str, Mapping[str, int]],
    topics: PathLike | Mapping[str, str],
    store: DocStore,
    output: PathLike,
    config: MineConfig = MineConfig(),
    *,
    ids_only: bool = False,
) -> MineReport:
    """Mine training groups from ``run`` into ``output`` (JSONL; ``ids_only``: without texts); returns the counts.

    ``qrels`` and ``topics`` are files or already loaded mappings (the CLI loads them through
    :mod:`rankkit.formats.sources`, so BEIR folders and ``irds:`` ids work too).
    """
    config.check()
    judged = qrels if isinstance(qrels, Mapping) else read_qrels(qrels)
    queries = topics if isinstance(topics, Mapping) else read_topics(topics)
    report = MineReport()
    if config.teacher_list is not None:
        log(f"writing the top {config.teacher_list} of {run} per query with scores (teacher lists); "
            f"positives: rel >= {config.min_rel}")
    else:
        log(
            f"mining {config.negatives} {config.strategy} negatives per query from the top {config.depth} "
            f"(skipping the first {config.skip_top}) of {run}; positives: rel >= {config.min_rel}"
        )
    with progress_bar("q") as bar:
        task = bar.add_task("mining", total=count_run_queries(run))
        groups = iter_mined_groups(run, judged, queries, store, config, report, on_query=lambda: bar.advance(task))
        if ids_only:
            groups = (group.without_texts() for group in groups)
        write_groups(output, _at_least_one(groups, report, run))
    for what, docids in (
        ("judged positives", report.missing_positive_text),
        ("run candidates", report.missing_candidate_text),
    ):
        unique = list(dict.fromkeys(docids))
        if unique:
            shown = ", ".join(repr(d) for d in unique[:5])
            warn(f"{len(unique):,} {what} have no text in {store.source} (left out): {shown}")
    return report


def _at_least_one(groups: Iterator[TrainingGroup], report: MineReport, run: PathLike) -> Iterator[TrainingGroup]:
    """Pass ``groups`` through; raise at the end if there was none, so the empty output is never renamed into place."""
    yield from groups
    if report.written == 0:
        raise no_group_error(report, str(run))


def no_group_error(report: MineReport, run: str) -> RankkitError:
    """Why no training group could be built from ``run`` (one line, the counts of each reason)."""
    return RankkitError(
        f"no training group could be built from {run}: {report.no_positive:,} queries have no positive "
        f"in the qrels, {report.not_in_topics:,} are not in the topics, {report.no_text:,} have no "
        f"positive with text, {report.no_negatives:,} no negative candidate (do run, qrels and topics "
        "share query ids?); nothing written"
    )
