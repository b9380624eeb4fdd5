#!/usr/bin/env python3
"""The translations of the desktop programs and the polkit messages (gettext domain
`nm-zones`), kept current from the sources with GNU gettext's tools.

    python3 tools/translations.py update    # after changing a marked string or a .po file
    python3 tools/translations.py check     # exit 1, saying what is stale (tests run this)

Sources: every `_("...")` and `N_("...")` in nm_zones/desktop/, and the <description> and
<message> of po/org.nm-zones.policy.in. Made from them:
  po/nm-zones.pot                                  the template translators start from
  po/LANG.po                                       merged with the template (msgmerge)
  nm_zones/locale/LANG/LC_MESSAGES/nm-zones.mo     compiled catalogs the programs load
  nm_zones/org.nm-zones.policy                     the policy with every language's messages
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOMAIN = "nm-zones"
PO = os.path.join(REPO, "po")
TEMPLATE = os.path.join(PO, f"{DOMAIN}.pot")
POLICY_IN = os.path.join(PO, "org.nm-zones.policy.in")
POLICY = os.path.join(REPO, "nm_zones", "org.nm-zones.policy")
LOCALE = os.path.join(REPO, "nm_zones", "locale")
HEADER_DATES = re.compile(r'^"POT-Creation-Date: .*\\n"\n', re.MULTILINE)


def languages() -> list[str]:
    """The languages po/LINGUAS lists (msgfmt --xml reads the same file)."""
    with open(os.path.join(PO, "LINGUAS"), encoding="utf-8") as stream:
        return sorted(word for line in stream for word in line.split("#")[0].split())


def sources() -> list[str]:
    return sorted(os.path.relpath(path, REPO)
                  for path in glob.glob(os.path.join(REPO, "nm_zones", "desktop", "*.py")))


def run(*argv: str, cwd: str = REPO) -> None:
    subprocess.run(argv, check=True, cwd=cwd)


def template(target: str) -> None:
    """The .pot from the Python sources and the polkit policy, without its creation date
    (which would make every run a change)."""
    with tempfile.TemporaryDirectory() as tmp:
        python_pot, policy_pot = os.path.join(tmp, "py.pot"), os.path.join(tmp, "policy.pot")
        run("xgettext", "--language=Python", "--keyword=_", "--keyword=N_", "--from-code=UTF-8",
            "--add-comments=Translators:", f"--package-name={DOMAIN}", "--sort-by-file",
            "--add-location=file",
            "-o", python_pot, *sources())
        policy_copy = os.path.join(tmp, "org.nm-zones.policy")  # .policy: polkit's ITS rules
        with open(POLICY_IN, encoding="utf-8") as source, open(policy_copy, "w") as copy:
            copy.write(source.read())
        run("xgettext", "--from-code=UTF-8", "--add-location=file", "-o", policy_pot,
            policy_copy, cwd=tmp)
        run("msgcat", "--use-first", "-o", target, python_pot, policy_pot)
    with open(target, encoding="utf-8") as stream:
        text = HEADER_DATES.sub("", stream.read())
    text = text.replace(os.path.join(os.path.basename(tempfile.gettempdir()), ""), "")
    text = re.sub(r"#: (/\S+/)?org\.nm-zones\.policy", "#: po/org.nm-zones.policy.in", text)
    with open(target, "w", encoding="utf-8") as stream:
        stream.write(text)


def merged(language: str, pot: str, target: str) -> None:
    run("msgmerge", "--quiet", "--no-fuzzy-matching", "--sort-by-file", "--add-location=file",
        "-o", target,
        os.path.join(PO, f"{language}.po"), pot)
    with open(target, encoding="utf-8") as stream:
        text = HEADER_DATES.sub("", stream.read())
    with open(target, "w", encoding="utf-8") as stream:
        stream.write(text)


def compiled(language: str, po: str, target: str) -> None:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    run("msgfmt", "--check", "-o", target, po)


def policy(target: str) -> None:
    run("msgfmt", "--xml", f"--template={POLICY_IN}", "-d", PO, "-o", target)


def untranslated(po: str) -> str:
    """msgfmt's count of untranslated and fuzzy messages, or "" when there are none."""
    result = subprocess.run(["msgfmt", "--statistics", "-o", os.devnull, po],
                            capture_output=True, text=True, check=True)
    counts = result.stderr.strip()
    return counts if ("untranslated" in counts or "fuzzy" in counts) else ""


def mo_path(language: str) -> str:
    return os.path.join(LOCALE, language, "LC_MESSAGES", f"{DOMAIN}.mo")


def update() -> int:
    template(TEMPLATE)
    for language in languages():
        path = os.path.join(PO, f"{language}.po")
        with tempfile.NamedTemporaryFile(suffix=".po", delete=False) as tmp:
            pass
        merged(language, TEMPLATE, tmp.name)
        os.replace(tmp.name, path)
        compiled(language, path, mo_path(language))
        missing = untranslated(path)
        if missing:
            print(f"po/{language}.po: {missing}")
    policy(POLICY)
    return 0


def check() -> int:
    """Everything made from the sources is what `update` would make now."""
    stale = []
    with tempfile.TemporaryDirectory() as tmp:
        pot = os.path.join(tmp, "template.pot")
        template(pot)
        if read(pot) != read(TEMPLATE):
            stale.append("po/nm-zones.pot (a marked string changed)")
        for language in languages():
            po = os.path.join(tmp, f"{language}.po")
            merged(language, TEMPLATE, po)
            if read(po) != read(os.path.join(PO, f"{language}.po")):
                stale.append(f"po/{language}.po (not merged with the template)")
            missing = untranslated(os.path.join(PO, f"{language}.po"))
            if missing:
                stale.append(f"po/{language}.po ({missing})")
            mo = os.path.join(tmp, f"{language}.mo")
            compiled(language, os.path.join(PO, f"{language}.po"), mo)
            if not os.path.exists(mo_path(language)) or read(mo, binary=True) != read(
                mo_path(language), binary=True
            ):
                stale.append(os.path.relpath(mo_path(language), REPO))
        made = os.path.join(tmp, "policy")
        policy(made)
        if read(made) != read(POLICY):
            stale.append("nm_zones/org.nm-zones.policy")
    for item in stale:
        print(f"stale: {item}")
    if stale:
        print("run: python3 tools/translations.py update")
    return 1 if stale else 0


def read(path: str, binary: bool = False):
    with open(path, "rb" if binary else "r", **({} if binary else {"encoding": "utf-8"})) as f:
        return f.read()


def main(argv: list[str]) -> int:
    if argv[1:] == ["update"]:
        return update()
    if argv[1:] == ["check"]:
        return check()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
