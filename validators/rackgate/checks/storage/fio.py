"""fio checks: storage bandwidth, IOPS and latency on the node's scratch path and, where
the profile names one, on the parallel file system.

- ``fio.seq_read`` / ``fio.seq_write``: sequential 1 MiB reads / writes, time-based;
  judged on ``read_bw`` / ``write_bw`` (MB/s).
- ``fio.rand_read``: random 4 KiB reads at queue depth 32; ``read_iops`` and ``read_p99_ms``.
- ``fio.checkpoint``: what a training checkpoint does, large sequential writes with an
  fsync every N blocks and at the end, ``size`` per job written once; ``write_bw``.
- ``fio.pfs.seq_read`` / ``fio.pfs.checkpoint``: the same on the parallel file system.

Local checks write into ``rackgate_scratch_path`` (inventory variable, default
``/var/tmp/rackgate``); parallel-file-system checks into ``<mount>/rackgate/<host>`` (the
mount is ``hardware.storage.parallel_fs_mount``, or the inventory variable
``rackgate_parallel_fs_mount``), one directory per node so nodes never share a file.
MB/s is 10^6 bytes/s, as disk vendors quote. Each job gets its own file
(``--filename_format``): jobs sharing one file would read the same blocks and measure a
cache. The very same command line of each run is in the evidence record (``argv``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from rackgate.checks.shared.base import (
    Check,
    CommandError,
    HostNeeds,
    NodeCheck,
    Params,
    Scope,
    compare,
    metric_of,
)
from rackgate.figures import figure
from rackgate.model import Judgement, Metric, Status
from rackgate.parsers.fio import FioDirection, FioJob, FioRun, parse_fio_json
from rackgate.profile import Hardware, Threshold
from rackgate.thresholds import Direction

DEFAULT_SCRATCH = "/var/tmp/rackgate"
_SIZE = r"^[1-9][0-9]*[KMGT]?$"


class FioParams(Params):
    """One fio job, as the profile sets it (``checks.<name>.params``)."""

    size: str = Field(default="4G", pattern=_SIZE, description="test file size per job")
    block_size: str = Field(default="1M", pattern=_SIZE)
    runtime_s: int = Field(default=60, ge=1, le=3600,
                           description="time-based patterns: how long to run")
    ioengine: Literal["libaio", "io_uring", "psync", "sync"] = "libaio"
    iodepth: int = Field(default=16, ge=1, le=1024)
    numjobs: int = Field(default=1, ge=1, le=256)
    direct: bool = Field(default=True, description="O_DIRECT: measure the device, not the cache")
    timeout_s: int = Field(default=900, ge=10, description="kill fio after this long")

    @model_validator(mode="after")
    def _timeout_covers_runtime(self) -> FioParams:
        if self.timeout_s <= self.runtime_s:
            raise ValueError(f"timeout_s {self.timeout_s} must exceed runtime_s "
                             f"{self.runtime_s} (fio also lays out the file first)")
        return self


class SeqReadParams(FioParams):
    pass


class SeqWriteParams(FioParams):
    pass


class RandReadParams(FioParams):
    block_size: str = Field(default="4K", pattern=_SIZE)
    iodepth: int = Field(default=32, ge=1, le=1024)


class CheckpointParams(FioParams):
    """Writes ``size`` per job once (not time-based), like a training checkpoint."""

    fsync_every: int = Field(default=64, ge=1, description="fsync after this many blocks")


def scratch_path(hostvars: Mapping[str, Any]) -> str:
    path = hostvars.get("rackgate_scratch_path", DEFAULT_SCRATCH)
    return _checked_dir(path, "rackgate_scratch_path")


def _checked_dir(path: Any, what: str) -> str:
    if not isinstance(path, str) or not path.startswith("/") or ":" in path:
        # fio splits file names on ':'; a relative path would land in the remote cwd
        raise CommandError(f"{what} must be an absolute path without ':', got {path!r}")
    return path.rstrip("/") or "/"


def _argv(name: str, rw: str, directory: str, p: FioParams) -> list[str]:
    argv = [
        # fio creates a missing directory on the way to the file (mode 0700)
        "fio", f"--name=rackgate_{name}",
        f"--filename_format={directory}/rackgate-{name}.$jobnum.dat",
        f"--rw={rw}", f"--bs={p.block_size}", f"--size={p.size}",
        f"--ioengine={p.ioengine}", f"--iodepth={p.iodepth}", f"--numjobs={p.numjobs}",
        f"--direct={int(p.direct)}", "--group_reporting=1", "--unlink=1",
        "--output-format=json",
    ]
    if isinstance(p, CheckpointParams):
        argv += [f"--fsync={p.fsync_every}", "--end_fsync=1"]
    else:
        argv += [f"--runtime={p.runtime_s}", "--time_based=1"]
    return argv


def seq_read_command(params: FioParams, hostvars: Mapping[str, Any]) -> list[str]:
    """argv of the sequential-read job.

    >>> seq_read_command(SeqReadParams(size="64M", runtime_s=3),
    ...                  {"rackgate_scratch_path": "/scratch"})[:3]
    ['fio', '--name=rackgate_seq_read', '--filename_format=/scratch/rackgate-seq_read.$jobnum.dat']
    """
    return _argv("seq_read", "read", scratch_path(hostvars), params)


def _pfs_dir(hardware_mount: str | None, hostvars: Mapping[str, Any]) -> str:
    host = hostvars.get("inventory_hostname", "")
    if not hardware_mount or not host:
        raise CommandError("no parallel file system mount in the profile, or no host name")
    return _checked_dir(f"{hardware_mount.rstrip('/')}/rackgate/{host}",
                        "hardware.storage.parallel_fs_mount")


# Plausibility of fio's figures. No node moves more than this through its file systems:
# the page cache is bounded by DRAM bandwidth (2 sockets x 12 channels of DDR5-6400 x 8 B
# = 1.23 TB/s) and O_DIRECT I/O by the PCIe lanes (2 x 128 Gen5 lanes x 3.94 GB/s = 1.0
# TB/s each way); 10 TB/s is eight times either. I/O is at least one 512 B sector, so IOPS
# are bounded by the same figure / 512 B. fio derives bw from its own io_bytes and runtime
# (bw = io_bytes x 1000 / runtime_ms, stat.c): a bw more than 2x off that is not one run's.
MAX_BYTES_PER_S = 10e12
MIN_IO_BYTES = 512
BW_CONSISTENCY = 2.0


def _implausible(which: str, d: FioDirection) -> str | None:
    """Why one direction's figures cannot be a real measurement, or None."""
    p99 = "none" if d.clat_p99_ns is None else figure(d.clat_p99_ns)
    checks = (
        (d.io_bytes >= 0, f"io_bytes {d.io_bytes} is negative"),
        (d.runtime_ms > 0, f"runtime {d.runtime_ms} ms is not positive although "
                           f"{d.io_bytes} bytes moved"),
        (d.bw_bytes_per_s >= 0, f"bandwidth {figure(d.bw_bytes_per_s)} B/s is negative"),
        (d.bw_bytes_per_s <= MAX_BYTES_PER_S,
         f"bandwidth {figure(d.bw_bytes_per_s / 1e6)} MB/s is above the "
         f"{figure(MAX_BYTES_PER_S / 1e6)} MB/s any node's memory or PCIe can carry"),
        (0 <= d.iops <= MAX_BYTES_PER_S / MIN_IO_BYTES,
         f"iops {figure(d.iops)} is outside 0 to {figure(MAX_BYTES_PER_S / MIN_IO_BYTES)}"),
        (d.clat_p99_ns is None or d.clat_p99_ns > 0,
         f"p99 completion latency {p99} ns is not positive"),
    )
    for ok, why in checks:
        if not ok:
            return f"fio {which}: {why}: implausible evidence"
    derived = d.io_bytes * 1000 / d.runtime_ms
    if not derived / BW_CONSISTENCY <= d.bw_bytes_per_s <= derived * BW_CONSISTENCY:
        return (f"fio {which}: bandwidth {figure(d.bw_bytes_per_s)} B/s disagrees with "
                f"io_bytes / runtime = {figure(derived)} B/s: implausible evidence")
    return None


