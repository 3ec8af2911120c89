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


def test_the_environment_is_read_in_config_and_cli_only():
    readers = []
    for name, tree in modules():
        if name in ("config.py", "cli.py"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv", "unsetenv") \
                    and isinstance(node.value, ast.Name) and node.value.id == "os":
                readers.append(f"{name}:{node.lineno}")
    assert readers == [], "read the environment through media_crawler/config.py"


def test_no_platform_is_named_outside_its_package_and_the_simulator():
    from media_crawler.platforms.registry import BUILTIN

    # "urls" is also an ordinary word (an options key, a path segment): only the other three.
    names = {module.rsplit(".", 1)[1] for module in BUILTIN} - {"urls"}
    named = [f"{name}:{node.lineno}" for name, tree in modules()
             if not name.startswith("platforms/")
             for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in names]
    assert named == [], "derive the platform from the registry (media_crawler/platforms/registry.py)"


# requests' public API: the package's top-level names, and HTTPAdapter (the documented
# way to mount transport adapters; net/pinning.py's PinnedAdapter, for the API path).
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
