"""Judging: stored evidence and profiles in, results out. Pure: evidence is read only
through the reader it is given.

``evidence`` judges one (node, check) from its evidence; ``run`` judges a stored run, each
check through its placement; ``rack`` runs the rack-level judgements (peer comparison,
version drift, duplicate identities) over every node's results.
"""
