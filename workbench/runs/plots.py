"""Plots of experiment results (`Results.plot`): bars with 95% bootstrap intervals, like the
paper's Figure 4. Plotly is imported when a plot is drawn, not with the run layer.

>>> from workbench.runs import Experiment, RunOptions, paper_ablation
>>> results = Experiment(index, questions, paper_ablation(judge="oracle"), RunOptions(progress=False)).run()
>>> figure = interval_bars(results, "R@10", reference="H=2")
>>> figure.layout.title.text
'R@10: paired difference to H=2 (95% interval, 9 questions)'
>>> dict(zip(figure.data[0].x, figure.data[0].y))
{'bm25': -18.5185, 'H=0': -15.7407, 'H=1': 0.0, 'no-context': 0.0, 'matched-budget': -15.7407, 'final-only': -2.7778}
"""

from __future__ import annotations


def interval_bars(results, metric: str = "R@10", reference: str | None = None, title: str | None = None):
    """Plotly bars with 95% bootstrap intervals. Without `reference`: each configuration's mean
    and the interval of that mean. With `reference`: each other configuration's paired
    difference to it and its interval."""
    import plotly.graph_objects as go  # heavy (~0.5 s) and only for plots: not loaded with the runs

    names, ys, lo, hi, text = [], [], [], [], []
    for n in results.names:
        if reference is not None:
            if n == reference:
                continue
            c = results.compare(n, reference, metric)
            mean, low, high = c["difference"], c["low"], c["high"]
        else:
            mean, low, high = results.interval(n, metric)
        judgments = sum(r["judgments"] for r in results.records if r["config"] == n)
        names.append(n)
        ys.append(mean)
        lo.append(mean - low)
        hi.append(high - mean)
        text.append(f"{mean:.2f} [{low:.2f}, {high:.2f}]<br>{judgments:,} judgments")
    fig = go.Figure(
        go.Bar(
            x=names,
            y=ys,
            error_y=dict(type="data", symmetric=False, array=hi, arrayminus=lo),
            hovertext=text,
            hoverinfo="text+x",
            marker_color="#4c72b0",
        )
    )
    label = f"{metric} − {reference}" if reference else metric
    questions = len(results.question_ids)
    fig.update_layout(
        title=title
        or (
            f"{metric}: paired difference to {reference} (95% interval, {questions} questions)"
            if reference
            else f"{metric} with 95% bootstrap intervals ({questions} questions)"
        ),
        yaxis_title=label,
        template="plotly_white",
        height=380,
        margin=dict(l=60, r=20, t=60, b=60),
    )
    return fig
