"""The torch-free core: the result model, settings, the user's registry, names, files and versions. Nothing here imports torch, hypothesis or pytest."""
