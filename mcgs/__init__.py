"""mcgs: Monte Carlo Graph Search over machine-learning solution programs.

Importing :mod:`mcgs` is cheap: heavy dependencies (pandas, scikit-learn, LightGBM, the
Anthropic SDK) load only when the parts that need them are used.
"""

__version__ = "0.1.0"
