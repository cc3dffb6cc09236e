"""docs/findings stays lean: each folder under it, its subfolders included, holds at most 1 MB of git-tracked files,
and certificates are stored compressed (``NAME.json.xz``, which ``specverify report`` reads as it is)."""

import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FINDINGS = "docs/findings"
LIMIT = 1_000_000  # bytes
FIX = (
    "store certificates compressed (`xz -9e NAME.json`: specverify report reads NAME.json.xz as it is, "
    "docs/findings/README.md), or drop those a benchmark regenerates and keep their figures and its command in the page"
)


def _tracked(under: str) -> list:
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", under], cwd=ROOT, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the cap counts git-tracked files")
    return [p for p in out.stdout.decode().split("\0") if p]


def folder_sizes(sizes: dict, top: str = FINDINGS) -> dict:
    """Bytes per folder strictly under ``top``, each counting its subfolders: ``sizes`` maps a file's path (relative,
    with ``/``) to its size."""
    totals: dict = {}
    for path, size in sizes.items():
        parts = path.split("/")[:-1]
        for depth in range(len(top.split("/")) + 1, len(parts) + 1):
            folder = "/".join(parts[:depth])
            totals[folder] = totals.get(folder, 0) + size
    return totals


def test_folder_sizes_count_subfolders_and_leave_the_top_out():
    sizes = {"docs/findings/a.md": 7, "docs/findings/x/1.json.xz": 600_000, "docs/findings/x/y/2.json.xz": 500_000}
    assert folder_sizes(sizes) == {"docs/findings/x": 1_100_000, "docs/findings/x/y": 500_000}


def test_each_findings_folder_holds_at_most_1_mb():
    sizes = {p: (ROOT / p).stat().st_size for p in _tracked(FINDINGS) if (ROOT / p).is_file()}
    over = {folder: size for folder, size in folder_sizes(sizes).items() if size > LIMIT}
    assert not over, "\n".join(
        f"{folder}/ holds {size / 1e6:.2f} MB of tracked files (at most {LIMIT / 1e6:g} MB with its subfolders): {FIX}"
        for folder, size in sorted(over.items())
    )


def test_certificates_under_docs_are_stored_compressed():
    plain = [p for p in _tracked("docs") if p.endswith(".json")]
    assert not plain, f"{len(plain)} certificate(s) stored uncompressed, e.g. {plain[:3]}: `xz -9e PATH` each"
