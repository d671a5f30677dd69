"""Controls: parameters, judge, pins and re-run. Each validates its entry and shows the
engine's own message (ParamsError, JudgeError) next to it instead of applying a bad value."""

from __future__ import annotations

import html

import ipywidgets as w

from workbench.judgment import JudgeError
from workbench.params import ParamsError
from workbench.terms import TermWeightingError

from .model import ROUND, TRACE

INT_PARAMS = ("B", "s", "L", "H", "p")
HELP = {
    "B": "candidates per round",
    "s": "seeds per round",
    "L": "expansion terms",
    "H": "expansion rounds (0-2)",
    "p": "protected BM25 passages",
}
# the paper's letter and what it counts, written next to the box (a hover is not seen)
WORDS = {"B": "candidates", "s": "seeds", "L": "terms", "H": "rounds", "p": "protected"}


def _message(widget: w.HTML, text: str | None, ok: str = ""):
    if text:
        widget.value = f"<span style='color:#b00020;font-size:12px' class='sag2wb-invalid'>✗ {html.escape(text)}</span>"
    else:
        widget.value = f"<span style='color:#555;font-size:12px'>{html.escape(ok)}</span>"


class ParamsControls:
    """B, s, L, H, p, field weights, term-weighting variant, diversity, context; auto re-run."""

    def __init__(self, model):
        self.model = model
        p = model.params
        small = w.Layout(width="178px")
        style = {"description_width": "116px"}  # "B · candidates" whole at the page's 13 px
        self.ints = {
            name: w.IntText(
                value=getattr(p, name),
                description=f"{name} · {WORDS[name]}",
                description_allow_html=False,
                tooltip=f"{name}: {HELP[name]}",
                layout=small,
                style=style,
            )
            for name in INT_PARAMS
        }
        for name, box in self.ints.items():
            box.add_class(f"sag2wb-param-{name}")
        self.field_weights = w.Text(
            value=", ".join(f"{x:g}" for x in p.field_weights),
            description="field weights",
            continuous_update=False,
            layout=w.Layout(width="230px"),
            style={"description_width": "95px"},
            tooltip="title, heading, body",
        )
        self.term_weighting = w.Dropdown(
            options=model.term_weightings(),
            value=p.term_weighting,
            description="term weighting",
            layout=w.Layout(width="300px"),
            style={"description_width": "115px"},
        )
        self.diversity = w.Checkbox(
            value=p.diversity, description="diversity", indent=False, layout=w.Layout(width="90px")
        )
        self.use_context = w.Checkbox(
            value=p.use_context, description="context", indent=False, layout=w.Layout(width="80px")
        )
        self.auto = w.Checkbox(value=True, description="re-run on change", indent=False, layout=w.Layout(width="135px"))
        self.rerun = w.Button(
            description="Re-run",
            button_style="primary",
            layout=w.Layout(width="80px"),
            tooltip="recompute from the earliest round the changes affect",
        )
        self.message = w.HTML()
        self.message.add_class("sag2wb-params-message")
        for box in [*self.ints.values(), self.field_weights, self.term_weighting, self.diversity, self.use_context]:
            box.observe(self._edited, "value")
        self.rerun.on_click(lambda _: self.apply(force=True))
        model.subscribe(self._on_event)
        self.widget = w.VBox(
            [
                w.HBox([*self.ints.values(), self.field_weights], layout=w.Layout(flex_flow="row wrap")),
                w.HBox(
                    [self.term_weighting, self.diversity, self.use_context, self.auto, self.rerun],
                    layout=w.Layout(flex_flow="row wrap", align_items="center"),
                ),
                self.message,
            ]
        )
        _message(self.message, None)

    def entered(self) -> dict:
        """The entries as Params fields (ParamsError for a malformed field-weights entry)."""
        try:
            weights = tuple(float(x) for x in self.field_weights.value.replace(";", ",").split(","))
        except ValueError:
            raise ParamsError(
                f"field_weights: {self.field_weights.value!r} is not three numbers like 2, 2, 1 (title, heading, body)"
            ) from None
        return {
            **{n: int(b.value) for n, b in self.ints.items()},
            "field_weights": weights,
            "term_weighting": self.term_weighting.value,
            "diversity": bool(self.diversity.value),
            "use_context": bool(self.use_context.value),
        }

    def _edited(self, _change):
        if self._syncing:
            return
        self.apply(force=False)

    _syncing = False

    def apply(self, force: bool):
        try:
            new = self.model.validate_params(**self.entered())
        except (ParamsError, TermWeightingError) as exc:
            _message(self.message, str(exc))
            return False
        if new == self.model.params:
            _message(self.message, None, "parameters unchanged" if force else "")
            if force:
                self.model.recompute()
            return True
        r = self.model.affected_round(new)
        if not (self.auto.value or force):
            _message(self.message, None, f"valid; press Re-run (recomputes from round {min(r, 3)})")
            return True
        _message(
            self.message,
            None,
            f"applied; recomputed from round {r}" if r <= 2 else "applied; only the final diversity ordering changed",
        )
        self._applied_for = (self.model.question.id, self.model.judge_spec)
        self.model.set_params(**{k: getattr(new, k) for k in self.entered()})
        return True

    _applied_for: tuple | None = None

    def _on_event(self, model, what):
        if what != TRACE:
            return
        if self._applied_for is not None and self._applied_for != (model.question.id, model.judge_spec):
            _message(self.message, None)  # "applied; recomputed ..." described an earlier run
            self._applied_for = None
        # a changed registry (a variant registered after the dashboard opened) shows up here
        options = model.term_weightings()
        if list(self.term_weighting.options) != options:
            self._syncing = True
            try:
                self.term_weighting.options = options
                self.term_weighting.value = model.params.term_weighting
            finally:
                self._syncing = False


