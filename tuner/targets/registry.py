"""The target kinds, listed once: ``kind`` → (settings model, target class).

The study file's ``[target]`` table is validated by the model of its ``kind`` (tuner/study/load.py),
its JSON Schema is the union of these models, and ``make_target`` builds the target through the
model's own method.
"""

from __future__ import annotations

from tuner.targets.base import Target
from tuner.targets.local import LocalTarget
from tuner.targets.local_settings import LocalTargetSettings
from tuner.targets.settings import TargetSettings
from tuner.targets.simulated import SimulatedTarget, SimulatedTargetSettings
from tuner.targets.systemd_ssh import SystemdSshTarget
from tuner.targets.systemd_ssh_settings import SystemdSshTargetSettings

TARGETS: dict[str, tuple[type[TargetSettings], type[Target]]] = {
    settings.kind_name(): (settings, target)
    for settings, target in (
        (SimulatedTargetSettings, SimulatedTarget),
        (LocalTargetSettings, LocalTarget),
        (SystemdSshTargetSettings, SystemdSshTarget),
    )
}
#: The kinds, in the order docs and error messages list them.
TARGET_KINDS: tuple[str, ...] = tuple(TARGETS)


def settings_model(kind: str) -> type[TargetSettings]:
    return TARGETS[kind][0]
