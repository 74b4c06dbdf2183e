"""The viewer's web app: four pages and the JSON, binary and image endpoints behind them.

`create_app(lake)` returns a Starlette application over one lake handle. Pages are plain HTML
files of this package with the page's first data embedded as JSON (so the first paint needs no
second round trip); everything else the pages draw comes from GET endpoints:

    /                        lake page: versions and tags, embodiments, statistics, quarantine summary
    /episodes                the episodes table (filtered, sorted and paged by /api/episodes)
    /episode?id=ID           one episode: frames, plots, task, source, lineage
    /quarantine              the quarantine table (paged by /api/quarantine)
    /api/lake                what the lake page embeds
    /api/versions            per version: episodes added and removed (robolake.curate.diff, cached)
    /api/episodes?text=&embodiment=&success=&where=&sort=&desc=&offset=&limit=
    /api/episode?id=ID       an episode's details (what its page embeds)
    /api/lineage?id=ID       which lake versions hold it
    /api/steps?id=ID         timestamps, state and action as one binary blob (see episodes.py)
    /api/frame?id=ID&camera=CAM&step=K   one frame (`frames.frame_bytes`)
    /api/record?id=ID        the episode's recorded streams (no values) and its event markers (record.py)
    /api/signal?id=ID&stream=S&px=&from=&to=   one stream's messages in [from, to] s, decimated to px buckets
    /api/quarantine?reason=&offset=&limit=
    /static/...              the pages' scripts and styles, and the vendored uPlot

Nothing in a URL is ever joined into a path. Episode ids, camera names and steps are query
values looked up in the lake's own tables (the episode index, the episode's camera list, its
step count, its recorded streams); anything not found answers 404, so `../` in any position finds nothing. Static
files are served by Starlette's `StaticFiles` from this package's `static/` directory, which
refuses paths that leave it. Every route is a GET: the viewer never writes.

Bound to 127.0.0.1 the app also accepts only Host headers naming the loopback interface, so a
web page elsewhere cannot reach it through DNS rebinding; `--host` lifts that (with a warning).
Endpoints are plain functions: Starlette runs them on its thread pool, where the Lance reads
they make do not block the event loop.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

try:
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
except ImportError as e:  # the web stack is an extra
    raise ImportError("robolake view needs starlette and uvicorn: pip install 'robolake[view]'") from e

from robolake.errors import one_line
from robolake.lake import Lake
from robolake.view.catalog import LakeCatalog
from robolake.view.episodes import SORT_KEYS, EpisodeCatalog, EpisodeQuery
from robolake.view.frames import FrameSource
from robolake.view.record import DEFAULT_PX, MAX_PX, RecordSource

__all__ = ["LOOPBACK_HOSTS", "create_app"]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
_PAGES = ("lake", "episodes", "episode", "quarantine")
_CACHE = "private, max-age=3600"  # a frame or series of one served lake version never changes
_DETAILS = 64
# Damaged data (a truncated or deleted data file, a tag that is not JSON) is the server's state, not
# the request's fault, and not a crash: answered as 503 with the line the CLI prints, never a 500.
DAMAGED = 503

log = logging.getLogger(__name__)


def _clean(x: Any) -> Any:
    """`x` with NaN/inf as null (JSON has no NaN) and numpy scalars as Python numbers."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "item") and callable(x.item):  # numpy scalar
        return _clean(x.item())
    return x


def _json(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(_clean(data), default=str), status_code=status, media_type="application/json")


def _template(name: str) -> str:
    return (resources.files("robolake.view") / "templates" / f"{name}.html").read_text(encoding="utf-8")


