"""`robolake view` in a real browser: headless Chromium, driven by selenium, through every page.

On a lake ingested from the real GR00T PickNPlace data: the episodes table lists all five
episodes; the frame the episode page shows at step k is the lake's frame k (the bytes the page
loaded equal the lake's stored JPEG, and the pixels Chromium decoded, read back from a canvas,
equal `FrameReader`'s decode); the plotted state and action arrays equal the lake's steps;
`../` and unknown episodes answer 404. The same on an S3 lake (moto's local server) holding
key-referenced h264 frames, which the server decodes and sends as PNG, and one input in
quarantine. Screenshots and the
measured first paint / 100-frame step-through land in the test's tmp directory.

Chromium must be Debian's, at /usr/bin/chromium with /usr/bin/chromedriver
(`scripts/install_browser.sh`); without it these tests fail saying so, they never skip quietly.
"""

from __future__ import annotations

import base64
import http.client
import json
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robolake.lake import Lake
from robolake.lake.intake.ingest import IngestConfig, ingest
from robolake.view import ViewServer, create_app
from robolake.view.frames import frame_bytes
from tests.fixtures import copy_pick_n_place

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# This machine's closed network refuses connections unless Chromium is told not to make any.
CHROME_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)

# The frame an <img> shows: its bytes (fetched again from its src: the browser cache answers)
# and its pixels (drawn on a canvas and read back), base64.
FRAME_JS = """
const [k, camera, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
(async () => {
  await robolakeView.ready;
  await robolakeView.setStep(k);
  const img = document.querySelector('img[data-camera="' + camera + '"]');
  const r = await fetch(img.src);
  const b = new Uint8Array(await r.arrayBuffer());
  const c = document.createElement('canvas');
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  const ctx = c.getContext('2d');
  ctx.drawImage(img, 0, 0);
  const px = ctx.getImageData(0, 0, c.width, c.height).data;
  const b64 = (a) => {
    let s = '';
    for (let i = 0; i < a.length; i += 8192) s += String.fromCharCode.apply(null, a.subarray(i, i + 8192));
    return btoa(s);
  };
  done({bytes: b64(b), pixels: b64(px), width: c.width, height: c.height, type: r.headers.get('content-type'),
        label: document.getElementById('position').textContent});
})().catch((e) => done({error: String(e)}));
"""

STEP_THROUGH_JS = """
const [first, n, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
(async () => {
  await robolakeView.ready;
  const t0 = performance.now();
  for (let k = first; k < first + n; k++) await robolakeView.setStep(k);
  done(performance.now() - t0);
})().catch((e) => done('error: ' + e));
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.fail(
            f"the viewer's browser tests need Debian's chromium and chromium-driver ({', '.join(missing)} not found): "
            "run scripts/install_browser.sh"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    with tempfile.TemporaryDirectory(prefix="robolake-chromium-") as profile:
        options.add_argument(f"--user-data-dir={profile}")
        driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
        driver.set_script_timeout(120)
        try:
            yield driver
        finally:
            driver.quit()


@pytest.fixture(scope="module")
def real_lake(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    root = tmp_path_factory.mktemp("view_real")
    src = copy_pick_n_place(root)  # skips where ../shared is absent, before Ray starts
    request.getfixturevalue("ray_session")
    ingest(str(src), str(root / "lake"))
    return Lake.open(str(root / "lake"))


def _wait(driver: Any, condition: str, timeout: float = 60) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(
        lambda d: d.execute_script(f"try {{ return {condition}; }} catch (e) {{ return false; }}")
    )


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def _raw_status(server: ViewServer, path: str) -> int:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    conn.request("GET", path)  # sent as given: `..` reaches the server un-normalised
    status = conn.getresponse().status
    conn.close()
    return status


def _steps(lake: Lake, episode_id: str) -> tuple[np.ndarray, np.ndarray]:
    t = lake.to_arrow("steps", where=f"episode_id = '{episode_id}'").sort_by("step_index")
    return np.array(t["state"].to_pylist(), dtype=np.float32), np.array(t["action"].to_pylist(), dtype=np.float32)


def _check_frame(driver: Any, lake: Lake, episode_id: str, camera: str, k: int, *, mime: str) -> None:
    """The page shows step k of `camera`: the bytes `frame_bytes` serves (a JPEG/PNG row as stored,
    anything else decoded from the record and sent as PNG), of type `mime`, whose pixels are the lake's."""
    r = driver.execute_async_script(FRAME_JS, k, camera)
    assert "error" not in r, r
    assert r["label"].startswith(f"step {k} /")
    sent = base64.b64decode(r["bytes"])
    reader = lake.frames()
    assert r["type"] == mime
    assert sent == frame_bytes(lake, reader, episode_id, camera, k)[0]
    shown = np.frombuffer(base64.b64decode(r["pixels"]), np.uint8).reshape(r["height"], r["width"], 4)[..., :3]
    np.testing.assert_array_equal(shown, reader.read(episode_id, camera, k, exact=True))


