"""After the verdict: take what failed out of the scheduler, put back what rackgate took out
and now passes (``rackgate drain``).

- :mod:`.drain` decides, purely, what to do with each node of a judged report given the
  scheduler's view of it and this run's records: drain a rejected node for this run,
  resume a node that this run drained (its records say so) and that now passes, and
  never touch a node that another run, a person or the health check drained.
- :mod:`.slurm` builds the SLURM commands (``sinfo``, ``scontrol update``), reads sinfo's
  answer and writes and reads rackgate's reasons (``rackgate/drain[<runs>]: ...``);
  :mod:`.kubernetes` builds the ``kubectl`` commands (the taint read, taint, annotate,
  label) and reads the taint read's answer.
- :mod:`.apply` runs them on the launch host through the collector, as every other
  command of rackgate runs, records them in the run directory and reads those records
  back for ``--resume-passed``.
"""
