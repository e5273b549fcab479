"""rankkit/serve runs models through the inference session only: like the other drivers (tests/runtime/
test_session.py), it never enters autocast, names Runtime.torch_precision or compares a precision string, and it
never calls a model's scoring methods itself (the worker calls session.scores / session.encode)."""

from __future__ import annotations

import ast
from pathlib import Path

SERVE = Path(__file__).resolve().parents[2] / "rankkit" / "serve"
PRECISIONS = {"fp32", "bf16", "fp16", "tf32"}
MODEL_CALLS = {"rerank_scores", "forward_scores", "rerank_prepared", "encode_prepared", "embed"}


def test_serve_scores_through_the_session_only() -> None:
    problems = []
    for path in sorted(SERVE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.name}:{getattr(node, 'lineno', 0)}"
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if name in ("autocast", "torch_precision") or name in MODEL_CALLS:
                problems.append(f"{where}: {name}")
            if isinstance(node, ast.Compare):
                constants = [c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
                if any(c in PRECISIONS for c in constants):
                    problems.append(f"{where}: compares a precision string")
    assert not problems, problems
