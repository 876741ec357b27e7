"""Providers from the config file (SHOAL_CONFIG): every mistake is one message that
names the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.drivers.openstack.settings import OpenStackSettings
from shoal.drivers.sim import worlds
from shoal.drivers.sim.settings import SimSettings
from shoal.settings import Settings, SettingsError


def _settings(tmp_path: Path, text: str, **env: str) -> Settings:
    path = tmp_path / "shoal.yaml"
    path.write_text(text)
    return Settings.from_env(
        env={"SHOAL_CONFIG": str(path), "SHOAL_DATA_DIR": str(tmp_path), **env}
    )


def test_no_file_is_the_sim_and_its_vms_on_virt_hosts(tmp_path: Path) -> None:
    s = Settings.from_env(env={"SHOAL_DATA_DIR": str(tmp_path), "SHOAL_SIM_TIME_SCALE": "7"})
    assert [(p.name, p.driver) for p in s.providers] == [("sim", "sim"), ("vms", "sim")]
    assert s.default_provider == "sim"
    sim, vms = (p.options for p in s.providers)
    assert isinstance(sim, SimSettings) and sim.time_scale == 7.0 and not sim.hosted
    assert vms.hosted and vms.time_scale == 7.0


def test_two_sim_providers_keep_two_worlds(tmp_path: Path) -> None:
    s = _settings(
        tmp_path,
        """
default_provider: west
providers:
  - name: east
    driver: sim
    settings: {time_scale: 50, seed: 3}
    rate_per_s: 20
    concurrency: 8
  - name: west
    driver: sim
""",
        SHOAL_SIM_TIME_SCALE="10",
    )
    east, west = s.providers
    assert s.default_provider == "west"
    assert (east.options.time_scale, east.options.seed) == (50.0, 3)
    assert west.options.time_scale == 10.0  # SHOAL_SIM_* are the defaults of every sim
    assert (east.rate_per_s, east.concurrency, west.concurrency) == (20.0, 8, None)
    assert worlds.db_url(s, east) == f"sqlite:///{tmp_path / 'sim.db'}"
    assert worlds.db_url(s, west) == f"sqlite:///{tmp_path / 'sim-west.db'}"


def test_a_second_sim_world_on_postgresql_needs_its_own_url(tmp_path: Path) -> None:
    text = "providers:\n  - {name: a, driver: sim}\n  - {name: b, driver: sim}\n"
    s = _settings(tmp_path, text, SHOAL_DATABASE_URL="postgresql://postgres@127.0.0.1/x")
    assert worlds.db_url(s, s.providers[0]) == s.db_url
    with pytest.raises(SettingsError, match="'b' needs its own settings.database_url"):
        worlds.db_url(s, s.providers[1])


P0 = r"providers\[0\]"
A = "providers:\n  - {name: a, driver: sim"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("providers: [\n", r"shoal\.yaml: .* at line"),
        ("- a\n- b\n", r"shoal\.yaml: the file must be a mapping"),
        ("providers: []\n", r"shoal\.yaml: providers: a non-empty list"),
        ("provider: []\n", r"shoal\.yaml: unknown key 'provider'"),
        ("providers:\n  - {name: a, driver: nosuch}\n", P0 + r"\.driver='nosuch' is not a known"),
        (A + ", colour: red}\n", P0 + r": unknown key 'colour'"),
        ("providers:\n  - {name: A b, driver: sim}\n", P0 + r"\.name: 'A b' is not a provider"),
        (A + "}\n" + A[11:] + "}\n", r"providers\[1\]\.name: 'a' is named twice"),
        (A + ", settings: {time_scale: fast}}\n", P0 + r"\.settings\.time_scale: 'fast' is not"),
        (A + ", settings: {jitter: 3}}\n", P0 + r"\.settings\.jitter=3.0 is out of bounds"),
        (A + ", settings: {nope: 1}}\n", P0 + r"\.settings\.nope: not a setting of this"),
        (A + ", concurrency: 0}\n", P0 + r"\.concurrency=0 is out of bounds"),
        ("default_provider: b\n" + A + "}\n", r"default_provider: 'b' is none of \(a\)"),
    ],
)  # fmt: skip
def test_a_bad_file_is_one_message_naming_file_and_key(
    tmp_path: Path, text: str, says: str
) -> None:
    with pytest.raises(SettingsError, match=says) as err:
        _settings(tmp_path, text)
    assert "\n" not in str(err.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(SettingsError, match=f"SHOAL_CONFIG={missing}: cannot read it"):
        Settings.from_env(env={"SHOAL_CONFIG": str(missing)})


@pytest.mark.parametrize(
    ("driver", "says"),
    [
        ("nosuch", "SHOAL_DRIVER='nosuch' is not a known driver"),
        ("openstack", "SHOAL_DRIVER='openstack': the openstack driver needs its settings"),
    ],
)
def test_shoal_driver_names_what_is_wrong(driver: str, says: str) -> None:
    with pytest.raises(SettingsError, match=says):
        Settings.from_env(env={"SHOAL_DRIVER": driver})


LV = "providers:\n  - name: lv\n    driver: libvirt\n    settings:\n"
HOST = "      hosts:\n        - {name: h1, uri: 'qemu:///system', cores: 8, ram_mb: 16384}\n"


def test_a_libvirt_provider_with_hosts_flavors_and_images(tmp_path: Path) -> None:
    from shoal.drivers.libvirt.settings import LibvirtSettings

    s = _settings(
        tmp_path,
        LV
        + HOST
        + """        - name: h2
          uri: qemu+ssh://root@10.0.0.2/system
          cores: 32
          ram_mb: 131072
          disk_gb: 2000
      network: shoal
      pool: vms
      domain_type: qemu
      flavors: [{name: small, vcpus: 1, ram_mb: 512}]
      images:
        - {name: tiny, kernel: /srv/vmlinuz, initrd: /srv/initrd.gz, cmdline: "console=ttyS0"}
        - {name: debian, disk: debian-12.qcow2}
    concurrency_per_target: 4
