"""The desktop programs and the polkit messages speak the user's language (gettext domain
`nm-zones`): the template holds every marked string, each language translates all of it,
and what the programs load is made from it (tools/translations.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.harness.lab import REPO, base_env

TOOL = os.path.join(REPO, "tools", "translations.py")


@pytest.mark.skipif(not shutil.which("msgfmt"), reason="needs GNU gettext's tools (gettext)")
def test_template_catalogs_and_policy_are_current():
    result = subprocess.run([sys.executable, TOOL, "check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def words_in(language: str, code: str) -> str:
    env = base_env(LANGUAGE=language, LANG=f"{language}.UTF-8" if language != "C" else "C")
    result = subprocess.run(
        [sys.executable, "-c", f"from nm_zones.desktop.words import *; print({code})"],
        capture_output=True, text=True, env=env, check=True,
    )
    return result.stdout.strip()


def test_the_programs_load_the_german_catalog():
    assert words_in("de_DE", "zone_label('public'), reason_text('default-zone')") == (
        "Öffentlich unbekanntes Netzwerk"
    )
    assert words_in("C", "zone_label('public')") == "Public"


def test_the_policy_carries_german_messages():
    with open(os.path.join(REPO, "nm_zones", "org.nm-zones.policy"), encoding="utf-8") as f:
        policy = f.read()
    english = policy.count("<message>")
    assert english >= 2 and policy.count('<message xml:lang="de">') == english
