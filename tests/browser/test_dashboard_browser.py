"""The dashboard as a person uses it: `bench dashboard`'s Streamlit server on 127.0.0.1 over the published results,
driven by Playwright in the system's Chromium (Debian's `chromium`, installed by .ci/run; Playwright's own browser
download is never used). It switches task, attack and tab, opens a row's provenance, and checks that the Pareto
frontier is drawn, that the chart's labels sit off the data and do not overlap, that there is no "Deploy" button,
that the browser console has no error or warning and that no exception text shows. Screenshots go to
``.ci-artifacts/browser/`` (ignored by git; CI keeps it as an artefact) with ``timings.json``, the seconds each widget
change took to re-render.

``BENCH_SCREENSHOT=docs/img/board.png`` also saves the published board's first view there (the README's picture;
``python scripts/board_screenshot.py`` refreshes it).

Skipped when Playwright or Chromium is missing, unless ``BENCH_BROWSER_TEST=1`` (set by .ci/run), where that fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / ".ci-artifacts" / "browser"
# every wait is bounded: 30 s (60 s for the first page: Streamlit's bundle and first script run), stretched at
# most 4 times on a machine whose CPUs are overloaded by other jobs (load average per CPU above 1)
OVERLOAD = min(4.0, max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)))
WAIT_MS = int(30_000 * OVERLOAD)
FIRST_LOAD_MS = int(60_000 * OVERLOAD)
REQUIRED = os.environ.get("BENCH_BROWSER_TEST") == "1"
SCREENSHOT = os.environ.get("BENCH_SCREENSHOT")  # where to save the published board's first view, if anywhere


def _chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed"
    return None if _chromium() else "no chromium on PATH (apt-get install chromium)"


if _missing() and REQUIRED:
    raise RuntimeError(f"BENCH_BROWSER_TEST=1 but {_missing()}")
pytestmark = [pytest.mark.browser, pytest.mark.skipif(_missing() is not None, reason=str(_missing()))]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """`bench dashboard` on the committed results, on a free port of 127.0.0.1; stopped after the module."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "import sys; from bench.cli.main import main; sys.argv = sys.argv[1:]; main()"
    process = subprocess.Popen([sys.executable, "-c", code, "bench", "dashboard", "--port", str(port),
                                "--results-dir", str(ROOT / "results")], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 40 * OVERLOAD
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
                if answer.status == 200:
                    break
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the dashboard did not start: {process.stderr.read().decode()[-2000:]}")
        time.sleep(0.3)
    yield url
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _idle(page) -> None:
    """Wait (bounded) until Streamlit has finished the current run."""
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=WAIT_MS)
    page.wait_for_timeout(150)  # the last delta is painted
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=WAIT_MS)


def _open(page, combobox) -> None:
    """Open a selectbox's list (a click that lands while the app repaints is repeated, at most three times)."""
    from playwright.sync_api import TimeoutError as Timeout

    for _ in range(3):
        combobox.click()
        try:
            page.get_by_role("listbox").wait_for(timeout=5_000)
            return
        except Timeout:
            _idle(page)
    raise AssertionError("the selectbox's list did not open")