def _check_plots(driver: Any, lake: Lake, episode_id: str) -> None:
    state, action = _steps(lake, episode_id)
    plotted = driver.execute_script("return robolakeView.plotted();")
    covered: dict[str, list[int]] = {"state": [], "action": []}
    for p in plotted:
        want = state if p["kind"] == "state" else action
        for dim, values in zip(p["dims"], p["values"], strict=True):
            np.testing.assert_array_equal(np.asarray(values, dtype=np.float64), want[:, dim].astype(np.float64))
            covered[p["kind"]].append(dim)
    assert sorted(covered["state"]) == list(range(state.shape[1]))
    assert sorted(covered["action"]) == list(range(action.shape[1]))


def test_every_page_in_a_browser_on_the_real_gr00t_data(real_lake: Lake, browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    lake, d = real_lake, browser
    episodes = lake.episodes().to_pylist()
    assert len(episodes) == 5
    with ViewServer(create_app(lake), port=0) as server:
        # Lake page: counts, versions with what they added, the embodiment's statistics plots.
        d.get(server.url + "/")
        _wait(d, "window.robolakeView.changes !== null")
        assert d.find_element(By.CSS_SELECTOR, "[data-count=episodes] .n").text == "5"
        assert len(d.find_elements(By.CSS_SELECTOR, "#versions tbody tr")) == len(lake.versions()) == 2
        # v2 added all five: a count and one link to the episodes it brought in, never the ids inline
        added = d.find_elements(By.CSS_SELECTOR, "#versions tbody tr:first-child a")
        assert len(added) == 1 and "ingest_version" in (added[0].get_attribute("href") or "")
        assert "5" in d.find_element(By.CSS_SELECTOR, "#versions tbody tr:first-child").text
        added[0].click()
        _wait(d, "window.robolakeView && window.robolakeView.total === 5")
        d.get(server.url + "/")
        _wait(d, "window.robolakeView.changes !== null")
        assert len(d.find_elements(By.CSS_SELECTOR, ".embodiment[data-embodiment=gr1_arms_only] canvas")) >= 2
        assert "empty" in d.find_element(By.ID, "quarantine-summary").text
        d.save_screenshot(str(tmp_path / "lake.png"))

        # Episodes page: all five, server-side sort and filter.
        d.get(server.url + "/episodes")
        _wait(d, "window.robolakeView.total === 5")
        links = d.find_elements(By.CSS_SELECTOR, "#episodes tbody td:first-child a")
        assert sorted(a.text for a in links) == sorted(e["episode_id"] for e in episodes)
        d.find_element(By.CSS_SELECTOR, "#episodes th[data-key=num_steps]").click()
        _wait(
            d,
            "robolakeView.query.sort === 'num_steps' && robolakeView.rows.length === 5 && "
            "document.querySelector('#episodes th[data-key=num_steps]').classList.contains('asc')",
        )
        lengths = [int(td.text) for td in d.find_elements(By.CSS_SELECTOR, "#episodes tbody td:nth-child(4)")]
        assert lengths == sorted(e["num_steps"] for e in episodes)
        d.save_screenshot(str(tmp_path / "episodes.png"))
        box = d.find_element(By.NAME, "text")
        box.send_keys("ketchup", Keys.ENTER)
        _wait(d, "robolakeView.total === 1")
        assert "ketchup" in d.find_element(By.CSS_SELECTOR, "#episodes tbody td:nth-child(2)").text

        # Episode page: frames, plots, task, source, lineage, controls, and the two measurements.
        ep = max(episodes, key=lambda e: (e["num_steps"], e["episode_id"]))
        eid, camera = ep["episode_id"], ep["cameras"][0]
        d.get(server.url + "/episode?" + urllib.parse.urlencode({"id": eid}))
        _wait(d, "document.body.dataset.ready === '1'")
        paint = d.execute_script(
            "const fcp = performance.getEntriesByName('first-contentful-paint')[0];"
            "return {fcp_ms: fcp ? fcp.startTime : null, ready_ms: robolakeView.timings.ready_ms};"
        )
        assert d.find_element(By.ID, "task").text == ep["task"]
        header = d.find_element(By.ID, "header").text
        meta = json.loads(ep["metadata"])
        assert "episode_00000" in header and "lerobot-v2.0" in header and str(meta["source_time_offset_s"]) in header
        for k in (0, 123, ep["num_steps"] - 1):
            _check_frame(d, lake, eid, camera, k, mime="image/png")  # the record: decoded, sent losslessly
        _check_plots(d, lake, eid)
        _wait(d, "robolakeView.lineage !== null")
        assert [(r["version"], r["holds"]) for r in d.execute_script("return robolakeView.lineage;")] == [
            (1, False),
            (2, True),
        ]
        d.execute_async_script("robolakeView.setStep(10).then(arguments[0]);")
        d.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_RIGHT)
        _wait(d, "robolakeView.step === 11")
        d.find_element(By.ID, "play").click()
        _wait(d, "robolakeView.step >= 16", timeout=30)
        d.find_element(By.ID, "play").click()
        assert d.execute_script("return robolakeView.playing;") is False
        d.save_screenshot(str(tmp_path / "episode.png"))
        d.execute_script("document.getElementById('action-plots').scrollIntoView();")
        d.save_screenshot(str(tmp_path / "episode_plots.png"))
        step_ms = d.execute_async_script(STEP_THROUGH_JS, 200, 100)
        assert isinstance(step_ms, (int, float)), step_ms
        _check_frame(d, lake, eid, camera, 299, mime="image/png")  # where the step-through stopped

        # Quarantine page.
        d.get(server.url + "/quarantine")
        _wait(d, "window.robolakeView.total === 0")
        assert "empty" in d.find_element(By.ID, "status").text

        # Nothing outside the lake: ../ and unknown names answer 404, in the browser and over HTTP.
        d.get(server.url + "/episode?" + urllib.parse.urlencode({"id": "../../etc/passwd"}))
        assert d.find_element(By.TAG_NAME, "h1").text.startswith("404")
        d.save_screenshot(str(tmp_path / "not_found.png"))
        q = urllib.parse.urlencode
        for path in (
            "/episode?" + q({"id": "src/999999-000000000000"}),
            "/api/frame?" + q({"id": "../" + eid, "camera": camera, "step": 0}),
            "/api/frame?" + q({"id": eid, "camera": "../../../etc/passwd", "step": 0}),
            "/api/frame?" + q({"id": eid, "camera": camera, "step": ep["num_steps"]}),
            "/api/steps?" + q({"id": eid + "/../x"}),
            "/static/..%2F..%2Fpyproject.toml",
        ):
            assert _status(server.url + path) == 404, path
        for path in ("/static/../app.py", "/static/../../../pyproject.toml", "/../../etc/passwd"):
            assert _raw_status(server, path) == 404, path

    timings = {
        "episode": eid,
        "steps": ep["num_steps"],
        "cameras": len(ep["cameras"]),
        "first_contentful_paint_ms": paint["fcp_ms"],
        "first_frame_and_plots_ms": paint["ready_ms"],
        "step_through_100_frames_ms": step_ms,
        "per_frame_ms": step_ms / 100,
    }
    (tmp_path / "view_timings.json").write_text(json.dumps(timings, indent=1))
    print(f"\nrobolake view on real GR00T data: {json.dumps(timings)} (screenshots in {tmp_path})")


