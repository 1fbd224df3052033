"""HTML of the explorer's pages: the dicts of `views` through Jinja2 templates, autoescaped.

Every value from the chain or IPFS (a spec's fields, DIDs, CIDs, a transcript's rejection
details) is attacker-controlled text; autoescaping is on for every template and nothing is marked
safe. Pages carry no script at all: a live run's page refreshes itself with ``<meta
http-equiv="refresh">``, and the server sends a Content-Security-Policy without ``script-src``.
The held-out loss curve is an inline SVG drawn here from numbers.
"""

from __future__ import annotations

from typing import Any

from jinja2 import DictLoader, Environment, StrictUndefined

from tenzro_operator.explorer.templates import TEMPLATES
from tenzro_operator.units import format_tokens

CHART_W, CHART_H, CHART_PAD = 560, 180, 28  # pixels of the loss chart


def _tokens(atto: Any) -> str:
    """An atto-unit amount (int or decimal string) as ``1,000 TNZO``; other text as is."""
    try:
        return format_tokens(int(atto))
    except (TypeError, ValueError):
        return str(atto)


def _loss_chart(rounds: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Polyline points of the held-out loss by round (None with fewer than one point): x the
    round, y the loss, scaled into a ``CHART_W`` x ``CHART_H`` box."""
    pts = [(r["round"], r["heldout_loss"]) for r in rounds if r.get("heldout_loss") is not None]
    first = next((r for r in rounds if r.get("heldout_loss_before") is not None and r["round"] == 0), None)
    if first is not None:
        pts.insert(0, (-1, first["heldout_loss_before"]))  # the initial weights, before round 0
    if not pts:
        return None
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    sx = (CHART_W - 2 * CHART_PAD) / ((x1 - x0) or 1)
    sy = (CHART_H - 2 * CHART_PAD) / ((y1 - y0) or 1)
    coords = [(CHART_PAD + (x - x0) * sx, CHART_H - CHART_PAD - (y - y0) * sy) for x, y in pts]
    return {"w": CHART_W, "h": CHART_H, "pad": CHART_PAD, "lo": y0, "hi": y1, "first": x0, "last": x1,
            "points": " ".join(f"{x:.1f},{y:.1f}" for x, y in coords),
            "dots": [{"x": round(x, 1), "y": round(y, 1), "round": r, "loss": v}
                     for (x, y), (r, v) in zip(coords, pts)]}


def _env() -> Environment:
    env = Environment(loader=DictLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["tokens"] = _tokens
    env.filters["dash"] = lambda v: "—" if v is None or v == "" else v
    return env


_ENV = _env()


def render(template: str, page: dict[str, Any], *, title: str, api: str | None = None,
           refresh_s: int = 0) -> str:
    """The HTML of ``template`` (a name in `TEMPLATES`) for ``page`` (a `views` dict).

    Args:
        title: the page title (escaped like everything else).
        api: path of the page's JSON twin, linked in the footer.
        refresh_s: seconds between reloads of a live page (0: none).
    """
    extra = {"chart": _loss_chart(page.get("rounds", []))} if template == "run.html" else {}
    return _ENV.get_template(template).render(p=page, title=title, api=api, refresh_s=refresh_s, **extra)


def error_page(status: int, message: str, hint: str = "") -> str:
    """A page for an HTTP error: the status, one line saying what is wrong, and what to do."""
    return _ENV.get_template("error.html").render(p={"status": status, "message": message, "hint": hint},
                                                  title=f"{status}", api=None, refresh_s=0)
