"""The Debian mirror and suites of this machine, read from its own apt sources.

The harness fetches the `kubernetes` source package through a private deb-src
list; that list repeats the machine's `deb` entries (same URIs, suites,
components and keyring) as `deb-src`, so no mirror host is written in code and
the system's apt configuration stays untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SOURCES_LIST = Path("/etc/apt/sources.list")
SOURCES_PARTS = Path("/etc/apt/sources.list.d")


@dataclass(frozen=True)
class AptSource:
    uri: str
    suite: str
    components: tuple[str, ...]
    signed_by: str = ""

    def deb_src_line(self) -> str:
        opts = f" [signed-by={self.signed_by}]" if self.signed_by else ""
        return f"deb-src{opts} {self.uri} {self.suite} {' '.join(self.components)}"


def parse_one_line(text: str) -> list[AptSource]:
    """The `deb` entries of a one-line-style sources.list."""
    found: list[AptSource] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line.startswith("deb "):
            continue
        rest = line[len("deb ") :].strip()
        signed_by = ""
        if rest.startswith("["):
            opts, _, rest = rest[1:].partition("]")
            for opt in opts.split():
                key, _, value = opt.partition("=")
                if key == "signed-by":
                    signed_by = value
        words = rest.split()
        if len(words) < 3:  # a flat repository ("uri ./") has no suite to fetch from
            continue
        found.append(AptSource(words[0], words[1], tuple(words[2:]), signed_by))
    return found


def parse_deb822(text: str) -> list[AptSource]:
    """The `deb` entries of a deb822 .sources file (stanzas split by blank lines)."""
    found: list[AptSource] = []
    for stanza in _stanzas(text):
        if stanza.get("enabled", "yes").lower() == "no":
            continue
        if "deb" not in stanza.get("types", "").split():
            continue
        comps = tuple(stanza.get("components", "").split())
        if not comps:
            continue
        for uri in stanza.get("uris", "").split():
            for suite in stanza.get("suites", "").split():
                found.append(AptSource(uri, suite, comps, stanza.get("signed-by", "")))
    return found


def _stanzas(text: str) -> list[dict[str, str]]:
    stanzas: list[dict[str, str]] = []
    current: dict[str, str] = {}
    key = ""
    for raw in text.splitlines() + [""]:
        if raw.lstrip().startswith("#"):
            continue
        if not raw.strip():
            if current:
                stanzas.append(current)
            current, key = {}, ""
            continue
        if raw[0] in " \t" and key:  # a continuation line
            current[key] += " " + raw.strip()
            continue
        name, sep, value = raw.partition(":")
        if sep:
            key = name.strip().lower()
            current[key] = value.strip()
    return stanzas


def deb_src_list(sources: list[AptSource], codename: str) -> str:
    """A private deb-src list for `codename` (its main suite and its -updates/-security
    suites), or "" when the machine has no `deb` entry for it."""
    lines = [
        s.deb_src_line()
        for s in sources
        if s.suite == codename or s.suite.startswith(codename + "-")
    ]
    return "\n".join(dict.fromkeys(lines)) + "\n" if lines else ""


def machine_sources() -> list[AptSource]:
    """Every `deb` entry of this machine's apt configuration."""
    found: list[AptSource] = []
    if SOURCES_LIST.is_file():
        found += parse_one_line(SOURCES_LIST.read_text())
    if SOURCES_PARTS.is_dir():
        for path in sorted(SOURCES_PARTS.iterdir()):
            if path.suffix == ".list":
                found += parse_one_line(path.read_text())
            elif path.suffix == ".sources":
                found += parse_deb822(path.read_text())
    return found


def os_codename(os_release: Path = Path("/etc/os-release")) -> str:
    for line in os_release.read_text().splitlines() if os_release.is_file() else []:
        key, _, value = line.partition("=")
        if key == "VERSION_CODENAME":
            return value.strip().strip('"')
    return ""