def test_an_s3_lake_of_h264_frames_in_a_browser(
    s3_options: dict[str, str], browser: Any, tmp_path: Path, ray_session
) -> None:
    from selenium.webdriver.common.by import By

    from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

    generate_synthetic(
        tmp_path / "syn", SyntheticConfig.tiny(embodiments=("bimanual_14dof",), episodes_per_embodiment=3)
    )
    gone = next((tmp_path / "syn").rglob("episode_000001.mp4"))  # one camera's video of one episode
    gone.unlink()
    ingest(
        str(tmp_path / "syn"),
        Lake.create("s3://robolake/viewlake", storage_options=s3_options),
        IngestConfig(video_frames="h264"),
    )
    lake = Lake.open("s3://robolake/viewlake", storage_options=s3_options)
    episodes = lake.episodes(columns=["episode_id", "cameras", "num_steps"]).to_pylist()
    assert len(episodes) == 2
    d = browser
    with ViewServer(create_app(lake), port=0) as server:
        d.get(server.url + "/quarantine")
        _wait(d, "window.robolakeView.total === 1")
        row = [td.text for td in d.find_elements(By.CSS_SELECTOR, "#quarantine tbody td")]
        assert row[0] == "missing_video" and row[1] == str(gone) and "video file is missing" in row[2]
        d.save_screenshot(str(tmp_path / "s3_quarantine.png"))
        d.get(server.url + "/episodes")
        _wait(d, f"window.robolakeView.total === {len(episodes)}")
        ep = episodes[-1]
        d.get(server.url + "/episode?" + urllib.parse.urlencode({"id": ep["episode_id"]}))
        _wait(d, "document.body.dataset.ready === '1'")
        for camera in ep["cameras"]:
            for k in (0, 5, ep["num_steps"] - 1):  # a keyframe, a P frame, the last
                _check_frame(d, lake, ep["episode_id"], camera, k, mime="image/png")
        _check_plots(d, lake, ep["episode_id"])
        d.save_screenshot(str(tmp_path / "s3_episode.png"))
        assert _status(server.url + "/episode?" + urllib.parse.urlencode({"id": "../viewlake"})) == 404


