# Voilà config for the dashboard (loaded by `python -m widgets.voila`, or by
# `voila --Voila.config_file_paths=widgets/voila_config ...`): closing a page ends its kernel
# and the page requests nothing from a CDN. Why: widgets/voila_hooks.py.
from widgets.voila_hooks import prelaunch_hook

c.VoilaConfiguration.prelaunch_hook = prelaunch_hook  # noqa: F821 (c is Voilà's config object)

# Voilà's page is built with JupyterLab 4.2 packages; these lab-only extensions are built for
# JupyterLab 4.6 and make the page log "Unsatisfied version ..." warnings. The dashboard needs
# neither: Voilà brings its own widget manager, and the charts are anywidgets (kept).
c.VoilaConfiguration.extension_denylist = ["jupyterlab-plotly"]  # noqa: F821
