"""The episode page's record: every stream at its own rate (decimated for display only), events as markers.

Over HTTP: the catalog lists every recorded stream with its count and every event marker; a
stream sent whole holds every message bit for bit; a decimated one keeps each pixel bucket's
min and max of every series and counts every message; unknown streams answer 404. In headless
Chromium (`scripts/install_browser.sh`): the stream plots and the event markers render.
"""

from __future__ import annotations

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

from robolake.lake import IngestConfig, Lake, ingest, read_record, steps_seconds
from robolake.testing.ros import Layout, write_ros2
from robolake.view import ViewServer, create_app

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
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


def _extras() -> dict:
    t = np.arange(6000) / 3000.0  # a 3 kHz force-torque-like stream with spikes the steps never see
    spikes = np.zeros(t.size)
    spikes[[137, 3111, 5999]] = [50.0, -40.0, 30.0]
    return {
        "/ft": ("float64", [(float(x), float(np.sin(7 * x) + s)) for x, s in zip(t, spikes, strict=True)]),
        "/imu": ("imu", [(float(x), np.arange(10) * 0.1 + x) for x in np.arange(400) / 200.0]),
        "/fault": ("bool", [(0.2, False), (0.5, True), (0.7, True), (1.2, False)]),
        "/phase": ("string", [(0.1, "reach"), (0.6, "grasp <b>&</b>"), (1.5, "place")]),
        "/button": ("empty", [(0.33, None), (1.66, None)]),
    }


