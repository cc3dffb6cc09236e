"""Look at the page as a person would: headless Chromium renders it; the page loads, names every scenario, and
every image is an embedded PNG that decodes and is not blank (benchmarks/report_screenshot.py's checks)."""

import importlib.util
import pathlib

import pytest

pytest.importorskip("matplotlib", reason="the HTML report needs the report extra: pip install -e '.[report]'")
pytest.importorskip("PIL", reason="the screenshot check reads PNGs with Pillow (installed with matplotlib)")

_SCRIPT = pathlib.Path(__file__).parents[2] / "benchmarks" / "report_screenshot.py"
_spec = importlib.util.spec_from_file_location("report_screenshot", _SCRIPT)
shot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shot)


@pytest.fixture(scope="module")
def chromium():
    path = shot.find_chromium()
    if path is None:
        pytest.skip("chromium is not installed, so the page cannot be looked at (Debian: apt-get install -y chromium)")
    return path


def test_the_failing_report_renders_in_chromium(odd_cert, odd_plots, chromium, tmp_path):
    from specverify.report import write_html

    html_path = write_html(odd_cert, tmp_path / "report.html", plots=odd_plots)
    html = html_path.read_text(encoding="utf-8")
    assert shot.page_problems(html, [s.name for s in odd_cert.scenarios], min_images=3) == []
    png = tmp_path / "screenshot.png"
    code, stderr = shot.screenshot(html_path, png, height=2400, chromium=chromium)
    assert code == 0 and png.exists(), stderr
    assert shot.png_problem(png.read_bytes(), "the screenshot") is None


def test_the_checks_catch_a_blank_image_a_missing_scenario_and_a_fetch():
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (64, 64), "white").save(buf, format="PNG")
    blank = base64.b64encode(buf.getvalue()).decode()
    page = f'<p>alpha</p><img src="data:image/png;base64,{blank}"><img src="https://example.org/x.png">'
    problems = "\n".join(shot.page_problems(page, ["alpha", "beta"], min_images=1))
    assert "'beta' is not named" in problems and "looks blank" in problems
    assert "not an embedded PNG" in problems and "would fetch" in problems
