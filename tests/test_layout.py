"""The package boundaries, checked: imports point one way (api -> sweeper -> trials), no module imports
itself back through others, and the on-disk job protocol has one owner."""

from __future__ import annotations

import ast
import io
import itertools
import keyword
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package -> top-level modules it must never import
FORBIDDEN = {
    "trials": {"sweeper", "api", "scaling", "dashboards", "ray", "fastapi", "uvicorn", "optuna"},
    "sweeper": {"api", "fastapi", "uvicorn"},
    "scaling": {"api", "fastapi", "uvicorn", "dashboards"},
    "dashboards": {"api", "fastapi", "uvicorn", "sweeper"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imports(path) & FORBIDDEN[package])
        for path in (ROOT / package).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


@pytest.mark.parametrize(
    "package", ["trials", "trials.optim", "trials.metrics", "scaling", "sweeper", "api", "dashboards"]
)
def test_public_surface_is_explicit(package: str) -> None:
    module = __import__(package, fromlist=["__all__"])
    assert isinstance(module.__all__, list)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


# ------------------------------------------------------------------------------------------------------------
# One owner for the on-disk job protocol; no import cycles; `scaling` light to import.

PRODUCT_PACKAGES = ("trials", "sweeper", "scaling", "dashboards", "api")
JOB_FILES = {"sweep.json", "status.json", "driver.lock", "transfer.json", "outcome.json"}
JOB_PROTOCOL_MODULE = ROOT / "sweeper" / "jobfiles.py"


def _product_modules() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (source file, is a package's __init__)."""
    modules: dict[str, tuple[Path, bool]] = {"scalesweep_cli": (ROOT / "scalesweep_cli.py", False)}
    for package in PRODUCT_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return modules


def _import_nodes(tree: ast.Module, *, deferred: bool) -> list[ast.Import | ast.ImportFrom]:
    """The module's imports: those that run when it is imported (its body, `if`/`try` blocks, TYPE_CHECKING
    included), or with `deferred` also those inside functions and classes."""
    if deferred:
        return [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.append(node)
            elif isinstance(node, ast.If | ast.Try | ast.With):
                for block in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", []),
                              *(h.body for h in getattr(node, "handlers", []))):
                    visit(block)

    visit(tree.body)
    return found


def _import_graph(*, deferred: bool) -> dict[str, set[str]]:
    """Module -> product modules it imports (absolute and relative imports, `from pkg import submodule` too)."""
    modules = _product_modules()
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in _import_nodes(ast.parse(path.read_text(), filename=str(path)), deferred=deferred):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            targets.add(module)
            targets.update(f"{module}.{alias.name}" for alias in node.names)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path a -> b -> ... -> a) per strongly connected group of modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm; the graph is a few hundred modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    cycles = []
    for group in groups:  # walk inside the group from its first module back to it
        start = min(group)
        path, seen = [start], {start}
        while True:
            nxt = sorted(w for w in graph[path[-1]] if w in group)
            back = [w for w in nxt if w == start]
            if back and len(path) > 1:
                break
            step = next((w for w in nxt if w not in seen), None) or nxt[0]
            if step in seen:
                path = path[path.index(step):]
                break
            path.append(step)
            seen.add(step)
        cycles.append([*path, path[0]])
    return cycles


def test_no_import_cycle_among_product_modules() -> None:
    cycles = _cycles(_import_graph(deferred=False))
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("package", ["sweeper", "scaling"])
def test_no_deferred_import_cycle_in(package: str) -> None:
    """Imports inside functions hide a cycle from the interpreter, not from a reader: none in these packages."""
    graph = _import_graph(deferred=True)
    inside = {m: {t for t in ts if t.split(".")[0] == package} for m, ts in graph.items() if m.split(".")[0] == package}
    cycles = _cycles(inside)
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_job_files_are_named_only_by_the_job_protocol_module() -> None:
    """`sweep.json`, `status.json`, `cancel`, ... are spelled in `sweeper.jobfiles` alone; everyone else uses its
    constants and helpers, so the protocol between a driver and its readers changes in one place."""
    offenders = []
    for path, _ in _product_modules().values():
        if path == JOB_PROTOCOL_MODULE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            literal = isinstance(node, ast.Constant) and node.value in JOB_FILES
            cancel_path = (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
                           and isinstance(node.right, ast.Constant) and node.right.value == "cancel")
            if literal or cancel_path:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_importing_scaling_loads_neither_ray_mlflow_nor_the_sweeper() -> None:
    """`scaling` is pure functions over records: importing it loads neither Ray, MLflow nor the sweeper."""
    code = ("import sys, scaling; "
            "print(sorted(m for m in ('ray', 'mlflow', 'sweeper') if m in sys.modules or "
            "any(k.startswith(m + '.') for k in sys.modules)))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_transfer_has_one_home_and_scaling_forwards_none_of_its_names() -> None:
    import scaling
    import sweeper
    import sweeper.transfer

    on_sweeper = set(sweeper.__all__) & set(sweeper.transfer.__all__)
    assert {"TransferSpec", "run_transfer", "load_transfer_result", "TransferResult"} <= on_sweeper
    for name in on_sweeper:  # the sweeper's face forwards the transfer's own objects
        assert getattr(sweeper, name) is getattr(sweeper.transfer, name), name
    for name in sweeper.transfer.__all__:
        assert not hasattr(scaling, name) and name not in scaling.__all__, name


def test_scaling_caps_the_seeds_where_the_sweeper_does() -> None:
    from scaling.rounds import MAX_SEEDS
    from sweeper.specs.checks import MAX_SEEDS as SWEEPER_MAX_SEEDS

    assert MAX_SEEDS == SWEEPER_MAX_SEEDS


# ------------------------------------------------------------------------------------------------------------
# Issue 34 ("one home per concept"): imports inside functions count, since they are dependencies too.

# The layer order the README states (each layer imports only the ones before it), and the imports that still run
# the other way: none since a finished driver draws its figures through the hook the command line registers.
LAYERS = ("trials", "scaling", "sweeper", "dashboards", "api", "scalesweep_cli")
UPWARD_IMPORTS: set[tuple[str, str]] = set()

SCALING_NEVER_IMPORTS = ("sweeper", "api", "dashboards", "ray", "mlflow", "optuna")


def _is_private(module: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in module.split(".")[1:])


def private_cross_package_imports() -> list[tuple[str, str]]:
    """(importer, imported module) for every import of another package's private module (`pkg._name`, or a
    module below one), imports inside functions included; `scalesweep_cli` counts as a package of its own."""
    graph = _import_graph(deferred=True)
    return sorted((m, t) for m, ts in graph.items() for t in ts
                  if t.split(".")[0] != m.split(".")[0] and _is_private(t))


def _scaling_imports_of(tops: tuple[str, ...]) -> set[tuple[str, str]]:
    found = set()
    for name, (path, _) in _product_modules().items():
        if name.split(".")[0] != "scaling":
            continue
        for node in _import_nodes(ast.parse(path.read_text(), filename=str(path)), deferred=True):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""] if node.level == 0 else [])
            found.update((name, m) for m in modules if m.split(".")[0] in tops)
    return found


