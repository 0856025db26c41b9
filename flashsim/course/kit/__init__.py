"""The course kit: what every chapter shares (sizes, the device report, tables, plotting, the "On the real GPU"
comparison, running notebooks as plain Python). A chapter's own code lives in ``flashsim/course/chNN/``."""
