#!/usr/bin/env python3
"""`make mutate`: plant one bug at a time in the modules where a silent bug loses or corrupts
data or lies to the operator, and run the tests that cover that module against each.

Why our own runner (~300 lines of `ast`) and not mutmut 3 or cosmic-ray: no new dependency;
mutmut 3 rewrites every function of a module into trampolines and runs the whole suite once
to map tests (too slow here: the suite is ~12 min on 2 cores, and several tests run the CLI
in subprocesses, which its trampolines do not follow); a table of module -> covering tests
(MODULES below) is short, reviewed like code, and each mutant runs only those tests, `-x`.

How: the repository's media_crawler/ and media_crawler_tests/ are copied to a temporary
folder once; each mutant is written into the copy's file (ast.unparse of the mutated tree),
the covering tests run there (PYTHONPATH=copy, no bytecode written), and the
original is put back. The working tree is never touched. A mutant is killed when the tests
fail or time out (3x the unmutated run, at least 60 s: a mutant that loops forever).

Operators: comparison swaps (< <=, == !=, in / not in, is / is not), and <-> or, dropping one
operand of an `and` / `or`, dropping `not`, True <-> False, n -> n + 1, + <-> -, * <-> /,
+= <-> -=, a keyword argument or dict value -> None, `return x` -> `return None`, a call
statement -> `pass`. Not mutated: docstrings, strings, f-strings, annotations, decorators,
log lines (log_item, logger.*, print).

Output: one line per module, then `mutation score: K/N killed (P%)`. N leaves out the
mutants listed in .ci/mutation-equivalent.txt (each with the reason it cannot be told
apart from the original); the survivors go to .ci/mutation-survivors.txt (gitignored).

    .venv/bin/python .ci/mutate.py                     # every module (slow: see README)
    .venv/bin/python .ci/mutate.py transitions errors  # some modules
    .venv/bin/python .ci/mutate.py --list transitions  # the mutants, without running them
"""
from __future__ import annotations

import argparse
import ast
import copy
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EQUIVALENT_FILE = REPO / ".ci" / "mutation-equivalent.txt"
SURVIVORS_FILE = REPO / ".ci" / "mutation-survivors.txt"
T = "media_crawler_tests/"

# Platform health on hand-made ledgers. SQLite only here (the SQL is the same text on both; the
# PostgreSQL runs, each on a database of its own, are in `make test`), and without the operator's
# day of test_health_state (a whole crawl through the CLI and Dagster: ~5 s a run).
HEALTH_TESTS = ["-k", "not postgresql and not operator_day and not token and not auth_alert",
                T + "observe/test_platform_incidents.py", T + "observe/test_health_state.py",
                T + "observe/test_ledger_stats.py"]

# module name -> (source files, the test files that cover them). Only tests that run in a
# few seconds: the slow end-to-end ones (hostile media, Dagster crawls) run in `make test`.
MODULES: dict[str, tuple[list[str], list[str]]] = {
    "errors": (["media_crawler/errors.py"], [
        T + "test_errors.py", T + "download/test_retry.py", T + "download/test_fetcher_errors.py",
        T + "download/test_resume_at_once.py", T + "pipeline/test_fetch_urls_across_runs.py"]),
    "transitions": (["media_crawler/store/transitions.py"], [
        T + "store/test_transitions.py", T + "pipeline/test_fetch_urls_across_runs.py", T + "store/test_ledger.py",
        T + "store/test_ledger_batches.py",
        T + "pipeline/test_claim_batches.py", T + "observe/test_waiting.py"]),
    # Verification, one module per file: each mutant runs the tests of its own file, and the
    # dispatcher's (test_verify_file: every format through verify_file).
    "verify_images": (["media_crawler/verify/images.py"], [
        T + "verify/test_images.py", T + "verify/test_verify_file.py", T + "verify/test_hash_proven.py"]),
    "verify_mp4": (["media_crawler/verify/mp4.py"], [T + "verify/test_mp4.py", T + "verify/test_verify_file.py"]),
    "verify_webm": (["media_crawler/verify/webm.py"], [T + "verify/test_webm.py", T + "verify/test_verify_file.py"]),
    "verify_signatures": (["media_crawler/verify/signatures.py"], [
        T + "verify/test_signatures.py", T + "verify/test_verify_file.py"]),
    "verify": (["media_crawler/verify/verify.py"], [
        T + "verify/test_verify_file.py", T + "verify/test_hash_proven.py", T + "verify/test_signatures.py"]),
    "net": (["media_crawler/net/policy.py", "media_crawler/net/pinning.py"], [
        T + "net/test_hostile_urls.py", T + "net/test_pinning.py", T + "download/test_http_safety.py"]),
    "platform_signals": (["media_crawler/store/reports/platform_signals.py"], HEALTH_TESTS),
    "platform_incidents": (["media_crawler/store/reports/platform_incidents.py"], HEALTH_TESTS),
    "cas": (["media_crawler/store/cas.py", "media_crawler/store/free_space.py"], [T + "store/test_cas.py", T + "store/test_cas_durability.py",
                                             T + "store/test_blob_store_protocol.py"]),
    "resume": (["media_crawler/download/fetcher.py", "media_crawler/download/writeback.py"], [
        T + "download/test_fetcher_resume.py", T + "download/test_resume_at_once.py",
        T + "download/test_fetcher_errors.py", T + "download/test_writeback.py"]),
}