""",
    )
    (p,) = s.providers
    lv = p.options
    assert isinstance(lv, LibvirtSettings) and p.concurrency_per_target == 4
    assert [(h.name, h.cores, h.disk_gb) for h in lv.hosts] == [("h1", 8, 0), ("h2", 32, 2000)]
    assert (lv.network, lv.pool, lv.domain_type) == ("shoal", "vms", "qemu")
    assert [f.name for f in lv.flavors] == ["small"]
    assert lv.images[0].kernel == "/srv/vmlinuz" and lv.images[1].disk == "debian-12.qcow2"


S0 = r"providers\[0\]\.settings"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (LV + "      network: n\n", S0 + r"\.hosts: at least one host is required"),
        (LV + "      hosts: {name: h1}\n", S0 + r"\.hosts: a list is expected"),
        (LV + "      hosts: [h1]\n", S0 + r"\.hosts\[0\]: a mapping is expected"),
        (LV + HOST.replace("cores: 8", "cores: many"), S0 + r"\.hosts\[0\]\.cores: 'many' is not"),
        (LV + HOST.replace("cores: 8", "cpus: 8"), S0 + r"\.hosts\[0\]\.cpus: not a setting here"),
        (LV + HOST.replace("cores: 8, ", ""), S0 + r"\.hosts\[0\]\.cores: the host's capacity"),
        (LV + HOST.replace("uri: 'qemu:///system', ", ""), S0 + r"\.hosts\[0\]\.uri: a libvirt"),
        (LV + HOST + HOST.replace("      hosts:\n", ""), S0 + r"\.hosts\[1\]\.name: 'h1' is named"),
        (LV + HOST + "      images: [{name: x}]\n", S0 + r"\.images\[0\]: an image needs"),
        (LV + HOST + "      domain_type: xen\n", S0 + r"\.domain_type: 'xen' is neither"),
        (
            LV + HOST + "      flavors: [{name: f, vcpus: 0}]\n",
            S0 + r"\.flavors\[0\]\.vcpus=0 is out",
        ),
    ],
)
def test_libvirt_settings_mistakes_name_the_key(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(SettingsError, match=r"shoal\.yaml: " + says):
        _settings(tmp_path, text)


OS = "providers:\n  - name: nova\n    driver: openstack\n"


def test_an_openstack_provider_is_a_clouds_yaml_entry_and_a_deployment(tmp_path: Path) -> None:
    s = _settings(
        tmp_path,
        OS + "    settings: {cloud: mycloud, deployment: prod-1, networks: [net-a, net-b],"
        " server_groups: false, clouds_yaml: /etc/c.yaml}\n",
    )
    (p,) = s.providers
    assert isinstance(p.options, OpenStackSettings)
    assert (p.options.cloud, p.options.deployment) == ("mycloud", "prod-1")
    assert p.options.networks == ("net-a", "net-b") and p.options.server_groups is False
    assert p.concurrency == OpenStackSettings.PROVIDER_CONCURRENCY  # the driver's default
    own = _settings(tmp_path, OS + "    concurrency: 4\n    settings: {cloud: c, deployment: d}\n")
    assert own.providers[0].concurrency == 4
    one = _settings(tmp_path, OS + "    settings: {cloud: c, deployment: d, networks: n}\n")
    assert one.providers[0].options.networks == ("n",)


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ("{deployment: d}", r"settings\.cloud: required: the clouds\.yaml entry"),
        ("{cloud: c}", r"settings\.deployment: required: a name for this shoal deployment"),
        ("{cloud: c, deployment: Prod}", r"settings\.deployment='Prod' does not match"),
        ("{cloud: c, deployment: d, networks: [1]}", r"settings\.networks: \[1\] is not a list"),
        ("{cloud: c, deployment: d, api_timeout: 0}", r"settings\.api_timeout=0.0 is out of"),
    ],
)
def test_an_openstack_provider_names_what_is_missing_or_wrong(
    tmp_path: Path, settings: str, says: str
) -> None:
    with pytest.raises(SettingsError, match=P0 + r"\." + says):
        _settings(tmp_path, OS + f"    settings: {settings}\n")


LOCAL = "providers:\n  - name: here\n    driver: local\n    settings:\n"


def test_a_local_provider_with_its_settings(tmp_path: Path) -> None:
    s = _settings(
        tmp_path,
        LOCAL + "      subnet: 10.9.0.0/24\n      kubernetes_bin: /opt/k/bin\n"
        "      preload: [{archive: /a.tar, names: ['k8s.gcr.io/pause:3.4']}]\n",
    )
    (p,) = s.providers
    assert (p.driver, p.options.subnet, p.options.kubernetes_bin) == (
        "local", "10.9.0.0/24", "/opt/k/bin",
    )  # fmt: skip
    assert p.options.preload[0].names == ("k8s.gcr.io/pause:3.4",)
    assert p.options.images == ("host",) and p.options.agents is True


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (LOCAL + "      bridge: Bad_Name\n", S0 + r"\.bridge: 'Bad_Name' is not an interface"),
        (LOCAL + "      subnet: 10.9.0.0/31\n", S0 + r"\.subnet: 10.9.0.0/31 must be an IPv4"),
        (LOCAL + "      subnet: nonsense\n", S0 + r"\.subnet: "),
        (LOCAL + "      state_dir: rel/dir\n", S0 + r"\.state_dir: 'rel/dir' must be an absolute"),
        (LOCAL + "      preload: [{names: [x]}]\n", S0 + r"\.preload\[0\]\.archive: a path"),
        (LOCAL + "      memory: 4\n", S0 + r"\.memory: not a setting"),
    ],
)
def test_local_settings_mistakes_name_the_key(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(SettingsError, match=r"shoal\.yaml: " + says):
        _settings(tmp_path, text)
