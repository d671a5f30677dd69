"""Jupyter widgets for SAG2 Workbench: a dashboard over one model of UI state whose views
read only `Trace.frames()` and ask the engine to re-run.

>>> from widgets import dashboard_for
>>> dash = dashboard_for("sample_corpora/internal_docs")   # a bare `dash` in a cell shows it
>>> dash.trace.question_id, dash.trace.judge
('docs-01', 'lexical')
"""

from .changes import ChangesView
from .dashboard import Dashboard, dashboard_for
from .model import DashboardModel, jev_configured

__all__ = ["ChangesView", "Dashboard", "DashboardModel", "dashboard_for", "jev_configured"]
