"""Import contracts: analysis/ and spark_io/ never import streamlit; analysis/ never starts Spark."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from support import ROOT

# the folder's layers, each imported as statelens.<layer> (statelens/ links them): the one import name
LAYERS = ("analysis", "spark_io", "commands", "views", "assets", "app", "cli")


def local(name: str) -> str:
    """A module's name in this folder: ``statelens.analysis.core`` is ``analysis.core`` (the notebook
    API's own modules stay ``statelens...``)."""
    parts = name.split(".")
    return ".".join(parts[1:]) if parts[0] == "statelens" and len(parts) > 1 and parts[1] in LAYERS else name


def top_imports(path: Path) -> set[str]:
    """The layers and top-level packages a module imports (at the top or inside a function)."""
    return {name.split(".")[0] for name in dotted_imports(path)}


def dotted_imports(path: Path) -> set[str]:
    """The modules a file imports, dotted in full (at the top or inside a function), layers by their
    folder's name."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {local(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(local(node.module))
    return names


def imported_modules(folder: str) -> dict[str, set[str]]:
    # every room and package below it (statelens/'s links to the layers are not its modules)
    return {
        path.relative_to(ROOT / folder).as_posix(): top_imports(path)
        for path in sorted((ROOT / folder).rglob("*.py"))
        if not path.is_symlink()
    }


def python_files() -> list[Path]:
    """Every Python file of this folder: the layers, the tests, benchmarks, scripts and the docs' hooks."""
    skip = {".venv", "test-artifacts", "__pycache__", "node_modules", ".tools"}
    return [p for p in ROOT.rglob("*.py") if not skip & set(p.relative_to(ROOT).parts) and not p.is_symlink()]


def test_one_import_name() -> None:
    """``statelens`` is the one name the wheel installs and the code imports: no module imports a layer
    by its bare folder name (``import analysis``, ``from commands import``), which a notebook folder's own
    ``analysis.py`` or ``commands/`` would shadow; statelens/ links every layer."""
    bare = []
    for path in python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            bare += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in LAYERS]
    assert bare == []
    for layer in LAYERS:
        link = ROOT / "statelens" / (f"{layer}.py" if (ROOT / f"{layer}.py").exists() else layer)
        assert link.is_symlink() and link.resolve() == (ROOT / link.name).resolve(), link


def test_engine_code_does_not_import_the_ui() -> None:
    for folder in ("analysis", "spark_io"):
        for name, mods in imported_modules(folder).items():
            assert "streamlit" not in mods and "views" not in mods, f"{folder}/{name}"


def test_analysis_does_not_touch_spark() -> None:
    """One direction: views and cli -> spark_io -> analysis. analysis imports no engine and no layer above it."""
    for name, mods in imported_modules("analysis").items():
        assert not mods & {"pyspark", "py4j", "duckdb", "streamlit", "spark_io", "views", "cli"}, (name, mods)
        src = (ROOT / "analysis" / name).read_text()
        assert "get_spark" not in src and "state_reader.read" not in src, name


def test_pages_are_thin() -> None:
    for path in (ROOT / "views").glob("*.py"):
        mods = imported_modules("views")[path.name]
        assert "pyspark" not in mods and "duckdb" not in mods, path.name


def test_ruff_is_clean() -> None:
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "ruff", "check", str(ROOT)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-2000:]


def test_no_legacy_pages_folder() -> None:
    # A pages/ folder next to app.py makes Streamlit route direct URLs (deep links) through its
    # legacy multipage runner, which runs the page file without app.py: pages live in views/.
    assert not (ROOT / "pages").exists()


def test_spark_io_does_not_import_pages_or_cli() -> None:
    for name, mods in imported_modules("spark_io").items():
        assert not mods & {"views", "cli", "streamlit"}, (name, mods)


