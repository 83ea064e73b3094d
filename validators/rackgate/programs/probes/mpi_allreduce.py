# MPI all-reduce bandwidth probe: sent by rackgate's mpi.allreduce check as
# `python3 -c <this text> <sizes...> --iters N --warmup W` and launched with srun (or
# mpirun) across the nodes under test. Needs mpi4py only (Debian: python3-mpi4py).
#
# For each message size it times `iters` MPI_Allreduce(SUM) of float64 buffers after
# `warmup` untimed ones, takes the slowest rank's mean time (a collective is as slow as
# its slowest rank), and checks every element of the result: rank r contributes r + 1, so
# each element must equal n(n+1)/2. Rank 0 prints one JSON object per line:
#   {"probe": "mpi_allreduce", "ranks": n, "hosts": [...], "mpi": "<library version>"}
#   {"bytes": B, "iters": I, "time_us": T, "algbw_gbps": A, "busbw_gbps": U, "wrong": W}
# algbw = bytes / time; busbw = algbw * 2(n-1)/n, the ring all-reduce's traffic per rank,
# as nccl-tests defines it, so it compares with a link's bandwidth. GB/s is 10^9 bytes/s.
import array
import json
import sys
import time

from mpi4py import MPI


def main(argv: list[str]) -> None:
    sizes: list[int] = []
    iters, warmup = 20, 5
    args = iter(argv)
    for word in args:
        if word == "--iters":
            iters = int(next(args))
        elif word == "--warmup":
            warmup = int(next(args))
        else:
            sizes.append(int(word))
    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    hosts = comm.gather(MPI.Get_processor_name(), root=0)
    if rank == 0:
        library = MPI.Get_library_version().replace("\0", "").splitlines()[0].strip()
        print(json.dumps({"probe": "mpi_allreduce", "ranks": n, "hosts": hosts,
                          "mpi": library}), flush=True)
    expected = n * (n + 1) / 2
    for size in sizes:
        count = max(1, size // 8)
        send = array.array("d", [rank + 1.0]) * count
        recv = array.array("d", [0.0]) * count
        for _ in range(warmup):
            comm.Allreduce(send, recv, op=MPI.SUM)
        comm.Barrier()
        start = time.perf_counter()
        for _ in range(iters):
            comm.Allreduce(send, recv, op=MPI.SUM)
        elapsed = (time.perf_counter() - start) / iters
        slowest = comm.allreduce(elapsed, op=MPI.MAX)
        wrong = comm.allreduce(sum(1 for v in recv if v != expected), op=MPI.SUM)
        if rank == 0:
            nbytes = count * 8
            algbw = nbytes / slowest / 1e9
            busbw = algbw * 2 * (n - 1) / n
            print(json.dumps({"bytes": nbytes, "iters": iters, "time_us": slowest * 1e6,
                              "algbw_gbps": algbw, "busbw_gbps": busbw, "wrong": wrong}),
                  flush=True)


main(sys.argv[1:])
