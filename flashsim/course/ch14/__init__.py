"""Chapter 14: Hopper at full speed: its dashboards and figures (re-exported by flashsim.widgets and .plots)."""
