"""Render a libvirt domain XML template from a dict of attributes, and refuse what is
not domain XML afterwards. Pure: no I/O, no libvirt.

A template holds `{name}` placeholders (`<vcpu>{cpu}</vcpu>`). Each is filled from the
attributes: an attribute the template does not use is ignored, a placeholder with no
attribute (or a None value) renders empty. Values are XML-escaped, so an attribute
cannot inject elements; a caller that owns a value which *is* XML (the driver's
metadata, its disks) names it in `fragments`. Any other brace is left as it is.

After rendering, the text must be a libvirt domain: well-formed XML whose root is
`<domain type=...>` with a `<name>`, a positive `<memory>`, a positive `<vcpu>` when
present, and an `<os>`. Anything else raises `TemplateError` naming the line that
failed, so an operator who uploads a template learns where it broke.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any
from xml.parsers import expat
from xml.sax.saxutils import escape

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
DOMAIN_TYPES = ("kvm", "qemu", "test", "xen", "lxc", "hvf")


class TemplateError(ValueError):
    """The rendered template is not domain XML; `line` is where it failed (1-based)."""

    def __init__(self, line: int, message: str, text: str = "") -> None:
        shown = f": {text.strip()}" if text.strip() else ""
        super().__init__(f"line {line}: {message}{shown}")
        self.line = line
        self.message = message


def placeholders(template: str) -> list[str]:
    """The attribute names `template` uses, in order of first use."""
    return list(dict.fromkeys(PLACEHOLDER.findall(template)))


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return json.dumps(value, sort_keys=True)  # a list or mapping, as the JSON it came as


def render(template: str, attributes: Mapping[str, Any], fragments: Collection[str] = ()) -> str:
    """`template` with every `{name}` replaced by its attribute (escaped, unless `name` is
    in `fragments`); checked as domain XML (TemplateError with the line otherwise)."""

    def fill(m: re.Match[str]) -> str:
        name = m.group(1)
        text = _text(attributes.get(name))
        return text if name in fragments else escape(text, {"'": "&apos;", '"': "&quot;"})

    out = PLACEHOLDER.sub(fill, template)
    check_domain(out)
    return out


@dataclass
class _Element:
    tag: str
    attrs: dict[str, str]
    line: int
    text: list[str] = field(default_factory=list)
    children: list[_Element] = field(default_factory=list)

    def child(self, tag: str) -> _Element | None:
        return next((c for c in self.children if c.tag == tag), None)


def _parse(xml: str) -> _Element:
    """The element tree with the line of each start tag (expat knows it; ElementTree
    does not keep it)."""
    parser = expat.ParserCreate()
    stack: list[_Element] = []
    root: list[_Element] = []

    def start(tag: str, attrs: dict[str, str]) -> None:
        el = _Element(tag, attrs, parser.CurrentLineNumber)
        (stack[-1].children if stack else root).append(el)
        stack.append(el)

    def end(_tag: str) -> None:
        stack.pop()

    def data(text: str) -> None:
        if stack:
            stack[-1].text.append(text)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = data
    try:
        parser.Parse(xml, True)
    except expat.ExpatError as exc:
        line = exc.lineno or 1
        raise TemplateError(line, f"not well-formed XML ({expat.ErrorString(exc.code)})",
                            _line(xml, line)) from exc  # fmt: skip
    return root[0]


def _line(xml: str, line: int) -> str:
    lines = xml.splitlines()
    return lines[line - 1] if 0 < line <= len(lines) else ""


def check_domain(xml: str) -> None:
    """TemplateError (with the line) unless `xml` is a libvirt domain as described above."""
    if not xml.strip():
        raise TemplateError(1, "the template is empty")
    root = _parse(xml)

    def fail(el: _Element, message: str) -> TemplateError:
        return TemplateError(el.line, message, _line(xml, el.line))

    if root.tag != "domain":
        raise fail(root, f"the root element is <{root.tag}>, not <domain>")
    kind = root.attrs.get("type", "")
    if kind not in DOMAIN_TYPES:
        raise fail(root, f"<domain type={kind!r}> is not one of {', '.join(DOMAIN_TYPES)}")
    name = root.child("name")
    if name is None or not "".join(name.text).strip():
        raise fail(name or root, "the domain needs a non-empty <name>")
    for tag, required in (("memory", True), ("vcpu", False)):
        el = root.child(tag)
        if el is None:
            if required:
                raise fail(root, f"the domain needs a <{tag}>")
            continue
        value = "".join(el.text).strip()
        if not value.isdigit() or int(value) < 1:
            raise fail(el, f"<{tag}> must be a positive whole number, not {value!r}")
    if root.child("os") is None:
        raise fail(root, "the domain needs an <os>")
