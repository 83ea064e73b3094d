"""The InfiniBand fabric as planned: the plan model (``plan``), what judges of the fabric
return (``findings``), and what follows from a plan (a generated design, an ibsim net file,
SLURM's topology.conf)."""
