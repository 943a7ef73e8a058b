"""The presets every bench table runs on, the smallest array first."""

PRESETS = ("edge16", "mid32", "dc128")
