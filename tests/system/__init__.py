"""Whole jobs: the tutorial, notebooks, slurm scripts, the CLI and bench scripts end to end, the browser, installs."""