def test_analysis_imports_without_pyspark_duckdb_or_streamlit() -> None:
    """Every analysis module imports in a fresh interpreter where the engines cannot be imported."""
    import subprocess
    import sys

    modules = sorted(
        ".".join(p.relative_to(ROOT / "analysis").with_suffix("").parts).removesuffix(".__init__")
        for p in (ROOT / "analysis").rglob("*.py")
        if p.relative_to(ROOT / "analysis").as_posix() != "__init__.py"
    )
    code = (
        "import sys\n"
        "for name in ('pyspark', 'py4j', 'duckdb', 'streamlit'):\n"
        "    sys.modules[name] = None  # any import of it raises ImportError\n"
        + "".join(f"import statelens.analysis.{m}\n" for m in modules)
        + "print('ok', len(sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stderr[-2000:]
    assert len(modules) >= 12


# each package's rooms, lowest first: a module imports its own room and the rooms before it, never after
ROOMS = {
    "spark_io": ("storage", "runtime", "logs", "readers", "gather", "preflight"),
    "analysis": ("core", "inputs", "plan", "checkpoint", "runs", "verdicts", "fate", "kinds", "pipeline", "charts"),
}


def _imports(package: str) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports (at the top or inside a function; for a
    TYPE_CHECKING import too: a loop there is a loop in the design)."""

    def module_of(name: str) -> str:
        path = ROOT / name.replace(".", "/")
        return name if path.with_suffix(".py").exists() or path.is_dir() else name.rsplit(".", 1)[0]

    out: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and local(node.module).split(".")[0] == package:
                deps |= {module_of(f"{local(node.module)}.{a.name}") for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {local(a.name) for a in node.names if local(a.name).split(".")[0] == package}
        out[name] = deps - {name}
    return out


@pytest.mark.parametrize("package", sorted(ROOMS))
def test_rooms_import_downwards_only(package: str) -> None:
    imports, rooms_of = _imports(package), ROOMS[package]
    rooms = {m.split(".")[1] for m in imports if m.count(".")}
    assert rooms == set(rooms_of), rooms  # every module is in a room; a new room is placed in ROOMS
    assert [m for m in imports if m.count(".") == 0] == [package]
    for module, deps in imports.items():
        if module == package:
            continue
        mine = rooms_of.index(module.split(".")[1])
        for dep in deps:
            assert dep.count(".") and rooms_of.index(dep.split(".")[1]) <= mine, f"{module} imports {dep}: rooms import downwards"


@pytest.mark.parametrize("package", sorted(ROOMS))
def test_no_import_loop(package: str) -> None:
    imports = _imports(package)
    state: dict[str, int] = {}
    loops: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for dep in sorted(imports.get(module, ())):
            if state.get(dep) == 1:
                loops.append([*path[path.index(dep) :], dep] if dep in path else [module, dep])
            elif dep in imports and dep not in state:
                visit(dep, [*path, dep])
        state[module] = 2

    for module in sorted(imports):
        if module not in state:
            visit(module, [module])
    assert loops == [], [" -> ".join(loop) for loop in loops]


def test_the_notebook_api_sits_on_the_engine() -> None:
    """statelens (the notebook API) is a layer beside the CLI and the pages: above spark_io and
    analysis, never imported by them, and it imports no page, no CLI and no Spark of its own."""
    for name, mods in imported_modules("statelens").items():
        assert not mods & {"views", "cli", "streamlit", "pyspark", "py4j"}, (name, mods)
    for folder in ("analysis", "spark_io"):
        for name, mods in imported_modules(folder).items():
            assert "statelens" not in mods, f"{folder}/{name}"


def test_the_pages_ask_through_statelens_only() -> None:
    """The app is a front door as the CLI is: ``app.py`` and the pages ask ``statelens`` (the
    checkpoint's kept object, and ``statelens.server`` for sign-in and the server's settings) and draw
    with ``analysis.charts``; they import nothing else of ``spark_io`` or ``analysis``."""
    paths = [ROOT / "app.py", *sorted((ROOT / "views").glob("*.py"))]
    asking = set()
    for path in paths:
        mods = dotted_imports(path)
        assert not {m for m in mods if m.split(".")[0] == "spark_io"}, path.name
        assert {m for m in mods if m.split(".")[0] == "analysis"} <= {m for m in mods if m.startswith("analysis.charts")}, (
            path.name,
            mods,
        )
        asking |= {m for m in mods if m.split(".")[0] == "statelens"}
    assert "statelens" in asking and "statelens.server" in asking
    # the app's caches wrap the checkpoint's methods (and statelens's questions about a root): no cached
    # function of its own reads the engine
    common = (ROOT / "views" / "common.py").read_text()
    assert common.count("@st.cache_resource") <= 2 and common.count("@st.cache_data") <= 4, "a cache that re-wires a question"


def test_operator_kinds_are_read_in_one_registry() -> None:
    """Spark's names for stateful operators (the state metadata's, the plan's) are declared by each kind's
    module (``analysis/kinds``) and turned into kinds by ``analysis/core/operator_kinds.py`` only: no
    other module keeps a table of them or a guess, and only that registry loads the kinds' package for
    the rooms below it."""
    plan_nodes = ("StreamingDeduplicate", "StateStoreSave", "StreamingSymmetricHashJoin", "FlatMapGroupsWithState")
    for folder in ("analysis", "spark_io", "statelens", "views"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "operator_kinds.py" or path.parent == ROOT / "analysis" / "kinds":
                continue
            src = path.read_text()
            assert "statelens.analysis.kinds" not in src, f"{path}: kinds are looked up in the registry"
            assert not any(f'"{n}"' in src for n in plan_nodes), f"{path}: a plan node named outside the registry"
            assert "def operator_kind(" not in src and "def kind_of(operator_name" not in src, f"{path}: a second table of kinds"


def test_the_cli_asks_through_statelens_only() -> None:
    """The CLI is a front door: ``cli.py`` and its commands (one module each) ask ``statelens`` and print
    what it answers; they import nothing from ``spark_io`` or ``analysis``, and no engine of their own."""
    from statelens.commands import COMMANDS, command

    paths = [ROOT / "cli.py", *sorted((ROOT / "commands").glob("*.py"))]
    for path in paths:
        mods = top_imports(path)
        assert not mods & {"spark_io", "analysis", "views", "pyspark", "duckdb", "streamlit"}, (path.name, mods)
    modules = {p.stem for p in (ROOT / "commands").glob("*.py") if not p.stem.startswith("_")}
    assert set(COMMANDS.values()) == modules  # every module is a registered command, every command a module
    for name in COMMANDS:
        m = command(name)
        assert m.HELP and callable(m.add) and callable(m.run) and isinstance(m.SPARK, bool), name


def test_one_meaning_per_file_name() -> None:
    """The names that meant three things each mean one: the query's progress (``analysis/runs``), the
    state's health findings (``analysis/checkpoint``), a changed job's preflight run (``spark_io``);
    downloads, event logs, the checkup's reads and a change's verdict have names of their own."""
    for name in ("progress", "health", "preflight"):
        found = sorted(
            p.relative_to(ROOT).as_posix()
            for folder in ("analysis", "spark_io", "statelens")
            for p in (ROOT / folder).rglob("*")
            if p.stem == name and "__pycache__" not in p.parts and (p.suffix == ".py" or p.is_dir())
        )
        assert len(found) == 1, (name, found)
    assert not (ROOT / "analysis" / "core" / "policy.py").exists()  # the access policy is with the rest of sign-in


def test_readers_do_not_import_the_verdicts() -> None:
    """The rooms that read (storage, runtime, logs, readers) stand below every answer: they import
    ``analysis.core`` and the model, never a verdict or a fate (a helper they need lives in core)."""
    for room in ("storage", "runtime", "logs", "readers"):
        for name, mods in {p: dotted_imports(p) for p in (ROOT / "spark_io" / room).rglob("*.py")}.items():
            above = {m for m in mods if m.startswith(("analysis.verdicts", "analysis.fate"))}
            assert not above, (name.relative_to(ROOT).as_posix(), above)


def test_one_time_formatter() -> None:
    """A time is written one way (``analysis/core/key_format.fmt_time``: UTC, milliseconds where there are
    some, ``NO_TIME`` for none): no other module writes a UTC time or its own "no time"."""
    for path in python_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("tests/", "bench/", "sample_checkpoints/", "scripts/", "docs/")) or rel.endswith("key_format.py"):
            continue
        src = path.read_text()
        assert "%S UTC" not in src and '+ " UTC"' not in src and '"no time"' not in src, f"{rel}: a time formatter of its own"