class JudgeControls:
    """Judge picker (the registry's choices, `workbench.judges.registry.picker_choices`: every kind
    that can run now, oracle only with gold, jev only when configured; then the notebook's own
    judges) and a FILE.py:NAME loader for a function judge. The picker shows each judge's text;
    the model holds the value (`model.judge`)."""

    def __init__(self, model):
        self.model = model
        self.picker = w.Dropdown(
            options=model.judge_options(),
            value=model.judge_spec,
            description="judge",
            layout=w.Layout(width="230px"),
            style={"description_width": "40px"},
        )
        self.picker.add_class("sag2wb-judge")
        self.function = w.Text(placeholder="FILE.py:NAME", layout=w.Layout(width="210px"), continuous_update=False)
        self.load = w.Button(description="use function", layout=w.Layout(width="115px"))
        self.message = w.HTML()
        self._syncing = False
        self.picker.observe(self._picked, "value")
        self.load.on_click(self._load)
        model.subscribe(self._on_event)
        self.widget = w.HBox(
            [self.picker, self.function, self.load, self.message],
            layout=w.Layout(flex_flow="row wrap", align_items="center"),
        )

    def _picked(self, change):
        if self._syncing:
            return
        try:
            self.model.set_judge(change["new"])
            _message(self.message, None)
        except JudgeError as exc:
            _message(self.message, str(exc))

    def _load(self, _):
        spec = self.function.value.strip()
        try:
            self.model.set_judge(spec)
            _message(self.message, None, f"judge {spec}")
        except JudgeError as exc:
            _message(self.message, str(exc))
            return
        self._sync()

    def _sync(self):
        self._syncing = True
        try:
            self.picker.options = self.model.judge_options()
            self.picker.value = self.model.judge_spec
        finally:
            self._syncing = False

    def _on_event(self, model, what):
        if what == TRACE:
            self._sync()


class PinControls:
    """Pin a passage's score in the shown round; the re-run starts from that round."""

    def __init__(self, model):
        self.model = model
        self.unit = w.Dropdown(description="pin", layout=w.Layout(width="330px"), style={"description_width": "30px"})
        self.score = w.BoundedFloatText(value=1.0, min=0.0, max=1.0, step=0.05, layout=w.Layout(width="70px"))
        self.pin = w.Button(description="pin score", layout=w.Layout(width="85px"))
        self.clear = w.Button(description="clear pins", layout=w.Layout(width="85px"))
        self.message = w.HTML()
        self.unit.add_class("sag2wb-pin-unit")
        self.pin.add_class("sag2wb-pin")
        self.pin.on_click(self._pin)
        self.clear.on_click(lambda _: model.clear_pins())
        model.subscribe(self._on_event)
        self.widget = w.HBox(
            [self.unit, self.score, self.pin, self.clear, self.message],
            layout=w.Layout(flex_flow="row wrap", align_items="center"),
        )
        self._on_event(model, ROUND)

    def _pin(self, _):
        if self.unit.value is None:
            return
        try:
            self.model.pin(self.model.round, self.unit.value, self.score.value)
        except ValueError as exc:
            _message(self.message, str(exc))

    def _on_event(self, model, what):
        if what not in (TRACE, ROUND) or not model.frames:
            return
        p = model.frames["passages"]
        p = p[(p["round"] == model.round) & p["score"].notna()].sort_values("rank")
        keep = self.unit.value
        self.unit.options = [
            (f"r{model.round} #{int(r)} {t[:40]}", int(u)) for r, t, u in zip(p["rank"], p["title"], p["unit_id"])
        ]
        ids = [u for _, u in self.unit.options]
        self.unit.value = keep if keep in ids else (ids[0] if ids else None)
        titles = dict(zip(model.frames["passages"]["unit_id"], model.frames["passages"]["title"]))
        pins = ", ".join(f"r{r}:{str(titles.get(u, u))[:20]}={s:g}" for (r, u), s in model.pins.items())
        _message(self.message, None, f"pinned: {pins}" if pins else "")
