#!/usr/bin/env python
"""Probe: where a BERT-base cross-encoder's GPU re-ranking time goes, and what batching and attention win.

    python3 bench/probes/gpu_inference.py --output "$OUT"          # on the GPU machine (carry bench/gpu_wheels)
    python bench/probes/gpu_inference.py --dry-run --output /tmp/p  # tiny model on the CPU (the code path only)

One process, one random-init BERT-base sequence classifier (seed 0, 1 label; the bert-base-uncased
vocabulary), the 4,300 (query, passage) pairs of DL19's BM25 top-100 (examples/data), cut to 256 tokens.
Every row scores all pairs twice: ``cold`` is the first pass (shapes this process has not run before,
which is what a re-ranking command meets), ``warm`` the second (the same shapes again). Rows are
ordered, and their batch row counts chosen, so that no row's cold pass reuses another row's shapes.

Rows: sentence-transformers' ``CrossEncoder`` (fp32, bf16 weights; its own batching, input order);
rankkit 0.x's ``rerank_scores`` (fp32, bf16 autocast: what the issue measured); then pre-tokenised
pairs through the transformers model with each batching (input order; longest first with exact
lengths; lengths rounded up to buckets; a token budget per batch), each SDPA backend, bf16/fp32
weights, autocast vs none, TF32, and an unpadded path (``torch.nn.attention.varlen.varlen_attn``
through transformers' attention interface, packed sequences). Also the tokeniser's time and the
import/start-up costs. Writes ``probe.json`` and prints a table; MFU = model FLOPs / 790 TFLOP/s
(the bf16 dense rate measured on this machine kind), counting real tokens only.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
PEAK_BF16 = 790e12


def load_pairs(queries: int | None) -> list[tuple[str, str]]:
    from rankkit.formats import read_run, read_topics

    data = ROOT / "examples" / "data" / "dl19"
    topics = read_topics(data / "topics.dl19-passage.txt")
    run = read_run(data / "runs" / "BM25.dl19.txt")
    texts: dict[str, str] = {}
    with gzip.open(data / "passages.dl19-pool.tsv.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            docid, text = line.rstrip("\n").split("\t", 1)
            texts[docid] = text
    pairs = []
    for qid in sorted(run)[:queries]:
        ranked = sorted(run[qid].items(), key=lambda kv: (-kv[1], kv[0]))[:100]
        pairs += [(topics[qid], texts[d]) for d, _ in ranked if d in texts]
    return pairs


def flops_per_pair(config: Any, tokens: int) -> float:
    """Forward FLOPs of one sequence of ``tokens`` through a BERT encoder (matmuls only)."""
    h, layers, inter = config.hidden_size, config.num_hidden_layers, config.intermediate_size
    dense = 2 * tokens * (4 * h * h + 2 * h * inter)
    attention = 2 * 2 * tokens * tokens * h
    return layers * (dense + attention)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    args.output.mkdir(parents=True, exist_ok=True)
    from gpu_suite import carried_wheels, tokenizer_folder

    extra = carried_wheels()
    started_all = time.monotonic()
    import torch
    import transformers
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    device = torch.device("cpu" if args.dry_run else "cuda")
    results: dict[str, Any] = {"meta": {"torch": torch.__version__, "transformers": transformers.__version__,
                                        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
                                        "dry_run": args.dry_run, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
                               "rows": [], "notes": {}}

    def save() -> None:
        (args.output / "probe.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    tok_dir = tokenizer_folder()
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    if args.dry_run:
        config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=128, num_labels=1)
    else:
        config = BertConfig(vocab_size=tokenizer.vocab_size, num_labels=1)
    torch.manual_seed(0)
    model32 = BertForSequenceClassification(config).eval()
    work = Path(tempfile.mkdtemp(prefix="probe-"))
    folder = work / "ce"
    model32.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    model32.to(device)
    pairs = load_pairs(4 if args.dry_run else None)
    n = len(pairs)
    results["meta"]["pairs"] = n

    # -- tokenisation ---------------------------------------------------------------------------------
    t0 = time.perf_counter()
    enc = tokenizer([q for q, _ in pairs], [p for _, p in pairs], truncation="only_second", max_length=256,
                    padding=False, return_attention_mask=False)
    results["notes"]["tokenize_s"] = time.perf_counter() - t0
    ids = [list(x) for x in enc["input_ids"]]
    segs = [list(x) for x in enc["token_type_ids"]]
    lengths = [len(x) for x in ids]
    real_tokens = sum(lengths)
    results["meta"]["tokens"] = {"mean": statistics.mean(lengths), "max": max(lengths), "min": min(lengths),
                                 "total": real_tokens}
    model_flops = sum(flops_per_pair(config, t) for t in lengths)
    print(f"{n} pairs, {real_tokens} tokens (mean {statistics.mean(lengths):.1f}); tokenize "
          f"{results['notes']['tokenize_s']:.3f} s", flush=True)

    def record(name: str, fn: Callable[[], Any], *, padded: int | None = None, extra_info: dict | None = None,
               reference: list[float] | None = None) -> list[float] | None:
        row: dict[str, Any] = {"row": name, **(extra_info or {})}
        try:
            for phase in ("cold", "warm"):
                sync()
                t = time.perf_counter()
                scores = fn()
                sync()
                seconds = time.perf_counter() - t
                row[f"{phase}_pairs_s"] = n / seconds
                row[f"{phase}_mfu"] = model_flops / seconds / PEAK_BF16
            if padded is not None:
                row["padded_share"] = 1 - real_tokens / padded
            if reference is not None and scores is not None:
                diffs = [abs(a - b) for a, b in zip(scores, reference)]
                row["max_abs_diff_vs_fp32"] = max(diffs)
                import numpy as np

                row["corr_vs_fp32"] = float(np.corrcoef(np.array(scores), np.array(reference))[0, 1])
        except Exception as err:  # a backend that refuses this input: recorded, the probe goes on
            row["error"] = f"{type(err).__name__}: {str(err)[:300]}"
            scores = None
        results["rows"].append(row)
        save()
        print(json.dumps(row), flush=True)
        return scores

    # -- the peer: sentence-transformers CrossEncoder (first: nothing has run any shape yet) -------------
    from sentence_transformers import CrossEncoder

    for precision in ("fp32", "bf16"):
        ce = CrossEncoder(str(folder), num_labels=1, max_length=256, device=str(device),
                          activation_fn=torch.nn.Identity())
        if precision == "bf16":
            ce.model.to(torch.bfloat16)
        for bs in (64,):
            record(f"CrossEncoder {precision} batch {bs}",
                   lambda ce=ce, bs=bs: [float(x) for x in ce.predict(pairs, batch_size=bs, show_progress_bar=False)],
                   extra_info={"precision": precision})
        del ce
    # -- rankkit as it is (rerank_scores on a mono folder, autocast) --------------------------------------
    try:
        from rankkit.devices import autocast
        from rankkit.models.checkpoint import load_for_inference
        from rankkit.runtime import Runtime
        from rankkit.runtime import load_for_inference as load_runtime

        mono_dir = work / "mono"
        import shutil

        shutil.copytree(folder, mono_dir)
        (mono_dir / "tokenizer.json").exists() or shutil.copy(tok_dir / "tokenizer.json", mono_dir / "tokenizer.json")
        by_query: dict[str, list[str]] = {}
        for q, p in pairs:
            by_query.setdefault(q, []).append(p)
        queries, candidates = list(by_query), list(by_query.values())
        for precision in ("fp32", "bf16"):
            loaded = load_runtime("mono", mono_dir, Runtime("torch", "none", None, precision), device)

            def ours(model: Any = loaded.model, precision: str = precision) -> list[float]:
                with torch.inference_mode(), autocast(precision, device):
                    return [float(x) for s in model.rerank_scores(queries, candidates, 31) for x in s.tolist()]

            record(f"rankkit 0.x rerank_scores {precision} (autocast) batch 31", ours, extra_info={"precision": precision})
            del loaded
        del load_for_inference
    except Exception as err:
        results["notes"]["rankkit_error"] = f"{type(err).__name__}: {err}"
        print("rankkit rows failed:", err, flush=True)

    # -- pre-tokenised batches through transformers -------------------------------------------------------
    import numpy as np

    def batches(order: list[int], *, rows: int, bucket: int = 1, budget: int | None = None) -> list[tuple[list[int], int]]:
        """(rows, padded length) batches of ``order``: at most ``rows`` rows and ``budget`` padded tokens."""
        out, cur, width = [], [], 0
        for i in order:
            w = max(width, -(-lengths[i] // bucket) * bucket)
            if cur and (len(cur) + 1 > rows or (budget is not None and w * (len(cur) + 1) > budget)):
                out.append((cur, width))
                cur, w = [], -(-lengths[i] // bucket) * bucket
            cur.append(i)
            width = w
        if cur:
            out.append((cur, width))
        return out

    def tensors(rows: list[int], width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        a = np.zeros((len(rows), width), dtype=np.int64)
        s = np.zeros((len(rows), width), dtype=np.int64)
        m = np.zeros((len(rows), width), dtype=np.int64)
        for r, i in enumerate(rows):
            a[r, :lengths[i]] = ids[i]
            s[r, :lengths[i]] = segs[i]
            m[r, :lengths[i]] = 1
        return torch.from_numpy(a), torch.from_numpy(s), torch.from_numpy(m)

    sorted_order = sorted(range(n), key=lambda i: (-lengths[i], i))

    def padded_runner(model: Any, plan: list[tuple[list[int], int]], *, ctx: Callable[[], Any] = contextlib.nullcontext
                      ) -> tuple[Callable[[], list[float]], int]:
        prepared = [(rows, *tensors(rows, width)) for rows, width in plan]
        padded = sum(len(rows) * width for rows, width in plan)

        def run() -> list[float]:
            out = torch.empty(n, dtype=torch.float32, device=device)
            with torch.inference_mode(), ctx():
                for rows, a, s, m in prepared:
                    logits = model(input_ids=a.to(device, non_blocking=True), token_type_ids=s.to(device, non_blocking=True),
                                   attention_mask=m.to(device, non_blocking=True)).logits
                    out[torch.tensor(rows, device=device)] = logits[:, 0].float()
            return out.cpu().tolist()

        return run, padded

    from torch.nn.attention import SDPBackend, sdpa_kernel

    def backend_ctx(backend: Any) -> Callable[[], Any]:
        return (lambda: sdpa_kernel([backend])) if backend is not None else contextlib.nullcontext

    # fp32 reference scores (warm fp32 run, exact lengths)
    run, padded = padded_runner(model32, batches(sorted_order, rows=61))
    reference = record("hf fp32 sorted exact, 61 rows", run, padded=padded, extra_info={"precision": "fp32"})
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    run, padded = padded_runner(model32, batches(sorted_order, rows=256, bucket=16, budget=32768))
    record("hf fp32+TF32 sorted bucket16 budget32k", run, padded=padded, extra_info={"precision": "tf32"},
           reference=reference)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    run, padded = padded_runner(model32, batches(sorted_order, rows=256, bucket=16, budget=32768),
                                ctx=lambda: torch.autocast(device.type, dtype=torch.bfloat16))
    record("hf fp32 weights + bf16 autocast, sorted bucket16 budget32k", run, padded=padded,
           extra_info={"precision": "bf16-autocast"}, reference=reference)

    model16 = BertForSequenceClassification(config)
    model16.load_state_dict(model32.state_dict())
    model16 = model16.to(device=device, dtype=torch.bfloat16).eval()
    model16.classifier.float()
    model16.classifier.register_forward_pre_hook(lambda m, a: tuple(x.float() for x in a))

    plan_rows = {None: 60, SDPBackend.EFFICIENT_ATTENTION: 59, SDPBackend.CUDNN_ATTENTION: 58, SDPBackend.MATH: 57}
    for backend, rows in plan_rows.items():
        name = "default" if backend is None else backend.name
        run, padded = padded_runner(model16, batches(sorted_order, rows=rows), ctx=backend_ctx(backend))
        record(f"hf bf16 weights sorted exact {rows} rows, sdpa {name}", run, padded=padded,
               extra_info={"precision": "bf16"}, reference=reference)
    run, padded = padded_runner(model16, batches(list(range(n)), rows=62))
    record("hf bf16 weights input order 62 rows (CrossEncoder-like), sdpa default", run, padded=padded,
           extra_info={"precision": "bf16"}, reference=reference)
    for bucket, budget, backend in ((16, 16384, None), (32, 32768, None), (16, 32768, SDPBackend.EFFICIENT_ATTENTION),
                                    (16, 65536, SDPBackend.EFFICIENT_ATTENTION), (8, 32768, SDPBackend.EFFICIENT_ATTENTION),
                                    (16, 30720, SDPBackend.CUDNN_ATTENTION), (64, 65536, SDPBackend.EFFICIENT_ATTENTION)):
        name = "default" if backend is None else backend.name
        run, padded = padded_runner(model16, batches(sorted_order, rows=1024, bucket=bucket, budget=budget),
                                    ctx=backend_ctx(backend))
        record(f"hf bf16 weights sorted bucket{bucket} budget{budget // 1024}k, sdpa {name}", run, padded=padded,
               extra_info={"precision": "bf16"}, reference=reference)
    run, padded = padded_runner(model16, batches(sorted_order, rows=1024, bucket=16, budget=32768),
                                ctx=lambda: torch.autocast(device.type, dtype=torch.bfloat16))
    record("hf bf16 weights + bf16 autocast sorted bucket16 budget32k, sdpa default", run, padded=padded,
           extra_info={"precision": "bf16"}, reference=reference)

    # -- unpadded: varlen flash attention through transformers' attention interface -----------------------
    try:
        from transformers import AttentionInterface

        try:
            from torch.nn.attention.varlen import varlen_attn
        except ImportError:
            varlen_attn = None

        def packed_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                             attention_mask: Any, dropout: float = 0.0, scaling: float | None = None,
                             **kwargs: Any) -> tuple[torch.Tensor, None]:
            cu, longest = kwargs["cu_seq_lens_q"], kwargs["max_length_q"]
            q, k, v = (x[0].transpose(0, 1) for x in (query, key, value))  # [T, H, D]
            if varlen_attn is not None and q.is_cuda:
                out = varlen_attn(q, k, v, cu, cu, longest, longest)
            else:  # CPU check of the wiring: each sequence on its own
                parts = []
                bounds = cu.tolist()
                for a, b in zip(bounds, bounds[1:]):
                    parts.append(torch.nn.functional.scaled_dot_product_attention(
                        q[a:b].transpose(0, 1), k[a:b].transpose(0, 1), v[a:b].transpose(0, 1)).transpose(0, 1))
                out = torch.cat(parts)
            return out.unsqueeze(0), None

        AttentionInterface.register("probe_packed", packed_attention)
        results["notes"]["varlen_attn"] = varlen_attn is not None

        def packed_runner(model: Any, budget: int) -> Callable[[], list[float]]:
            plan = batches(sorted_order, rows=10 ** 6, budget=budget)
            prepared = []
            for rows, _ in plan:
                flat = np.concatenate([ids[i] for i in rows])
                seg = np.concatenate([segs[i] for i in rows])
                pos = np.concatenate([np.arange(lengths[i]) for i in rows])
                cu = np.zeros(len(rows) + 1, dtype=np.int32)
                cu[1:] = np.cumsum([lengths[i] for i in rows])
                prepared.append((rows, torch.from_numpy(flat)[None], torch.from_numpy(seg)[None],
                                 torch.from_numpy(pos)[None], torch.from_numpy(cu), max(lengths[i] for i in rows)))

            def run() -> list[float]:
                out = torch.empty(n, dtype=torch.float32, device=device)
                with torch.inference_mode():
                    for rows, a, s, p, cu, longest in prepared:
                        cu_d = cu.to(device)
                        hidden = model.bert(input_ids=a.to(device), token_type_ids=s.to(device), position_ids=p.to(device),
                                            cu_seq_lens_q=cu_d, cu_seq_lens_k=cu_d, max_length_q=longest,
                                            max_length_k=longest).last_hidden_state[0]
                        cls = hidden[cu_d[:-1].long()]
                        pooled = model.bert.pooler.activation(model.bert.pooler.dense(cls))
                        out[torch.tensor(rows, device=device)] = model.classifier(pooled)[:, 0].float()
                return out.cpu().tolist()

            return run

        model16.config._attn_implementation = "probe_packed"
        for budget in (32768, 65536):
            record(f"hf bf16 weights packed (varlen) budget{budget // 1024}k", packed_runner(model16, budget),
                   padded=real_tokens, extra_info={"precision": "bf16"}, reference=reference)
        if args.dry_run:
            model32.config._attn_implementation = "probe_packed"
            record("hf fp32 packed (CPU wiring check)", packed_runner(model32, 4096), padded=real_tokens,
                   extra_info={"precision": "fp32"}, reference=reference)
    except Exception as err:
        results["notes"]["varlen_error"] = f"{type(err).__name__}: {err}"
        print("varlen rows failed:", err, flush=True)
    save()

    # -- start-up costs (child processes) ----------------------------------------------------------------
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *extra])}
    for label, code in (("import torch", "import torch"),
                        ("import torch+transformers model classes",
                         "import torch, transformers; from transformers import AutoModel"),
                        ("rankkit rerank --help", None)):
        command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "rankkit", "rerank", "--help"]
        t = time.perf_counter()
        child = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        results["notes"][f"startup: {label}"] = {"s": time.perf_counter() - t, "exit": child.returncode}
        save()
    results["meta"]["seconds"] = time.monotonic() - started_all
    save()
    for row in results["rows"]:
        print(f"{row['row']:<75} cold {row.get('cold_pairs_s', 0):8.0f}  warm {row.get('warm_pairs_s', 0):8.0f} pairs/s  "
              f"pad {row.get('padded_share', float('nan')):.3f}  mfu {row.get('warm_mfu', 0):.3f}  "
              f"diff {row.get('max_abs_diff_vs_fp32', float('nan')):.2e} {row.get('error', '')}")
    print(json.dumps(results["notes"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
