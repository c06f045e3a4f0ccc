"""What the gallery scripts share: one figure format and one finish.

Imported by the scripts of ``docs/gallery/`` (run from the repository root:
Python puts the script's folder on the path).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt


def new_figure():
    """(figure, axes) in the gallery's size: 600 × 400 pixels."""
    return plt.subplots(figsize=(6.0, 4.0), dpi=100)


def save_figure(fig, ax, out: Path, *, legend_loc: str = "best") -> None:
    """Legend, grid, tight layout, then write ``out``."""
    ax.legend(loc=legend_loc, fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