def test_no_module_imports_another_packages_private_module() -> None:
    """What crosses a package boundary is public (in the package's `__all__`, or a public module such as
    `sweeper.jobfiles`): no `pkg._name` from another package, not even inside a function."""
    found = private_cross_package_imports()
    assert found == [], "\n".join(f"{a} imports {b}" for a, b in found)


def test_no_import_cycle_counting_imports_inside_functions() -> None:
    cycles = _cycles(_import_graph(deferred=True))
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_module_imports_a_layer_above_its_own() -> None:
    """Imports inside functions count; `UPWARD_IMPORTS` is what is left to remove, and only shrinks."""
    rank = {name: i for i, name in enumerate(LAYERS)}
    found = {(m, t.split(".")[0]) for m, ts in _import_graph(deferred=True).items() for t in ts
             if rank[t.split(".")[0]] > rank[m.split(".")[0]]}
    assert found == UPWARD_IMPORTS


def test_scaling_imports_nothing_above_it() -> None:
    """`scaling` is pure functions of run records: none of the sweeper, the service, the figures, Ray, MLflow or
    Optuna, not even inside a function."""
    assert _scaling_imports_of(SCALING_NEVER_IMPORTS) == set()


def test_the_layout_helpers_see_private_modules_and_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b", "a"]]
    assert _is_private("sweeper._driver") and not _is_private("sweeper.jobfiles")
    assert not _is_private("trials.record") and not _is_private("trials.__init__")


