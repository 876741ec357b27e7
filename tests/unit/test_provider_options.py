"""A node group's provider options (domain/provider_options.py): its own over the labels
its driver reads as options; the values a provider offers; labels that cannot change."""

from __future__ import annotations

import pytest

from shoal.domain import provider_options as po
from shoal.domain.errors import Invalid

READS = {"heat_template": "template"}
OFFER = po.Offer(READS, {"template": ("default", "gpu")})


@pytest.mark.parametrize(
    ("own", "labels", "want"),
    [
        ({}, {}, {}),
        ({}, {"heat_template": "gpu"}, {"template": "gpu"}),  # a cluster template's label
        ({"template": "default"}, {"heat_template": "gpu"}, {"template": "default"}),  # own wins
        ({"config_drive": "true"}, {"heat_template": "gpu"},
         {"template": "gpu", "config_drive": "true"}),
        ({}, {"kube_tag": "v1.20.2", "template": "gpu"}, {}),  # only labels the driver reads
    ],
)  # fmt: skip
def test_effective(own: dict[str, str], labels: dict[str, str], want: dict[str, str]) -> None:
    assert po.effective(own, labels, READS) == want


def test_a_driver_that_reads_no_label_gets_the_groups_own_options() -> None:
    assert po.effective({"a": "1"}, {"heat_template": "gpu"}, {}) == {"a": "1"}


@pytest.mark.parametrize(
    ("own", "labels", "want"),
    [
        ({}, {}, []),
        ({}, {"heat_template": "gpu"}, []),
        ({"template": "default"}, {}, []),
        ({}, {"heat_template": "gpux"},
         [("labels", "template 'gpux' (label heat_template) is not one provider 'east' "
                     "offers (its templates: default, gpu)")]),
        ({"template": "nope"}, {},
         [("provider_options", "template 'nope' (provider_options) is not one provider "
                               "'east' offers (its templates: default, gpu)")]),
        # the group's own option wins, so a bad label it overrides is no problem
        ({"template": "gpu"}, {"heat_template": "gpux"}, []),
        ({"other": "x"}, {}, []),  # no closed set: the driver's validate judges it
    ],
)  # fmt: skip
def test_problems(own: dict[str, str], labels: dict[str, str], want: list[tuple[str, str]]) -> None:
    assert po.problems(own, labels, OFFER, "east") == want


def test_check_raises_the_first_problem_with_its_field_and_prefix() -> None:
    with pytest.raises(Invalid) as err:
        po.check({}, {"heat_template": "gpux"}, OFFER, "east", "node group w: ")
    assert str(err.value).startswith("node group w: template 'gpux' (label heat_template)")
    assert "default, gpu" in str(err.value)
    po.check({}, {"heat_template": "gpu"}, OFFER, "east")  # offered: no error


@pytest.mark.parametrize(
    ("own", "before", "after", "want"),
    [
        ({}, {"heat_template": "gpu"}, {"heat_template": "gpu", "x": "1"}, []),
        ({}, {"heat_template": "gpu"}, {"heat_template": "default"}, ["heat_template"]),
        ({}, {}, {"heat_template": "gpu"}, ["heat_template"]),  # added
        ({}, {"heat_template": "gpu"}, {}, ["heat_template"]),  # removed
        ({"template": "gpu"}, {"heat_template": "gpu"}, {}, []),  # own option: label moot
    ],
)  # fmt: skip
def test_changed_labels(
    own: dict[str, str], before: dict[str, str], after: dict[str, str], want: list[str]
) -> None:
    assert po.changed_labels(own, before, after, READS) == want
