"""Fetch the three real NYC TLC green trip files and verify them before anything reads them.

    python scripts/fetch_tlc.py --record        # first time, on a machine with a network
    python scripts/fetch_tlc.py                 # download what is missing, verify all three
    python scripts/fetch_tlc.py --describe      # DESCRIBE each month (re-read the schema)
    python scripts/fetch_tlc.py --run pipelines/tlc_backfill.py [twicerun run options]

Files go to data/tlc/ (or --dir), which is not committed: the TLC publishes no licence
for the records, so no TLC bytes are in this repository (docs/data.md). Each file's
size and SHA-256 are recorded in scripts/tlc_files.json the first time (--record), and
every later use verifies against that record: a file that does not match is refused,
and so is running a pipeline on it. The download is plain HTTPS from the TLC's public
distribution; tests import this module and never call it (their socket block would
refuse it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RECORD = Path(__file__).resolve().parent / "tlc_files.json"
BASE_URL = "https://d37ci6vzurychx.cloudfront.net/trip-data"
MONTHS = ("2024-12", "2025-01", "2025-02")
DEFAULT_DIR = REPO / "data" / "tlc"


def file_name(month: str) -> str:
    return f"green_tripdata_{month}.parquet"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    why: str = ""


def sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def load_record(path: Path | None = None) -> dict[str, dict]:
    path = path or RECORD
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8")).get("files", {})


def verify(directory: Path, record: dict[str, dict]) -> list[Check]:
    """Each month's file against its recorded size and digest."""
    checks = []
    for month in MONTHS:
        name = file_name(month)
        path = Path(directory) / name
        expected = record.get(name)
        if expected is None:
            checks.append(Check(name, False, "no size and digest recorded; run with --record once"))
        elif not path.is_file():
            checks.append(Check(name, False, f"{path} is missing"))
        elif path.stat().st_size != expected["size"]:
            checks.append(
                Check(name, False, f"{path.stat().st_size} bytes, recorded {expected['size']}")
            )
        elif sha256(path) != expected["sha256"]:
            checks.append(Check(name, False, "its SHA-256 differs from the recorded one"))
        else:
            checks.append(Check(name, True))
    return checks


def download(month: str, directory: Path) -> Path:
    """Fetch one month over HTTPS into `directory`, atomically."""
    target = Path(directory) / file_name(month)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    url = f"{BASE_URL}/{file_name(month)}"
    with urllib.request.urlopen(url, timeout=60) as response, open(partial, "wb") as out:
        while chunk := response.read(1 << 20):
            out.write(chunk)
    partial.replace(target)
    return target


def record(directory: Path, path: Path | None = None) -> dict[str, dict]:
    path = path or RECORD
    files = {
        file_name(m): {
            "size": (Path(directory) / file_name(m)).stat().st_size,
            "sha256": sha256(Path(directory) / file_name(m)),
            "url": f"{BASE_URL}/{file_name(m)}",
        }
        for m in MONTHS
    }
    path.write_text(json.dumps({"files": files}, indent=2) + "\n", encoding="utf-8")
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument(
        "--record", action="store_true", help="download and record sizes and digests"
    )
    parser.add_argument("--describe", action="store_true", help="DESCRIBE each verified month")
    parser.add_argument("--run", metavar="PIPELINE", help="run twicerun on the verified files")
    args, rest = parser.parse_known_args(argv)
    if args.record:
        for month in MONTHS:
            download(month, args.dir)
        for name, entry in record(args.dir).items():
            print(f"recorded {name}: {entry['size']} bytes, sha256 {entry['sha256']}")
        return 0
    recorded = load_record()
    if not recorded:
        print(
            f"fetch_tlc: {RECORD.name} holds no sizes and digests yet; run with --record on a "
            f"machine with a network, and commit the file it writes",
            file=sys.stderr,
        )
        return 2
    for month in MONTHS:
        if not (args.dir / file_name(month)).is_file():
            download(month, args.dir)
    failed = [c for c in verify(args.dir, recorded) if not c.ok]
    for c in failed:
        print(f"fetch_tlc: {c.name}: {c.why}; refusing to use it", file=sys.stderr)
    if failed:
        return 1
    if args.describe:
        import duckdb

        con = duckdb.connect()
        for month in MONTHS:
            rows = con.execute(f"DESCRIBE SELECT * FROM '{args.dir / file_name(month)}'").fetchall()
            print(f"{file_name(month)}: " + ", ".join(f"{r[0]} {r[1]}" for r in rows))
    if args.run:
        env = {**os.environ, "TWICERUN_TLC_DIR": str(args.dir)}
        return subprocess.run(["twicerun", "run", args.run, *rest], env=env, check=False).returncode
    print(f"verified {len(MONTHS)} files in {args.dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
