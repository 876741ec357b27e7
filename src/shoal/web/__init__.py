"""The dashboard: static pages under /ui/ that call /v1 from the browser, like `shoal` does.

The server side only serves the files in `static/` (`serving.router`); everything
the page shows comes from the API with the caller's own token. This package imports
nothing of shoal (a contract in pyproject.toml).
"""
