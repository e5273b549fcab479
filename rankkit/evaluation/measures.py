"""Measure names: ir_measures syntax and trec_eval names, translated to ir_measures objects.

Users write measures either the ir_measures way (``nDCG@10``, ``RR(rel=2)@10``, ``AP``, ``R@1000``)
or the trec_eval way (``ndcg_cut.10``, ``recip_rank``, ``map``, ``P.20``, ``recall.100``, ``bpref``,
``ndcg_cut.10,100`` for two measures at once, or trec_eval's output spelling ``ndcg_cut_10``).
:func:`parse_measures` turns each into a :class:`MeasureSpec` whose ``label`` is the measure as the
user wrote it (one label per parameter for comma lists) and whose ``measure`` is the ir_measures
object that computes it. The trec_eval table below is rankkit's own; the numbers themselves come
from ir_measures (pytrec_eval for every trec_eval measure).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Literal

import ir_measures
from ir_measures import Measure

from rankkit.errors import RankkitError

Aggregate = Literal["mean", "sum", "gmean"]

#: What ``rankkit eval`` reports when no ``-m`` is given: the TREC DL / MS MARCO staples
#: (graded early precision, the MS MARCO official RR@10, classic MAP and the recall ceiling a
#: re-ranker works under).
DEFAULT_MEASURES: tuple[str, ...] = ("nDCG@10", "RR@10", "AP", "R@1000")

#: trec_eval's default parameters for measures given without one (``-m P`` = P at these cutoffs).
TREC_CUTOFFS: tuple[str, ...] = ("5", "10", "15", "20", "30", "100", "200", "500", "1000")
TREC_RECALL_POINTS: tuple[str, ...] = tuple(f"{i / 10:.2f}" for i in range(11))

#: trec_eval's floor for the geometric means (gm_map, gm_bpref): ``MIN_GEO_MEAN`` in trec_eval.
MIN_GEO_MEAN = 0.00001


@dataclass(frozen=True)
class MeasureSpec:
    """One measure to report: its label (as the user wrote it), the ir_measures object, the mean kind.

    ``aggregate`` is ``mean`` for almost everything, ``sum`` for trec_eval's counters (num_q,
    num_ret, num_rel, num_rel_ret) and ``gmean`` for gm_map/gm_bpref (geometric mean with trec_eval's
    floor of 1e-5 on each query's value).
    """

    label: str
    measure: Measure
    aggregate: Aggregate = "mean"

    @property
    def caveat(self) -> str | None:
        """A known difference from trec_eval 10 for this measure, or None."""
        if self.measure.NAME == "IPrec":
            return (
                f"{self.label}: interpolated precision follows pytrec_eval's embedded trec_eval 9 rule "
                "(recall level x num_rel + 0.9, truncated); trec_eval 10 rounds instead, so values can "
                "differ (docs/EVALUATION.md)"
            )
        return None

    @property
    def is_recall(self) -> bool:
        """True for recall at a cutoff (R@k, recall.k): these get recall@k curves in plots."""
        return self.measure.NAME == "R"


@dataclass(frozen=True)
class _TrecEntry:
    """How to build the ir_measures object(s) for one trec_eval measure name."""

    build: Callable[[str | None], Measure]  # parameter text (None: no parameter) -> measure
    defaults: tuple[str, ...] | None = None  # parameters used when the name is given bare
    takes_param: bool = False
    aggregate: Aggregate = "mean"


def _cutoff(text: str | None) -> int:
    """trec_eval reads cutoffs as numbers and truncates them (``ndcg_cut.23.4`` is ndcg_cut_23)."""
    assert text is not None
    value = float(text)
    if value < 1:
        raise ValueError(f"cutoff must be at least 1, got {text}")
    return int(value)


def _recall_point(text: str | None) -> float:
    assert text is not None
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"recall level must be between 0 and 1, got {text}")
    return round(value, 2)  # ir_measures names pytrec_eval's iprec_at_recall_X at two decimals


def _beta(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"beta must be a finite number of at least 0, got {text}")
    return value


def _gains(text: str | None) -> Measure:
    """``ndcg.1=3,2=9``: trec_eval's relevance-level -> gain map (levels not listed keep their value)."""
    if text is None:
        return ir_measures.nDCG
    gains: dict[int, float] = {}
    for pair in text.split(";"):
        level, equals, gain = pair.partition("=")
        if not equals or not level.strip():
            raise ValueError(f"expected level=gain pairs, got {text.replace(';', ',')!r}")
        value = float(gain)
        if not math.isfinite(value):
            raise ValueError(f"gain of level {level.strip()} must be a finite number, got {gain.strip()}")
        gains[int(level)] = int(value) if value.is_integer() else value
    return ir_measures.nDCG(gains=gains)


def _plain(measure: Measure) -> Callable[[str | None], Measure]:
    return lambda _text: measure


_TREC: dict[str, _TrecEntry] = {
    "map": _TrecEntry(_plain(ir_measures.AP)),
    "map_cut": _TrecEntry(lambda t: ir_measures.AP @ _cutoff(t), TREC_CUTOFFS, True),
    "gm_map": _TrecEntry(_plain(ir_measures.AP), aggregate="gmean"),
    "Rprec": _TrecEntry(_plain(ir_measures.Rprec)),
    "bpref": _TrecEntry(_plain(ir_measures.Bpref)),
    "gm_bpref": _TrecEntry(_plain(ir_measures.Bpref), aggregate="gmean"),
    "recip_rank": _TrecEntry(_plain(ir_measures.RR)),
    "infAP": _TrecEntry(_plain(ir_measures.infAP)),
    "P": _TrecEntry(lambda t: ir_measures.P @ _cutoff(t), TREC_CUTOFFS, True),
    "recall": _TrecEntry(lambda t: ir_measures.R @ _cutoff(t), TREC_CUTOFFS, True),
    "success": _TrecEntry(lambda t: ir_measures.Success @ _cutoff(t), ("1", "5", "10"), True),
    "iprec_at_recall": _TrecEntry(lambda t: ir_measures.IPrec @ _recall_point(t), TREC_RECALL_POINTS, True),
    "ndcg": _TrecEntry(_gains, None, True),
    "ndcg_cut": _TrecEntry(lambda t: ir_measures.nDCG @ _cutoff(t), TREC_CUTOFFS, True),
    "set_P": _TrecEntry(_plain(ir_measures.SetP)),
    "set_relative_P": _TrecEntry(_plain(ir_measures.SetP(relative=True))),
    "set_recall": _TrecEntry(_plain(ir_measures.SetR)),
    "set_map": _TrecEntry(_plain(ir_measures.SetAP)),
    "set_F": _TrecEntry(
        lambda t: ir_measures.SetF if t is None else ir_measures.SetF(beta=_beta(t)), None, True),
    "num_q": _TrecEntry(_plain(ir_measures.NumQ), aggregate="sum"),
    "num_ret": _TrecEntry(_plain(ir_measures.NumRet), aggregate="sum"),
    "num_rel": _TrecEntry(_plain(ir_measures.NumRel), aggregate="sum"),
    "num_rel_ret": _TrecEntry(_plain(ir_measures.NumRelRet), aggregate="sum"),
}

#: trec_eval measures with no ir_measures counterpart (see docs/EVALUATION.md for details).
TREC_UNSUPPORTED: dict[str, str] = {
    "runid": "not a measure (the run's tag)",
    "relstring": "a string of relevance labels, not a number",
    "Rprec_mult": "R-precision at multiples of R has no ir_measures counterpart",
    "utility": "set utility has no ir_measures counterpart",
    "11pt_avg": "11-point average precision has no ir_measures counterpart",
    "binG": "binary G has no ir_measures counterpart",
    "G": "G has no ir_measures counterpart",
    "ndcg_rel": "nDCG averaged over relevant documents has no ir_measures counterpart",
    "Rndcg": "nDCG at R has no ir_measures counterpart",
    "relative_P": "relative precision at k has no ir_measures counterpart",
    "num_nonrel_judged_ret": "the judged non-relevant retrieved count has no ir_measures counterpart",
    "rbp": "ir_measures' RBP needs the trectools provider, which is not installed",
    "rbp_resid": "RBP residual has no ir_measures counterpart",
    "unj": "the unjudged fraction has no ir_measures counterpart (Judged@k is its complement)",
}

#: trec_eval's measure groups for ``-m``, in trec_eval's output order: ``official`` is what trec_eval
#: prints without ``-m``, ``all_trec`` every measure of trec_eval 9/10 (trec_eval's ``-m all_trec``;
#: checked against its own test outputs out.test and out.test.a).
TREC_GROUPS: dict[str, tuple[str, ...]] = {
    "official": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref",
                 "recip_rank", "iprec_at_recall", "P"),
    "all_trec": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref",
                 "recip_rank", "iprec_at_recall", "P", "recall", "infAP", "gm_bpref", "Rprec_mult", "utility",
                 "11pt_avg", "binG", "G", "ndcg", "ndcg_rel", "Rndcg", "ndcg_cut", "map_cut", "relative_P",
                 "success", "set_P", "set_relative_P", "set_recall", "set_map", "set_F", "num_nonrel_judged_ret",
                 "rbp", "rbp_resid", "unj"),
}


