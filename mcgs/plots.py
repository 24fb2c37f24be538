"""Plots of runs and campaigns, as PNG files.

Written with matplotlib's Agg backend: plotly's static-image export (kaleido 1.x) needs a
Chrome binary, which an offline machine does not have, while the PNGs must be produced
wherever the benchmark runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

__all__ = ["best_so_far", "plot_best_so_far", "plot_campaign"]


def best_so_far(nodes, higher_is_better: bool) -> list[tuple[float, float]]:
    """``[(seconds since the run's first node was created, best score so far)]`` at each
    finished valid search node of ``nodes`` (a run's nodes; ensembles included: they are
    nodes), in the metric's direction."""
    nodes = [n for n in nodes if n.parent_id is not None and n.finished_at is not None]
    if not nodes:
        return []
    t0 = min(n.created_at for n in nodes if n.created_at is not None)
    higher = higher_is_better
    best, out = None, []
    for n in sorted((n for n in nodes if n.is_valid and n.full_fidelity), key=lambda n: n.finished_at):
        if best is None or (n.score > best if higher else n.score < best):
            best = n.score
        out.append(((n.finished_at - t0).total_seconds(), best))
    return out


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_best_so_far(curves: dict[str, list[tuple[float, float]]], path: Path, *, title: str, metric: str) -> Path:
    """One step line per run (label -> best-so-far curve) in one PNG.

    Args:
        curves: Run label -> ``[(seconds, best score)]`` from :func:`best_so_far`.
        path: PNG to write (parents created).
        title, metric: Figure title and y-axis label.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, pts in curves.items():
        if pts:
            xs, ys = zip(*pts)
            ax.step(xs, ys, where="post", label=label)
    ax.set_xlabel("seconds since the first node")
    ax.set_ylabel(f"best {metric} so far (validation)")
    ax.set_title(title)
    if curves:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_campaign(agg: dict[str, Any], path: Path) -> Path:
    """Bar chart of a campaign's aggregate: per competition, the share of runs with a valid
    submission, above the median and with any medal (percent)."""
    plt = _pyplot()
    comps: Sequence[str] = list(agg["competitions"])
    keys = (("valid_submission_pct", "valid"), ("above_median_pct", "above median"), ("any_medal_pct", "any medal"))
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(comps)), 4))
    width = 0.27
    for i, (key, label) in enumerate(keys):
        ax.bar([j + (i - 1) * width for j in range(len(comps))], [agg["competitions"][c][key] or 0 for c in comps], width, label=label)
    ax.set_xticks(range(len(comps)))
    ax.set_xticklabels([c[:22] for c in comps], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("% of runs")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=8)
    ax.set_title("MLE-bench campaign")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