# ------------------------------------------------------------------------------------------------------------
# One settings object per process kind: every environment variable of the project read in one place.

# The modules that read the environment, one per process kind: the service, the remote client and the local
# deployment, the driver, the trial. Everyone else asks them.
SETTINGS_MODULES = {"api.service.settings", "api.client._settings", "api.deploy_local._settings", "sweeper.settings",
                    "trials.core.trial_settings"}


def _string_constants() -> dict[str, str]:
    """Module-level `NAME = "literal"` across the product modules (how variable names are usually spelled)."""
    found: dict[str, str] = {}
    for path, _ in _product_modules().values():
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)):
                found.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
    return found


def _is_environ(node: ast.AST) -> bool:
    """`os.environ` or a bare `environ`."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ")


def _environment_reads(tree: ast.Module, constants: dict[str, str]) -> list[tuple[int, str]]:
    """(line, variable) of each read of a named variable: `os.environ[X]`, `os.environ.get(X)`, `os.getenv(X)`,
    `X in os.environ`, with X a literal or a module-level constant. Writes (`os.environ[X] = ...`) are not reads."""

    def name(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name | ast.Attribute):
            return constants.get(node.id if isinstance(node, ast.Name) else node.attr)
        return None

    reads = []
    for node in ast.walk(tree):
        key: ast.AST | None = None
        if isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
            key = node.slice
        elif isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute):
            func = node.func
            if (func.attr in ("get", "pop") and _is_environ(func.value)) or (
                    func.attr == "getenv" and isinstance(func.value, ast.Name) and func.value.id == "os"):
                key = node.args[0]
        elif (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In | ast.NotIn)
              and _is_environ(node.comparators[0])):
            key = node.left
        variable = name(key) if key is not None else None
        if variable is not None:
            reads.append((node.lineno, variable))
    return reads


def test_only_the_settings_modules_read_a_scalesweep_variable() -> None:
    """Each process kind has one settings object (`api.Settings`, the client's and the deployment's in
    `api.client` and `api.deploy_local`, `sweeper.DriverSettings`, `trials.TrialSettings`): no other module reads a
    `SCALESWEEP_*` variable. Passing the whole environment on to a child is not a read."""
    constants = _string_constants()
    offenders = []
    for module, (path, _) in _product_modules().items():
        if module in SETTINGS_MODULES:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        offenders += [f"{path.relative_to(ROOT)}:{line} reads {variable}"
                      for line, variable in _environment_reads(tree, constants) if variable.startswith("SCALESWEEP_")]
    assert offenders == []


def test_the_environment_check_sees_each_way_of_reading() -> None:
    code = ('import os\nNAME = "SCALESWEEP_X"\nos.environ["SCALESWEEP_A"]\nos.environ.get(NAME)\n'
            'os.getenv("SCALESWEEP_B")\n"SCALESWEEP_C" in os.environ\nos.environ["SCALESWEEP_D"] = "1"\n')
    reads = _environment_reads(ast.parse(code), {"NAME": "SCALESWEEP_X"})
    assert [v for _, v in reads] == ["SCALESWEEP_A", "SCALESWEEP_X", "SCALESWEEP_B", "SCALESWEEP_C"]


def _settings_variables() -> set[str]:
    from api.client import ClientSettings
    from api.deploy_local import DeploySettings
    from api.service import Settings
    from sweeper import DriverSettings
    from trials import TrialSettings

    names = {v for kind in (ClientSettings, DeploySettings, DriverSettings, TrialSettings)
             for v in kind.variables().values()}
    return names | {"SCALESWEEP_" + field.upper() for field in Settings.model_fields}


def test_every_variable_a_settings_object_reads_is_in_the_design_documents_table() -> None:
    text = (ROOT / "docs" / "design.md").read_text()
    table = text[text.index("### Environment variables"):]
    listed = {line.split("|")[1].strip().strip("`") for line in table.splitlines() if line.startswith("| `")}
    assert sorted(_settings_variables() - listed) == []


# ------------------------------------------------------------------------------------------------------------
# Near copies: six lines or more of the same shape in two places of the product packages.

NEAR_COPY_LINES = 6
NEAR_COPY_MAX_PAIRS = 5  # pairs of files; what is left is listed by the test when it fails
_NEAR_COPY_MAX_PLACES = 8  # a shape in more places than this is an idiom, not a copy


def _shape_lines(source: str) -> list[tuple[int, tuple[str, ...]]]:
    """(line number, shape) of each line that carries code: names become N, strings S, numbers 0 (keywords and
    operators stay). Left out: blank lines, comments, imports, docstrings and other lone strings, lines of one or
    two tokens (`return 0`, `else:`, lone punctuation), and annotated declarations (`name: type = ...`: a
    dataclass's fields and a signature's parameters are its own, however alike)."""
    rows: dict[int, list[str]] = {}
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER,
            getattr(tokenize, "FSTRING_MIDDLE", -1), getattr(tokenize, "FSTRING_END", -1)}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in skip:
            continue
        if tok.type == tokenize.NAME:
            word = tok.string if keyword.iskeyword(tok.string) or keyword.issoftkeyword(tok.string) else "N"
        elif tok.type in (tokenize.STRING, getattr(tokenize, "FSTRING_START", -1)):
            word = "S"
        elif tok.type == tokenize.NUMBER:
            word = "0"
        else:
            word = tok.string
        rows.setdefault(tok.start[0], []).append(word)
    return [(row, tuple(words)) for row, words in sorted(rows.items())
            if words[0] not in ("import", "from") and words != ["S"] and len(words) > 2 and words[:2] != ["N", ":"]]


def near_copy_pairs(sources: dict[str, str], lines: int = NEAR_COPY_LINES) -> dict[tuple[str, str], str]:
    """(file, file) -> where, for each two files (or two places in one) that share `lines` lines of one shape
    in a row. A run must hold 30 tokens, 8 of them distinct, to count: a few short lines alike are a habit."""
    places: dict[tuple[tuple[str, ...], ...], list[tuple[str, int, int]]] = {}
    for name, source in sources.items():
        shaped = _shape_lines(source)
        for i in range(len(shaped) - lines + 1):
            run = tuple(shape for _, shape in shaped[i:i + lines])
            words = [w for shape in run for w in shape]
            if len(words) >= 30 and len(set(words)) >= 8:
                places.setdefault(run, []).append((name, shaped[i][0], shaped[i + lines - 1][0]))
    pairs: dict[tuple[str, str], str] = {}
    for found in places.values():
        if len(found) > _NEAR_COPY_MAX_PLACES:
            continue
        for a, b in itertools.combinations(found, 2):
            if a[0] == b[0] and a[1] <= b[2] and b[1] <= a[2]:  # overlapping runs of one file
                continue
            key = (min(a[0], b[0]), max(a[0], b[0]))
            pairs.setdefault(key, f"{a[0]}:{a[1]} ~ {b[0]}:{b[1]}")
    return pairs


def test_few_near_copies_in_the_product_packages() -> None:
    """One piece of code where the logic is the same: at most a few pairs of places alike line for line."""
    sources = {str(path.relative_to(ROOT)): path.read_text() for path, _ in _product_modules().values()}
    pairs = near_copy_pairs(sources)
    assert len(pairs) <= NEAR_COPY_MAX_PAIRS, "\n".join(sorted(pairs.values()))


def test_the_near_copy_check_sees_a_renamed_copy() -> None:
    body = ("def {f}(items, limit):\n    kept = [x for x in items if x.size < limit]\n"
            "    total = sum(x.size for x in kept)\n    if total > limit * 2:\n"
            "        raise ValueError(f'too large: {{total}}')\n    ranked = sorted(kept, key=lambda x: x.rank)\n"
            "    return {{x.name: x.rank for x in ranked}}\n")
    one, other = body.format(f="first"), body.format(f="second").replace("items", "rows").replace("kept", "left")
    assert list(near_copy_pairs({"a.py": one, "b.py": other})) == [("a.py", "b.py")]
    assert near_copy_pairs({"a.py": one, "b.py": "def second():\n    return 1\n"}) == {}


# ------------------------------------------------------------------------------------------------------------
# Issue 50 ("rooms by concept"): a room is a subpackage, or a module that stands directly in its package
# (`sweeper.jobs`, `sweeper.ledger`, `api.service`, `trials.core`). Imports inside functions count.

FACE_MAX_NAMES = 20
# Faces still wider than FACE_MAX_NAMES, with their width today: each only narrows (to be emptied). `sweeper`'s
# face is the user's one entry to sweeps and transfers alike: issue 61 allows it 30 names.
WIDE_FACES: dict[str, int] = {"sweeper": 30}
# Packages whose rooms are subpackages: no room reaches another's private module.
ROOMED_PACKAGES = ("sweeper", "api", "scaling")


def _room(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else parts[0]


def _package_names() -> list[str]:
    return sorted(name for name, (_, is_package) in _product_modules().items() if is_package)


def _inside(top: str) -> dict[str, set[str]]:
    graph = _import_graph(deferred=True)
    return {m: {t for t in ts if t.split(".")[0] == top} for m, ts in graph.items() if m.split(".")[0] == top}


def _room_graph(inside: dict[str, set[str]]) -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = {}
    for module, targets in inside.items():
        rooms.setdefault(_room(module), set()).update(_room(t) for t in targets if _room(t) != _room(module))
        for target in targets:
            rooms.setdefault(_room(target), set())
    return rooms


def _private_across_rooms(inside: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((m, t) for m, ts in inside.items() for t in ts if _room(m) != _room(t) and _is_private(t))


def test_every_face_names_at_most_twenty() -> None:
    """A package's `__all__` is what its neighbours use (Optuna's subpackages: 6-15 names): at most 20."""
    import importlib

    wide = {}
    for package in _package_names():
        names = getattr(importlib.import_module(package), "__all__", None)
        if names is not None and len(names) > WIDE_FACES.get(package, FACE_MAX_NAMES):
            wide[package] = len(names)
    assert wide == {}, f"faces over {FACE_MAX_NAMES} names (or wider than WIDE_FACES allows): {wide}"


@pytest.mark.parametrize("package", ROOMED_PACKAGES)
def test_no_room_imports_another_rooms_private_module(package: str) -> None:
    found = _private_across_rooms(_inside(package))
    assert found == [], "\n".join(f"{a} imports {b}" for a, b in found)


@pytest.mark.parametrize("package", PRODUCT_PACKAGES)
def test_rooms_stack_one_way(package: str) -> None:
    """No arrow back up inside a package: its rooms import each other in one direction only."""
    cycles = _cycles(_room_graph(_inside(package)))
    assert cycles == [], "rooms importing each other: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_room_checks_see_a_private_import_and_a_loop_between_rooms() -> None:
    inside = {"p.a._x": {"p.b._y"}, "p.b._y": {"p.a"}, "p.a": set()}
    assert _private_across_rooms(inside) == [("p.a._x", "p.b._y")]
    assert _cycles(_room_graph(inside)) == [["p.a", "p.b", "p.a"]]
    assert _room("sweeper.jobs._driver") == "sweeper.jobs" and _room("sweeper.ledger") == "sweeper.ledger"


def _secret_names() -> set[str]:
    from trials.core import SERVICE_SECRET_ENV

    return set(SERVICE_SECRET_ENV)


def test_one_list_of_secret_variables() -> None:
    """The service's secrets are listed once (`trials.core.SERVICE_SECRET_ENV`): no other module writes a
    collection of them (a tuple, list or set literal naming a secret variable)."""
    secrets = _secret_names()
    home = ROOT / "trials" / "core" / "redact.py"
    offenders = []
    for path, _ in _product_modules().values():
        if path == home:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Tuple | ast.List | ast.Set) and any(
                    isinstance(e, ast.Constant) and e.value in secrets for e in node.elts):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_one_settings_mechanism() -> None:
    """Every process kind reads its environment through `trials.core.EnvSettings`; nobody imports
    pydantic-settings or defines its own reader."""
    from api.client._settings import ClientSettings
    from api.deploy_local._settings import DeploySettings
    from api.service.settings import Settings
    from sweeper.settings import DriverSettings
    from trials import TrialSettings
    from trials.core import EnvSettings
    from trials.progress import TrainerSettings

    assert all(issubclass(kind, EnvSettings)
               for kind in (Settings, ClientSettings, DeploySettings, DriverSettings, TrialSettings, TrainerSettings))
    offenders = [f"{path.relative_to(ROOT)}" for path, _ in _product_modules().values()
                 if {"pydantic_settings"} & _imports(path)]
    assert offenders == []


# ------------------------------------------------------------------------------------------------------------
# Issue 61 ("faces that hold"): a package answers its `__all__` and its submodules, nothing else; no private module
# is imported from outside its own package; the run record's tags are spelled in `trials.record` alone.


def _listed_names(package: str) -> set[str]:
    """Every name that a module of `package` (its subpackages' included) lists in its `__all__`, read from the
    source: what a fallback to the package's modules would answer."""
    found: set[str] = set()
    for path in (ROOT / Path(*package.split("."))).rglob("*.py"):
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            listing = isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                           for t in node.targets)
            if listing and isinstance(node.value, ast.List | ast.Tuple):
                found.update(e.value for e in node.value.elts if isinstance(e, ast.Constant))
    return found


