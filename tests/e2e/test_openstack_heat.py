"""Heat in the OpenStack test cloud (tests/harness/openstack, `start_heat`): a stack
of one OS::Nova::Server is created through the catalog's `orchestration` endpoint,
its server is a real Nova server with its output's address, and deleting the stack
deletes the server."""

from __future__ import annotations

import uuid

import pytest
from openstack.connection import Connection

from tests.harness.openstack.cloud import OpenStackCloud
from tests.support.openstack_cloud import OPENSTACK_MARKS
from tests.support.waiting import until

pytestmark = [
    *OPENSTACK_MARKS,
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning:openstack"),
]


def one_server(image: str, flavor: str, name: str) -> dict[str, object]:
    return {
        "heat_template_version": "2018-08-31",
        "resources": {
            "server": {
                "type": "OS::Nova::Server",
                "properties": {
                    "name": name,
                    "image": image,
                    "flavor": flavor,
                    "networks": [{"allocate_network": "auto"}],
                },
            }
        },
        "outputs": {
            "id": {"value": {"get_resource": "server"}},
            "address": {"value": {"get_attr": ["server", "first_address"]}},
        },
    }


def test_a_stack_of_one_server_is_created_and_deleted(openstack_heat: OpenStackCloud) -> None:
    cloud = openstack_heat
    conn: Connection = cloud.connection("demo")
    catalog = conn.session.auth.get_access(conn.session).service_catalog
    assert catalog.url_for(service_type="orchestration", interface="public").startswith(
        cloud.endpoints["orchestration"] + "/v1/"
    )
    name = f"smoke-{uuid.uuid4().hex[:8]}"
    stack = conn.orchestration.create_stack(
        name=name, template=one_server(cloud.image_name, cloud.flavor_small.name, name)
    )

    def status() -> str:
        found = conn.orchestration.find_stack(stack.id)
        return str(found.status) if found is not None else "GONE"

    until(lambda: "PROGRESS" not in status(), progress=status, what="the stack to settle")
    done = conn.orchestration.get_stack(stack.id)
    assert done.status == "CREATE_COMPLETE", done.status_reason
    outputs = {o["output_key"]: o["output_value"] for o in done.outputs}
    server = conn.compute.get_server(outputs["id"])
    assert server.name == name and server.status == "ACTIVE"
    assert outputs["address"] and outputs["address"].startswith("192.168.")

    conn.orchestration.delete_stack(stack.id)
    until(lambda: status() in ("GONE", "DELETE_COMPLETE"), progress=status, what="the stack to go")
    assert conn.compute.find_server(outputs["id"]) is None
    conn.close()
