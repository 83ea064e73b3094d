"""The health check's configuration, ``/etc/rackgate/healthcheck.yaml``, validated strictly:
an unknown key, a wrong type or a name outside its pattern is refused with the file, the key
and the value, because a typo must not silently switch an item off.

The slurm role writes it (``to_nice_yaml``) from the inventory; every key is required:

    node_name: gpu001            # the node's SLURM NodeName
    textfile_dir: /var/lib/prometheus/node-exporter
    slurmd_unit: slurmd.service  # whose MainPID's limits memlock reads
    gpus: 8                      # expected GPUs; 0: the three GPU items are skipped
    gpu_ecc: true                # volatile uncorrectable ECC errors must be 0
    gpu_xid: true                # no XID since boot except those allowed
    xid_allowed: [13, 31, 43, 45]
    ib_ports: [{device: mlx5_0, port: 1, rate_gbps: 400}]
    mounts: [{path: /scratch, fstype: lustre}]
    memlock_min: unlimited       # or a number of bytes; null skips the item
    units: [munge.service]
    failed_units_allowed: []

>>> c = load_config(EXAMPLE, "example")
>>> c.node_name, c.ib_ports[0].rate_gbps, c.memlock_min
('gpu001', 400.0, -1)
>>> load_config(EXAMPLE.replace("gpus: 8", "gpus: true"), "x")
Traceback (most recent call last):
...
rackgate.health.config.ConfigError: x: gpus: expected a whole number >= 0 and <= 64, got True
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from rackgate.documents import DocumentError, load_yaml

NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
PATH = re.compile(r"/[A-Za-z0-9._/+@:-]*\Z")  # absolute, plain characters
DEVICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")  # an RDMA device (mlx5_0, ibp3s0)
FSTYPE = re.compile(r"[a-z0-9][a-z0-9_.]{0,31}\Z")  # nfs4, lustre, fuse.gpfs, tmpfs
UNIT = re.compile(r"[A-Za-z0-9][A-Za-z0-9:_.@\\-]{0,127}\.(service|mount|socket|target|timer|"
                  r"path|device|swap|scope|slice)\Z")
UNLIMITED = -1  # memlock_min "unlimited"
KEYS = ("node_name", "textfile_dir", "slurmd_unit", "gpus", "gpu_ecc", "gpu_xid",
        "xid_allowed", "ib_ports", "mounts", "memlock_min", "units", "failed_units_allowed")
EXAMPLE = """\
node_name: gpu001
textfile_dir: /var/lib/prometheus/node-exporter
slurmd_unit: slurmd.service
gpus: 8
gpu_ecc: true
gpu_xid: true
xid_allowed: [13, 31, 43, 45]
ib_ports: [{device: mlx5_0, port: 1, rate_gbps: 400}]
mounts: [{path: /scratch, fstype: lustre}]
memlock_min: unlimited
units: [munge.service]
failed_units_allowed: []
"""


class ConfigError(ValueError):
    """The configuration was refused; the message names the file, the key and the value."""


@dataclass(frozen=True)
class IbPort:
    """A port expected ACTIVE at ``rate_gbps`` (sysfs ``rate``: "400 Gb/sec (4X NDR)")."""

    device: str
    port: int
    rate_gbps: float


@dataclass(frozen=True)
class Mount:
    """A mount point that must be mounted with this file system type."""

    path: str
    fstype: str


@dataclass(frozen=True)
class HealthConfig:
    node_name: str
    textfile_dir: str
    slurmd_unit: str
    gpus: int
    gpu_ecc: bool
    gpu_xid: bool
    xid_allowed: frozenset[int]
    ib_ports: tuple[IbPort, ...]
    mounts: tuple[Mount, ...]
    memlock_min: int | None  # bytes; UNLIMITED (-1) for "unlimited"; None: not checked
    units: tuple[str, ...]
    failed_units_allowed: frozenset[str]


def _int(src: str, key: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{src}: {key}: expected a whole number >= {low}"
                          f"{'' if high >= 2**62 else f' and <= {high}'}, got {value!r}")
    return value


def _bool(src: str, key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{src}: {key}: expected true or false, got {value!r}")
    return value


def _name(src: str, key: str, value: object, pattern: re.Pattern[str]) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value) or ".." in value:
        raise ConfigError(f"{src}: {key}: {value!r} does not match {pattern.pattern}")
    return value


def _list(src: str, key: str, value: object) -> list[Any]:
    if not isinstance(value, list):
        raise ConfigError(f"{src}: {key}: expected a list, got {value!r}")
    return value


def _entry(src: str, key: str, value: object, keys: set[str]) -> Mapping[str, Any]:
    if not isinstance(value, dict) or set(value) != keys:
        raise ConfigError(f"{src}: {key}: each entry needs exactly the keys "
                          f"{sorted(keys)}, got {value!r}")
    return value


def _unique(src: str, key: str, values: list[Any]) -> None:
    if len(set(values)) != len(values):
        raise ConfigError(f"{src}: {key}: an entry is listed twice in {values!r}")


def _memlock(src: str, value: object) -> int | None:
    if value is None:
        return None
    if value == "unlimited":
        return UNLIMITED
    return _int(src, "memlock_min", value, 0, 2**63)


def _ib_port(src: str, i: int, value: object) -> IbPort:
    key = f"ib_ports[{i}]"
    e = _entry(src, key, value, {"device", "port", "rate_gbps"})
    rate = e["rate_gbps"]
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate <= 10000:
        raise ConfigError(f"{src}: {key}.rate_gbps: expected Gb/s > 0, got {rate!r}")
    return IbPort(_name(src, f"{key}.device", e["device"], DEVICE),
                  _int(src, f"{key}.port", e["port"], 1, 255), float(rate))


def _mount(src: str, i: int, value: object) -> Mount:
    e = _entry(src, f"mounts[{i}]", value, {"path", "fstype"})
    return Mount(_name(src, f"mounts[{i}].path", e["path"], PATH),
                 _name(src, f"mounts[{i}].fstype", e["fstype"], FSTYPE))


def load_config(text: str, src: str) -> HealthConfig:
    """The configuration in ``text`` (read from ``src``), or ConfigError naming what is wrong."""
    try:
        doc = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{src}: not YAML: {' '.join(str(exc).split())}") from None
    except DocumentError as exc:
        raise ConfigError(f"{src}: {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{src}: expected a mapping of {', '.join(KEYS)}, got {doc!r:.80}")
    unknown, missing = sorted(set(doc) - set(KEYS), key=str), [k for k in KEYS if k not in doc]
    if unknown or missing:
        raise ConfigError(f"{src}: unknown keys {unknown}, missing keys {missing}")
    ports = [_ib_port(src, i, p) for i, p in enumerate(_list(src, "ib_ports", doc["ib_ports"]))]
    _unique(src, "ib_ports", [(p.device, p.port) for p in ports])
    mounts = [_mount(src, i, m) for i, m in enumerate(_list(src, "mounts", doc["mounts"]))]
    _unique(src, "mounts", [m.path for m in mounts])
    units = [_name(src, "units", u, UNIT) for u in _list(src, "units", doc["units"])]
    _unique(src, "units", units)
    allowed_units = [_name(src, "failed_units_allowed", u, UNIT)
                     for u in _list(src, "failed_units_allowed", doc["failed_units_allowed"])]
    xids = [_int(src, "xid_allowed", x, 1, 999)
            for x in _list(src, "xid_allowed", doc["xid_allowed"])]
    return HealthConfig(
        node_name=_name(src, "node_name", doc["node_name"], NODE_NAME),
        textfile_dir=_name(src, "textfile_dir", doc["textfile_dir"], PATH),
        slurmd_unit=_name(src, "slurmd_unit", doc["slurmd_unit"], UNIT),
        gpus=_int(src, "gpus", doc["gpus"], 0, 64),
        gpu_ecc=_bool(src, "gpu_ecc", doc["gpu_ecc"]),
        gpu_xid=_bool(src, "gpu_xid", doc["gpu_xid"]),
        xid_allowed=frozenset(xids), ib_ports=tuple(ports), mounts=tuple(mounts),
        memlock_min=_memlock(src, doc["memlock_min"]), units=tuple(units),
        failed_units_allowed=frozenset(allowed_units))
