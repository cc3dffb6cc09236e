"""Look at the HTML report as a person would: render it with headless Chromium and check what the page shows.

    python benchmarks/report_screenshot.py [--cert CERT.json] [--out DIR] [--height 2400]

Without ``--cert`` it certifies ``specverify.zoo:argmax_verify`` (quick, temperature-1 and greedy, in-process),
a decoder that fails. It writes DIR/report.html and DIR/screenshot.png (1280 px wide) and prints what it checked:
the page loads, names every scenario, and every ``<img>`` is an embedded PNG (``data:`` URI) that decodes and is
not blank, and the screenshot itself is not blank. Exit code 1 when a check fails, 2 when Chromium is missing
(Debian: ``apt-get install -y chromium``). tests/report/test_screenshot.py runs the same checks.
"""

from __future__ import annotations

import argparse
import base64
import io
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_IMG = re.compile(r"<img\b[^>]*\bsrc=\"([^\"]*)\"", re.I)
_EXTERNAL = re.compile(
    r"(<script\b|<link\b|<iframe\b|<object\b|<embed\b|\b(?:src|href)\s*=\s*\"(?!data:|#)|url\(|@import)", re.I
)


def find_chromium():
    """The path of a Chromium-like browser, or None."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(html_path, png_path, *, width=1280, height=2400, timeout=90, chromium=None):
    """Render ``html_path`` headless into ``png_path``; returns the browser's (returncode, stderr tail)."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise FileNotFoundError("chromium is not installed (Debian: apt-get install -y chromium)")
    with tempfile.TemporaryDirectory() as profile:
        cmd = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            f"--screenshot={Path(png_path).resolve()}",
            f"--window-size={width},{height}",
            Path(html_path).resolve().as_uri(),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stderr[-2000:]


def png_problem(data, what):
    """Why ``data`` is not a readable, non-blank PNG (None when it is one)."""
    import numpy as np
    from PIL import Image

    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return f"{what} is not a PNG (starts with {data[:8]!r})"
    try:
        pixels = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=np.int32)
    except Exception as exc:  # noqa: BLE001 - any decoding failure is the finding
        return f"{what} does not decode ({exc})"
    if pixels.size == 0:
        return f"{what} is empty"
    background = pixels[0, 0]
    differs = np.abs(pixels - background).sum(axis=2) > 30
    packed = (pixels[..., 0] << 16) | (pixels[..., 1] << 8) | pixels[..., 2]
    colours = len(np.unique(packed.ravel()[:: max(1, packed.size // 200_000)]))
    if differs.mean() < 0.01 or colours < 8:
        return f"{what} looks blank ({differs.mean():.1%} of pixels differ from the corner, {colours} colours)"
    return None


def page_problems(html, scenario_names, *, min_images=1):
    """What is wrong with the page's source: a scenario it does not name, an image that is not an embedded
    PNG, a resource it would fetch, fewer than ``min_images`` images."""
    problems = [f"scenario {name!r} is not named on the page" for name in scenario_names if name not in html]
    sources = _IMG.findall(html)
    if len(sources) < min_images:
        problems.append(f"{len(sources)} <img> found, expected at least {min_images}")
    for i, src in enumerate(sources):
        if not src.startswith("data:image/png;base64,"):
            problems.append(f"image {i} is not an embedded PNG: {src[:40]!r}")
            continue
        problem = png_problem(base64.b64decode(src.split(",", 1)[1], validate=True), f"image {i}")
        if problem:
            problems.append(problem)
    external = _EXTERNAL.search(html)
    if external:
        problems.append(f"the page would fetch or run something: {external.group(0)!r}")
    return problems


def _certificate(path):
    import specverify
    from specverify.report import load_certificate

    if path:
        return load_certificate(path)
    return specverify.certify(
        "specverify.zoo:argmax_verify", level="quick", scenarios=["temperature-1", "greedy"], isolation="none"
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cert", help="a certificate saved with --json (default: certify specverify.zoo:argmax_verify)")
    p.add_argument("--out", default=None, help="directory for report.html and screenshot.png (default: a temp dir)")
    p.add_argument("--height", type=int, default=2400, help="window height in pixels (default 2400)")
    args = p.parse_args(argv)
    from specverify.report import write_html

    if find_chromium() is None:
        print("chromium is not installed (Debian: apt-get install -y chromium)", file=sys.stderr)
        return 2
    out = Path(args.out or tempfile.mkdtemp(prefix="specverify-report-"))
    out.mkdir(parents=True, exist_ok=True)
    cert = _certificate(args.cert)
    html_path = write_html(cert, out / "report.html")
    shot = out / "screenshot.png"
    code, stderr = screenshot(html_path, shot, height=args.height)
    html = html_path.read_text(encoding="utf-8")
    problems = page_problems(html, [s.name for s in cert.scenarios], min_images=2 if cert.failures else 1)
    if code != 0 or not shot.exists():
        problems.append(f"chromium exited {code} without a screenshot: {stderr}")
    else:
        problems += [x for x in [png_problem(shot.read_bytes(), "the screenshot")] if x]
    print(f"verdict {cert.verdict}; {len(cert.scenarios)} scenarios; {len(_IMG.findall(html))} embedded images")
    print(f"report     {html_path}  ({len(html) / 1024:.0f} KiB)")
    print(f"screenshot {shot}")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print("all checks passed" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
