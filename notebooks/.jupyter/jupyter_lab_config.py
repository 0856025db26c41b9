"""JupyterLab settings of the course (``make lab`` points JUPYTER_CONFIG_PATH here): no news pop-up, no update
check. The pop-up ("Would you like to get notified about official Jupyter news?") is asked for by the notification
setting, so the settings overrides next to this file set it too."""
import os

c = get_config()  # noqa: F821 - provided by the config loader
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
c.LabApp.app_settings_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lab", "settings")