def test_a_damaged_lake_reads_as_one_line_in_the_browser(browser: Any, tmp_path: Path) -> None:
    """[30] A truncated data file: every page answers with the CLI's line (503), never a 500 and a blank page."""
    from robolake.writers.synthetic import SyntheticConfig, generate_synthetic

    generate_synthetic(tmp_path / "syn", SyntheticConfig.tiny(embodiments=("single_arm_7dof",), image_size=16))
    ingest(str(tmp_path / "syn"), str(tmp_path / "lake"), IngestConfig(video_frames="jpeg"))
    lake = Lake.open(str(tmp_path / "lake"))
    for f in lake.dataset("media").get_fragments():
        for df in f.metadata.files:
            p = tmp_path / "lake" / "media.lance" / "data" / df.path
            p.write_bytes(p.read_bytes()[:64])
    episode = sorted(lake.episode_ids())[0]
    with ViewServer(create_app(lake), port=0) as server:
        cams = lake.episodes(columns=["cameras"])["cameras"][0].as_py()
        frame = f"/api/frame?{urllib.parse.urlencode({'id': episode, 'camera': cams[0], 'step': 0})}"
        assert _status(server.url + frame) == 503
        browser.get(server.url + "/episode?" + urllib.parse.urlencode({"id": episode}))
        text = _wait(browser, "document.body.innerText.length > 0 && document.body.innerText")
        assert "500" not in text.split("\n")[0] and "Internal Server Error" not in text, text[:300]
        for path in ("/", "/episodes", "/quarantine", "/api/lake", "/api/episodes"):
            assert _status(server.url + path) in (200, 503), path
