"""Several simulated devices joined by links (chapter 13): :mod:`.cluster` runs the schedules, :mod:`.closed_forms`
gives the bytes they must move."""
