"""The pytest layer: hooks (the ``torchbind`` entry point), the run, options, items, the controller's recorder, reuse and the baseline."""