def _answered_beyond_the_face(package: str) -> list[str]:
    import importlib
    import types

    module = importlib.import_module(package)
    face = set(getattr(module, "__all__", ()))
    return sorted(name for name in _listed_names(package) - face
                  if hasattr(module, name) and not isinstance(getattr(module, name), types.ModuleType))


@pytest.mark.parametrize("package", _package_names())
def test_a_package_answers_only_the_names_on_its_face(package: str) -> None:
    """No `__getattr__` fallback to the package's modules: a name the face does not list is imported from the
    module or subpackage that owns it (`sweeper` answered 142 names with a 19-name face before issue 61)."""
    assert _answered_beyond_the_face(package) == []


def _package_of(module: str, modules: dict[str, tuple[Path, bool]]) -> str:
    return module if modules[module][1] else module.rpartition(".")[0]


def private_imports_across_packages(graph: dict[str, set[str]], modules: dict[str, tuple[Path, bool]]
                                    ) -> list[tuple[str, str]]:
    """(importer, imported) where the imported module is private to a package (`pkg._x`, or a module below it)
    that the importer is not in: a subpackage reaching its parent's private module (`trials.data` ->
    `trials._registry`) counts, and so does a parent reaching a subpackage's."""
    found = []
    for importer, targets in graph.items():
        here = _package_of(importer, modules)
        for target in targets:
            parts = target.split(".")
            first = next((i for i, part in enumerate(parts) if i and _is_private(f"x.{part}")), None)
            if first is None:
                continue
            owner, private = ".".join(parts[:first]), ".".join(parts[:first + 1])
            if here != owner and here != private and not here.startswith(private + "."):
                found.append((importer, target))
    return sorted(found)


