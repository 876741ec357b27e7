"""Keystone's WSGI app for gunicorn (runs in the services' venv).

Keystone's oslo.config parses sys.argv; under gunicorn that is gunicorn's own
command line, which it refuses ("unrecognized arguments"), so hide it. The
config file comes from $OS_KEYSTONE_CONFIG_FILES.
"""

import sys

sys.argv = sys.argv[:1]

from keystone.wsgi.api import application  # noqa: E402,F401
