"""fio checks: storage bandwidth on the node's scratch path.

``fio.seq_read``: sequential 1 MiB reads of a test file in ``rackgate_scratch_path``
(inventory variable, default ``/var/tmp/rackgate``), time-based, JSON output; judged on
aggregate read bandwidth (``read_bw``, MB/s = 10^6 bytes/s, as disk vendors quote).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rackgate.checks import Check, CommandError, Scope, compare
from rackgate.model import Judgement, Status
from rackgate.parsers.fio import FioRun, parse_fio_json
from rackgate.profile import Hardware, Threshold

DEFAULT_SCRATCH = "/var/tmp/rackgate"
_SIZE = r"^[1-9][0-9]*[KMGT]?$"


class SeqReadParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    size: str = Field(default="4G", pattern=_SIZE, description="test file size per job")
    block_size: str = Field(default="1M", pattern=_SIZE)
    runtime_s: int = Field(default=60, ge=1, le=3600)
    ioengine: Literal["libaio", "io_uring", "psync", "sync"] = "libaio"
    iodepth: int = Field(default=16, ge=1, le=1024)
    numjobs: int = Field(default=1, ge=1, le=256)
    direct: bool = Field(default=True, description="O_DIRECT: measure the device, not the cache")
    timeout_s: int = Field(default=900, ge=10, description="kill fio after this long")

    @model_validator(mode="after")
    def _timeout_covers_runtime(self) -> SeqReadParams:
        if self.timeout_s <= self.runtime_s:
            raise ValueError(f"timeout_s {self.timeout_s} must exceed runtime_s "
                             f"{self.runtime_s} (fio also lays out the file first)")
        return self


def scratch_path(hostvars: Mapping[str, Any]) -> str:
    path = hostvars.get("rackgate_scratch_path", DEFAULT_SCRATCH)
    if not isinstance(path, str) or not path.startswith("/") or ":" in path:
        # fio splits file names on ':'; a relative path would land in the remote cwd
        raise CommandError(f"rackgate_scratch_path must be an absolute path without ':', "
                           f"got {path!r}")
    return path.rstrip("/") or "/"


def seq_read_command(params: SeqReadParams, hostvars: Mapping[str, Any]) -> list[str]:
    """argv of the sequential-read job.

    >>> seq_read_command(SeqReadParams(size="64M", runtime_s=3),
    ...                  {"rackgate_scratch_path": "/scratch"})[:3]
    ['fio', '--name=rackgate_seq_read', '--directory=/scratch']
    """
    return [
        "fio", "--name=rackgate_seq_read",
        # one file per job: jobs sharing one file would read the same blocks (cache hits)
        f"--directory={scratch_path(hostvars)}",
        "--filename_format=rackgate-fio-seq-read.$jobnum.dat",
        "--rw=read", f"--bs={params.block_size}", f"--size={params.size}",
        f"--runtime={params.runtime_s}", "--time_based=1",
        f"--ioengine={params.ioengine}", f"--iodepth={params.iodepth}",
        f"--numjobs={params.numjobs}", f"--direct={int(params.direct)}",
        "--group_reporting=1", "--unlink=1", "--output-format=json",
    ]


def judge_seq_read(run: FioRun, params: SeqReadParams, thresholds: Mapping[str, Threshold],
                   hardware: Hardware | None = None) -> Judgement:
    failed = [j for j in run.jobs if j.error]
    if failed:
        j = failed[0]
        return Judgement(Status.ERROR, f"fio job {j.name} stopped with error {j.error} "
                                       f"({os.strerror(j.error)}): no valid measurement")
    reads = [j.read for j in run.jobs if j.read is not None]
    if not reads or sum(r.io_bytes for r in reads) == 0:
        return Judgement(Status.ERROR, "fio read no data: no valid measurement")
    bw = sum(r.bw_bytes_per_s for r in reads) / 1e6
    p99 = max((r.clat_p99_ns for r in reads if r.clat_p99_ns is not None), default=None)
    base = compare(bw, thresholds["read_bw"], "sequential read")
    details: dict[str, float | str] = {
        "iops": round(sum(r.iops for r in reads), 1),
        "io_mib": round(sum(r.io_bytes for r in reads) / 2**20, 1),
        "runtime_s": max(r.runtime_ms for r in reads) / 1000,
        "fio_version": run.version,
    }
    if p99 is not None:
        details["clat_p99_ms"] = round(p99 / 1e6, 3)
    return Judgement(base.status, base.message, round(bw, 1), base.unit, base.expected,
                     base.percent_of_limit, details, base.better)


CHECKS = (
    Check(
        name="fio.seq_read",
        scope=Scope.NODE,
        tags=frozenset({"fio", "storage"}),
        description="Sequential read bandwidth on the node's scratch path (fio, 1 MiB blocks)",
        params_model=SeqReadParams,
        metrics=frozenset({"read_bw"}),
        command=seq_read_command,
        timeout_s=lambda p: int(p.timeout_s),
        parse=parse_fio_json,
        judge=judge_seq_read,
    ),
)

__all__ = ["CHECKS", "SeqReadParams", "judge_seq_read", "seq_read_command"]
