"""The coverage matrix of a TorchBind class: its rows (:mod:`.rows`), each a program over its object
(:mod:`.scenarios`; the dynamic row's sizes: :mod:`.sizes`), what a cell says about each output and state
(:mod:`.explain`), the reproducer of a failed cell (:mod:`.repro`) and how a cell runs (:mod:`.run`)."""
