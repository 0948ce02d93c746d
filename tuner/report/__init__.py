"""``spectune report``: one self-contained HTML page (interactive plotly plots, plotly.js inlined),
summary.md and trials.csv.

``figures`` draws the plots with plotly (importances from Optuna's evaluator over the decoded
flags), ``steps`` builds the steps × concurrency table of the seed document, ``page`` writes the
HTML, ``build`` ties them to a stored study and writes the other files.
"""
