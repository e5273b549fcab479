"""Rebuild the lightning-ir fixtures of rankkit's interop tests (run in a throwaway environment, not rankkit's).

lightning-ir 0.0.6 needs transformers < 5, so it cannot share rankkit's environment::

    python3.11 -m venv /tmp/lir-venv
    /tmp/lir-venv/bin/pip install torch==2.13.0 "transformers<5" "lightning-ir==0.0.6"
    /tmp/lir-venv/bin/python tests/data/lightning_ir/build_fixtures.py tests/data/lightning_ir

Each fixture is a tiny randomly initialised model (seeded) saved by lightning-ir itself
(``LightningIRModule.save_pretrained``), beside ``scores.json``: the scores lightning-ir gave for
the queries and candidate lists of ``texts.json`` (one forward pass per query, lightning-ir's own
tokenisation and truncation). rankkit's tests re-rank the same lists and compare to 1e-5.

``--check-export DIR`` instead scores rankkit-exported lightning-ir folders (``rankkit export
--format lightning-ir``) with lightning-ir and prints the largest difference to the scores rankkit
wrote beside them (``rankkit-scores.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

# The third query is short: lightning-ir leaves its unused query budget unused (rankkit's pair cut would
# give it to the passage), so the fixtures tell the two truncations apart.
QUERIES = ["what is the boiling point of water at altitude",
           "who wrote the origin of species",
           "darwin"]
DOCS = [
    ["water boils at a lower temperature at high altitude because the air pressure is lower there than at sea level",
     "the boiling point of water is one hundred degrees celsius at sea level",
     "mount everest is the highest mountain above sea level",
     "pressure cookers raise the boiling point of water so food cooks faster",
     "a kettle switches off when the water boils"],
    ["charles darwin wrote on the origin of species in eighteen fifty nine",
     "the origin of the word species comes from latin",
     "alfred russel wallace also proposed natural selection",
     "darwin sailed on the beagle around the world for five years collecting specimens of plants and animals"],
    ["charles darwin wrote on the origin of species in eighteen fifty nine",
     "darwin sailed on the beagle around the world for five years collecting specimens of plants and animals",
     "the galapagos islands are famous for their finches and giant tortoises"],
]
WORDS = sorted({w for text in QUERIES + [d for docs in DOCS for d in docs] for w in text.split()})


def tiny_vocab() -> list[str]:
    chars = list("abcdefghijklmnopqrstuvwxyz0123456789")
    # The first half of the words only: the rest split into characters, so truncation cuts word pieces.
    words = [w for w in WORDS if len(w) > 1]
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + c for c in chars] + words[: len(words) // 2]


def write_backbone(folder: Path, kind: str) -> Path:
    from transformers import BertConfig, BertModel, BertTokenizerFast, ElectraConfig, ElectraModel

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("".join(w + "\n" for w in tiny_vocab()), encoding="utf-8")
    BertTokenizerFast(str(folder / "vocab.txt")).save_pretrained(str(folder))
    torch.manual_seed(0)
    size = dict(vocab_size=len(tiny_vocab()), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=128, hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0, initializer_range=0.2)
    if kind == "bert":
        model = BertModel(BertConfig(**size))
    else:  # ELECTRA: smaller embeddings projected to the hidden width, as google/electra-* do
        model = ElectraModel(ElectraConfig(embedding_size=16, **size))
    model.save_pretrained(str(folder))
    return folder


def build(out: Path) -> None:
    import lightning_ir
    import transformers
    from lightning_ir import CrossEncoderModule
    from lightning_ir.models import MonoConfig, SetEncoderConfig

    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "_backbones"
    backbones = {"bert": write_backbone(tmp / "bert", "bert"), "electra": write_backbone(tmp / "electra", "electra")}
    fixtures = {
        # name: (backbone, config)
        "set-encoder-bert": ("bert", SetEncoderConfig(query_length=8, doc_length=24, depth=5, add_extra_token=False)),
        "set-encoder-electra-int": ("electra", SetEncoderConfig(query_length=8, doc_length=24, depth=5,
                                                                add_extra_token=True)),
        "mono-electra": ("electra", MonoConfig(query_length=8, doc_length=24)),
    }
    for name, (kind, config) in fixtures.items():
        torch.manual_seed(1)
        module = CrossEncoderModule(model_name_or_path=str(backbones[kind]), config=config)
        if getattr(config, "add_extra_token", False):
            # lightning-ir 0.0.6 adds [INT] to the tokenizer but does not grow the embeddings; the
            # authors' checkpoints carry the grown matrix. Grow it here, the new row a seeded draw.
            module.model.resize_token_embeddings(len(module.tokenizer))
            with torch.no_grad():
                row = module.tokenizer.interaction_token_id
                module.model.get_input_embeddings().weight[row] = torch.randn(
                    module.model.get_input_embeddings().weight.shape[1]) * 0.02
        with torch.no_grad():  # a head that is not zero, so scores differ between candidates
            module.model.linear.weight.normal_(0.0, 0.5)
        module.eval()
        folder = out / name
        module.save_pretrained(folder)
        scores = []
        for query, docs in zip(QUERIES, DOCS):
            # The Set-Encoder pads a list shorter than its depth with random samples (sample_missing_docs):
            # the first query's list has exactly `depth` passages; the second is shorter, so it is scored
            # with sampling turned off (a fixed list, and what rankkit computes).
            model_config = module.model.config
            if hasattr(model_config, "sample_missing_docs"):
                model_config.sample_missing_docs = len(docs) == model_config.depth
            scores.append([float(s) for s in module.score(query, docs).scores.view(-1)])
        (folder / "scores.json").write_text(json.dumps(
            {"queries": QUERIES, "docs": DOCS, "scores": scores, "lightning_ir": lightning_ir.__version__
             if hasattr(lightning_ir, "__version__") else "0.0.6", "transformers": transformers.__version__,
             "torch": torch.__version__}, indent=1) + "\n", encoding="utf-8")
        print(name, scores)
    import shutil

    shutil.rmtree(tmp)


def check_export(folder: Path) -> None:
    from lightning_ir import CrossEncoderModule

    worst = 0.0
    for sub in sorted(p for p in folder.iterdir() if (p / "rankkit-scores.json").is_file()):
        expected = json.loads((sub / "rankkit-scores.json").read_text(encoding="utf-8"))
        module = CrossEncoderModule(model_name_or_path=str(sub)).eval()
        for query, docs, want in zip(expected["queries"], expected["docs"], expected["scores"]):
            config = module.model.config
            if hasattr(config, "sample_missing_docs"):
                config.sample_missing_docs = False
            got = [float(s) for s in module.score(query, docs).scores.view(-1)]
            diff = max(abs(a - b) for a, b in zip(got, want))
            worst = max(worst, diff)
            print(f"{sub.name}: {type(module.model).__name__}, max |lightning-ir - rankkit| = {diff:.2e}")
    print(f"worst {worst:.2e}")
    sys.exit(0 if worst < 1e-5 else 1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--check-export", action="store_true")
    args = parser.parse_args()
    check_export(args.out) if args.check_export else build(args.out)