def _direction(run: FioRun, which: str) -> tuple[list[FioDirection], Judgement | None]:
    """The job totals of one direction, or an error judgement when fio measured nothing.

    The command runs one job group with ``--group_reporting=1``: fio reports it as exactly
    one entry of ``jobs``; more entries are someone else's run or duplicated output."""
    failed = [j for j in run.jobs if j.error]
    if failed:
        j = failed[0]
        return [], Judgement(Status.ERROR, f"fio job {j.name} stopped with error {j.error} "
                                           f"({os.strerror(j.error)}): no valid measurement")
    if len(run.jobs) != 1:
        return [], Judgement(Status.ERROR, f"fio reported {len(run.jobs)} jobs "
                             f"({', '.join(j.name for j in run.jobs)}), expected the one "
                             "group-reported job of the command: not this check's evidence")
    dirs = [d for j in run.jobs if (d := getattr(j, which)) is not None]
    if not dirs or sum(d.io_bytes for d in dirs) == 0:
        return [], Judgement(Status.ERROR, f"fio {which} no data: no valid measurement")
    for d in dirs:
        if why := _implausible(which, d):
            return [], Judgement(Status.ERROR, why)
    return dirs, None


def _details(run: FioRun, dirs: list[FioDirection]) -> dict[str, float | str]:
    details: dict[str, float | str] = {
        "bw_mb_s": round(sum(d.bw_bytes_per_s for d in dirs) / 1e6, 1),
        "iops": round(sum(d.iops for d in dirs), 1),
        "io_mib": round(sum(d.io_bytes for d in dirs) / 2**20, 1),
        "runtime_s": max(d.runtime_ms for d in dirs) / 1000,
        "fio_version": run.version,
    }
    p99 = max((d.clat_p99_ns for d in dirs if d.clat_p99_ns is not None), default=None)
    if p99 is not None:
        details["clat_p99_ms"] = round(p99 / 1e6, 3)
    return details