def _pick_until(page, combobox, option, shown) -> None:
    """Pick ``option`` in ``combobox`` until ``shown`` appears. A pick that lands while the app repaints is lost
    (seen under load: the selectbox kept "(none)"), so it is repeated, at most three times; ``shown`` must still
    appear."""
    from playwright.sync_api import TimeoutError as Timeout

    for attempt in range(3):
        _open(page, combobox)
        option.click()
        try:
            shown.wait_for(timeout=WAIT_MS if attempt == 2 else WAIT_MS // 2)
            return
        except Timeout:
            if attempt == 2:
                raise
            _idle(page)


def _choose(page, container, label: str, option: str, shown) -> float:
    """Pick ``option`` in the selectbox labelled ``label`` until ``shown`` appears (``_pick_until``); the seconds
    until the app is idle again."""
    started = time.monotonic()
    _pick_until(page, container.get_by_role("combobox", name=label, exact=True),
                page.get_by_role("option", name=option, exact=True), shown)
    _idle(page)
    return time.monotonic() - started


def _dark_pixels(png: bytes) -> int:
    """Pixels of the frontier's colour (pure black: axes, labels and points are grey or coloured)."""
    from io import BytesIO

    from PIL import Image

    image = Image.open(BytesIO(png)).convert("RGB")
    return sum(1 for r, g, b in image.get_flattened_data() if r < 25 and g < 25 and b < 25)


def _chart_texts(chart) -> tuple[list[tuple], tuple]:
    """Every text of a Vega chart rendered as SVG, as (text, x, y, width, height, is an axis's), and the data
    area (the union of the axis grids) as (left, top, right, bottom)."""
    found = chart.locator("svg.marks").first.evaluate("""svg => {
        const box = e => { const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; };
        const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim())
            .map(t => [t.textContent, ...box(t), !!t.closest('g.role-axis')]);
        const grids = [...svg.querySelectorAll('g.role-axis-grid')].map(box);
        return {texts, grids};
    }""")
    grids = found["grids"]
    area = (min(g[0] for g in grids), min(g[1] for g in grids), max(g[0] + g[2] for g in grids),
            max(g[1] + g[3] for g in grids))
    return [tuple(t) for t in found["texts"]], area


def _overlap(a, b) -> bool:
    """Whether two (x, y, width, height) boxes overlap by more than a pixel."""
    return a[0] + a[2] > b[0] + 1 and b[0] + b[2] > a[0] + 1 and a[1] + a[3] > b[1] + 1 and b[1] + b[3] > a[1] + 1


def test_a_reader_switches_views_and_opens_provenance(server):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    console, errors, timings = [], [], {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        page = None
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type in ("error", "warning")
                    else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            started = time.monotonic()
            page.goto(server, timeout=FIRST_LOAD_MS)
            page.get_by_text("sst2", exact=False).first.wait_for(timeout=FIRST_LOAD_MS)
            page.locator('[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg').first \
                .wait_for(timeout=FIRST_LOAD_MS)
            _idle(page)
            timings["first load"] = time.monotonic() - started
            assert page.get_by_text("Deploy", exact=True).count() == 0  # a local board, not a developer's
            if SCREENSHOT:
                Path(SCREENSHOT).parent.mkdir(parents=True, exist_ok=True)
                page.wait_for_timeout(500)
                page.screenshot(path=SCREENSHOT)
            # the board opens on the worst case; its frontier holds only the settings every applicable attack reached,
            # so the frontier and labels are read on one attack's view
            page.get_by_text("Worst case: privacy against utility on sst2").first.wait_for(timeout=WAIT_MS)
            sidebar = page.get_by_test_id("stSidebar")
            on_sst2 = page.get_by_text("rss: privacy against utility on sst2")
            timings["attack -> rss"] = _choose(page, sidebar, "attack", "rss", on_sst2)
            chart = page.locator('[data-testid="stVegaLiteChart"]').filter(has_text="identity").first  # rss's axis
            chart.wait_for(timeout=WAIT_MS)
            chart.scroll_into_view_if_needed()
            page.wait_for_timeout(300)
            shot = chart.screenshot(path=str(ARTIFACTS / "1-sst2-scatter.png"))
            assert _dark_pixels(shot) > 40, "no Pareto frontier (black line) in the privacy-utility chart"
            texts, (left, top, right, bottom) = _chart_texts(chart)
            labels = [t[0] for t in texts]
            assert "none (undefended)" in labels and any(t.startswith("random guess") for t in labels), labels
            inside = [t[0] for t in texts if not t[5] and _overlap(t[1:5], (left, top, right - left, bottom - top))]
            assert not inside, f"labels drawn over the data: {inside}"
            clashes = [(a[0], b[0]) for i, a in enumerate(texts) for b in texts[i + 1:] if _overlap(a[1:5], b[1:5])]
            assert not clashes, f"labels drawn over each other: {clashes}"
            timings["task -> mrpc"] = _choose(page, sidebar, "task", "mrpc", page.get_by_text("on mrpc").first)
            page.screenshot(path=str(ARTIFACTS / "2-mrpc.png"), full_page=True)
            timings["task -> sst2"] = _choose(page, sidebar, "task", "sst2", on_sst2)
            main = page.get_by_test_id("stMain")
            started = time.monotonic()
            heading = page.get_by_text(re.compile("^Provenance of "))
            _pick_until(page, main.get_by_role("combobox", name="provenance of (or select a row above)"),
                        page.get_by_role("option").nth(1), heading)
            # the heading can paint a delta before the body, and before the status widget shows the run
            main.get_by_text(re.compile(r"git_sha [0-9a-f]{40}")).first.wait_for(timeout=WAIT_MS)
            main.get_by_text("notes (per seed)").first.wait_for(timeout=WAIT_MS)  # the provenance's last element
            _idle(page)
            heading.scroll_into_view_if_needed()
            timings["open provenance"] = time.monotonic() - started
            page.screenshot(path=str(ARTIFACTS / "3-provenance.png"), full_page=True)
            shown = main.inner_text()
            assert re.search(r"git_sha [0-9a-f]{40} · torch ", shown) and re.search(r"runtime \d", shown), shown
            for text in ("cpu_count", "config hash", "notes (per seed)"):
                assert text in shown, text
            # spec, versions and hardware, notes: st.json mounts a lazily loaded viewer, which may paint after the run
            main.locator('[data-testid="stJson"]').nth(2).wait_for(timeout=WAIT_MS)
            assert main.locator('[data-testid="stJson"]').count() >= 3
            started = time.monotonic()
            page.get_by_role("tab", name="Paper vs ours").click()
            page.get_by_text("Claims").first.wait_for(timeout=WAIT_MS)
            timings["tab -> paper vs ours"] = time.monotonic() - started
            page.screenshot(path=str(ARTIFACTS / "4-paper-vs-ours.png"), full_page=True)
            page.get_by_role("tab", name="Plausible deniability").click()
            page.get_by_text("Whiskers").first.wait_for(timeout=WAIT_MS)
            assert page.locator('[data-testid="stException"]').count() == 0
            body = page.inner_text("body")
            assert "Traceback" not in body and "Error:" not in body
        except Exception:
            if page is not None:
                page.screenshot(path=str(ARTIFACTS / "failure.png"), full_page=True)  # what the reader saw
            raise
        finally:
            browser.close()
    load = os.getloadavg()[0]
    (ARTIFACTS / "timings.json").write_text(json.dumps({"seconds": {k: round(v, 3) for k, v in timings.items()},
                                                        "load_average": load, "cpus": os.cpu_count()}, indent=2))
    print("re-render seconds:", json.dumps({k: round(v, 2) for k, v in timings.items()}), "load", load)
    assert not errors, errors
    assert not console, console
    changes = {k: v for k, v in timings.items() if k != "first load"}
    # the target is 1 s on an idle machine; 10 s (scaled by how overloaded the CPUs are) catches a return to
    # re-running everything, without failing on a machine shared with other jobs
    bound = 10 * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    assert max(changes.values()) < bound, (changes, bound)
