"""A result as a notebook shows it: its HTML report in a frame of its own, so that its styles and scripts stay
inside (an analysis, a diff), or its terminal summary as preformatted text (a result with no HTML report).
``import nsync`` in IPython registers this for every result (nsync/__init__.py); ``nsync.capture()``'s run shows
its analysis so."""

from __future__ import annotations

import html

from nsync.render.options import RenderOptions
from nsync.report import Analysis, Diff, Result

IFRAME_HEIGHT_PX = 720


def notebook_html(result: Result) -> str:
    """``result`` as HTML for a notebook's output."""
    if isinstance(result, (Analysis, Diff)):
        from nsync.render.html import render_html

        page = render_html(result, RenderOptions())
        return (
            f'<iframe title="nsync report" srcdoc="{html.escape(page, quote=True)}" '
            f'style="width:100%;height:{IFRAME_HEIGHT_PX}px;border:0"></iframe>'
        )
    from nsync.render.terminal import render_terminal

    return f"<pre>{html.escape(render_terminal(result))}</pre>"
