"""`make vendor`: fetch the pinned browser libraries from the npm registry and copy their
distribution files and licences into static/vendor/<name>/.

static/vendor/vendor.json is the only place versions live: each entry names the npm
package, its exact version, the registry's sha512 integrity (checked here, so a
re-published or tampered tarball is refused) and which files of the tarball to copy.
To update a library, change its version, run `make vendor`, paste the integrity it
prints on refusal after checking the release, run it again and commit static/vendor/.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "static" / "vendor"
MANIFEST = VENDOR / "vendor.json"


def _integrity(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def vendor_one(name: str, entry: dict[str, object], workdir: Path) -> None:
    spec = f"{entry['package']}@{entry['version']}"
    out = subprocess.run(
        ["npm", "pack", spec, "--json", "--pack-destination", str(workdir)],
        check=True,
        capture_output=True,
        text=True,
    )
    tarball = workdir / json.loads(out.stdout)[0]["filename"]
    actual = _integrity(tarball)
    if actual != entry["integrity"]:
        raise SystemExit(f"{spec}: integrity {actual} does not match vendor.json")
    target = VENDOR / name
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    files = entry["files"]
    assert isinstance(files, dict)
    with tarfile.open(tarball) as archive:
        for source, dest in files.items():
            member = archive.extractfile(f"package/{source}")
            if member is None:
                raise SystemExit(f"{spec}: {source} is not a file in the package")
            (target / dest).write_bytes(member.read())
    print(f"{name}: {spec} -> {target.relative_to(ROOT)}/ ({', '.join(files.values())})")


def main() -> int:
    manifest = json.loads(MANIFEST.read_text())
    with tempfile.TemporaryDirectory(prefix="hermes-vendor-") as tmp:
        for name, entry in manifest.items():
            vendor_one(name, entry, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
