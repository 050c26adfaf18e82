"""The coverage matrix of a Python custom class: its rows, one per custom op taking the class, each called with a
sequence of objects (:mod:`.rows`), and how a cell runs (:mod:`.run`)."""