def expand_groups(names: Iterable[str]) -> tuple[list[str], list[str]]:
    """``-m`` values with ``official``/``all_trec`` replaced by their measures, as trec_eval expands them.

    Returns ``(names, left out)``: a group's measures that rankkit cannot compute
    (:data:`TREC_UNSUPPORTED`; ``runid`` is the run's name, shown anyway) are left out of the group
    and named in the second list, so a report can say so; given alone they stay errors.
    """
    out: list[str] = []
    left_out: list[str] = []
    for name in names:
        group = TREC_GROUPS.get(name.strip())
        if group is None:
            out.append(name)
            continue
        for base in group:
            if base in TREC_UNSUPPORTED:
                if base != "runid" and base not in left_out:
                    left_out.append(base)
            else:
                out.append(base)
    return out, left_out


_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def _split_trec(spec: str) -> tuple[str, str | None, str] | None:
    """Split a trec_eval name into ``(base, parameter text or None, separator)``, or None if not one.

    Accepts ``name``, ``name.params`` (trec_eval's -m syntax) and ``name_params`` (its output syntax).
    """
    if spec in _TREC or spec in TREC_UNSUPPORTED:
        return spec, None, ""
    base, dot, params = spec.partition(".")
    if dot and (base in _TREC or base in TREC_UNSUPPORTED):
        return base, params, "."
    base, underscore, params = spec.rpartition("_")
    if underscore and (base in _TREC or base in TREC_UNSUPPORTED) and params[:1] in set("0123456789.-"):
        return base, params, "_"
    return None


