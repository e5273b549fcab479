"""Model declarations (issue 39): what the command line knows of a model without importing torch, each model's
settings declared once, and plug-in declarations checked when they are registered."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from rankkit.models import ModelConfig, ModelSpec, get_model_class, get_spec, option, specs
from rankkit.models.declaration import DeclarationError, check_spec

ROOT = Path(__file__).resolve().parents[2]


def test_each_class_takes_its_attributes_from_its_declaration() -> None:
    from rankkit.models.base import BiEncoder
    from rankkit.models.documents.base import DocumentModel

    declared = specs()
    assert len(declared) >= 22
    for name, spec in declared.items():
        cls = get_model_class(name)
        assert cls.spec is spec and ModelSpec.of_class(cls) is spec
        assert (cls.name, cls.config_class, cls.output_type, cls.training_defaults, cls.paper) == (
            spec.name, spec.config_class, spec.output_type, spec.training_defaults, spec.paper)
        family = "bi-encoder" if issubclass(cls, BiEncoder) else "documents" if issubclass(cls, DocumentModel) \
            else "passages"
        assert spec.family == family, name


def test_a_class_must_be_the_target_its_declaration_names() -> None:
    from rankkit.models.base import RankingModel

    with pytest.raises(TypeError, match="whose target is"):
        class Elsewhere(RankingModel, spec=get_spec("mono")):  # noqa: F841 - the class statement is the test
            pass


@dataclass
class _Settings(ModelConfig):
    width: int = option(4, help="a width", minimum=1)


def _spec(config: type[ModelConfig] = _Settings, **changes: object) -> ModelSpec:
    spec = ModelSpec(name="demo", target="demo.module:Demo", config_class=config)
    return dataclasses.replace(spec, **changes)  # type: ignore[arg-type]


def _config(**fields: object) -> type[ModelConfig]:
    """A settings class with one extra setting ``extra`` declared with ``fields`` passed to :func:`option`."""
    default = fields.pop("default", 1)
    kind = fields.pop("kind", int)
    help_text = fields.pop("help", "an extra setting")
    return dataclasses.make_dataclass("Bad", [("extra", kind, option(default, help=help_text, **fields))],
                                      bases=(ModelConfig,))


@pytest.mark.parametrize("spec, problem", [
    (_spec(name="Has Space"), "lower-case word"),
    (_spec(target="no_colon"), "package.module:Class"),
    (_spec(family="rerankers"), "family"),
    (_spec(output_type=dict), "RankingOutput"),
    (_spec(config=dict), "ModelConfig dataclass"),
    (_spec(config=_config(rerank_flag=True)), "rerank_flag"),  # issue 39: crashed every rankkit rerank
    (_spec(config=_config(rerank_flag="max-width")), "rerank_flag"),
    (_spec(config=_config(flag="width")), "flag"),
    (_spec(config=_config(default=0, minimum=1)), "refused by its own declaration"),
    (_spec(config=_config(kind=list)), "unsupported option type"),
    (_spec(config=_config(help=3)), "help must be a string"),
    (_spec(config=_config(aliases={"wide": 2})), "aliases"),
])
def test_a_declaration_the_command_line_cannot_use_is_refused_with_its_reason(spec: ModelSpec, problem: str) -> None:
    with pytest.raises(DeclarationError, match=problem):
        check_spec(spec)


def test_the_built_in_declarations_pass_their_own_check() -> None:
    for spec in specs().values():
        check_spec(spec)


def _cli(site: Path | None, *args: object, code: str = "") -> subprocess.CompletedProcess[str]:
    paths = [str(ROOT), *([str(site)] if site is not None else []), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    program = code or "import sys\nfrom rankkit.cli import main\nmain(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", program, *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=600, check=False)


def _distribution(root: Path, entry_points: str, files: dict[str, str]) -> Path:
    """A throw-away installed distribution ``rankkit-decl-demo`` 0.1 with these modules and entry points."""
    site = root / "site"
    (site / "decl_demo").mkdir(parents=True)
    (site / "decl_demo" / "__init__.py").write_text("", encoding="utf-8")
    for name, text in files.items():
        (site / "decl_demo" / name).write_text(text, encoding="utf-8")
    info = site / "rankkit_decl_demo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rankkit-decl-demo\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[rankkit.models]\n{entry_points}", encoding="utf-8")
    return site


BAD_PLUGIN = '''from dataclasses import dataclass
from rankkit.models import ModelConfig, ModelSpec, option, register

@dataclass
class BadConfig(ModelConfig):
    width: int = option(4, help="a width", rerank_flag=True)

register(ModelSpec(name="bad-decl", target="decl_demo.network:Bad", config_class=BadConfig))
'''

CLASHING_PLUGIN = '''from dataclasses import dataclass
from rankkit.models import ModelConfig, ModelSpec, option

@dataclass
class ClashConfig(ModelConfig):
    depth: int = option(4, help="takes rerank's own --depth", rerank_flag="--depth")
    wide: int = option(2, help="a setting of its own", rerank_flag="--wide")

SPEC = ModelSpec(name="clash-decl", target="decl_demo.network:Clash", config_class=ClashConfig)
'''


def test_a_bad_plugin_declaration_is_one_warning_and_every_other_model_works(tmp_path: Path) -> None:
    """A plug-in declaring ``rerank_flag=True`` made every ``rankkit rerank`` a traceback, whatever the model."""
    site = _distribution(tmp_path, "bad-decl = decl_demo.declarations\n", {"declarations.py": BAD_PLUGIN})
    listed = _cli(site, "models")
    assert listed.returncode == 0, listed.stderr
    assert "mono" in listed.stdout and "bad-decl" not in listed.stdout
    warnings = [line for line in listed.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1 and "plug-in bad-decl (rankkit-decl-demo==0.1)" in warnings[0], listed.stderr
    assert "rerank_flag" in warnings[0] and "Traceback" not in listed.stderr
    helped = _cli(site, "rerank", "--help")
    assert helped.returncode == 0 and "--max-set-size" in helped.stdout and "Traceback" not in helped.stderr


def test_a_plugin_option_that_is_a_commands_own_flag_is_left_out_with_a_warning(tmp_path: Path) -> None:
    site = _distribution(tmp_path, "clash-decl = decl_demo.declarations:SPEC\n", {"declarations.py": CLASHING_PLUGIN})
    helped = _cli(site, "rerank", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "--wide" in helped.stdout and "--max-set-size" in helped.stdout
    assert "model option --depth of clash-decl (plug-in rankkit-decl-demo==0.1)" in helped.stderr


DECLARED_PLUGIN = '''from dataclasses import dataclass
from rankkit.models import ModelConfig, ModelSpec, option

@dataclass
class LazyConfig(ModelConfig):
    bias_init: float = option(0.0, help="initial score bias")

SPEC = ModelSpec(name="lazy-decl", target="decl_demo.network:Lazy", config_class=LazyConfig,
                 paper="Nobody, 2026, a declaration", summary="A model declared apart from its network.")
'''


def test_a_plugin_declared_by_its_spec_is_listed_without_importing_its_network(tmp_path: Path) -> None:
    """The entry point names a torch-free declaration: listing it, its options and its --help import nothing heavy
    (the network module would fail if imported)."""
    site = _distribution(tmp_path, "lazy-decl = decl_demo.declarations:SPEC\n", {
        "declarations.py": DECLARED_PLUGIN, "network.py": "raise ImportError('the network is never imported here')\n"})
    code = ("import sys\nfrom rankkit.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print('heavy:', sorted(m for m in ('torch', 'transformers', 'decl_demo.network') if m in sys.modules),"
            " file=sys.stderr)")
    for args in (("models",), ("models", "lazy-decl"), ("train", "--help"), ("train", "--model", "lazy-decl", "--help")):
        result = _cli(site, *args, code=code)
        assert "heavy: []" in result.stderr, (args, result.stderr)
        assert "lazy-decl" in result.stdout or "--bias-init" in result.stdout, (args, result.stdout)
    used = _cli(site, code="from rankkit.models import get_model_class\nget_model_class('lazy-decl')")
    assert "model 'lazy-decl' (plug-in rankkit-decl-demo==0.1) could not be imported" in used.stderr
    assert "the network is never imported here" in used.stderr  # imported when used: then its own error shows