def test_no_module_imports_a_private_module_of_another_package() -> None:
    """Imports inside functions count; a package's private modules are its own (issue 61 found 22 such imports:
    `trials/{data,metrics,optim,text}` -> `trials._registry`/`_settings`, the routers -> `api.service._*`)."""
    modules = _product_modules()
    found = private_imports_across_packages(_import_graph(deferred=True), modules)
    assert found == [], "\n".join(f"{a} imports {b}" for a, b in found)


def test_the_private_import_check_sees_a_child_a_parent_and_a_sibling() -> None:
    modules = {name: (Path(name), is_package) for name, is_package in (
        ("p", True), ("p._reg", False), ("p.sub", True), ("p.sub._x", False), ("p.sub.y", False), ("p._in", True),
        ("p._in.z", False), ("q", True))}
    graph = {"p.sub.y": {"p._reg", "p.sub._x"}, "p": {"p.sub._x", "p._reg"}, "p._in.z": {"p._in", "p._reg"},
             "q": {"p.sub"}}
    assert private_imports_across_packages(graph, modules) == [("p", "p.sub._x"), ("p._in.z", "p._reg"),
                                                               ("p.sub.y", "p._reg")]


# The tag literals still written outside `trials.record`, by value (each only goes): the transfer's, which the
# transfer's own move takes to `trials.record.LINEAGE` (TRANSFER_ARM, PILOT_OF, PILOT).
TAG_LITERALS_LEFT: dict[str, set[str]] = {}
_TAG_SHAPE = re.compile(r"(scalesweep|mlflow)\.[A-Za-z_]+(\.[A-Za-z_]+)*\.?")


