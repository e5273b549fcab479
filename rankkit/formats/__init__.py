"""File formats rankkit reads and writes: runs, qrels, topics, corpora, training groups."""

from rankkit.files import atomic_write, open_text
from rankkit.formats.corpus import Document, iter_corpus, write_corpus
from rankkit.formats.groups import Passage, TrainingGroup, iter_groups, read_groups, write_groups
from rankkit.formats.qrels import Qrels, read_qrels, write_qrels
from rankkit.formats.runs import Run, iter_run_lines, iter_run_queries, read_run, sort_ranking, write_run
from rankkit.formats.topics import Topics, iter_topics, read_topics, write_topics

__all__ = [
    "Document", "Passage", "Qrels", "Run", "Topics", "TrainingGroup",
    "atomic_write", "iter_corpus", "iter_groups", "iter_run_lines", "iter_run_queries", "iter_topics",
    "open_text", "read_groups", "read_qrels", "read_run", "read_topics", "sort_ranking",
    "write_corpus", "write_groups", "write_qrels", "write_run", "write_topics",
]
