# Voilà config for the dashboard (loaded by `python -m widgets.voila`, or by
# `voila --Voila.config_file_paths=widgets/voila_config ...`): closing a page ends its kernel
# and the page requests nothing from a CDN. Why: widgets/voila_hooks.py.
from widgets.voila_hooks import prelaunch_hook

c.VoilaConfiguration.prelaunch_hook = prelaunch_hook  # noqa: F821 (c is Voilà's config object)

# Voilà's page is built with JupyterLab 4.2 packages; the jupyterlab-plotly extension is a
# lab-only extension the dashboard does not need (the charts are anywidgets). The widget
# extensions' versions are pinned in pyproject.toml so the page logs no "Unsatisfied
# version ..." warnings (docs/widgets.md "Voilà").
c.VoilaConfiguration.extension_denylist = ["jupyterlab-plotly"]  # noqa: F821

# Voilà is pinned to 0.5.8, which predates 0.5.13's check on template names taken from the
# URL (`?template=../..`); the dashboard needs no per-request template, so none is accepted.
c.VoilaConfiguration.allow_template_override = "NO"  # noqa: F821
