"""Judging: stored evidence and profiles in, results out. Pure, except ``judge.run``'s
reading of the evidence through the store it is given.

``evidence`` judges one (node, check) from its evidence; ``rack`` runs the rack-level
judgements (peer comparison, version drift, duplicate identities) over every result.
"""