def _worst(judgements: list[Judgement], details: dict[str, float | str],
           metrics: tuple[Metric, ...] = ()) -> Judgement:
    """One judgement from several metrics (each in ``metrics``): the first is the headline
    figure, worst wins."""
    head = judgements[0]
    status = Status.worst(j.status for j in judgements)
    return Judgement(status, "; ".join(j.message for j in judgements), head.measured,
                     head.unit, "; ".join(j.expected for j in judgements),
                     head.percent_of_limit, details, head.better, metrics)


def _judge_bw(which: str, metric: str, what: str) -> Any:
    def judge(run: FioRun, params: FioParams, thresholds: Mapping[str, Threshold],
              hardware: Hardware | None = None) -> Judgement:
        dirs, err = _direction(run, which)
        if err:
            return err
        details = _details(run, dirs)
        j = compare(round(sum(d.bw_bytes_per_s for d in dirs) / 1e6, 1), thresholds[metric],
                    what)
        return _worst([j], details)
    return judge


judge_seq_read = _judge_bw("read", "read_bw", "sequential read")
judge_seq_write = _judge_bw("write", "write_bw", "sequential write")
judge_checkpoint = _judge_bw("write", "write_bw", "checkpoint write (with fsync)")


_ON, _OFF = ("1", "true", "on", "yes"), ("0", "false", "off", "no")  # fio's bool options


def _no_p99(job: FioJob, dirs: list[FioDirection]) -> str:
    """Why fio printed no p99 (fio HOWTO and options.c: gtod_reduce=1 turns on disable_clat
    and off clat_percentiles; stat.c prints percentiles only with samples)."""
    for name, values, what in (
            ("gtod_reduce", _ON, "fio then measures no completion latency and prints no "
                                 "percentiles"),
            ("disable_clat", _ON, "fio then measures no completion latency"),
            ("clat_percentiles", _OFF, "fio then prints no completion latency percentiles")):
        value = job.option(name)
        if value is not None and value.lower() in values:
            return f"the job ran with {name}={value}: {what} (run it without)"
    if any(d.clat_percentiles for d in dirs):
        return f"its percentile_list ({job.option('percentile_list')}) has no 99"
    if any(d.clat_samples == 0 for d in dirs):
        return ("clat_ns.N is 0: no completion latency was sampled, as with gtod_reduce=1 or "
                "disable_clat=1 (set where the job options do not show it?)")
    return "clat_ns has no percentile object: clat_percentiles was off"


def judge_rand_read(run: FioRun, params: FioParams, thresholds: Mapping[str, Threshold],
                    hardware: Hardware | None = None) -> Judgement:
    dirs, err = _direction(run, "read")
    if err:
        return err
    details = _details(run, dirs)
    iops = compare(round(sum(d.iops for d in dirs)), thresholds["read_iops"], "random read")
    judged = metric_of("read_iops", thresholds["read_iops"], iops)
    p99 = details.get("clat_p99_ms")
    if not isinstance(p99, float):
        return Judgement(Status.ERROR, "fio reported no 99th-percentile completion latency "
                                       f"(clat_ns.percentile): {_no_p99(run.jobs[0], dirs)}: "
                                       "cannot judge read_p99_ms", details=details,
                         metrics=(judged, metric_of("read_p99_ms", thresholds["read_p99_ms"])))
    latency = compare(p99, thresholds["read_p99_ms"], "p99 completion latency")
    return _worst([iops, latency], details,
                  (judged, metric_of("read_p99_ms", thresholds["read_p99_ms"], latency)))


