"""bench/ is one package with one entry point (issue 27): `python -m bench NAME` runs each
benchmark, none reaches into sys.path or the tests (the hostile-media corpus they share is
media_crawler_sim/hostile), and none spells ledger rows itself.
Checked from the source (nothing is run: the benchmarks are minutes each)."""
from __future__ import annotations

import ast
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
HELPERS = {"__init__", "__main__", "instruments", "scale_figures", "scale_launch", "scale_postgres", "scale_rows", "scale_sensors"}  # imported by the benchmarks


def listed() -> set[str]:
    tree = ast.parse((BENCH / "__main__.py").read_text(encoding="utf-8"))
    [table] = [node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
               and any(isinstance(target, ast.Name) and target.id == "BENCHMARKS" for target in node.targets)]
    return {key.value for key in table.keys}


def sources():
    for path in sorted(BENCH.glob("*.py")):
        yield path.stem, path.read_text(encoding="utf-8")


def test_every_benchmark_is_listed_by_python_m_bench_and_has_a_main():
    benchmarks = {name for name, _ in sources()} - HELPERS
    assert listed() == benchmarks, "add each bench/ module to BENCHMARKS in bench/__main__.py (or to HELPERS here)"
    without_main = [name for name, text in sources() if name in benchmarks
                    and not any(isinstance(node, ast.FunctionDef) and node.name == "main"
                                and node.args.args for node in ast.parse(text).body)]
    assert without_main == [], "each benchmark has main(argv): bench/__main__.py calls it"


def test_no_benchmark_edits_sys_path_or_imports_the_tests():
    offenders = sorted(name for name, text in sources() for node in ast.walk(ast.parse(text))
                       if isinstance(node, ast.Attribute) and node.attr == "path"
                       and isinstance(node.value, ast.Name) and node.value.id == "sys"
                       or isinstance(node, (ast.Import, ast.ImportFrom))
                       and any((getattr(node, "module", None) or alias.name).startswith("media_crawler_tests")
                               for alias in node.names))
    assert offenders == [], "run from the repository root with `python -m bench`; share code through bench/"


def test_ledger_rows_are_written_through_the_store_only():
    """No benchmark builds an INSERT or DELETE itself: a synthesized ledger goes in through
    media_crawler/store/bulk_load.py, a dropped fold through store/reports/delay_fold.py.
    (Reads stay: row counts, and EXPLAIN of the lease queries, scale_ledger_scan.py's plans.)"""
    writes = {"insert", "update", "delete"}
    offenders = sorted(name for name, text in sources() for node in ast.walk(ast.parse(text))
                       if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy")
                       and writes & {alias.name for alias in node.names}
                       or isinstance(node, ast.Constant) and isinstance(node.value, str)
                       and node.value.lower().lstrip().startswith(("insert into mc_", "delete from mc_")))
    assert offenders == [], "write ledger rows through a media_crawler.store function"