def _record_tags() -> set[str]:
    from trials import record

    values = {v for kind in (record.TAG, record.LINEAGE, record.TRIAL_TAG, record.PROVENANCE)
              for k, v in vars(kind).items() if k.isupper() and isinstance(v, str)}
    return values | {record.PARENT_TAG}


def tag_literals(source: str, tags: set[str]) -> list[tuple[int, str]]:
    """(line, literal) of each string that is a run-record tag: one of `tags`, or shaped like one
    (`scalesweep.<key>`, `mlflow.<key>`, an f-string's `scalesweep.best.` prefix). Logger names and `*.db` file
    names are not tags."""
    tree = ast.parse(source)
    loggers = {id(node.args[0]) for node in ast.walk(tree) if isinstance(node, ast.Call) and node.args
               and getattr(node.func, "attr", getattr(node.func, "id", None)) == "getLogger"}
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in loggers
                  and not node.value.endswith(".db") and (node.value in tags or _TAG_SHAPE.fullmatch(node.value)))


def test_run_record_tags_are_spelled_only_in_trials_record() -> None:
    """The README says `trials.record` names every tag a run carries: everyone else uses its constants."""
    tags = _record_tags()
    home = ROOT / "trials" / "record.py"
    offenders = []
    for path, _ in _product_modules().values():
        if path == home:
            continue
        name = str(path.relative_to(ROOT))
        offenders += [f"{name}:{line} {value!r}" for line, value in tag_literals(path.read_text(), tags)
                      if value not in TAG_LITERALS_LEFT.get(name, set())]
    assert offenders == []


def test_the_tag_check_sees_a_tag_a_prefix_and_spares_a_logger() -> None:
    code = ('import logging\nlog = logging.getLogger("scalesweep.api")\nt = {"scalesweep.kind": 1}\n'
            'b = f"scalesweep.best.{k}"\np = "mlflow.parentRunId"\ndb = "scalesweep.db"\nx = "fd.extractor"\n')
    assert tag_literals(code, {"fd.extractor"}) == [(3, "scalesweep.kind"), (4, "scalesweep.best."),
                                                    (5, "mlflow.parentRunId"), (7, "fd.extractor")]
