"""After the verdict: take what failed out of the scheduler, put back what rackgate took out
and now passes (``rackgate drain``).

- :mod:`.drain` decides, purely, what to do with each node of a judged report given the
  scheduler's view of it: drain a rejected node, resume a node that rackgate drained and
  that now passes, and never touch a node that someone else drained.
- :mod:`.slurm` builds the SLURM commands (``sinfo``, ``scontrol update``) and reads
  sinfo's answer; :mod:`.kubernetes` builds the ``kubectl`` taint and label commands.
- :mod:`.apply` runs them on the launch host through the collector, as every other
  command of rackgate runs, and records them in the run directory.
"""