@pytest.fixture(scope="module")
def record_lake(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    root = tmp_path_factory.mktemp("view_record")
    write_ros2(root / "src" / "rig", Layout(seconds=2.0, extra=_extras()))
    ingest(str(root / "src" / "rig"), str(root / "lake"), IngestConfig(execution="local"))
    return Lake.open(str(root / "lake"))


@pytest.fixture(scope="module")
def server(record_lake: Lake) -> Iterator[ViewServer]:
    with ViewServer(create_app(record_lake), port=0) as s:
        yield s


def _get(server: ViewServer, path: str, **params: object) -> tuple[int, Any]:
    url = server.url + path + "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _stream(lake: Lake, eid: str, stream: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(seconds on the steps' axis, {label: values}) of a one-part stream, from the lake's own rows."""
    meta = json.loads(lake.episodes(columns=["metadata"])["metadata"][0].as_py())
    rec = read_record(lake.to_arrow("signals", where=f"stream = '{stream}'"), lake.to_arrow("events", where="false"))
    (part,) = rec.signals
    t = steps_seconds(part.t_ns, meta, log_clock=part.clock == "log")
    cols = {}
    for f, v in zip(part.fields, part.values, strict=True):
        for d in range(v.shape[1]):
            cols[f if v.shape[1] == 1 else f"{f}[{d}]"] = v[:, d].astype(np.float64)
    order = np.argsort(t, kind="stable")
    return t[order], {k: v[order] for k, v in cols.items()}


def test_catalog_lists_every_stream_and_marker(server, record_lake):
    eid = record_lake.episode_ids()[0]
    status, cat = _get(server, "/api/record", id=eid)
    assert status == 200
    streams = {s["name"]: s for s in cat["streams"]}
    assert streams["/ft"]["count"] == 6000 and streams["/imu"]["count"] == 400 and "/joint_states" in streams
    ev = {e["name"]: e for e in cat["events"]}
    assert ev["/fault"]["count"] == 4 and ev["/fault"]["value"] == ["false", "true", "false"]  # transitions
    assert ev["/phase"]["value"] == ["reach", "grasp <b>&</b>", "place"]  # text as recorded, escaped only as JSON
    assert ev["/button"]["kind"] == "trigger" and ev["/button"]["markers"] == 2
    assert ev["/fault"]["t"][1] == pytest.approx(0.5, abs=0.01)  # on the steps' axis


def test_a_stream_is_every_message_or_every_extreme(server, record_lake):
    eid = record_lake.episode_ids()[0]
    t, cols = _stream(record_lake, eid, "/ft")
    status, whole = _get(server, "/api/signal", id=eid, stream="/ft", px=4000)
    assert status == 200 and not whole["decimated"] and whole["count"] == whole["in_view"] == 6000
    assert np.array_equal(np.asarray(whole["x"]), t)
    assert np.array_equal(np.asarray(whole["values"][0], dtype=np.float64), cols["data"])

    for px in (7, 100, 333):
        status, d = _get(server, "/api/signal", id=eid, stream="/ft", px=px)
        assert status == 200 and d["decimated"] and sum(d["bucket_counts"]) == d["count"] == 6000
        lo, hi, n = d["edges"]
        bucket = np.minimum(((t - lo) / (hi - lo) * n).astype(np.int64), n - 1)
        slot = {b: i for i, b in enumerate(d["buckets"])}
        assert np.array_equal(np.bincount(bucket, minlength=n)[d["buckets"]], d["bucket_counts"])
        for s, sent in zip(d["series"], d["values"], strict=True):
            pairs = np.asarray(sent, dtype=np.float64).reshape(-1, 2)
            raw = cols[s["label"]]
            for b in np.unique(bucket):  # never drops a bucket's min or max
                got = pairs[slot[int(b)]]
                assert sorted(got) == [raw[bucket == b].min(), raw[bucket == b].max()]
        assert max(d["values"][0]) == cols["data"].max() > 50 and min(d["values"][0]) == cols["data"].min() < -39


def test_a_zoomed_span_and_wrong_requests(server, record_lake):
    eid = record_lake.episode_ids()[0]
    t, cols = _stream(record_lake, eid, "/imu")
    status, d = _get(server, "/api/signal", id=eid, stream="/imu", px=1000, **{"from": 0.5, "to": 1.0})
    inside = (t >= 0.5) & (t <= 1.0)
    assert status == 200 and d["in_view"] == int(inside.sum()) and d["count"] == 400 and not d["decimated"]
    i = next(k for k, s in enumerate(d["series"]) if s["label"] == "angular_velocity.x")
    assert np.array_equal(np.asarray(d["values"][i]), cols["angular_velocity.x"][inside])
    hidden = {s["label"] for s in d["series"] if s["hidden"]}
    assert "orientation_covariance[0]" in hidden and "angular_velocity.x" not in hidden
    assert _get(server, "/api/signal", id=eid, stream="/nope")[0] == 404
    assert _get(server, "/api/signal", id=eid, stream="/fault")[0] == 404  # events are markers, not series
    assert _get(server, "/api/signal", id=eid, stream="../../signals.lance")[0] == 404
    assert _get(server, "/api/signal", id="../" + eid, stream="/ft")[0] == 404
    assert _get(server, "/api/signal", id=eid, stream="/ft", px=0)[0] == 400
    assert _get(server, "/api/signal", id=eid, stream="/ft", **{"from": "nan"})[0] == 400
    assert _get(server, "/api/record", id="nope")[0] == 404


# --- in a browser --------------------------------------------------------------------------------------------


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


RENDERED_JS = """
const done = arguments[arguments.length - 1];
(async () => {
  await robolakeView.record.ready;
  const inked = (c) => {  // pixels that are not the blank background, in a plot's canvas
    const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < px.length; i += 4) {
      if (px[i + 3] > 0 && (px[i] < 200 || px[i + 1] < 200 || px[i + 2] < 200)) n++;
    }
    return n;
  };
  const plots = [...document.querySelectorAll('#record-plots .plot')].map((p) => ({
    stream: p.dataset.stream, ink: inked(p.querySelector('canvas'))}));
  const events = document.querySelector('#events-plot canvas');
  await robolakeView.record.show('/ft', true);
  const ft = robolakeView.record.plotted().find((p) => p.stream === '/ft');
  done({plots, events_ink: events ? inked(events) : 0, drawn: robolakeView.record.drawn,
        plotted: robolakeView.record.plotted(), ft,
        injected: document.querySelectorAll('#events-plot b, #record-plots b').length,
        status: document.getElementById('record-status').textContent});
})().catch((e) => done({error: String(e)}));
"""


def test_plots_and_event_markers_render(server, record_lake, browser, tmp_path: Path):
    eid = record_lake.episode_ids()[0]
    browser.get(server.url + "/episode?" + urllib.parse.urlencode({"id": eid}))
    got = browser.execute_async_script(RENDERED_JS)
    assert "error" not in got, got
    browser.save_screenshot(str(tmp_path / "record.png"))
    assert len(got["plots"]) == 4 and all(p["ink"] > 500 for p in got["plots"]), got["plots"]
    assert got["events_ink"] > 200
    assert got["drawn"]["markers"] == {"/button": 2, "/fault": 3, "/phase": 3}
    assert got["drawn"]["labels"] == 3  # the label text painted on the canvas
    assert got["injected"] == 0  # "grasp <b>&</b>" stays text
    steps = record_lake.count("steps")
    assert all(n == steps for n in got["drawn"]["ticks"].values()), got["drawn"]["ticks"]
    assert got["ft"]["count"] == 6000 and got["ft"]["decimated"] and got["ft"]["points"] <= 2 * 1400
    assert "streams recorded" in got["status"]
