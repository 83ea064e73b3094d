"""Collection: run each planned task's command on its host and store what it printed.

``plan`` turns the run's hosts, profiles and checks into tasks (pure); ``ansible`` runs
them through ansible-runner under the node lock and writes the evidence; ``launch`` builds
the scheduler command lines (srun, mpirun) of the checks launched across the nodes.
Nothing here decides pass or fail.
"""