class _Viewer:
    """The app's state: one lake handle, its catalogs and frame source, and the page renderer."""

    def __init__(self, lake: Lake):
        self.lake = lake
        self.catalog = LakeCatalog(lake)
        self.episodes = EpisodeCatalog(self.catalog)
        self.frames = FrameSource(lake)
        self.record = RecordSource(lake)
        self._templates = {name: _template(name) for name in (*_PAGES, "missing")}
        self._details: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def header(self) -> dict[str, Any]:
        tag = self.lake.tag
        return {"uri": self.lake.uri, "version": self.lake.version, "tag": None if tag is None else tag.name}

    def page(self, name: str, data: Any, status: int = 200) -> HTMLResponse:
        payload = json.dumps(_clean({"page": name, "lake": self.header(), "data": data}), default=str)
        # "<" escaped: no string in the lake can close the <script> element that holds the data.
        html = self._templates[name].replace("{{ROBOLAKE_DATA}}", payload.replace("<", "\\u003c"))
        return HTMLResponse(html, status_code=status)

    def detail(self, episode_id: str | None) -> dict[str, Any]:
        """The episode's details, or a 404 for an id (or no id) the lake does not hold."""
        if not episode_id:
            raise HTTPException(404, "no episode id given")
        with self._lock:
            hit = self._details.get(episode_id)
            if hit is not None:
                self._details.move_to_end(episode_id)
                return hit
        d = self.episodes.detail(episode_id)
        if d is None:
            raise HTTPException(404, f"the lake has no episode {episode_id!r}")
        with self._lock:
            self._details[episode_id] = d
            while len(self._details) > _DETAILS:
                self._details.popitem(last=False)
        return d


