"""The layering the code keeps, checked from its source: who may import whom, and how wide a function may be.

Issue 14's rules. Where the code does not meet one yet, the exceptions are listed
here by name, and a test fails when one is fixed but still listed: the lists only shrink.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "media_crawler"
MAX_PARAMETERS = 8
# Still wider than MAX_PARAMETERS: none left (issue 14); a new exception needs its reason here.
WIDE_FUNCTIONS: set[str] = set()


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def imported(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


# -- one layer order (issue 27) ---------------------------------------------------------
# docs/DESIGN.md ("Layers"). Lowest first: a module imports its own layer and the ones
# before it, never a later one. Every import counts: at module level, inside a function,
# under TYPE_CHECKING. A folder names every module under it; a file, itself.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("core", frozenset({"models.py", "errors.py", "scrub.py", "environment.py", "platform_spec.py",
                        "timestamps.py", "shown.py", "crashpoints.py", "__init__.py"})),
    ("net, store, verify", frozenset({"net", "store", "verify", "http.py"})),
    ("download, platforms", frozenset({"download", "platforms", "sessions.py"})),
    ("configuration", frozenset({"config.py", "config_cache.py", "shards.py", "dagster_home.py"})),
    ("observe", frozenset({"observe"})),
    ("pipeline", frozenset({"pipeline"})),
    ("orchestration, commands, after-the-fact tools",
     frozenset({"defs", "commands", "recovery", "deploy", "export", "definitions.py", "cli.py"})),
)
# The simulator leaves the product package (issue 27); until then it is outside the order.
OUTSIDE_THE_ORDER = ("sim/",)
# Imports that still break the order, each with its way out; the list only shrinks.
LAYER_BREACHES: set[str] = set()


def layer_of(module: str) -> int | None:
    """The layer of a module named by its path under media_crawler/ (`store/ledger.py`)."""
    head = module.split("/", 1)[0]
    return next((index for index, (_name, members) in enumerate(LAYERS) if head in members), None)


def module_path(dotted_name: str) -> str | None:
    """`media_crawler.store.ledger.Ledger` -> `store/ledger.py`: the deepest module a dotted name reaches."""
    parts = dotted_name.split(".")
    if parts[0] != "media_crawler":
        return None
    folder = PACKAGE
    for part in parts[1:]:
        if (folder / part).is_dir():
            folder = folder / part
        elif (folder / f"{part}.py").is_file():
            return (folder / f"{part}.py").relative_to(PACKAGE).as_posix()
        else:
            break
    return (folder / "__init__.py").relative_to(PACKAGE).as_posix()


def package_imports(name: str, tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module path) of every import of the package in a module, wherever it stands."""
    package = name.rsplit("/", 1)[0].split("/") if "/" in name else []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package upward
                up = package[:len(package) - (node.level - 1)] if node.level > 1 else package
                base = ".".join(["media_crawler", *up, *([base] if base else [])])
            targets = {module_path(f"{base}.{alias.name}") for alias in node.names} | {module_path(base)}
        elif isinstance(node, ast.Import):
            targets = {module_path(alias.name) for alias in node.names}
        else:
            continue
        found.extend((node.lineno, target) for target in sorted(t for t in targets if t and t != name))
    return found


def test_every_module_has_a_layer():
    unplaced = [name for name, _tree in modules() if not name.startswith(OUTSIDE_THE_ORDER) and layer_of(name) is None]
    assert unplaced == [], "place it in LAYERS (and in docs/DESIGN.md's layer order)"


def test_no_module_imports_a_later_layer():
    breaches = {}  # "importer -> imported": where, for the message
    for name, tree in modules():
        own = layer_of(name)
        if own is None or name.startswith(OUTSIDE_THE_ORDER):
            continue
        for line, target in package_imports(name, tree):
            theirs = layer_of(target)
            if theirs is not None and theirs > own and not target.startswith(OUTSIDE_THE_ORDER):
                breaches[f"{name} -> {target}"] = f"{name}:{line} ({LAYERS[own][0]}) imports {target} ({LAYERS[theirs][0]})"
    unlisted = sorted(where for breach, where in breaches.items() if breach not in LAYER_BREACHES)
    assert unlisted == [], "a lower layer imports a higher one: move the piece down, or take it as a parameter"
    assert LAYER_BREACHES - set(breaches) == set(), "fixed: take it off LAYER_BREACHES"


