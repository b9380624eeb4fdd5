"""Where nm-zones finds its configuration and keeps its state."""

from __future__ import annotations

import os
from dataclasses import dataclass

SHIPPED_DIR = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class Paths:
    """The three places nm-zones reads or writes; tests and the command line may move two."""

    shipped: str = SHIPPED_DIR
    config: str = "/etc/nm-zones"
    state: str = "/run/nm-zones"

    @classmethod
    def from_environment(cls) -> Paths:
        return cls(
            config=os.environ.get("NM_ZONES_CONFIG_DIR") or "/etc/nm-zones",
            state=os.environ.get("NM_ZONES_STATE_DIR") or "/run/nm-zones",
        )

    @property
    def disabled_flag(self) -> str:
        """Kept in the config dir, not the state dir, so that `disable` survives a reboot."""
        return os.path.join(self.config, "disabled")
