"""The heat driver's templates by name (drivers/heat/templates.py, settings.py): how a
group's template is chosen, which names an operator may give, what the stack records,
and a provider's settings refused when one of its templates breaks the contract."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shoal.drivers.contract import MachineSpec
from shoal.drivers.heat import templates
from shoal.drivers.heat.driver import HeatDriver
from shoal.drivers.heat.settings import HeatSettings
from shoal.settings import Settings, SettingsError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "docs" / "examples" / "heat-group.yaml")


@pytest.mark.parametrize(
    ("options", "want"),
    [
        ({}, "default"),
        ({"template": "gpu"}, "gpu"),
        ({"template": ""}, "default"),
        ({"other": "x"}, "default"),
    ],
)
def test_the_template_a_groups_options_choose(options: dict[str, str], want: str) -> None:
    assert templates.chosen(options) == want


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("gpu", None),
        ("gpu-2_ssd", None),
        ("7rack", None),
        ("default", "'default' is the provider's own template"),
        ("GPU", "'GPU' is not a template name"),
        ("-gpu", "is not a template name"),
        ("a" * 41, "is not a template name"),
        ("a b", "is not a template name"),
    ],
)
def test_template_names(name: str, says: str | None) -> None:
    why = templates.name_problem(name)
    assert (why is None) if says is None else (why is not None and says in why)


@pytest.mark.parametrize(
    ("tags", "want"),
    [
        (None, "default"),  # a stack made before templates had names
        ([], "default"),
        (["shoal-deployment=d", "shoal-template=gpu"], "gpu"),
        ("shoal-deployment=d,shoal-template=gpu", "gpu"),  # Heat's comma-separated form
        (["shoal-templates=x"], "default"),
    ],
)
def test_the_template_a_stack_was_made_from(tags: list[str] | str | None, want: str) -> None:
    assert templates.made_from(tags) == want


def test_an_unknown_template_names_the_known_ones() -> None:
    assert templates.unknown("gpu", ("default", "gpu")) is None
    why = templates.unknown("gpux", ("default", "gpu"))
    assert why is not None and "'gpux'" in why and "(default, gpu)" in why


def _lacking(tmp_path: Path, what: str) -> str:
    """A template without the contract's parameter or output `what`."""
    body = yaml.safe_load(Path(EXAMPLE).read_text())
    body["parameters"].pop(what, None)
    body["outputs"].pop(what, None)
    path = tmp_path / f"no-{what}.yaml"
    path.write_text(yaml.safe_dump(body))
    return str(path)


@pytest.mark.parametrize(
    ("named", "says"),
    [
        ({"gpu": "EXAMPLE"}, []),
        ({"gpu": "EXAMPLE", "ssd": "EXAMPLE"}, []),
        ({"gpu": "no-members"}, ["templates.gpu: ", "it lacks parameter 'members'"]),
        ({"gpu": "no-refs_map"}, ["templates.gpu: ", "it lacks output 'refs_map'"]),
        ({"ok": "EXAMPLE", "bad": "no-count"}, ["templates.bad: ", "parameter 'count'"]),
        ({"gpu": "missing"}, ["templates.gpu: cannot read"]),
        ({"default": "EXAMPLE"}, ["templates.default: 'default' is the provider's own"]),
        ({"Big": "EXAMPLE"}, ["templates.Big: 'Big' is not a template name"]),
    ],
)
def test_settings_check_each_named_template(
    tmp_path: Path, named: dict[str, str], says: list[str]
) -> None:
    paths = {
        "EXAMPLE": EXAMPLE,
        "missing": str(tmp_path / "nowhere.yaml"),
        **{f"no-{w}": _lacking(tmp_path, w) for w in ("members", "refs_map", "count")},
    }
    s = HeatSettings(cloud="c", deployment="d", templates={k: paths[v] for k, v in named.items()})
    problems = s.problems()
    if says:
        assert len(problems) == 1 and all(part in problems[0] for part in says), problems
    else:
        assert problems == []


HEAT = "providers:\n  - name: east\n    driver: heat\n    settings:\n"


def _file_settings(tmp_path: Path, settings: str) -> Settings:
    path = tmp_path / "shoal.yaml"
    path.write_text(HEAT + settings)
    return Settings.from_env(env={"SHOAL_CONFIG": str(path), "SHOAL_DATA_DIR": str(tmp_path)})


def test_a_config_file_names_templates_and_a_bad_one_refuses_it(tmp_path: Path) -> None:
    base = "      cloud: c\n      deployment: d\n      templates:\n"
    ok = _file_settings(tmp_path, base + f"        gpu: {EXAMPLE}\n")
    options = ok.providers[0].options
    assert isinstance(options, HeatSettings)
    assert options.template_paths() == {"default": None, "gpu": EXAMPLE}
    bad = _lacking(tmp_path, "members")
    with pytest.raises(SettingsError) as err:
        _file_settings(tmp_path, base + f"        gpu: {EXAMPLE}\n        ssd: {bad}\n")
    said = str(err.value)
    assert "providers[0].settings.templates.ssd: " in said and "parameter 'members'" in said
    with pytest.raises(SettingsError, match=r"settings\.templates: .* not a mapping of names"):
        _file_settings(tmp_path, base.replace("templates:\n", "templates: [a, b]\n"))


def _spec(**options: str) -> MachineSpec:
    return MachineSpec("m", "n", "p", "c", "g", "worker", "f", "i", options=options)


def test_the_driver_offers_its_templates_and_refuses_another() -> None:
    """What the conductor records for the API (capabilities) and what `validate` says, with
    no cloud call."""
    settings = HeatSettings(cloud="c", deployment="d", templates={"gpu": EXAMPLE})
    driver = HeatDriver(settings, cloud=None)  # type: ignore[arg-type]  # no call is made
    caps = driver.capabilities()
    assert caps.option_choices == {"template": ("default", "gpu")}
    assert caps.option_labels == {"heat_template": "template"}
    assert driver.group_templates["gpu"]["resources"]["site"]["type"] == "OS::Heat::Value"
    assert driver.group_templates["default"] is templates.GROUP
    assert driver.validate(_spec()) == []
    assert driver.validate(_spec(template="gpu")) == []
    (why,) = driver.validate(_spec(template="gpux"))
    assert "'gpux'" in why and "(default, gpu)" in why
    (why,) = driver.validate(_spec(flavour="x"))
    assert why == "option 'flavour' is not known to the heat driver (options: template)"


def _attrs(value: object) -> list[list[str]]:
    """Every `get_attr` argument in a template value."""
    if isinstance(value, dict):
        found = [value["get_attr"]] if "get_attr" in value else []
        return found + [a for v in value.values() for a in _attrs(v)]
    if isinstance(value, list):
        return [a for v in value for a in _attrs(v)]
    return []


def test_no_built_in_output_asks_heat_for_a_servers_attribute() -> None:
    """An output naming a server's attribute costs Heat a Nova call per member at each
    traversal; shoal reads what it needs from Nova's listing."""
    entry = {"name": "n", "image": "i", "flavor": "f", "id": "m"}
    members = yaml.safe_load(templates.members_file({"0": entry, "1": {**entry, "id": "p"}}))
    assert _attrs(members["outputs"]) == []
    assert members["outputs"]["refs_map"]["value"] == {"0": {"get_resource": "0"},
                                                      "1": {"get_resource": "1"}}  # fmt: skip
    assert _attrs(templates.GROUP["outputs"]) == [[templates.GROUP_RESOURCE, "refs_map"]]
