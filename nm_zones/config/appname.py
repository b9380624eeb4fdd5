"""An application's name (APP) as a zone file or an allowance gives it, checked: in the
configuration's stage, so that loading a zone needs nothing of the ruleset
(ruleset/applications.py says what an APP matches)."""

from __future__ import annotations

import re

APP_PATTERN = re.compile(r"^[A-Za-z0-9@._:*?\[\]\\/+-]{1,240}$")


def check_app(text: str) -> str:
    """APP in its canonical form (no leading or trailing `/`), or ValueError saying why."""
    app = text.strip().strip("/")
    if not APP_PATTERN.match(app) or ".." in app.split("/") or "//" in app:
        raise ValueError(
            f"{text!r} is not an application: give a unit or scope name (wildcards allowed) "
            "or a cgroup path relative to the cgroup v2 root"
        )
    return app
