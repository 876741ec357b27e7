"""A node group's provider options: its own `provider_options`, and the labels its
provider's driver reads as options.

A cluster template's labels reach its clusters and their node groups (merge.py), so
a label a driver reads as an option chooses that option per cluster template (the
heat driver's `heat_template` sets its `template`). The group's own
`provider_options` win over a label. Which labels a driver reads, and which values an
option takes, are the driver's to say (`Capabilities.option_labels`,
`Capabilities.option_choices`); this module names no driver.

A provider option is chosen when its group is made: `provider_options` cannot be
changed, and neither can a label that sets an option (`changed_labels`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from shoal.domain.errors import Invalid


@dataclass(frozen=True)
class Offer:
    """What a provider says of its options: the labels it reads as options (label ->
    option) and the options with a closed set of values (option -> values)."""

    labels: Mapping[str, str] = field(default_factory=dict)
    choices: Mapping[str, Sequence[str]] = field(default_factory=dict)


def effective(
    own: Mapping[str, str], labels: Mapping[str, str], from_labels: Mapping[str, str]
) -> dict[str, str]:
    """The group's options: each label of `from_labels` (label -> option) the group
    has, as its option, then the group's own options over them."""
    out = {opt: labels[label] for label, opt in sorted(from_labels.items()) if label in labels}
    out.update(own)
    return out


def problems(
    own: Mapping[str, str], labels: Mapping[str, str], offer: Offer, provider: str
) -> list[tuple[str, str]]:
    """(field, message) for each option whose value is not one its provider offers,
    naming where the value came from and the values offered."""
    out: list[tuple[str, str]] = []
    for label, opt in sorted(offer.labels.items()):
        if opt not in own and label in labels:
            bad = _refusal(opt, labels[label], offer, provider, f"label {label}")
            out += [("labels", bad)] if bad else []
    for opt, value in sorted(own.items()):
        bad = _refusal(opt, value, offer, provider, "provider_options")
        out += [("provider_options", bad)] if bad else []
    return out


def _refusal(opt: str, value: str, offer: Offer, provider: str, source: str) -> str | None:
    known = offer.choices.get(opt)
    if known is None or value in known:
        return None
    return (
        f"{opt} {value!r} ({source}) is not one provider {provider!r} offers "
        f"(its {opt}s: {', '.join(known) or 'none'})"
    )


def check(
    own: Mapping[str, str],
    labels: Mapping[str, str],
    offer: Offer,
    provider: str,
    prefix: str = "",
) -> None:
    """Invalid (a 400) naming the first option value `provider` does not offer."""
    found = problems(own, labels, offer, provider)
    if found:
        field_name, message = found[0]
        raise Invalid(prefix + message, field_name)


def changed_labels(
    own: Mapping[str, str],
    before: Mapping[str, str],
    after: Mapping[str, str],
    from_labels: Mapping[str, str],
) -> list[str]:
    """The labels whose change would change an option the group was made with (a
    label its own `provider_options` override changes nothing)."""
    return [
        label
        for label, opt in sorted(from_labels.items())
        if opt not in own and before.get(label) != after.get(label)
    ]
