"""The release page in a real browser: headless Chromium renders it from a file, with the
network features it would reach for turned off, and the parsed DOM holds every section
(and, for an evaluated release, the inline plot)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from reef_cli.core.release_page import SECTIONS, render_page
from tests.core.test_release_page import Parsed, publish_evaluated, publish_plain

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="/usr/bin/chromium is not installed (apt-get install chromium)"
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1200,2000",
]


def chromium(tmp: Path, page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    return subprocess.run(
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


@pytest.mark.parametrize("kind", ["plain", "evaluated"])
def test_page_renders_in_headless_chromium(kind: str, tmp_path: Path) -> None:
    number = publish_plain()
    if kind == "evaluated":
        number = publish_evaluated()
    html = render_page("demo", number)
    assert "http://" not in html and "https://" not in html  # no resource to fetch
    page = tmp_path / f"release-{kind}.html"
    page.write_text(html, encoding="utf-8")

    shot = tmp_path / "shot.png"
    chromium(tmp_path, page, f"--screenshot={shot}")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 30_000  # a rendered page, not a blank canvas

    dom = chromium(tmp_path, page, "--dump-dom").stdout
    parsed = Parsed(dom)
    assert parsed.sections == list(SECTIONS)
    assert parsed.scripts == 0
    if kind == "evaluated":
        assert len(parsed.images) == 1 and parsed.images[0].startswith("data:image/png;base64,")
        assert "candidate beats incumbent" in dom
    else:
        assert parsed.images == [] and "No evaluation" in dom


def test_a_gated_gepa_release_renders_with_its_evaluation_and_plot(tmp_path: Path) -> None:
    """A real GEPA search (scripted model) publishes r2; its page shows the gate's
    test-split evaluation with the inline plot, and GEPA's evidence."""
    from tests.recipes.gepa.test_gepa import demo, evolve
    from tests.recipes.gepa_model import GOOD, Sums

    model = Sums(GOOD)
    model.server.start()
    try:
        demo()
        outcome, _ = evolve(model, {"max_metric_calls": 30})
    finally:
        model.server.stop()
    assert outcome.state == "published" and outcome.release == 2, outcome.message
    page = tmp_path / "gepa.html"
    page.write_text(render_page("demo", 2), encoding="utf-8")
    shot = tmp_path / "gepa.png"
    chromium(tmp_path, page, f"--screenshot={shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    dom = chromium(tmp_path, page, "--dump-dom").stdout
    parsed = Parsed(dom)
    assert parsed.sections == list(SECTIONS) and parsed.scripts == 0
    assert len(parsed.images) == 1 and parsed.images[0].startswith("data:image/png;base64,")
    assert "GEPA: val" in dom and "candidate beats incumbent" in dom