def _int(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise HTTPException(400, f"{name} must be an integer, got {raw!r}") from None


def _float(request: Request, name: str) -> float | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        x = float(raw)
    except ValueError:
        x = math.nan
    if not math.isfinite(x):
        raise HTTPException(400, f"{name} must be a number of seconds, got {raw!r}")
    return x


def _answers(endpoint: Callable[[Request], Response]) -> Callable[[Request], Response]:
    """`endpoint`, with any failure that is not an HTTP answer turned into one (DAMAGED, one line)."""

    @functools.wraps(endpoint)
    def wrapped(request: Request) -> Response:
        try:
            return endpoint(request)
        except HTTPException:
            raise
        except Exception as e:
            line = one_line(e)
            log.warning("%s %s: %s", request.method, request.url.path, line)
            log.debug("the failure behind that answer", exc_info=True)  # for `--debug`, not the default log
            raise HTTPException(DAMAGED, f"{line}; run `robolake check` on the lake for what to do") from None

    return wrapped


def _routes(v: _Viewer) -> list[Any]:
    def lake_page(request: Request) -> Response:
        return v.page("lake", v.catalog.overview())

    def episodes_page(request: Request) -> Response:
        names = [e["embodiment"] for e in v.catalog.embodiments()]
        return v.page("episodes", {"embodiments": names, "sort_keys": list(SORT_KEYS)})

    def episode_page(request: Request) -> Response:
        return v.page("episode", v.detail(request.query_params.get("id")))

    def quarantine_page(request: Request) -> Response:
        return v.page("quarantine", {"reasons": v.catalog.quarantine_reasons()})

    def api_lake(request: Request) -> Response:
        return _json(v.catalog.overview())

    def api_versions(request: Request) -> Response:
        return _json(v.catalog.changes())

    def api_episodes(request: Request) -> Response:
        p = request.query_params
        try:
            q = EpisodeQuery(
                text=p.get("text", ""),
                embodiment=p.get("embodiment") or None,
                success=p.get("success") or None,
                where=p.get("where") or None,
                sort=p.get("sort") or "episode_id",
                descending=p.get("desc") in ("1", "true"),
                offset=_int(request, "offset", 0),
                limit=_int(request, "limit", 50),
            )
            return _json(v.episodes.page(q))
        except ValueError as e:  # a bad sort key, limit or --where expression: say what is wrong
            return _json({"error": str(e)}, status=400)

    def api_episode(request: Request) -> Response:
        return _json(v.detail(request.query_params.get("id")))

    def api_lineage(request: Request) -> Response:
        d = v.detail(request.query_params.get("id"))
        return _json(v.catalog.lineage(d["episode_id"]))

    def api_steps(request: Request) -> Response:
        d = v.detail(request.query_params.get("id"))
        blob = v.episodes.series_bytes(d["episode_id"])
        if blob is None:
            raise HTTPException(404, "no such episode")
        return Response(blob, media_type="application/octet-stream", headers={"Cache-Control": _CACHE})

    def api_frame(request: Request) -> Response:
        d = v.detail(request.query_params.get("id"))
        camera = request.query_params.get("camera", "")
        if camera not in {c["name"] for c in d["cameras"]}:
            raise HTTPException(404, f"episode {d['episode_id']!r} has no camera {camera!r}")
        step = _int(request, "step", -1)
        if not 0 <= step < d["num_steps"]:
            raise HTTPException(404, f"episode {d['episode_id']!r} has no step {step}")
        try:
            data, mime = v.frames.get(d["episode_id"], camera, step)
        except KeyError as e:
            raise HTTPException(404, str(e)) from None
        return Response(data, media_type=mime, headers={"Cache-Control": _CACHE})

    def api_record(request: Request) -> Response:
        d = v.detail(request.query_params.get("id"))
        out = _json(v.record.catalog(d["episode_id"]))
        out.headers["Cache-Control"] = _CACHE
        return out

    def api_signal(request: Request) -> Response:
        d = v.detail(request.query_params.get("id"))
        stream = request.query_params.get("stream", "")
        px = _int(request, "px", DEFAULT_PX)
        if not 1 <= px <= MAX_PX:
            return _json({"error": f"px must be 1..{MAX_PX}, got {px}"}, status=400)
        out = v.record.series(d["episode_id"], stream, px=px, start=_float(request, "from"), end=_float(request, "to"))
        if out is None:
            raise HTTPException(404, f"episode {d['episode_id']!r} recorded no numeric stream {stream!r}")
        answer = _json(out)
        answer.headers["Cache-Control"] = _CACHE
        return answer

    def api_quarantine(request: Request) -> Response:
        offset, limit = _int(request, "offset", 0), _int(request, "limit", 100)
        if offset < 0 or not 1 <= limit <= 1000:
            return _json({"error": "need offset >= 0 and 1 <= limit <= 1000"}, status=400)
        return _json(v.catalog.quarantine_page(request.query_params.get("reason") or None, offset, limit))

    get = ["GET", "HEAD"]
    return [
        Route("/", _answers(lake_page), methods=get),
        Route("/episodes", _answers(episodes_page), methods=get),
        Route("/episode", _answers(episode_page), methods=get),
        Route("/quarantine", _answers(quarantine_page), methods=get),
        Route("/api/lake", _answers(api_lake), methods=get),
        Route("/api/versions", _answers(api_versions), methods=get),
        Route("/api/episodes", _answers(api_episodes), methods=get),
        Route("/api/episode", _answers(api_episode), methods=get),
        Route("/api/lineage", _answers(api_lineage), methods=get),
        Route("/api/steps", _answers(api_steps), methods=get),
        Route("/api/frame", _answers(api_frame), methods=get),
        Route("/api/record", _answers(api_record), methods=get),
        Route("/api/signal", _answers(api_signal), methods=get),
        Route("/api/quarantine", _answers(api_quarantine), methods=get),
        Mount("/static", app=StaticFiles(packages=[("robolake.view", "static")]), name="static"),
    ]


def create_app(lake: Lake, *, allowed_hosts: Sequence[str] | None = LOOPBACK_HOSTS) -> Starlette:
    """The viewer app over `lake` (a handle at a version or tag; it only reads).

    Args:
        lake: The lake to show.
        allowed_hosts: Host header values the app answers (None: any). The default admits only
            the loopback names, which is right for a server bound to 127.0.0.1.
    """
    viewer = _Viewer(lake)

    def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        detail = str(getattr(exc, "detail", "") or exc)
        if request.url.path.startswith("/api/") or request.url.path.startswith("/static/"):
            return JSONResponse({"error": detail}, status_code=status)
        return viewer.page("missing", {"status": status, "error": detail, "path": request.url.path}, status=status)

    middleware = [] if allowed_hosts is None else [Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))]
    app = Starlette(routes=_routes(viewer), middleware=middleware, exception_handlers={HTTPException: not_found})
    app.state.viewer = viewer
    return app
