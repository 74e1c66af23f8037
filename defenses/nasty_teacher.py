"""Nasty teacher: the victim is trained by self-undermining distillation, so its soft answers teach badly.

Paper: Ma et al. "Undistillable: Making A Nasty Teacher That CANNOT Teach Students", ICLR 2021, Eq. 2 (Li et al.
§5.1.2 (4)): the victim minimises cross-entropy on its labels minus omega * tau^2 * KL(softmax(victim / tau) ||
softmax(adversary / tau)), where the adversary is a normally trained network of the same architecture; the API
then answers the victim's plain softmax.
Threat model: the adversary queries the API and sees the nasty victim's probability vectors; it knows tau and
omega, not the victim's weights.

Deviation: the encoder is frozen offline, so only the victim's MLP head is trained this way, against a normally
trained head on the same frozen features (``bench.models.api.nasty_head``); the paper trains whole networks.
Defaults tau = 4, omega = 0.004: Ma et al.'s CIFAR-10 setting (their fewest-class data set); Li et al. and He et
al. state no values in the text available offline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench import OutputDefense, register_defense, require, within
from bench.privacy.public import SelfUndermining


@register_defense("nasty-teacher")
@dataclass
class NastyTeacher(OutputDefense):
    """Train the victim with the self-undermining objective; answer its softmax."""

    version: ClassVar[str] = "1"

    tau: float = within(4.0, "[1e-3, 1e3]")  # temperature of the KL term, > 0
    omega: float = within(0.004, "[0, 1]")  # weight of the KL term, >= 0 (0 = a normally trained victim)

    def __post_init__(self) -> None:
        require(self.tau > 0, f"nasty-teacher tau must be > 0, got {self.tau}.")
        require(self.omega >= 0, f"nasty-teacher omega must be >= 0, got {self.omega}.")

    def distillation(self):
        """The self-undermining objective with this defense's tau and omega."""
        return SelfUndermining(self.tau, self.omega)