def trec_base_name(spec: str) -> str | None:
    """The trec_eval family of ``spec`` (``ndcg_cut`` for ``ndcg_cut_10``), or None if not trec_eval's."""
    split = _split_trec(spec.strip())
    return None if split is None else split[0]


def _with_rel_level(measure: Measure, rel_level: int | None, *, override: bool) -> Measure:
    """Apply trec_eval's ``-l``: binary measures count labels >= rel_level as relevant (``rel=``).

    A ``rel=`` the user wrote (``RR(rel=2)``) wins unless ``override`` (trec_eval names, whose
    ``rel`` comes from rankkit's table); graded measures (nDCG, ERR) have no ``rel`` and are
    unaffected, as in trec_eval.
    """
    if rel_level is None or "rel" not in measure.SUPPORTED_PARAMS:
        return measure
    if measure.NAME == "NumRet" and "rel" not in measure.params:
        return measure  # num_ret counts every retrieved document; NumRet(rel=) would be num_rel_ret
    if "rel" in measure.params and not override:
        return measure
    return measure(rel=rel_level)


def _parse_trec(spec: str, base: str, params: str | None, sep: str) -> list[tuple[str, Measure, Aggregate]]:
    if base in TREC_UNSUPPORTED:
        reason = TREC_UNSUPPORTED[base]
        raise RankkitError(f"measure {spec!r}: trec_eval's {base} is not supported ({reason})")
    entry = _TREC[base]
    if params is not None and not entry.takes_param:
        raise RankkitError(f"measure {spec!r}: trec_eval's {base} takes no parameter")
    if base == "ndcg" and params is not None:
        # ndcg.1=3,2=9 is one measure whose parameter is a gain map, not a list of measures.
        pieces = [params.replace(",", ";")]
    elif params is None:
        pieces = list(entry.defaults) if entry.defaults else [None]  # type: ignore[list-item]
    else:
        pieces = [p.strip() for p in params.split(",")]
    out: list[tuple[str, Measure, Aggregate]] = []
    for piece in pieces:
        if piece is not None and base != "ndcg" and not _NUMBER.match(piece):
            raise RankkitError(f"measure {spec!r}: parameter {piece!r} is not a number")
        try:
            measure = entry.build(piece)
        except ValueError as err:
            raise RankkitError(f"measure {spec!r}: {err}") from None
        if piece is None:
            label = spec
        elif params is None:
            label = f"{base}.{piece}"  # a bare name expanded to trec_eval's default parameters
        elif base == "ndcg":
            label = spec
        else:
            label = f"{base}{sep}{piece}"
        out.append((label, measure, entry.aggregate))
    return out


