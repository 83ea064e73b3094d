"""What a run leaves on disk: the evidence records, the run's manifest, the history."""
