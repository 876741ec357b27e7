"""The domain XML template renderer: placeholders filled from attributes, unused
attributes ignored, missing ones empty, and what is not domain XML refused with its line."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from shoal.domain import xmlrender
from shoal.domain.xmlrender import TemplateError

TEMPLATE = """<domain type='kvm'>
  <name>vm-{id}</name>
  <memory unit='GiB'>{ram}</memory>
  <vcpu>{cpu}</vcpu>
  <description>{new_value}</description>
  <os><type>hvm</type></os>
</domain>
"""
SEED = {"id": 0, "cpu": 2, "ram": 4, "new_value": "example"}


def test_the_seeds_example_renders_into_the_domain() -> None:
    root = ET.fromstring(xmlrender.render(TEMPLATE, SEED))
    assert root.findtext("name") == "vm-0"
    assert (root.findtext("vcpu"), root.findtext("memory")) == ("2", "4")
    assert root.findtext("description") == "example"


def test_an_attribute_the_template_does_not_use_changes_nothing() -> None:
    plain = xmlrender.render(TEMPLATE, SEED)
    assert xmlrender.render(TEMPLATE, {**SEED, "disk": 40, "gpu": {"model": "x"}}) == plain


def test_a_placeholder_with_no_attribute_renders_empty() -> None:
    out = xmlrender.render(TEMPLATE, {k: v for k, v in SEED.items() if k != "new_value"})
    assert ET.fromstring(out).findtext("description") == ""
    assert "<description></description>" in out
    none = xmlrender.render(TEMPLATE, {**SEED, "new_value": None})
    assert "<description></description>" in none


def test_values_are_escaped_unless_they_are_fragments() -> None:
    out = xmlrender.render(TEMPLATE, {**SEED, "new_value": "<b>&'\""})
    assert ET.fromstring(out).findtext("description") == "<b>&'\""
    frag = TEMPLATE.replace("{new_value}", "{extra}")
    out = xmlrender.render(frag, {**SEED, "extra": "<x>1</x>"}, fragments={"extra"})
    assert ET.fromstring(out).findtext("description/x") == "1"


def test_values_of_every_json_type() -> None:
    out = xmlrender.render(TEMPLATE, {**SEED, "new_value": [1, {"a": True}]})
    assert ET.fromstring(out).findtext("description") == '[1, {"a": true}]'
    out = xmlrender.render(TEMPLATE, {**SEED, "new_value": False})
    assert "<description>false</description>" in out
    with pytest.raises(TemplateError, match="<vcpu> must be a positive whole number, not '2.0'"):
        xmlrender.render(TEMPLATE, {**SEED, "cpu": 2.0})


def test_braces_that_are_not_placeholders_stay() -> None:
    tpl = TEMPLATE.replace("{new_value}", "{ not one } {1x} {}")
    assert "<description>{ not one } {1x} {}</description>" in xmlrender.render(tpl, SEED)
    assert xmlrender.placeholders(TEMPLATE) == ["id", "ram", "cpu", "new_value"]


@pytest.mark.parametrize(
    ("template", "attrs", "line", "says"),
    [
        (TEMPLATE, {**SEED, "cpu": ""}, 4, "<vcpu> must be a positive whole number, not ''"),
        (TEMPLATE, {"id": 1, "cpu": 1}, 3, "<memory> must be a positive whole number"),
        (TEMPLATE, {**SEED, "cpu": "two"}, 4, "not 'two'"),
        (TEMPLATE.replace("</vcpu>", "</vcpus>"), SEED, 4, "not well-formed XML (mismatched tag)"),
        (TEMPLATE.replace("type='kvm'", "type='{kind}'"), SEED, 1, "<domain type=''>"),
        (TEMPLATE.replace("<name>vm-{id}</name>", "<name>{nm}</name>"), SEED, 2, "<name>"),
        (TEMPLATE.replace("<os><type>hvm</type></os>", ""), SEED, 1, "needs an <os>"),
        ("<network><name>x</name></network>", {}, 1, "root element is <network>"),
        ("", {}, 1, "the template is empty"),
    ],
)
def test_what_is_not_domain_xml_is_refused_with_its_line(
    template: str, attrs: dict[str, object], line: int, says: str
) -> None:
    with pytest.raises(TemplateError) as err:
        xmlrender.render(template, attrs)
    assert err.value.line == line
    assert str(err.value).startswith(f"line {line}: ")
    assert says in str(err.value)


def test_the_failed_line_is_quoted() -> None:
    with pytest.raises(TemplateError) as err:
        xmlrender.render(TEMPLATE, {**SEED, "cpu": 0})
    assert str(err.value).endswith(": <vcpu>0</vcpu>")