def _parse_ir_measures(spec: str) -> Measure:
    try:
        measure = ir_measures.parse_measure(spec)
    except NameError:
        raise RankkitError(
            f"unknown measure {spec!r} (use ir_measures names like nDCG@10, RR@10, AP, R@1000 "
            "or trec_eval names like ndcg_cut.10, recip_rank, map)"
        ) from None
    except (ValueError, SyntaxError) as err:
        raise RankkitError(f"unknown measure {spec!r}: {' '.join(str(err).split())}") from None
    try:
        measure.validate_params()
    except AssertionError as err:
        raise RankkitError(f"invalid measure {spec!r}: {err}") from None
    _check_params(spec, measure)
    return measure


#: Largest measure cutoff (the evaluator's C int).
MAX_CUTOFF = 2**31 - 1


def _check_params(spec: str, measure: Measure) -> None:
    """Refuse parameters the evaluator cannot take; a cutoff of 0 aborts pytrec_eval's C code (SIGABRT)."""
    params = measure.params
    cutoff = params.get("cutoff")
    if cutoff is not None:
        if isinstance(cutoff, bool) or not isinstance(cutoff, (int, float)) or cutoff != int(cutoff) or cutoff < 1:
            raise RankkitError(f"measure {spec!r}: the cutoff must be a whole number of at least 1, got {cutoff}")
        if cutoff > MAX_CUTOFF:  # trec_eval's C int
            raise RankkitError(f"measure {spec[:40]!r}: the cutoff must be at most {MAX_CUTOFF:,}, got {cutoff:.3g}")
    recall = params.get("recall")
    if recall is not None and (not isinstance(recall, (int, float)) or not 0.0 <= recall <= 1.0):
        raise RankkitError(f"measure {spec!r}: the recall level must be between 0 and 1, got {recall}")


def parse_measure(spec: str, *, rel_level: int | None = None) -> list[MeasureSpec]:
    """Parse one ``-m`` value into one or more measures (``ndcg_cut.10,100`` gives two).

    Raises :class:`RankkitError` naming the measure when it is unknown, malformed, or cannot be
    computed by any installed ir_measures provider.
    """
    text = spec.strip()
    if not text:
        raise RankkitError("empty measure name")
    split = _split_trec(text)
    if split is not None:
        parsed = _parse_trec(text, *split)
    else:
        measure = _parse_ir_measures(text)
        aggregate: Aggregate = "sum" if isinstance(measure.aggregator(), ir_measures.SumAgg) else "mean"
        parsed = [(text, measure, aggregate)]
    specs = []
    for label, measure, aggregate in parsed:
        measure = _with_rel_level(measure, rel_level, override=split is not None)
        if not ir_measures.DefaultPipeline.supports(measure):
            detail = f" with -l {rel_level}" if rel_level is not None else ""
            raise RankkitError(
                f"measure {label!r}{detail} cannot be computed by the installed ir_measures providers")
        specs.append(MeasureSpec(label, measure, aggregate))
    return specs


def measure_text(value: object) -> str:
    """A measure as text: a name in ir_measures or trec_eval syntax as it is, an ir_measures measure object
    (``ir_measures.nDCG@10``, ``ir_measures.RR(rel=2)@10``) as its canonical name."""
    if isinstance(value, str):
        return value
    if isinstance(value, ir_measures.measures.Measure):
        return str(value)
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    raise RankkitError(f"a measure is a name (nDCG@10, ndcg_cut.10, ...) or an ir_measures measure "
                       f"(ir_measures.nDCG@10), not a {type(value).__name__} ({shown})")


def parse_measures(specs: Iterable[object] | None, *, rel_level: int | None = None) -> list[MeasureSpec]:
    """Parse every ``-m`` value (default: :data:`DEFAULT_MEASURES`); repeated labels are kept once.

    Each is a name or an ir_measures measure object (:func:`measure_text`). ``official`` and ``all_trec``
    expand as in trec_eval (see :func:`expand_groups`).
    """
    names, _ = expand_groups([measure_text(spec) for spec in specs] if specs else list(DEFAULT_MEASURES))
    out: list[MeasureSpec] = []
    seen: set[str] = set()
    for name in names:
        for spec in parse_measure(name, rel_level=rel_level):
            if spec.label not in seen:
                seen.add(spec.label)
                out.append(spec)
    return out
