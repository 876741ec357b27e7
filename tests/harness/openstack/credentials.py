"""A Keystone v3 password login of the test cloud, as openstacksdk and clouds.yaml take it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import openstack
from openstack.connection import Connection

from tests.harness.openstack.configs import REGION


@dataclass(frozen=True)
class Credentials:
    """A Keystone v3 password login (what a clouds.yaml entry holds)."""

    auth_url: str
    username: str
    password: str
    project_name: str
    user_domain_name: str = "Default"
    project_domain_name: str = "Default"
    region_name: str = REGION

    def auth(self) -> dict[str, str]:
        return {
            "auth_url": self.auth_url,
            "username": self.username,
            "password": self.password,
            "project_name": self.project_name,
            "user_domain_name": self.user_domain_name,
            "project_domain_name": self.project_domain_name,
        }

    def cloud_entry(self) -> dict[str, Any]:
        """This login as one entry of clouds.yaml's `clouds:` mapping."""
        return {
            "auth_type": "password",
            "auth": self.auth(),
            "region_name": self.region_name,
            "identity_api_version": "3",
            "interface": "public",
        }

    def connect(self, **options: Any) -> Connection:
        """An openstacksdk connection; ignores OS_* variables and any clouds.yaml.

        Each HTTP request times out after `api_timeout` seconds (60 unless given)."""
        options.setdefault("api_timeout", 60)
        return openstack.connect(
            load_yaml_config=False,
            load_envvars=False,
            auth_type="password",
            auth=self.auth(),
            region_name=self.region_name,
            **options,
        )
