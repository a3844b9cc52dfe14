"""`make bench`: run every benchmark module (bench/bench_*.py) on SQLite and PostgreSQL,
each in its own process, print the figures and write JSON to bench/results/.

    python -m bench                      # everything
    python -m bench memory_store         # one module, both vendors
    python -m bench memory_store --vendor sqlite
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys

from bench.harness import ROOT, teardown, write_report

VENDORS = ("sqlite", "postgresql")


def discover() -> list[str]:
    return sorted(p.stem.removeprefix("bench_") for p in (ROOT / "bench").glob("bench_*.py"))


def run_one(name: str, vendor: str) -> dict:
    module = importlib.import_module(f"bench.bench_{name}")
    vendors = getattr(module, "VENDORS", VENDORS)
    if vendor not in vendors:
        return {"skipped": f"{name} does not run on {vendor}"}
    from bench.harness import configure

    configure(vendor)
    try:
        figures = module.run(vendor)
    finally:
        teardown(vendor)
    path = write_report(name, vendor, figures)
    figures["report"] = str(path.relative_to(ROOT))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("names", nargs="*", help="benchmark modules (default: all)")
    parser.add_argument("--vendor", choices=VENDORS)
    args = parser.parse_args(argv)
    names = args.names or discover()
    if args.vendor:
        # Child mode: one module, one vendor, this process.
        failed = 0
        for name in names:
            figures = run_one(name, args.vendor)
            print(json.dumps({"benchmark": name, "vendor": args.vendor, **figures}, indent=2))
        return failed
    status = 0
    for name in names:
        for vendor in VENDORS:
            print(f"== {name} on {vendor}", flush=True)
            code = subprocess.call(
                [sys.executable, "-m", "bench", name, "--vendor", vendor],
                cwd=ROOT,
                env={k: v for k, v in os.environ.items() if k != "DATABASE_URL"},
            )
            status = status or code
    return status


if __name__ == "__main__":
    sys.exit(main())
