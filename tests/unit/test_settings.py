"""Settings: defaults, SHOAL_* overrides, bounds with messages that name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.drivers.sim import worlds
from shoal.settings import Settings, SettingsError


def test_defaults_are_the_embedded_setup(tmp_path: Path) -> None:
    s = Settings.from_env(env={"SHOAL_DATA_DIR": str(tmp_path)})
    assert s.db_url == f"sqlite:///{tmp_path / 'shoal.db'}"
    assert (
        worlds.first_db_url(s) == f"sqlite:///{tmp_path / 'sim.db'}"
    )  # the cloud has its own file
    assert (s.host, s.port, s.driver, s.conductor, s.quota_clusters) == (
        "127.0.0.1",
        9511,
        "sim",
        True,
        20,
    )


def test_env_overrides_nested_trees() -> None:
    s = Settings.from_env(
        env={
            "SHOAL_PORT": "9999",
            "SHOAL_CONDUCTOR": "false",
            "SHOAL_SIM_TIME_SCALE": "100",
            "SHOAL_CONDUCTOR_WORKERS": "4",
            "SHOAL_DATABASE_URL": "postgresql://postgres@127.0.0.1/x",
        }
    )
    assert s.port == 9999 and s.conductor is False
    assert s.driver_defaults["sim"].time_scale == 100.0 and s.conductor_settings.workers == 4
    assert s.db_url == "postgresql://postgres@127.0.0.1/x"
    assert worlds.first_db_url(s) == s.db_url  # on PostgreSQL the sim shares shoal's database


@pytest.mark.parametrize(("raw", "threads"), [(None, 8), ("1", 1), ("40", 40), ("256", 256)])
def test_api_threads_from_the_environment(raw: str | None, threads: int) -> None:
    env = {} if raw is None else {"SHOAL_API_THREADS": raw}
    assert Settings.from_env(env=env).api_threads == threads


def test_pool_limits_from_the_environment() -> None:
    env = {"SHOAL_DATABASE_POOL_MAX": "9", "SHOAL_SIM_DATABASE_POOL_MAX": "4"}
    s = Settings.from_env(env=env)
    assert s.database_pool_max == 9 and s.driver_defaults["sim"].database_pool_max == 4
    assert Settings.from_env(env={}).database_pool_max == 30


def test_keyword_overrides_win_over_env() -> None:
    s = Settings.from_env(env={"SHOAL_PORT": "9999"}, port=1234, sim={"seed": 7})
    assert s.port == 1234 and s.driver_defaults["sim"].seed == 7


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"SHOAL_PORT": "70000"}, "SHOAL_PORT"),
        ({"SHOAL_PORT": "abc"}, "SHOAL_PORT"),
        ({"SHOAL_CONDUCTOR": "maybe"}, "SHOAL_CONDUCTOR"),
        ({"SHOAL_CONDUCTOR_WORKERS": "0"}, "SHOAL_CONDUCTOR_WORKERS"),
        ({"SHOAL_SIM_JITTER": "2"}, "SHOAL_SIM_JITTER"),
        ({"SHOAL_API_THREADS": "0"}, r"SHOAL_API_THREADS=0 is out of bounds \[1, 256\]"),
        ({"SHOAL_API_THREADS": "257"}, r"SHOAL_API_THREADS=257 is out of bounds \[1, 256\]"),
        ({"SHOAL_API_THREADS": "four"}, "SHOAL_API_THREADS='four' is not a valid int"),
        ({"SHOAL_DATABASE_POOL_MAX": "0"}, r"SHOAL_DATABASE_POOL_MAX=0 is out of bounds"),
        ({"SHOAL_SIM_DATABASE_POOL_MAX": "0"}, "SHOAL_SIM_DATABASE_POOL_MAX"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        Settings.from_env(env=env)
