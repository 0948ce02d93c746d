"""``spectune report``: one self-contained HTML page (plots embedded as PNG data) plus each plot as a PNG file.

``figures`` draws the plots with matplotlib and Optuna's matplotlib visualizations, ``steps`` builds the
steps × concurrency table of the seed document, ``page`` writes the HTML, ``build`` ties them to a stored study.
"""