def import_cycles() -> list[list[str]]:
    """Every strongly connected group of two or more modules in the import graph (Tarjan)."""
    graph = {name: {target for _line, target in package_imports(name, tree) if not target.startswith(OUTSIDE_THE_ORDER)}
             for name, tree in modules() if not name.startswith(OUTSIDE_THE_ORDER)}
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_no_import_cycles():
    assert import_cycles() == [], "break the cycle: move the shared piece down a layer (docs/DESIGN.md)"


def test_nothing_below_the_commands_imports_them():
    offenders = [name for name, tree in modules()
                 if not name.startswith("commands/") and name != "cli.py"
                 and any(module.startswith("media_crawler.commands") for module in imported(tree))]
    assert offenders == []


def test_the_store_does_not_import_recovery():
    offenders = [name for name, tree in modules() if name.startswith("store/")
                 and any(module.startswith("media_crawler.recovery") for module in imported(tree))]
    assert offenders == []


def test_only_the_store_speaks_sql():
    speaking = sorted(name for name, tree in modules() if not name.startswith("store/")
                      and any(module == "sqlalchemy" or module.startswith("sqlalchemy.") for module in imported(tree)))
    assert speaking == [], "put the SQL in media_crawler/store/ as a named function"


def test_no_function_takes_more_than_eight_parameters_but_the_listed_ones():
    wide = set()
    for name, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                positional = [arg.arg for arg in args.posonlyargs + args.args]
                count = len(positional) + len(args.kwonlyargs) + bool(args.vararg) + bool(args.kwarg)
                count -= bool(positional) and positional[0] in ("self", "cls")
                if count > MAX_PARAMETERS:
                    wide.add(f"{name}:{node.name}")
    assert wide - WIDE_FUNCTIONS == set(), "a new function over eight parameters: pass a request or settings object"
    assert WIDE_FUNCTIONS - wide == set(), "fixed: take it off WIDE_FUNCTIONS"


def literal_keys(node: ast.AST) -> list[str] | None:
    """The string keys a dict display ({...}) or a dict(...) call spells out; None for any other node."""
    if isinstance(node, ast.Dict):
        return [key.value for key in node.keys if isinstance(key, ast.Constant) and isinstance(key.value, str)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return [keyword.arg for keyword in node.keywords if keyword.arg]
    return None


def test_only_the_store_spells_ledger_rows():
    # A dict whose keys are all mc_tasks columns is a ledger row (or part of one) in the
    # making: outside store/ a stage names a transition (store/transitions.py) instead.
    # The row id alone is no row: {"id": ...} is also an API's parameter or a feed's field.
    from media_crawler.store.schema import tasks

    columns = {column.name for column in tasks.columns}
    row_id = {column.name for column in tasks.primary_key}
    spelled = [f"{name}:{node.lineno} {sorted(keys)}" for name, tree in modules() if not name.startswith("store/")
               for node in ast.walk(tree) if (keys := literal_keys(node))
               and set(keys) <= columns and set(keys) - row_id]
    assert spelled == [], "name the move as a transition in media_crawler/store/transitions.py"


def test_the_environment_is_read_in_its_module_only():
    readers = []
    for name, tree in modules():
        if name == "environment.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv", "unsetenv") \
                    and isinstance(node.value, ast.Name) and node.value.id == "os":
                readers.append(f"{name}:{node.lineno}")
    assert readers == [], "read the environment through media_crawler/environment.py"


def test_no_platform_is_named_outside_its_package_and_the_simulator():
    from media_crawler.platforms.registry import BUILTIN

    # "urls" is also an ordinary word (an options key, a path segment): only the other three.
    names = {module.rsplit(".", 1)[1] for module in BUILTIN} - {"urls"}
    named = [f"{name}:{node.lineno}" for name, tree in modules()
             if not name.startswith("platforms/")
             for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in names]
    assert named == [], "derive the platform from the registry (media_crawler/platforms/registry.py)"