def _no_pfs(hw: Hardware) -> str | None:
    if hw.storage is None or not hw.storage.parallel_fs_mount:
        return "the profile names no parallel file system mount"
    return None


_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def room_bytes(p: FioParams) -> int:
    """The bytes a job's files take at once: ``size`` per job (fio's suffixes are powers of
    1024 by default, ``kb_base=1024``) times ``numjobs``.

    >>> room_bytes(SeqReadParams(size="8G", numjobs=8)) == 64 << 30
    True
    """
    return int(p.size.rstrip("KMGT")) * _UNITS.get(p.size[-1], 1) * p.numjobs


# What a site may baseline (``Check.baseline``): every fio figure measures the site's own
# storage. The judges' headline figure is the result's measured value (MB/s; IOPS for
# random reads); the p99 latency is in the result's details (``clat_p99_ms``).
_READ_BW = (("read_bw", "measured"),)
_WRITE_BW = (("write_bw", "measured"),)
_RAND = (("read_iops", "measured"), ("read_p99_ms", "clat_p99_ms"))
# Which way each figure improves (``Check.better``): bandwidth and IOPS up, latency down.
_READ: dict[str, Direction] = {"read_bw": "higher"}
_WRITE: dict[str, Direction] = {"write_bw": "higher"}
_RANDOM: dict[str, Direction] = {"read_iops": "higher", "read_p99_ms": "lower"}


def _check(name: str, rw: str, params: type[FioParams], metrics: Mapping[str, Direction],
           judge: Any, description: str, baseline: tuple[tuple[str, str], ...],
           pfs: bool = False) -> Check:
    short = name.removeprefix("fio.").removeprefix("pfs.")
    if pfs:
        def command(p: FioParams, hv: Mapping[str, Any]) -> list[str]:
            return _argv(short, rw, _pfs_dir(hv.get("rackgate_parallel_fs_mount"), hv), p)

        def needs(p: FioParams, hv: Mapping[str, Any]) -> HostNeeds:
            mount = _checked_dir(hv.get("rackgate_parallel_fs_mount"), "rackgate_parallel_fs_mount")
            return HostNeeds(dirs=((mount, room_bytes(p), "rackgate_parallel_fs_mount"),))
    else:
        def command(p: FioParams, hv: Mapping[str, Any]) -> list[str]:
            return _argv(short, rw, scratch_path(hv), p)

        def needs(p: FioParams, hv: Mapping[str, Any]) -> HostNeeds:
            return HostNeeds(dirs=((scratch_path(hv), room_bytes(p), "rackgate_scratch_path"),))
    return NodeCheck(
        name=name, scope=Scope.NODE,
        tags=frozenset({"fio", "storage", "parallel_fs" if pfs else "local"}),
        description=description, params_model=params, metrics=frozenset(metrics),
        command=command, parse=parse_fio_json, needs=needs,
        judge=judge, applies=_no_pfs if pfs else (lambda hw: None),
        baseline=baseline, better=metrics,
    )


CHECKS = (
    _check("fio.seq_read", "read", SeqReadParams, _READ, judge_seq_read,
           "Sequential read bandwidth on the node's scratch path (fio, 1 MiB blocks)",
           _READ_BW),
    _check("fio.seq_write", "write", SeqWriteParams, _WRITE, judge_seq_write,
           "Sequential write bandwidth on the node's scratch path (fio, 1 MiB blocks)",
           _WRITE_BW),
    _check("fio.rand_read", "randread", RandReadParams, _RANDOM,
           judge_rand_read, "Random 4 KiB read IOPS and p99 latency on the scratch path",
           _RAND),
    _check("fio.checkpoint", "write", CheckpointParams, _WRITE, judge_checkpoint,
           "Checkpoint-like sequential writes with fsync on the scratch path", _WRITE_BW),
    _check("fio.pfs.seq_read", "read", SeqReadParams, _READ, judge_seq_read,
           "Sequential read bandwidth on the parallel file system", _READ_BW, pfs=True),
    _check("fio.pfs.checkpoint", "write", CheckpointParams, _WRITE, judge_checkpoint,
           "Checkpoint-like writes with fsync on the parallel file system", _WRITE_BW,
           pfs=True),
)
