"""Chapter 05: its dashboards, figures and checks (re-exported by flashsim.widgets, .plots and .exercises)."""