# requests' public API: the package's top-level names, and HTTPAdapter (the documented
# way to mount transport adapters; sessions.py's PinnedAdapter, for the API path).
# Anything else under requests.* is its internals, which change without notice.
REQUESTS_PUBLIC_SUBMODULE_NAMES = {"requests.adapters", "requests.adapters.HTTPAdapter"}


def dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def test_no_module_reaches_into_requests_internals():
    reaching = set()
    for name, tree in modules():
        used = {module for module in imported(tree) if module.startswith("requests.")}
        used.update(text for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                    and (text := dotted(node)) and text.startswith("requests.")
                    and text.split(".")[1][:1].islower() and text.count(".") >= 2)
        reaching.update(f"{name}: {module}" for module in used - REQUESTS_PUBLIC_SUBMODULE_NAMES)
    assert reaching == set(), "use requests' public API, or urllib3 directly (download/media_transport.py)"


def test_the_media_path_does_not_use_requests():
    """Media downloads talk to urllib3 through download/media_transport.py; requests is the API path's."""
    users = sorted(name for name, tree in modules() if name.startswith("download/")
                   and any(module == "requests" or module.startswith("requests.") for module in imported(tree)))
    assert users == []


# The filesystem store's own names for where blobs are: only store/ may use them, so an
# object store can replace it without a caller building a path (store/blob_store.py).
# `path_for` is banned on any receiver; the generic names only on a store (`store`, `*_store`).
STORE_LAYOUT_NAMES = frozenset({"path_for", "root", "blobs", "staging"})


def test_no_path_of_a_blob_is_built_outside_the_store():
    reaching = [f"{name}:{node.lineno}:{node.attr}" for name, tree in modules() if not name.startswith("store/")
                for node in ast.walk(tree)
                if isinstance(node, ast.Attribute) and (node.attr == "path_for" or (
                    node.attr in STORE_LAYOUT_NAMES and _names_a_store(node.value)))]
    assert reaching == [], "ask the BlobStore (exists, open, local_file, location, ...), not its folders"


def test_the_store_alone_chooses_the_filesystem_implementation():
    choosing = sorted(name for name, tree in modules() if not name.startswith("store/")
                      and "media_crawler.store.cas.FilesystemBlobStore" in imported(tree))
    assert choosing == [], "open_blob_store (store/blob_store.py) chooses it; take or open a BlobStore"


def _names_a_store(node: ast.AST) -> bool:
    """`store.x`, `self.store.x`, `runtime.store.x`: an expression whose last name is a store."""
    last = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return last == "store" or last.endswith("_store")


def test_only_one_module_reaches_into_dagster_private_api():
    """`dagster._...` (an import anywhere in a module, or a string naming it) only in store/dagster_private.py,
    so a Dagster pin bump has one module to fix and test_dagster_private.py names what moved."""
    reaching = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0
                     else [alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else [])
            if any(name.startswith("dagster._") for name in names):
                reaching.add(path.relative_to(PACKAGE).as_posix())
    assert reaching <= {"store/dagster_private.py"}, "put what Dagster keeps private in store/dagster_private.py"


# The simulator is a package of its own (media_crawler_sim/), beside the product: it may
# import the product (the registry), never the other way round, but for the commands
# that run it. A module name in a string counts too (importlib.import_module).
SIMULATOR = "media_crawler_sim"
SIMULATOR_COMMANDS = ["commands/demo.py", "commands/sim.py", "commands/ui.py"]


def _names_the_simulator(module: str) -> bool:
    return module == SIMULATOR or module.startswith(SIMULATOR + ".")


def test_only_the_commands_that_run_the_simulator_import_it():
    importing = sorted(name for name, tree in modules() if any(map(_names_the_simulator, imported(tree))) or any(
        isinstance(node, ast.Constant) and isinstance(node.value, str) and _names_the_simulator(node.value.partition(":")[0])
        for node in ast.walk(tree)))
    assert importing == SIMULATOR_COMMANDS


def test_the_simulator_is_not_inside_the_product():
    assert not (PACKAGE / "sim").exists()
    importing = sorted(name for name, tree in modules()
                       if any(module == "media_crawler.sim" or module.startswith("media_crawler.sim.")
                              for module in imported(tree)))
    assert importing == []
