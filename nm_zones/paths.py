"""Where nm-zones finds its configuration and keeps its state."""

from __future__ import annotations

import os

SHIPPED_DIR = os.path.dirname(os.path.abspath(__file__))


class Paths:
    """The three places nm-zones reads or writes; tests and the command line may move two.

    A plain class, not a dataclass: this module is on the path of every event, and building
    a dataclass costs more than the rest of the module.
    """

    __slots__ = ("config", "data", "shipped", "state")

    def __init__(
        self,
        shipped: str = SHIPPED_DIR,
        config: str = "/etc/nm-zones",
        state: str = "/run/nm-zones",
        data: str = "/var/lib/nm-zones",
    ):
        self.shipped, self.config, self.state = shipped, config, state
        self.data = data  # what nm-zones learns and keeps across reboots (known networks)

    def __repr__(self) -> str:
        return (
            f"Paths(shipped={self.shipped!r}, config={self.config!r}, state={self.state!r}, "
            f"data={self.data!r})"
        )

    @classmethod
    def from_environment(cls) -> Paths:
        return cls(
            config=os.environ.get("NM_ZONES_CONFIG_DIR") or "/etc/nm-zones",
            state=os.environ.get("NM_ZONES_STATE_DIR") or "/run/nm-zones",
            data=os.environ.get("NM_ZONES_DATA_DIR") or "/var/lib/nm-zones",
        )

    @property
    def disabled_flag(self) -> str:
        """Kept in the config dir, not the state dir, so that `disable` survives a reboot."""
        return os.path.join(self.config, "disabled")

    @property
    def disabled(self) -> bool:
        """The flag counts only in a folder nobody but root can write: anyone who could
        plant it there could otherwise switch the firewall off."""
        try:
            os.lstat(self.disabled_flag)
            folder = os.stat(self.config)
        except OSError:
            return False
        return folder.st_uid in (0, os.geteuid()) and not folder.st_mode & 0o022

    @property
    def panic_flag(self) -> str:
        """Kept in the state dir (root's, refused by every run when others can write it):
        panic mode is a runtime emergency, gone after a reboot as firewalld's is."""
        return os.path.join(self.state, "panic")

    @property
    def panic(self) -> bool:
        """The flag counts whenever it is there: it can only make the firewall stricter."""
        return os.path.lexists(self.panic_flag)


def yaml_files(directory: str) -> dict[str, str]:
    """NAME -> path for NAME.yaml in a folder; hidden and backup files are ignored."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return {}
    except OSError:
        return {}
    return {
        name[: -len(".yaml")]: os.path.join(directory, name)
        for name in sorted(names)
        if name.endswith(".yaml") and not name.startswith(".")
    }


def stray_yml_files(paths: Paths) -> list[str]:
    """Admin files named NAME.yml, which nm-zones ignores (only NAME.yaml is read): for the
    commands that read the whole config to warn about, never for an event."""
    found = []
    for sub in ("zones.d", "services.d"):
        folder = os.path.join(paths.config, sub)
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        found += [os.path.join(folder, n) for n in names if n.endswith(".yml") and n[0] != "."]
    return found


def config_files(paths: Paths) -> list[str]:
    """Every file and folder whose change must invalidate the compiled-config cache."""
    result = [
        os.path.join(paths.config, "zones.d"),
        os.path.join(paths.config, "services.d"),
        os.path.join(paths.config, "connections-map.yaml"),
        os.path.join(paths.config, "nm-zones.yaml"),
        paths.config,
    ]
    for sub in ("zones.d", "services.d"):
        result += list(yaml_files(os.path.join(paths.config, sub)).values())
        result += list(yaml_files(os.path.join(paths.shipped, sub)).values())
    result.append(os.path.join(paths.shipped, "connections-map.yaml"))
    result.append(os.path.join(paths.shipped, "nm-zones.yaml"))
    return result


def config_fingerprint(paths: Paths) -> tuple:
    """The identity of every config file and folder (size, mtime, inode, mode, owner): it
    changes whenever anything the compiled config depends on may have changed."""
    entries = []
    for path in config_files(paths):
        try:
            info = os.stat(path)
            entries.append(
                (path, info.st_size, info.st_mtime_ns, info.st_ino, info.st_mode, info.st_uid)
            )
        except OSError:
            entries.append((path, None))
    return (os.geteuid() == 0, paths.shipped, paths.config, tuple(entries))


def code_identity(names: tuple[str, ...]) -> tuple:
    """(name, size, mtime) of nm-zones' own modules, by their paths in the package: what a
    cache built by that code is keyed on."""
    identity = []
    for name in names:
        try:
            info = os.stat(os.path.join(SHIPPED_DIR, name))
            identity.append((name, info.st_size, info.st_mtime_ns))
        except OSError:
            identity.append((name, None))
    return tuple(identity)