SKIPPED_CALLS = {"log_item", "print", "debug", "info", "warning", "error", "exception", "warn"}
COMPARE_SWAPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
                 ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
BINOP_SWAPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}


@dataclass(frozen=True)
class Mutant:
    path: str
    index: int  # the node's position in ast.walk order
    kind: str
    variant: int
    line: int
    column: int
    description: str
    scope: str = ""  # the enclosing class/function, dotted ("" at module level)
    text: str = ""  # the mutated node's first line of source, stripped
    occurrence: int = 0  # among the mutants of the same path, scope, text and description

    @property
    def key(self) -> str:
        """How .ci/mutation-equivalent.txt names it: by where it is in the code (the enclosing
        function, the line's own text), not by line number, so an entry survives code moving
        above it; it goes stale (and is re-judged) when its line or its function is renamed or
        edited. Two same mutants of one line are told apart by their order (`#2`)."""
        count = f" #{self.occurrence + 1}" if self.occurrence else ""
        return f"{self.path}: {self.scope or '<module>'}: `{self.text}`: {self.description}{count}"

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


def _skipped_nodes(tree: ast.AST) -> set[int]:
    """ids of nodes not to mutate: docstrings, strings, annotations, decorators, log calls."""
    skipped: set[int] = set()

    def skip(node: ast.AST | None) -> None:
        if node is not None:
            skipped.update(id(inner) for inner in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skip(body[0])
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator in node.decorator_list:
                skip(decorator)
            if not isinstance(node, ast.ClassDef):
                skip(node.returns)
        if isinstance(node, ast.arg):
            skip(node.annotation)
        if isinstance(node, ast.AnnAssign):
            skip(node.annotation)
        if isinstance(node, ast.JoinedStr):
            skip(node)
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in SKIPPED_CALLS:
                skip(node)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            skip(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip(node)
    return skipped


def _variants(node: ast.AST) -> list[str]:
    """What can be done to `node`: one description per mutant."""
    out: list[str] = []
    if isinstance(node, ast.Compare):
        for position, op in enumerate(node.ops):
            if type(op) in COMPARE_SWAPS:
                out.append(f"{type(op).__name__} -> {COMPARE_SWAPS[type(op)].__name__} (#{position})")
    elif isinstance(node, ast.BoolOp):
        other = "or" if isinstance(node.op, ast.And) else "and"
        out.append(f"{'and' if other == 'or' else 'or'} -> {other}")
        out += [f"drop operand {position}: {ast.unparse(value)[:60]}" for position, value in enumerate(node.values)]
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        out.append("drop not")
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        out.append(f"{node.value} -> {not node.value}")
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        out.append(f"{node.value!r} -> {node.value + 1!r}")
    elif isinstance(node, ast.BinOp) and type(node.op) in BINOP_SWAPS:
        out.append(f"{type(node.op).__name__} -> {BINOP_SWAPS[type(node.op)].__name__}")
    elif isinstance(node, ast.AugAssign) and type(node.op) in (ast.Add, ast.Sub):
        out.append(f"{type(node.op).__name__}= -> {BINOP_SWAPS[type(node.op)].__name__}=")
    elif isinstance(node, ast.keyword) and node.arg and not _is_none(node.value):
        out.append(f"keyword {node.arg}=None")
    elif isinstance(node, ast.Dict):
        out += [f"dict value {ast.unparse(key)[:40]}: None" for key, value in zip(node.keys, node.values)
                if key is not None and not _is_none(value)]
    elif isinstance(node, ast.Return) and node.value is not None and not _is_none(node.value):
        out.append("return None")
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        out.append(f"drop call {ast.unparse(node.value.func)[:50]}")
    return out


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _apply(node: ast.AST, variant: int) -> ast.AST:
    """`node` mutated in place (or its replacement, for a dropped `not` or call)."""
    if isinstance(node, ast.Compare):
        positions = [index for index, op in enumerate(node.ops) if type(op) in COMPARE_SWAPS]
        position = positions[variant]
        node.ops[position] = COMPARE_SWAPS[type(node.ops[position])]()
    elif isinstance(node, ast.BoolOp):
        if variant == 0:
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        else:
            del node.values[variant - 1]
            if len(node.values) == 1:
                return node.values[0]
    elif isinstance(node, ast.UnaryOp):
        return node.operand
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        node.value = not node.value
    elif isinstance(node, ast.Constant):
        node.value = node.value + 1
    elif isinstance(node, ast.BinOp):
        node.op = BINOP_SWAPS[type(node.op)]()
    elif isinstance(node, ast.AugAssign):
        node.op = BINOP_SWAPS[type(node.op)]()
    elif isinstance(node, ast.keyword):
        node.value = ast.Constant(None)
    elif isinstance(node, ast.Dict):
        positions = [index for index, (key, value) in enumerate(zip(node.keys, node.values))
                     if key is not None and not _is_none(value)]
        node.values[positions[variant]] = ast.Constant(None)
    elif isinstance(node, ast.Return):
        node.value = ast.Constant(None)
    elif isinstance(node, ast.Expr):
        return ast.Pass()
    return node


def mutants_of(path: str, source: str | None = None) -> list[Mutant]:
    source = (REPO / path).read_text() if source is None else source
    lines = source.splitlines()
    tree = ast.parse(source)
    skipped = _skipped_nodes(tree)
    scopes = _scopes(tree)
    found = []
    seen: dict[tuple[str, str, str], int] = {}
    # Source order (line, column), so `#2` means the second on the line, whatever ast.walk's order.
    for index, node in sorted(enumerate(ast.walk(tree)),
                              key=lambda pair: (getattr(pair[1], "lineno", 0), getattr(pair[1], "col_offset", 0))):
        if id(node) in skipped:
            continue
        line = getattr(node, "lineno", 0)
        text = lines[line - 1].strip() if line else ""
        scope = scopes.get(id(node), "")
        for variant, description in enumerate(_variants(node)):
            occurrence = seen.get((scope, text, description), 0)
            seen[(scope, text, description)] = occurrence + 1
            found.append(Mutant(path, index, type(node).__name__, variant, line, getattr(node, "col_offset", 0),
                                description, scope, text, occurrence))
    return sorted(found, key=lambda mutant: (mutant.index, mutant.variant))


def _scopes(tree: ast.AST) -> dict[int, str]:
    """id(node) -> the dotted name of the class/function it is in."""
    scopes: dict[int, str] = {}

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = f"{scope}.{child.name}" if scope else child.name
            scopes[id(child)] = inner if not isinstance(child, ast.ClassDef) else scope
            visit(child, inner)

    visit(tree, "")
    return scopes


def mutated_source(original: str, mutant: Mutant) -> str:
    tree = ast.parse(original)
    parents = {id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    target = list(ast.walk(tree))[mutant.index]
    replacement = _apply(target, mutant.variant)
    if replacement is not target:
        _replace_child(parents[id(target)], target, replacement)
    return ast.unparse(ast.fix_missing_locations(tree))


def _replace_child(parent: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for field, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, field, new)
            return
        if isinstance(value, list):
            for position, item in enumerate(value):
                if item is old:
                    value[position] = new
                    return
    raise AssertionError("the node is not a child of its parent")


def run_tests(copy_root: Path, tests: list[str], timeout: float, cache: Path) -> tuple[bool, float]:
    """(passed, seconds) of the tests in the copy."""
    # No bytecode written: the copy's modules (copied without __pycache__) are compiled from
    # the mutated source every run, never from a stale .pyc of the same size and second.
    # (A fresh PYTHONPYCACHEPREFIX would recompile Dagster and the rest too: 4x slower.)
    env = {**os.environ, "PYTHONPATH": str(copy_root), "PYTHONDONTWRITEBYTECODE": "1",
           "MEDIA_CRAWLER_HOME": str(cache / "home")}
    env.pop("MEDIA_CRAWLER_REQUIRE_SERVICES", None)  # a missing service skips here: the mutants are the point
    started = time.monotonic()
    # A session of its own, so a timed-out run is ended with everything it started.
    child = subprocess.Popen([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                             cwd=copy_root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    RUNNING.append(child)
    try:
        passed = child.wait(timeout) == 0
    except subprocess.TimeoutExpired:
        passed = False  # a mutant that never ends is caught by the tests' silence
        _end(child)
    finally:
        RUNNING.remove(child)
    shutil.rmtree(cache, ignore_errors=True)
    return passed, time.monotonic() - started


RUNNING: list[subprocess.Popen] = []


def _end(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait()


def _stop(signum, _frame) -> None:
    """Ctrl-C or a kill: end the test run in flight, then unwind (the temporary copy goes)."""
    for child in list(RUNNING):
        _end(child)
    raise SystemExit(128 + signum)


def equivalent_keys() -> dict[str, str]:
    known = {}
    if EQUIVALENT_FILE.exists():
        for line in EQUIVALENT_FILE.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                key, _, reason = line.partition(" -- ")
                known[key.strip()] = reason.strip()
    return known


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help=f"default: all of {', '.join(MODULES)}")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument("--survivors", type=Path, default=SURVIVORS_FILE, help="where the survivors go")
    parser.add_argument("--only", metavar="TEXT", help="only the mutants whose key holds TEXT (re-check survivors)")
    parser.add_argument("--recheck", metavar="FILE", type=Path,
                        help="only the mutants listed in FILE (an earlier survivors file): the score is over them")
    args = parser.parse_args()
    recheck = set(args.recheck.read_text().splitlines()) if args.recheck else None
    chosen = args.modules or list(MODULES)
    unknown = [name for name in chosen if name not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}; choose from {', '.join(MODULES)}")
    equivalent = equivalent_keys()
    # An entry whose line or function changed names no mutant any more: said, so the list is kept true.
    chosen_paths = {path for name in chosen for path in MODULES[name][0]}
    keys = {mutant.key for path in chosen_paths for mutant in mutants_of(path)}
    for key in sorted(key for key in equivalent if key.split(":")[0] in chosen_paths and key not in keys):
        print(f"stale in {EQUIVALENT_FILE.name} (no such mutant: its line or function changed; re-judge it): {key}",
              file=sys.stderr)
    if args.list:
        for name in chosen:
            for path in MODULES[name][0]:
                for mutant in mutants_of(path):
                    if args.only and args.only not in mutant.key:
                        continue
                    print(f"{mutant.where}  {mutant.key}" + ("   [equivalent]" if mutant.key in equivalent else ""))
        return 0

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    began = time.monotonic()
    killed = total = 0
    survivors: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mutate-") as folder:
        copy_root = Path(folder) / "repo"
        # media_crawler_sim/: the builders of crafted media; deploy/: the alert rules some tests replay.
        for part in ("media_crawler", "media_crawler_sim", "media_crawler_tests", "deploy", "pyproject.toml",
                     "workspace.yaml", "dagster.yaml"):
            source = REPO / part
            if source.is_dir():
                shutil.copytree(source, copy_root / part, ignore=shutil.ignore_patterns("__pycache__"))
            elif source.exists():
                shutil.copy2(source, copy_root / part)
        caches = Path(folder) / "cache"
        for name in chosen:
            paths, tests = MODULES[name]
            ok, baseline = run_tests(copy_root, tests, 1800, caches / "baseline")
            if not ok:
                print(f"{name}: its tests fail without a mutant; fix them first", file=sys.stderr)
                return 2
            timeout = max(60.0, 3 * baseline)
            module_killed = module_total = 0
            for path in paths:
                original = (copy_root / path).read_text()
                try:
                    for number, mutant in enumerate(mutants_of(path)):
                        if mutant.key in equivalent or (args.only and args.only not in mutant.key):
                            continue
                        if recheck is not None and mutant.key not in recheck:
                            continue
                        try:
                            (copy_root / path).write_text(mutated_source(original, mutant))
                        except (AssertionError, IndexError, TypeError):
                            continue  # not expressible as code: no mutant
                        passed, seconds = run_tests(copy_root, tests, timeout, caches / f"{name}-{number}")
                        print(f"  [{mutant.where} #{number}] {'survived' if passed else 'killed'} in {seconds:.0f} s",
                              file=sys.stderr, flush=True)
                        module_total += 1
                        if passed:
                            survivors.append(mutant.key)
                            print(f"  survived ({mutant.where}): {mutant.key}", flush=True)
                        else:
                            module_killed += 1
                finally:
                    (copy_root / path).write_text(original)
            killed, total = killed + module_killed, total + module_total
            print(f"{name}: {module_killed}/{module_total} killed (tests alone: {baseline:.0f} s)", flush=True)
    args.survivors.write_text("".join(f"{key}\n" for key in survivors))
    minutes = (time.monotonic() - began) / 60
    print(f"survivors: {args.survivors} ({len(survivors)}); took {minutes:.1f} min")
    print(f"mutation score: {killed}/{total} killed ({100 * killed / max(total, 1):.0f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
